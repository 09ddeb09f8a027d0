"""Cost of async steps, side by side with sync steps and the raw SQLite floor, in one run.

    python -m benchmarks.bench_async [--steps 2000] [--repeats 7]

Prints medians over repeats: a fresh ``async_step`` (coroutine function, and
plain function run in a worker thread) and its replay, per step, next to the
sync step and the raw floor (one INSERT + COMMIT per row with sqlite3); 100
gathered steps end to end, fresh and replayed; and the largest event-loop
stall a 1 ms ticker task sees while 1,000 gathered steps commit, next to the
same gather with no journal (the ticker's own noise on this machine); and how
long a coroutine step's commit takes with ``durability="power"`` while
plain-function steps keep every thread of the loop's default executor busy.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import ms, publish, table, us
from benchmarks.overhead import SMALL, fresh_steps, plain_call, raw_floor
from letitloop import Journal
from letitloop.stores.sqlite.pragmas import Durability


async def produce() -> Any:
    return SMALL


def produce_sync() -> Any:
    return SMALL


def _in_journal(
    durability: Durability, body: Callable[[Journal], Awaitable[float]], db: Path | None = None
) -> float:
    async def main() -> float:
        with tempfile.TemporaryDirectory() as d:
            async with Journal(
                "bench", run="r", path=db or Path(d) / "j.db", durability=durability
            ) as j:
                return await body(j)

    return asyncio.run(main())


def async_fresh(n: int, fn: Callable[[], Any], durability: Durability = "process") -> float:
    """Seconds per fresh ``async_step``, awaited one after another."""

    async def body(j: Journal) -> float:
        t0 = time.perf_counter()
        for i in range(n):
            await j.async_step(f"s{i}", fn)
        return (time.perf_counter() - t0) / n

    return _in_journal(durability, body)


def async_replay(db: Path, n: int) -> float:
    """Seconds per replayed ``async_step`` (the run was recorded by a first pass)."""

    async def body(j: Journal) -> float:
        t0 = time.perf_counter()
        for i in range(n):
            await j.async_step(f"s{i}", produce)
        return (time.perf_counter() - t0) / n

    return _in_journal("process", body, db)


def sync_replay(db: Path, n: int) -> float:
    """Seconds per replayed sync ``step`` of the same run (replay never calls the function)."""
    with Journal("bench", run="r", path=db) as j:
        t0 = time.perf_counter()
        for i in range(n):
            j.step(f"s{i}", produce)
        return (time.perf_counter() - t0) / n


def thread_hop(n: int) -> float:
    """Seconds per ``await asyncio.to_thread(noop)``: what a writer thread would add per step."""

    async def main() -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            await asyncio.to_thread(produce_sync)
        return (time.perf_counter() - t0) / n

    return asyncio.run(main())


def gathered(
    db: Path, n: int, durability: Durability = "process", run: str = "r"
) -> tuple[float, float]:
    """(open to close, the gather alone) in seconds for ``n`` gathered steps of run ``run``;
    fresh if the run is new (in a new file or not), else replayed.
    """

    async def main() -> tuple[float, float]:
        t0 = time.perf_counter()
        async with Journal("gather", run=run, path=db, durability=durability) as j:
            t1 = time.perf_counter()
            await asyncio.gather(*(j.async_step(f"g{i}", produce) for i in range(n)))
            t2 = time.perf_counter()
        return time.perf_counter() - t0, t2 - t1

    return asyncio.run(main())


#: The threads of asyncio's default executor (ThreadPoolExecutor's default since Python 3.8).
DEFAULT_EXECUTOR_THREADS = min(32, (os.cpu_count() or 1) + 4)


def commit_while_executor_busy(blocked: int, block_s: float = 1.0) -> float:
    """Seconds a coroutine step takes (its function returns at once, so: its commit) with
    ``durability="power"`` while ``blocked`` plain-function steps sleep ``block_s`` seconds in
    the loop's default executor. With ``blocked=0``, the same step on an idle executor.
    """

    def sleeper() -> str:
        time.sleep(block_s)
        return "slept"

    async def body(j: Journal) -> float:
        sleepers = [
            asyncio.ensure_future(j.async_step(f"sleep{i}", sleeper)) for i in range(blocked)
        ]
        await asyncio.sleep(0.1 if blocked else 0)  # every sleeper holds a thread by now
        t0 = time.perf_counter()
        await j.async_step("quick", produce)
        elapsed = time.perf_counter() - t0
        await asyncio.gather(*sleepers)
        return elapsed

    return _in_journal("power", body)


def interleaved(repeats: int, measures: dict[str, Callable[[], float]]) -> dict[str, float]:
    """The median of each measure over ``repeats`` rounds of running every measure once."""
    samples: dict[str, list[float]] = {name: [] for name in measures}
    for _ in range(repeats):
        for name, fn in measures.items():
            samples[name].append(fn())
    return {name: statistics.median(values) for name, values in samples.items()}


def median_pair(repeats: int, fn: Callable[[], tuple[float, float]]) -> tuple[float, float]:
    results = [fn() for _ in range(repeats)]
    return (
        sorted(x[0] for x in results)[len(results) // 2],
        sorted(x[1] for x in results)[len(results) // 2],
    )


def largest_stall(
    n: int, spread: float, durability: Durability | None, seed: int = 0
) -> tuple[float, float]:
    """(largest gap, 99th-percentile gap) between ticks of a 1 ms ticker while ``n`` gathered
    steps finish at random times over ``spread`` seconds and commit; ``durability=None`` runs
    the same gather with no journal.
    """
    rng = random.Random(seed)
    delays = [rng.uniform(0, spread) for _ in range(n)]

    async def work(delay: float) -> Any:
        await asyncio.sleep(delay)
        return SMALL

    async def main() -> tuple[float, float]:
        ticks: list[float] = []
        stop = False

        async def ticker() -> None:
            while not stop:
                ticks.append(time.perf_counter())
                await asyncio.sleep(0.001)

        with tempfile.TemporaryDirectory() as d:
            task = asyncio.ensure_future(ticker())
            await asyncio.sleep(0.01)
            if durability is None:
                await asyncio.gather(*(work(x) for x in delays))
            else:
                async with Journal(
                    "stall", run="r", path=Path(d) / "j.db", durability=durability
                ) as j:
                    await asyncio.gather(
                        *(j.async_step(f"w{i}", work, x) for i, x in enumerate(delays))
                    )
            stop = True
            await task
        gaps = sorted(b - a for a, b in itertools.pairwise(ticks))
        return gaps[-1], gaps[int(len(gaps) * 0.99)]

    return asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    n, r = args.steps, args.repeats

    # Interleaved: one of each per repeat, so a change in the machine's load
    # shifts every row alike instead of favouring whichever ran first.
    per_step = interleaved(
        r,
        {
            "call": lambda: plain_call(SMALL, n),
            "floor": lambda: raw_floor(SMALL, n, "NORMAL"),
            "sync": lambda: fresh_steps(SMALL, n, "process"),
            "async": lambda: async_fresh(n, produce),
            "async_thread": lambda: async_fresh(n // 4, produce_sync),
            "hop": lambda: thread_hop(n // 4),
        },
    )
    call, floor, sync_fresh = per_step["call"], per_step["floor"], per_step["sync"]
    a_fresh, a_fresh_thread, hop = per_step["async"], per_step["async_thread"], per_step["hop"]
    with tempfile.TemporaryDirectory() as d:
        recorded = Path(d) / "recorded.db"

        async def record(j: Journal) -> float:
            for i in range(n):
                await j.async_step(f"s{i}", produce)
            return 0.0

        _in_journal("process", record, recorded)
        replays = interleaved(
            r,
            {"async": lambda: async_replay(recorded, n), "sync": lambda: sync_replay(recorded, n)},
        )
        a_replay, s_replay = replays["async"], replays["sync"]

        def gather_fresh(durability: Durability) -> tuple[float, float]:
            db = Path(tempfile.mkdtemp(dir=d)) / "g.db"
            return gathered(db, 100, durability)

        runs = itertools.count()

        def gather_new_run(durability: Durability) -> tuple[float, float]:
            # A new run in a file that exists (the usual case: the file is made once).
            db = Path(d) / f"g-{durability}.db"
            return gathered(db, 100, durability, run=f"r{next(runs)}")

        g_fresh = median_pair(r, lambda: gather_fresh("process"))
        g_power = median_pair(r, lambda: gather_fresh("power"))
        gather_new_run("process"), gather_new_run("power")  # make the files
        g_run = median_pair(r, lambda: gather_new_run("process"))
        g_run_power = median_pair(r, lambda: gather_new_run("power"))
        replay_db = Path(d) / "g-replay.db"
        gathered(replay_db, 100)
        g_replay = median_pair(r, lambda: gathered(replay_db, 100))

    stall_runs = max(3, r // 2)
    stalls: dict[str, tuple[float, float]] = {}
    for label, durability in (("no journal", None), ("process", "process"), ("power", "power")):
        results = [largest_stall(1000, 0.5, durability, seed) for seed in range(stall_runs)]  # type: ignore[arg-type]
        stalls[label] = (
            sorted(x[0] for x in results)[len(results) // 2],
            sorted(x[1] for x in results)[len(results) // 2],
        )
    burst = median_pair(stall_runs, lambda: largest_stall(1000, 0.0, "process"))
    burst_plain = median_pair(stall_runs, lambda: largest_stall(1000, 0.0, None))
    busy = DEFAULT_EXECUTOR_THREADS
    behind = interleaved(
        stall_runs,
        {
            "idle": lambda: commit_while_executor_busy(0),
            "busy": lambda: commit_while_executor_busy(busy),
        },
    )

    per_step_table = table(
        ["measure", "median per step", "vs raw floor"],
        [
            ["plain call of the step function", us(call), ""],
            ["raw floor: INSERT+COMMIT, WAL, synchronous=NORMAL", us(floor), "1.00x"],
            [
                "sync fresh step, overhead over the call",
                us(sync_fresh - call),
                f"{(sync_fresh - call) / floor:.2f}x",
            ],
            [
                "async fresh step, coroutine function, overhead over the call",
                us(a_fresh - call),
                f"{(a_fresh - call) / floor:.2f}x",
            ],
            [
                "async fresh step, plain function (runs in a worker thread)",
                us(a_fresh_thread),
                f"{a_fresh_thread / floor:.2f}x",
            ],
            ["one thread hop alone: await asyncio.to_thread(noop)", us(hop), f"{hop / floor:.2f}x"],
            ["sync replay of a recorded step", us(s_replay), ""],
            ["async replay of a recorded step", us(a_replay), ""],
        ],
    )
    gather_table = table(
        ["100 gathered steps", "open to close", "the gather alone"],
        [
            ['fresh, new file, durability="process"', ms(g_fresh[0]), ms(g_fresh[1])],
            ['fresh, new file, durability="power"', ms(g_power[0]), ms(g_power[1])],
            ['fresh, existing file, durability="process"', ms(g_run[0]), ms(g_run[1])],
            ['fresh, existing file, durability="power"', ms(g_run_power[0]), ms(g_run_power[1])],
            ["replay", ms(g_replay[0]), ms(g_replay[1])],
        ],
    )
    stall_table = table(
        ["1,000 gathered steps finishing over 0.5 s", "largest tick gap", "99th percentile gap"],
        [
            [f"no journal (ticker noise), median of {stall_runs}", ms(a), ms(b)]
            if label == "no journal"
            else [f'durability="{label}", median of {stall_runs}', ms(a), ms(b)]
            for label, (a, b) in stalls.items()
        ]
        + [
            ["all 1,000 finishing at once, no journal", ms(burst_plain[0]), ms(burst_plain[1])],
            [
                'all 1,000 finishing at once, durability="process"',
                ms(burst[0]),
                ms(burst[1]),
            ],
        ],
    )
    behind_table = table(
        ['one coroutine step, durability="power"', "median time to return"],
        [
            ["the loop's default executor idle", ms(behind["idle"])],
            [
                f"while {busy} plain-function steps sleep 1 s in the default executor "
                f"(all its {busy} threads)",
                ms(behind["busy"]),
            ],
        ],
    )
    body = (
        f"{n} steps per repeat (plain-function and thread-hop rows: {n // 4}), "
        f"median of {r} repeats.\n\n## Per step\n\n{per_step_table}\n\n## Gathered\n\n"
        f"{gather_table}\n\n## Largest event-loop stall (a 1 ms ticker task)\n\n{stall_table}\n"
        f"\n## A commit behind blocking steps (median of {stall_runs})\n\n{behind_table}\n"
    )
    publish("async", "Async steps", f"python -m benchmarks.bench_async --repeats {r}", body)


if __name__ == "__main__":
    main()
