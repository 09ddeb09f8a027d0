"""Cost of a durable step, side by side with the raw SQLite floor, in one run.

    python benchmarks/bench_steps.py [--steps 2000] [--repeats 7]

Prints medians over repeats: the overhead of a fresh step over a plain call
against the raw floor (one INSERT + COMMIT per row with sqlite3, same mode),
replay per step, opening a journal of 10,000 steps, and ``import letitloop``.
The fuller picture (large results, growth to 100k steps) is
``python -m benchmarks.overhead``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import environment, median_of, ms, table, us
from benchmarks.overhead import (
    ARGS,
    SMALL,
    fingerprint_cost,
    fresh_steps,
    fresh_steps_with_args,
    open_time,
    plain_call,
    raw_floor,
    record,
    replay_steps,
)


def import_time() -> float:
    code = "import time; t = time.perf_counter(); import letitloop; print(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout)


def heavy_imports() -> list[str]:
    """Modules the step path does not need that ``import letitloop`` nonetheless loads."""
    code = (
        "import sys, letitloop; print(' '.join(m for m in "
        "('click', 'sqlite_utils', 'pydantic', 'langgraph', 'asyncio') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.split()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    n, r = args.steps, args.repeats

    call = median_of(r, lambda: plain_call(SMALL, n))
    floor_n = median_of(r, lambda: raw_floor(SMALL, n, "NORMAL"))
    step_n = median_of(r, lambda: fresh_steps(SMALL, n, "process"))
    step_args = median_of(r, lambda: fresh_steps_with_args(SMALL, n))
    fingerprint = median_of(r, lambda: fingerprint_cost(n * 10))
    floor_f = median_of(max(3, r // 2), lambda: raw_floor(SMALL, n // 4, "FULL"))
    step_f = median_of(max(3, r // 2), lambda: fresh_steps(SMALL, n // 4, "power"))
    with tempfile.TemporaryDirectory() as d:
        small, big = Path(d) / "small.db", Path(d) / "big.db"
        record(small, n)
        replay = median_of(r, lambda: replay_steps(small, n))
        with_args = Path(d) / "args.db"
        record(with_args, n, args=ARGS)
        replay_args = median_of(r, lambda: replay_steps(with_args, n, args=ARGS))
        record(big, 10_000)
        opened = median_of(r, lambda: open_time(big))
    imported = median_of(r, import_time)

    print(environment())
    print(f"{n} steps per repeat, median of {r} repeats\n")
    print(
        table(
            ["measure", "median", "ratio"],
            [
                ["plain call of the step function", us(call), ""],
                ["raw floor: INSERT+COMMIT, WAL, synchronous=NORMAL", us(floor_n), "1.00x"],
                [
                    'fresh step, durability="process", overhead over the call',
                    us(step_n - call),
                    f"{(step_n - call) / floor_n:.2f}x floor",
                ],
                ["raw floor: INSERT+COMMIT, WAL, synchronous=FULL", us(floor_f), "1.00x"],
                [
                    'fresh step, durability="power", overhead over the call',
                    us(step_f - call),
                    f"{(step_f - call) / floor_f:.2f}x floor",
                ],
                [
                    "fresh step with 2 small arguments, overhead over the call",
                    us(step_args - call),
                    f"{(step_args - call) / floor_n:.2f}x floor",
                ],
                ["argument fingerprint of 2 small arguments (in the above)", us(fingerprint), ""],
                ["replay of a recorded step", us(replay), ""],
                ["replay of a recorded step with 2 small arguments", us(replay_args), ""],
                ["open a journal holding 10,000 steps", ms(opened), ""],
                ["import letitloop (fresh interpreter)", ms(imported), ""],
                [
                    "modules import letitloop loads needlessly",
                    " ".join(heavy_imports()) or "none",
                    "",
                ],
            ],
        )
    )


if __name__ == "__main__":
    main()
