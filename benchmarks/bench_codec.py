"""Cost of the codec, side by side with raw msgspec.json, json and pickle, in one run.

    python benchmarks/bench_codec.py [--repeats 301]

Each row is the median, over ``--repeats`` timings taken round-robin
across the rows, of one encode plus one decode of the same value (the
round trip a step pays: encode when it returns, decode when it replays).

Benchmarks are hard: these machines are shared and noisy, so compare the
rows of one run with each other, not runs across days. Bias, stated: raw
msgspec.json and json do *less* work than the codec on the typed payload
(they turn the datetime and UUID into strings and give back strings: not
a round trip at all; json needs ``default=str`` to accept them), so they
are a floor, not a competitor. pickle gives the types back but cannot be
read in an SQLite browser and runs code named by the data when loading.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import pickle
import platform
import random
import sqlite3
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

import msgspec

from letitloop import __version__
from letitloop.codec import decode, encode


def agent_payload() -> dict[str, Any]:
    """A typical agent step result: a few strings, lists of dicts, a datetime, a UUID."""
    return {
        "run_id": uuid.UUID("6f1c1f43-4a7e-4a0e-9a53-3f0f4b1e2d9c"),
        "created": dt.datetime(2026, 11, 30, 3, 49, 5, 123456, tzinfo=dt.timezone.utc),
        "model": "claude-sonnet",
        "summary": "The customer asked for a refund of order 123; policy allows it within 30 days.",
        "messages": [
            {"role": "user", "content": "Can I get a refund for order 123?"},
            {"role": "assistant", "content": "Let me look that order up."},
            {"role": "tool", "content": '{"order": 123, "days_since": 12}'},
            {"role": "assistant", "content": "Yes: the refund is on its way."},
        ],
        "tool_calls": [
            {"id": "call_1", "name": "get_order", "arguments": {"order_id": 123}},
            {"id": "call_2", "name": "refund", "arguments": {"order_id": 123, "amount": 49.9}},
        ],
        "usage": {"input_tokens": 1834, "output_tokens": 211},
        "score": 0.93,
    }


def json_document(target_bytes: int = 100_000) -> dict[str, Any]:
    """A JSON-native document of about ``target_bytes`` of JSON: records, nested lists and dicts."""
    rng = random.Random(7)
    items: list[dict[str, Any]] = []
    doc: dict[str, Any] = {"source": "crm", "next_page": None, "items": items}
    while len(msgspec.json.encode(doc)) < target_bytes:
        i = len(items)
        items.append(
            {
                "id": i,
                "name": f"customer {i}",
                "email": f"customer{i}@example.com",
                "score": round(rng.random(), 6),
                "active": i % 3 != 0,
                "tags": ["vip", "eu", "beta"][: i % 4],
                "parent": None if i % 5 else i - 1,
                "address": {"city": rng.choice(["Paris", "Lima", "Oslo"]), "zip": f"{i:05d}"},
                "embedding": [round(rng.uniform(-1, 1), 6) for _ in range(4)],
            }
        )
    return doc


def transcript_document(target_bytes: int = 100_000) -> dict[str, Any]:
    """A JSON-native agent transcript of about ``target_bytes``: few values, long strings."""
    rng = random.Random(11)
    words = [
        "the",
        "refund",
        "order",
        "policy",
        "customer",
        "days",
        "within",
        "allows",
        "tool",
        "result",
        "call",
    ]
    messages: list[dict[str, Any]] = []
    doc: dict[str, Any] = {"model": "claude-sonnet", "stop": None, "messages": messages}
    while len(msgspec.json.encode(doc)) < target_bytes:
        text = " ".join(rng.choice(words) for _ in range(rng.randint(50, 400)))
        messages.append({"role": rng.choice(["user", "assistant", "tool"]), "content": text})
    return doc


def medians_us(repeats: int, fns: dict[str, Callable[[], object]]) -> dict[str, float]:
    """Median microseconds of each function, timed round-robin so that noise hits all alike."""
    for fn in fns.values():  # warm up
        for _ in range(5):
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return {name: statistics.median(ts) * 1e6 for name, ts in times.items()}


def check_round_trip(value: Any) -> str:
    """The codec's round trip of ``value``, checked: equal, and the same types (same text again)."""
    text = encode(value)
    back = decode(text)
    assert back == value, "the codec must round-trip the payload"
    assert encode(back) == text, "the payload must come back with the same types"
    return "round trip: equal, same types (re-encodes to the same text)"


def contenders(value: Any) -> dict[str, Callable[[], object]]:
    enc = msgspec.json.Encoder()
    dec = msgspec.json.Decoder()
    return {
        "letitloop codec": lambda: decode(encode(value)),
        "raw msgspec.json": lambda: dec.decode(enc.encode(value)),
        "json (stdlib)": lambda: json.loads(json.dumps(value, default=str)),
        "pickle": lambda: pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=301)
    args = parser.parse_args()
    print(
        f"letitloop {__version__}, Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, msgspec {msgspec.__version__}, "
        f"{platform.machine()} {platform.system()}"
    )
    print(f"median of {args.repeats} encode+decode round trips, microseconds\n")
    for label, value in [
        ("typical agent payload (typed: datetime, UUID)", agent_payload()),
        ("JSON-native document: records, many small values", json_document()),
        ("JSON-native document: agent transcript, long strings", transcript_document()),
    ]:
        size = len(encode(value))
        print(f"{label}, {size:,} bytes as stored")
        print(f"  {check_round_trip(value)}")
        rows = medians_us(args.repeats, contenders(value))
        base = rows["raw msgspec.json"]
        for name, us in rows.items():
            print(f"  {name:<18} {us:10.1f} us   {us / base:5.2f}x raw msgspec")
        print()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
