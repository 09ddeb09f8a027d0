"""Cost of a durable step, side by side with the raw SQLite floor, in one run.

    python benchmarks/bench_steps.py [--steps 2000] [--repeats 7]

Prints medians over repeats. Benchmarks are hard: these machines are shared
and noisy, so compare the rows of one run with each other, not runs across
days. The raw floor is one INSERT + COMMIT per row with Python's sqlite3 on
a table of the same shape, in the same WAL / synchronous mode: the least any
SQLite-journaled step can cost. Replay and open times do not touch the disk
after the first read (the file is in the page cache), which is the common
case of a restart on the same machine.
"""

from __future__ import annotations

import argparse
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from letitloop import Journal, __version__

RESULT = {"id": 123, "name": "Ada Lovelace", "tags": ["vip", "eu"], "score": 0.93}


def payload(i: int) -> dict[str, object]:
    return RESULT


def median_of(repeats: int, fn: Callable[[], float]) -> float:
    return statistics.median(fn() for _ in range(repeats))


def plain_call(n: int) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        payload(i)
    return (time.perf_counter() - t0) / n


def raw_floor(n: int, synchronous: str) -> float:
    with tempfile.TemporaryDirectory() as d:
        conn = sqlite3.connect(Path(d) / "raw.db")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute(
            "CREATE TABLE t (run TEXT, key TEXT, kind TEXT, status TEXT, fn TEXT, result TEXT, "
            "started_at TEXT, finished_at TEXT, duration_ms REAL, attempt INTEGER, "
            "error TEXT, traceback TEXT, PRIMARY KEY (run, key))"
        )
        conn.commit()
        text = '{"id":123,"name":"Ada Lovelace","tags":["vip","eu"],"score":0.93}'
        t0 = time.perf_counter()
        for i in range(n):
            conn.execute(
                "INSERT INTO t VALUES (?, ?, 'step', 'done', ?, ?, ?, ?, ?, 1, NULL, NULL)",
                ("run", f"s{i}", "bench.payload", text, "2026", "2026", 0.1),
            )
            conn.commit()
        elapsed = time.perf_counter() - t0
        conn.close()
        return elapsed / n


def fresh_steps(n: int, durability: str) -> float:
    with (
        tempfile.TemporaryDirectory() as d,
        Journal(
            "bench",
            path=Path(d) / "j.db",
            durability=durability,  # type: ignore[arg-type]
        ) as j,
    ):
        t0 = time.perf_counter()
        for i in range(n):
            j.step(f"s{i}", payload, i)
        return (time.perf_counter() - t0) / n


def replay_steps(db: Path, n: int) -> float:
    with Journal("bench", run="recorded", path=db) as j:
        t0 = time.perf_counter()
        for i in range(n):
            j.step(f"s{i}", payload, i)
        return (time.perf_counter() - t0) / n


def open_time(db: Path) -> float:
    t0 = time.perf_counter()
    with Journal("bench", run="recorded", path=db):
        elapsed = time.perf_counter() - t0
    return elapsed


def record(db: Path, n: int) -> None:
    with Journal("bench", run="recorded", path=db) as j:
        for i in range(n):
            j.step(f"s{i}", payload, i)


def import_time(module: str) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout)


def heavy_imports() -> list[str]:
    code = (
        "import sys, letitloop; "
        "print(' '.join(m for m in ('click', 'sqlite_utils', 'pydantic') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.split()


def us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f} µs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    n, r = args.steps, args.repeats

    print(
        f"letitloop {__version__}, Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, {platform.machine()}, {os.cpu_count()} cores"
    )
    print(f"{n} steps per repeat, median of {r} repeats\n")

    call = median_of(r, lambda: plain_call(n))
    floor_n = median_of(r, lambda: raw_floor(n, "NORMAL"))
    step_n = median_of(r, lambda: fresh_steps(n, "process"))
    floor_f = median_of(max(3, r // 2), lambda: raw_floor(n // 4, "FULL"))
    step_f = median_of(max(3, r // 2), lambda: fresh_steps(n // 4, "power"))

    with tempfile.TemporaryDirectory() as d:
        small = Path(d) / "small.db"
        record(small, n)
        replay = median_of(r, lambda: replay_steps(small, n))
        big = Path(d) / "big.db"
        record(big, 10_000)
        opened = median_of(r, lambda: open_time(big))

    imp = median_of(r, lambda: import_time("letitloop"))
    heavy = heavy_imports()

    rows = [
        ("plain call of the step function", us(call), ""),
        ("raw floor: INSERT+COMMIT, WAL, synchronous=NORMAL", us(floor_n), "1.00x"),
        (
            'fresh step, durability="process" (overhead over a call)',
            us(step_n - call),
            f"{(step_n - call) / floor_n:.2f}x floor",
        ),
        ("raw floor: INSERT+COMMIT, WAL, synchronous=FULL", us(floor_f), "1.00x"),
        (
            'fresh step, durability="power" (overhead over a call)',
            us(step_f - call),
            f"{(step_f - call) / floor_f:.2f}x floor",
        ),
        ("replay of a recorded step", us(replay), ""),
        ("open a journal holding 10,000 steps", f"{opened * 1000:,.1f} ms", ""),
        ("import letitloop (fresh interpreter)", f"{imp * 1000:,.1f} ms", ""),
        ("heavy modules loaded by import letitloop", " ".join(heavy) or "none", ""),
    ]
    width = max(len(a) for a, _, _ in rows)
    print(f"| {'measure':<{width}} | {'median':>12} | {'ratio':>12} |")
    print(f"|{'-' * (width + 2)}|{'-' * 14}|{'-' * 14}|")
    for a, b, c in rows:
        print(f"| {a:<{width}} | {b:>12} | {c:>12} |")


if __name__ == "__main__":
    main()
