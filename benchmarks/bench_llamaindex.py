"""Per-step overhead of LetItLoopRuntime against the bare LlamaIndex workflow engine.

    python benchmarks/bench_llamaindex.py [--runs 60] [--steps 6]

A linear workflow of ``--steps`` steps (each returns the next step's event;
the last a StopEvent; one writes the context state). Three rows, timed in
rounds that run each once (a busy moment of the shared machine falls on all of
them alike), medians of ``--runs`` rounds:

- bare: the workflow on the engine's own ``BasicRuntime`` (what it costs itself);
- journal alone: the bare workflow inside ``async with Journal`` on a new run
  (the journal's open and close, which any durable run pays once);
- durable, fresh: ``LetItLoopRuntime`` inside ``async with Journal`` on a new
  named run, every tick a step written to the file (what journaling costs);
- durable, replay: the same completed run opened again: its ticks replayed,
  its result returned, no step run.

The per-step overhead is (durable - bare) / steps, and net of the journal's open
and close, (durable - journal alone) / steps. A workflow step makes about
two ticks (the step's result, the event it returns), so about two rows each.
Bias, stated: the journal uses letitloop's default ``durability="process"``
(WAL, synchronous=NORMAL); the steps do nothing, so any real step's work makes
the overhead a far smaller share than here. The file lives in a temporary folder.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

from workflows import Context, Workflow, step
from workflows.events import Event, StartEvent, StopEvent

from letitloop import Journal, __version__
from letitloop.adapters.llamaindex import LetItLoopRuntime


class Hop(Event):
    n: int


class Chain(Workflow):
    """``steps`` steps: start -> Hop(1) -> ... -> StopEvent (``hop`` runs steps - 1 times)."""

    def __init__(self, steps: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.steps = steps

    @step
    async def first(self, ctx: Context, ev: StartEvent) -> Hop:
        await ctx.store.set("started", True)
        return Hop(n=1)

    @step
    async def hop(self, ev: Hop) -> Hop | StopEvent:
        return StopEvent(result=ev.n) if ev.n + 1 >= self.steps else Hop(n=ev.n + 1)


async def timed_rounds(runs: int, steps: int, db: Path) -> dict[str, list[float]]:
    bare = Chain(steps, timeout=60)
    durable = Chain(steps, runtime=LetItLoopRuntime(), timeout=60)
    times: dict[str, list[float]] = {
        "bare": [],
        "journal alone": [],
        "durable, fresh": [],
        "durable, replay": [],
    }
    for i in range(runs):
        start = time.perf_counter()
        await bare.run()
        times["bare"].append(time.perf_counter() - start)
        start = time.perf_counter()
        async with Journal("bench", run=f"empty{i}", path=db):
            await bare.run()
        times["journal alone"].append(time.perf_counter() - start)
        start = time.perf_counter()
        async with Journal("bench", run=f"r{i}", path=db):
            await durable.run()
        times["durable, fresh"].append(time.perf_counter() - start)
        start = time.perf_counter()
        async with Journal("bench", run=f"r{i}", path=db):
            await durable.run()
        times["durable, replay"].append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60, help="rounds (default 60)")
    parser.add_argument("--steps", type=int, default=6, help="steps per workflow run (default 6)")
    args = parser.parse_args()
    print(
        f"letitloop {__version__}, llama-index-workflows {version('llama-index-workflows')}, "
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, {sys.platform}"
    )
    with tempfile.TemporaryDirectory() as folder:
        times = asyncio.run(timed_rounds(args.runs, args.steps, Path(folder) / "journal.db"))
    bare = statistics.median(times["bare"])
    alone = statistics.median(times["journal alone"])
    print(
        f"{'row':<18}{'per wf.run':>13}{'vs bare':>10}{'per step over bare':>22}"
        f"{'over journal alone':>22}"
    )
    for row, samples in times.items():
        median = statistics.median(samples)
        extra, net = (median - bare) / args.steps, (median - alone) / args.steps
        print(
            f"{row:<18}{median * 1e3:>10.2f} ms{median / bare:>9.2f}x{extra * 1e3:>19.3f} ms"
            f"{net * 1e3:>19.3f} ms"
        )
    print(f"{args.steps} steps per wf.run")


if __name__ == "__main__":
    main()
