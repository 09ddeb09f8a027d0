"""Shared by the agent frameworks' benchmarks (bench_openai_agents.py, bench_pydantic_ai.py):
rounds that time a bare run, a durable run fresh and the same run replayed, and their table."""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from letitloop import Journal

#: The rows, in the order each round runs them.
ROWS = ("bare", "durable, fresh", "durable, replay")


async def timed_rounds(
    runs: int,
    db: Path,
    bare: Callable[[], Awaitable[object]],
    durable: Callable[[], Awaitable[object]],
) -> dict[str, list[float]]:
    """``runs`` rounds, each timing ``bare()``, then ``durable()`` inside ``async with Journal``
    on a new named run of ``db``, then the same completed run opened again (every call
    replayed): a busy moment of the shared machine falls on all three rows alike."""
    times: dict[str, list[float]] = {row: [] for row in ROWS}
    for i in range(runs):
        start = time.perf_counter()
        await bare()
        times["bare"].append(time.perf_counter() - start)
        for row in ROWS[1:]:
            start = time.perf_counter()
            async with Journal("bench", run=f"r{i}", path=db):
                await durable()
            times[row].append(time.perf_counter() - start)
    return times


def print_per_unit(times: dict[str, list[float]], units: int, per: str, unit: str) -> None:
    """Each row's median per ``per`` (one run), its ratio to bare, and the cost per ``unit``
    over bare ((median - bare) / ``units``)."""
    bare = statistics.median(times["bare"])
    print(f"{'row':<18}{'per ' + per:>15}{'vs bare':>10}{f'per {unit} over bare':>22}")
    for row, samples in times.items():
        median = statistics.median(samples)
        extra = (median - bare) / units
        print(f"{row:<18}{median * 1e3:>12.2f} ms{median / bare:>9.2f}x{extra * 1e3:>19.3f} ms")
