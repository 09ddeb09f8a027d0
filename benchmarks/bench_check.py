"""``lil check``'s cost per 1,000 recorded steps, beside a replay-only resume of the same run.

    python benchmarks/bench_check.py [--steps 1000 10000] [--repeats 5]

A module with one ``@durable`` function of N steps is recorded to a failed
run (its last step raises), then checked: ``deploycheck.check`` in process
(the module imported, the journal file copied with SQLite's backup, the run
replayed replay-only on the copy), the median of ``--repeats``. Beside it,
the floor: the same run replayed by a replay-only ``Journal`` on the file
itself (no import, no copy). Bias: the file was just written (a warm page
cache), and the module is already in ``sys.modules`` after the first check
(import costs a first check more).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import environment, ms, table

MODULE = """
from letitloop import durable, step

FAIL = [True]

def value(i):
    if i == STEPS - 1 and FAIL[0]:
        raise RuntimeError("the last step fails")
    return {{"i": i, "text": f"result {{i}}"}}

@durable(goal_id="long", run="long")
def long():
    for i in range(STEPS):
        step(f"step-{{i}}", value, i)

STEPS = {steps}
"""


def measure(folder: Path, steps: int, repeats: int) -> tuple[float, float]:
    from letitloop import Journal
    from letitloop.deploycheck import check

    name = f"checked_{steps}"
    (folder / f"{name}.py").write_text(textwrap.dedent(MODULE.format(steps=steps)))
    db = folder / f"{name}.db"
    sys.path.insert(0, str(folder))
    module = __import__(name)
    os.environ["LETITLOOP_DB"] = str(db)
    try:
        with contextlib.suppress(RuntimeError):
            module.long()
        checks, replays = [], []
        for _ in range(repeats):
            t = time.perf_counter()
            report = check(name, db)
            checks.append(time.perf_counter() - t)
            (run,) = report.runs
            assert run.outcome == "resumes" and run.replayed == steps - 1, run
            t = time.perf_counter()
            j = Journal("long", run="long", path=db, replay_only=True)
            with contextlib.suppress(Exception), j:  # the last step: not recorded
                module.FAIL[0] = False
                module.long.__letitloop__.fn()
            replays.append(time.perf_counter() - t)
        return statistics.median(checks), statistics.median(replays)
    finally:
        del os.environ["LETITLOOP_DB"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"lil check: {environment()}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for steps in args.steps:
            checked, replayed = measure(Path(tmp), steps, args.repeats)
            rows.append(
                (
                    f"{steps:,} recorded steps",
                    ms(checked),
                    ms(checked / steps * 1000),
                    ms(replayed),
                    f"{checked / replayed:.1f}x",
                )
            )
    print(
        table(
            ["run", "lil check", "per 1,000 steps", "replay-only resume", "check / resume"],
            rows,
        )
    )


if __name__ == "__main__":
    main()
