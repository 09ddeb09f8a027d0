"""Per-step overhead, replay, open latency, size on disk, and how they grow to 100k steps.

    python -m benchmarks.overhead [--quick]

Everything compared is measured side by side in one run; medians over
repeats. The raw floor is one INSERT + COMMIT per row with Python's sqlite3,
same table shape, same WAL / synchronous setting and the same payload: the
least any SQLite-journaled step can cost.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import median_of, ms, publish, table, us
from letitloop import Journal

#: The clock the in-process measurements read: wall time, or the process's CPU time
#: (user + system, ``--cpu`` of bench_steps.py) on a machine whose load makes wall
#: time swing. Set with :func:`use_cpu_clock`.
_clock: Callable[[], float] = time.perf_counter


def clock() -> float:
    return _clock()


def use_cpu_clock() -> None:
    """Measure CPU time (``time.process_time``) instead of wall time from now on."""
    global _clock
    _clock = time.process_time


SMALL: dict[str, Any] = {"id": 123, "name": "Ada Lovelace", "tags": ["vip", "eu"], "score": 0.93}
LARGE: dict[str, Any] = {"rows": [{"i": i, "text": "x" * 90} for i in range(1000)]}  # ~100 KB


def plain_call(value: Any, n: int) -> float:
    fn = _returner(value)
    t0 = clock()
    for _ in range(n):
        fn()
    return (clock() - t0) / n


def _returner(value: Any) -> Callable[[], Any]:
    def produce() -> Any:
        return value

    return produce


def raw_floor(value: Any, n: int, synchronous: str, page_size: int | None = None) -> float:
    """One INSERT + COMMIT per row with sqlite3, same shape and mode as a journal.

    ``page_size``: the file's (None: SQLite's default, 4 KiB; a journal's new
    files have ``letitloop.stores.sqlite.connect.PAGE_SIZE``).
    """
    import msgspec

    text = msgspec.json.encode(value).decode()
    with tempfile.TemporaryDirectory() as d:
        conn = sqlite3.connect(Path(d) / "raw.db")
        if page_size is not None:
            conn.execute(f"PRAGMA page_size = {page_size}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        # The row a step needs, in the compact shape letitloop stores since 0011: its
        # run and function as integers, its start as integer microseconds and a
        # duration, the key, status, result and an (empty) argument fingerprint.
        conn.execute(
            "CREATE TABLE t (run INTEGER, key TEXT, kind TEXT, status TEXT, fn INTEGER, "
            "result TEXT, started INTEGER, duration INTEGER, attempt INTEGER, error TEXT, "
            "traceback TEXT, args_fp TEXT, PRIMARY KEY (run, key))"
        )
        conn.commit()
        started = int(time.time() * 1e6)
        t0 = clock()
        for i in range(n):
            conn.execute(
                "INSERT INTO t VALUES (?, ?, 'step', 'done', ?, ?, ?, ?, 1, NULL, NULL, '')",
                (1, f"s{i}", 1, text, started + i * 37, 12),
            )
            conn.commit()
        elapsed = clock() - t0
        conn.close()
    return elapsed / n


def fresh_steps(value: Any, n: int, durability: str) -> float:
    """Seconds per fresh durable step (including the call of the step function)."""
    fn = _returner(value)
    with (
        tempfile.TemporaryDirectory() as d,
        Journal("bench", path=Path(d) / "j.db", durability=durability) as j,  # type: ignore[arg-type]
    ):
        t0 = clock()
        for i in range(n):
            j.step(f"s{i}", fn)
        return (clock() - t0) / n


def fresh_async_steps(value: Any, n: int, durability: str) -> float:
    """Seconds per fresh async step of a coroutine function returning ``value``."""
    from benchmarks.bench_async import async_fresh  # it imports this module: not at the top

    async def produce() -> Any:
        return value

    return async_fresh(n, produce, durability)  # type: ignore[arg-type]


#: Two small arguments, as a typical step passes (an id and a URL).
ARGS: tuple[Any, ...] = (123, "https://example.com/articles/2026/11/30")


def args_of(i: int) -> tuple[Any, ...]:
    """Step ``i``'s two small arguments, new at every step (a pipeline's items): a
    digest kept for arguments seen before (fingerprint.py) does not help them."""
    return (i, f"https://example.com/articles/2026/11/{i}")


Args = tuple[Any, ...] | Callable[[int], tuple[Any, ...]]


def _args(args: Args, i: int) -> tuple[Any, ...]:
    return args(i) if callable(args) else args


def _taking(value: Any) -> Callable[..., Any]:
    def produce(*args: Any) -> Any:
        return value

    return produce


def record(db: Path, n: int, value: Any = SMALL, run: str = "recorded", args: Args = ()) -> None:
    fn = _taking(value)
    with Journal("bench", run=run, path=db) as j:
        for i in range(n):
            j.step(f"s{i}", fn, *_args(args, i))


def replay_steps(db: Path, n: int, value: Any = SMALL, args: Args = ()) -> float:
    fn = _taking(value)
    calls = [(f"s{i}", _args(args, i)) for i in range(n)]  # made before the clock starts
    with Journal("bench", run="recorded", path=db) as j:
        t0 = clock()
        for name, a in calls:
            j.step(name, fn, *a)
        return (clock() - t0) / n


def fingerprint_cost(n: int, args: Args = ARGS) -> float:
    """Seconds per argument fingerprint of a call (what a fresh step adds to check its call)."""
    from letitloop.identity.fingerprint import Fingerprinter

    call = Fingerprinter().call
    kwargs: dict[str, Any] = {}
    every = [_args(args, i) for i in range(n)]
    t0 = clock()
    for a in every:
        call(a, kwargs)
    return (clock() - t0) / n


def fresh_steps_with_args(value: Any, n: int, args: Args = args_of) -> float:
    """Seconds per fresh durable step whose function takes ``args`` (process mode)."""
    fn = _taking(value)
    calls = [(f"s{i}", _args(args, i)) for i in range(n)]
    with (
        tempfile.TemporaryDirectory() as d,
        Journal("bench", path=Path(d) / "j.db") as j,
    ):
        t0 = clock()
        for name, a in calls:
            j.step(name, fn, *a)
        return (clock() - t0) / n


def open_time(db: Path) -> float:
    t0 = clock()
    with Journal("bench", run="recorded", path=db):
        return clock() - t0


def file_size(db: Path) -> int:
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return db.stat().st_size


def growth(sizes: list[int]) -> list[tuple[int, float, float]]:
    """(steps, fresh s/step over the last 1,000 steps, open s) as one run grows to each size."""
    out = []
    fn = _returner(SMALL)
    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "grow.db"
        done = 0
        for size in sizes:
            with Journal("bench", run="recorded", path=db) as j:
                for i in range(done, size - 1000):
                    j.step(f"s{i}", fn)
                t0 = clock()
                for i in range(size - 1000, size):
                    j.step(f"s{i}", fn)
                fresh = (clock() - t0) / 1000
            done = size
            out.append((size, fresh, median_of(3, lambda: open_time(db))))
    return out


_MEMORY_CHILD = """
import gc, os, sys, tempfile
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from letitloop import Journal

LARGE = {"rows": [{"i": i, "text": "x" * 90} for i in range(1000)]}

def rss():
    gc.collect()
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

def produce(i):
    return LARGE

with tempfile.TemporaryDirectory() as d:
    db = Path(d) / "m.db"
    marks = {}
    with Journal("bench", run="r", path=db) as j:
        for i in range(3000):
            j.step(f"s{i}", produce, i)
            if i + 1 in (1000, 3000):
                marks[("fresh", i + 1)] = rss()
    with Journal("bench", run="r", path=db) as j:
        for i in range(3000):
            j.step(f"s{i}", produce, i)
            if i + 1 in (1000, 3000):
                marks[("replay", i + 1)] = rss()
for kind in ("fresh", "replay"):
    print(kind, (marks[(kind, 3000)] - marks[(kind, 1000)]) / 2)
"""


def memory_growth() -> dict[str, float]:
    """Resident bytes gained per 1,000 steps of 100 KB, fresh and replayed (a fresh child).

    Measured between the 1,000th and the 3,000th step of one run, so the
    start-up and the first chunk of replayed results are not counted: what is
    left is what grows with the number of steps. Linux only (/proc).
    """
    import subprocess

    root = str(Path(__file__).resolve().parent.parent)
    out = subprocess.run(
        [sys.executable, "-c", _MEMORY_CHILD, root], capture_output=True, text=True, check=True
    )
    return {kind: float(v) for kind, v in (line.split() for line in out.stdout.splitlines())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and repeats")
    args = parser.parse_args()
    n, r = (500, 3) if args.quick else (2000, 7)
    big_n = 10_000 if args.quick else 100_000

    call_s = median_of(r, lambda: plain_call(SMALL, n))
    call_l = median_of(r, lambda: plain_call(LARGE, n // 10))
    rows: list[list[object]] = []
    for label, value, count in (("100 B", SMALL, n), ("100 KB", LARGE, n // 10)):
        call = call_s if value is SMALL else call_l
        for mode, sync, k in (("process", "NORMAL", 1), ("power", "FULL", 4)):
            m = count // k
            floor = median_of(max(3, r // k), lambda v=value, m=m, s=sync: raw_floor(v, m, s))
            step = median_of(max(3, r // k), lambda v=value, m=m, d=mode: fresh_steps(v, m, d))
            astep = median_of(
                max(3, r // k), lambda v=value, m=m, d=mode: fresh_async_steps(v, m, d)
            )
            for kind, cost in (("sync", step), ("async", astep)):
                rows.append(
                    [
                        f"{kind} step, {label}, durability={mode!r}",
                        us(floor),
                        us(cost - call),
                        f"{(cost - call) / floor:.2f}x",
                    ]
                )
    body = "## Fresh step overhead over a plain call, against the raw SQLite floor\n\n"
    body += table(["step", "raw floor", "overhead", "ratio"], rows)

    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "replay.db"
        record(db, n)
        replay = median_of(r, lambda: replay_steps(db, n))
        sizes = []
        for count in (1_000, 10_000):
            sdb = Path(d) / f"size{count}.db"
            record(sdb, count)
            sizes.append((count, file_size(sdb)))
    body += "\n\n## Replay, and the journal on disk\n\n"
    body += table(
        ["measure", "median"],
        [
            ["replay of a recorded step (100 B)", us(replay)],
            *[
                [
                    f"file size with {c:,} steps of 100 B (per 1,000 steps)",
                    f"{s / c * 1000 / 1024:,.0f} KiB",
                ]
                for c, s in sizes
            ],
        ],
    )
    grown_memory = memory_growth()
    body += "\n\n## Memory: resident growth per 1,000 steps of 100 KB (must be O(1) in steps)\n\n"
    body += table(
        ["steps", "resident growth per 1,000 steps"],
        [[kind, f"{grown_memory[kind] / 1024:,.0f} KiB"] for kind in ("fresh", "replay")],
    )
    checkpoints = [1_000, 10_000, big_n] if big_n > 10_000 else [1_000, 10_000]
    grown = growth(checkpoints)
    body += "\n\n## Growth: per-step costs must stay flat (no O(N²) rewriting of state)\n\n"
    body += table(
        ["steps in the run", "fresh step (last 1,000)", "open the run", "open per 1,000 steps"],
        [[f"{s:,}", us(f), ms(o), ms(o / s * 1000)] for s, f, o in grown],
    )
    publish(
        "overhead",
        "Overhead",
        "python -m benchmarks.overhead" + (" --quick" if args.quick else ""),
        body,
    )


if __name__ == "__main__":
    main()
