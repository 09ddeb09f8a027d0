"""The program that wrote tests/golden/primitives.db; its golden test runs it again.

``python primitives.py DB SIDE SCENARIO KILL``: one goal per SCENARIO, each
using one primitive. With KILL ``1`` the process SIGKILLs itself at the point
each scenario names (a run in flight, as a crash leaves it); with ``0`` it
runs to its end and prints what it got as one JSON line. Every function a step
calls appends ``ran NAME`` to SIDE, so the test counts calls from outside the
journal. Keep this file as it is: it is part of the golden data (its
functions' ``__main__.name`` and its steps' arguments are what the file
recorded). tests/golden/README.md says how it was run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import decimal
import enum
import json
import os
import signal
import sys
import uuid
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Any

from letitloop import (
    Budget,
    Journal,
    RetryPolicy,
    RunWaiting,
    codec,
    durable,
    durable_async,
    step,
    unchecked,
    usage,
)
from letitloop.primitives.expects import Expect

DB, SIDE, SCENARIO, KILL = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
os.environ["LETITLOOP_DB"] = DB  # @durable's journal
SEAL = "the golden journals' seal key"
KEY = "golden encryption key, 32 bytes+"


def ran(name: str) -> None:
    with open(SIDE, "a") as f:
        f.write(f"ran {name}\n")


def crash_here(point: str) -> None:
    if KILL:
        ran(f"kill {point}")
        os.kill(os.getpid(), signal.SIGKILL)


def fetch(name: str) -> str:
    ran(name)
    return name.upper()


def paid(name: str) -> str:
    ran(name)
    usage(input_tokens=100, output_tokens=10, cost=0.01, model="golden-model")
    return f"paid {name}"


@dataclasses.dataclass
class Order:
    id: int
    items: list[str]


class Color(enum.Enum):
    RED = 1


codec.register(Order)
codec.register(Color)


def echo(*args: Any, **kwargs: Any) -> list[Any]:
    ran("echo")
    kwargs.pop("free")  # unchecked: not part of the call's identity, nor of its result
    return [list(args), kwargs]


#: Arguments of every kind the codec encodes: their fingerprints were recorded.
ARGS = (
    None,
    True,
    2**70,
    1.5,
    float("inf"),
    "text \udc80",
    b"\x00bytes",
    [1, [2]],
    (1, "t"),
    {"k": 1, 2: "int key"},
    {3, 1, 2},
    frozenset({"a"}),
    dt.datetime(2026, 12, 7, 6, 0, tzinfo=dt.timezone.utc),
    dt.datetime(2026, 12, 7, 6, 0),
    dt.date(2026, 12, 7),
    dt.time(6, 30),
    dt.timedelta(seconds=90),
    decimal.Decimal("1.10"),
    uuid.UUID("12345678-1234-5678-1234-567812345678"),
    PurePosixPath("/tmp/x"),
    Color.RED,
    Order(7, ["a"]),
)


def scenario_budget() -> Any:
    with Journal("budget", path=DB, run="b", budget=Budget(tokens=10_000, cost=1.0)) as j:
        a = j.step("a", paid, "a")
        b = j.step("b", paid, "b")
        crash_here("after b")
        c = j.step("c", paid, "c")
        return [a, b, c]


def scenario_patches() -> Any:
    with Journal("patches", path=DB, run="p") as j:
        first = j.step("first", fetch, "first")
        new = j.patched("new-path")
        crash_here("after the patch")
        second = j.step("second", fetch, "second-new" if new else "second-old")
        return [first, new, second]


def scenario_markers() -> Any:
    with Journal("markers", path=DB, run="m") as j:
        with j.atomic_marker("notify") as go:
            if go:
                ran("notify")
        with j.atomic_marker("charge-7", scope="global") as go:
            if go:
                ran("charge-7")
        crash_here("after the markers")
        again = []
        for name in ("notify", "charge-7"):
            with j.atomic_marker(name, scope="global" if name == "charge-7" else "run") as go:
                again.append(bool(go))
        return [again, j.step("after", fetch, "after")]


def scenario_waits() -> Any:
    with Journal("waits", path=DB, run="w") as j:
        j.sleep("nap", 0.01)
        before = j.step("before", fetch, "before")
        expect = Expect({"type": "object"}, "an approval", {"ok": True})
        try:
            answer = j.wait_for("approval", stop_after=0, expect=expect)
        except RunWaiting:
            ran("waiting")
            raise
        after = j.step("after", fetch, f"after {answer}")
        return [before, answer, after]


flaky_calls = {"n": 0}


def flaky(name: str) -> str:
    ran(name)
    flaky_calls["n"] += 1
    if name == "flaky" and flaky_calls["n"] == 1:
        raise ValueError("the first try fails")
    return name.upper()


cut_calls = {"n": 0}


def cut(name: str) -> str:
    ran(name)
    cut_calls["n"] += 1
    if KILL and cut_calls["n"] == 1:
        raise ValueError("the first try fails")
    crash_here("in the second try of cut")
    return name.upper()


def scenario_retries() -> Any:
    policy = RetryPolicy(max_attempts=5, initial_backoff=0.01, max_backoff=0.01, jitter=0.0)
    with Journal("retries", path=DB, run="r", retry=policy) as j:
        a = j.step("flaky", flaky, "flaky")
        b = j.step("cut", cut, "cut")
        return [a, b]


def scenario_sealed() -> Any:
    with Journal("sealed", path=DB, run="s", seal=SEAL) as j:
        a = j.step("a", fetch, "sealed a")
        crash_here("after a")
        b = j.step("b", fetch, "sealed b")
        return [a, b]


def scenario_encrypted() -> Any:
    with Journal("encrypted", path=DB, run="e", encryption_key=KEY) as j:
        a = j.step("a", fetch, "secret a")
        crash_here("after a")
        b = j.step("b", fetch, "secret b")
        return [a, b]


def scenario_generations() -> Any:
    # The first generation completed in the write; the second is in flight.
    with Journal("generations", path=DB, run="daily", fresh=True) as j:
        a = j.step("a", fetch, "gen a")
        crash_here("after a")
        b = j.step("b", fetch, "gen b")
        return [j.generation, a, b]


def scenario_generations_first() -> Any:
    with Journal("generations", path=DB, run="daily") as j:
        return [j.generation, j.step("a", fetch, "gen a")]


def scenario_arguments() -> Any:
    with Journal("arguments", path=DB, run="args") as j:
        got = j.step("every kind", echo, *ARGS, last=Order(8, []), free=unchecked(object()))
        crash_here("after every kind")
        after = j.step("after", fetch, "after")
        return [repr(got), after]


@durable(goal_id="durable")
def pipeline(user: int) -> Any:
    outer = step("outer", nested, user)
    crash_here("after outer")
    return [outer, step("last", fetch, f"last {user}")]


def nested(user: int) -> list[str]:
    ran("outer")
    return [step("inner", fetch, f"inner {user}"), step("inner", fetch, f"inner2 {user}")]


async def slow(name: str) -> str:
    ran(name)
    await asyncio.sleep(0)
    return name.upper()


@durable_async(goal_id="asynchronous")
async def gathered(n: int) -> Any:
    got = await asyncio.gather(*(step_async(f"fetch:{i}", i) for i in range(n)))
    crash_here("after gather")
    return [got, await step_async("last", n)]


async def step_async(name: str, i: int) -> str:
    from letitloop import async_step

    return await async_step(name, slow, f"{name} {i}")


SCENARIOS: dict[str, Callable[[], Any]] = {
    "budget": scenario_budget,
    "patches": scenario_patches,
    "markers": scenario_markers,
    "waits": scenario_waits,
    "retries": scenario_retries,
    "sealed": scenario_sealed,
    "encrypted": scenario_encrypted,
    "generations-first": scenario_generations_first,
    "generations": scenario_generations,
    "arguments": scenario_arguments,
    "durable": lambda: pipeline(42),
    "asynchronous": lambda: asyncio.run(gathered(3)),
}

if __name__ == "__main__":
    print(json.dumps(SCENARIOS[SCENARIO](), default=repr))
