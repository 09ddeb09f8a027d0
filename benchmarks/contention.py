"""Many processes writing steps to one journal file: throughput and lock errors.

    python -m benchmarks.contention [--seconds 3] [--procs 1,2,4,8]

For 1, 2, 4 and 8 processes, each writing fresh steps as fast as it can for a
fixed time, either each on its own goal or each on its own named run of one
shared goal. Reports steps/second overall and per process, and every
"database is locked" error seen (the target is zero: writers wait on SQLite's
busy timeout instead of failing). On a 2-core machine more processes than
cores share the CPU, so per-process throughput must fall; the overall rate
shows what SQLite's single writer lock costs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import publish, table

ROOT = Path(__file__).resolve().parent.parent


def worker(db: str, goal: str, run: str, seconds: float, go: str) -> None:
    """Open the run, say ready, wait for the go file, write steps for ``seconds``; print counts."""
    from letitloop import Journal
    from letitloop.errors import JournalFileError

    value = {"id": 123, "name": "Ada Lovelace", "tags": ["vip", "eu"], "score": 0.93}
    steps = locked = other = 0
    with Journal(goal, run=run, path=db, timeout=60) as j:
        print("ready", flush=True)
        while not Path(go).exists():
            time.sleep(0.001)
        end = time.time() + seconds
        while time.time() < end:
            try:
                j.step("s", lambda: value)
                steps += 1
            except JournalFileError as exc:
                if "locked" in str(exc):
                    locked += 1
                else:
                    other += 1
    print(json.dumps({"steps": steps, "locked": locked, "other": other}))


def trial(procs: int, shared_goal: bool, seconds: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        db, go = str(Path(d) / "journal.db"), str(Path(d) / "go")
        children = []
        for i in range(procs):
            goal, run = ("shared", f"run-{i}") if shared_goal else (f"goal-{i}", "r")
            code = (
                "from benchmarks.contention import worker; "
                f"worker({db!r}, {goal!r}, {run!r}, {seconds}, {go!r})"
            )
            children.append(
                subprocess.Popen(
                    [sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True
                )
            )
        for child in children:  # every child has imported and opened its run
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                raise SystemExit("a worker failed before it was ready")
        Path(go).touch()
        results = []
        for child in children:
            out, _ = child.communicate(timeout=seconds + 120)
            if child.returncode != 0:
                raise SystemExit(f"a worker failed with status {child.returncode}")
            results.append(json.loads(out))
    total = sum(r["steps"] for r in results)
    return {
        "total": total / seconds,
        "per_process": total / seconds / procs,
        "locked": sum(r["locked"] for r in results),
        "other": sum(r["other"] for r in results),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--procs", default="1,2,4,8")
    args = parser.parse_args()
    rows = []
    for shared in (False, True):
        for procs in (int(p) for p in args.procs.split(",")):
            got = trial(procs, shared, args.seconds)
            rows.append(
                [
                    "named runs of one goal" if shared else "one goal each",
                    procs,
                    f"{got['total']:,.0f}",
                    f"{got['per_process']:,.0f}",
                    int(got["locked"]),
                    int(got["other"]),
                ]
            )
    body = table(
        [
            "layout",
            "processes",
            "steps/s overall",
            "steps/s per process",
            "locked errors",
            "other errors",
        ],
        rows,
    )
    publish(
        "contention",
        "Contention: several processes, one journal file",
        f"python -m benchmarks.contention --seconds {args.seconds:g} --procs {args.procs}",
        body,
    )


if __name__ == "__main__":
    main()
