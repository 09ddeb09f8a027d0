"""How much memory a replay takes: the peak RSS a fresh process adds while it replays a run.

    python benchmarks/replay_memory.py [--against OTHER_TREE] [--quick]

Each case records one run of N steps whose results are texts of SIZE bytes (in a
process of its own, which exits failed so the run resumes), then replays the
whole run in a fresh process that keeps no result: the figure is that process's
``ru_maxrss`` after the replay minus before the journal opened, so the imports
and the interpreter are the baseline. ``--against`` runs the same replays with
``PYTHONPATH`` on another checkout (main, say) and prints them side by side.

What it shows: what the replay holds at once (results read ahead, their copies
while they are split and decoded). What it does not: the page cache of the
file (the kernel's, not the process's), a program that keeps its results (then
the results are its own memory), or PostgreSQL's and memory://'s replay.
"""

from __future__ import annotations

import argparse
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: (steps, bytes per result, the bound issue 50 sets in MB over the baseline)
CASES = [(300, 1_000_000, 64.0), (2_000, 100_000, 60.0)]
#: The CI-sized cases of tests/test_replay_memory.py: the same ratio of bound to data.
QUICK = [(100, 1_000_000, 64.0 * 100 / 300), (900, 100_000, 60.0 * 900 / 2000)]

RECORD = """
import sys
from letitloop import Journal
n, size, db = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def make(i):
    return str(i) + "x" * (size - len(str(i)))
with Journal("memory", path=db, run="r") as j:
    for i in range(n):
        j.step("s", make, i)
    raise SystemExit(3)  # the run stays unfinished: the next open resumes it
"""

#: Prints the MB of peak RSS the replay added.
REPLAY = """
import resource, sys
from letitloop import Journal
n, size, db = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def make(i):
    raise AssertionError("a recorded step was called")
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with Journal("memory", path=db, run="r") as j:
    for i in range(n):
        j.step("s", make, i)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print((after - before) / 1024)
"""


def _python(code: str, tree: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    # Run from elsewhere: ``-c`` puts the current folder first on sys.path.
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
    )
    if code is REPLAY and done.returncode != 0:
        raise SystemExit(f"the replay failed: {done.stderr[-2000:]}")
    return done.stdout.strip()


def record(db: Path, steps: int, size: int) -> None:
    """The run of ``steps`` results of ``size`` bytes, recorded in ``db`` by this tree."""
    _python(RECORD, ROOT, str(steps), str(size), str(db))


def replay_mb(db: Path, steps: int, size: int, tree: Path = ROOT) -> float:
    """MB of peak RSS that replaying the run in ``db`` added, in a fresh process of ``tree``."""
    return float(_python(REPLAY, tree, str(steps), str(size), str(db)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--against", type=Path, help="another checkout to replay with")
    parser.add_argument("--quick", action="store_true", help="the CI-sized cases")
    options = parser.parse_args()
    print(f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}")
    head = f"{'steps':>6} {'result':>9} {'bound MB':>9} {'this tree MB':>13}"
    print(head + (f" {'against MB':>11}" if options.against else ""))
    for steps, size, bound in QUICK if options.quick else CASES:
        with tempfile.TemporaryDirectory() as d:
            db = Path(d) / "journal.db"
            record(db, steps, size)
            mine = replay_mb(db, steps, size)
            line = f"{steps:>6} {size:>9,} {bound:>9.1f} {mine:>13.1f}"
            if options.against:
                line += f" {replay_mb(db, steps, size, options.against):>11.1f}"
        print(line)


if __name__ == "__main__":
    main()
