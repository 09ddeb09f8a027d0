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


def raw_worker(db: str, table: str, seconds: float, go: str) -> None:
    """The floor: the same rows by plain sqlite3, INSERT + COMMIT each, same WAL settings."""
    import sqlite3

    import msgspec

    value = {"id": 123, "name": "Ada Lovelace", "tags": ["vip", "eu"], "score": 0.93}
    conn = sqlite3.connect(db, timeout=60, isolation_level=None)
    conn.execute("PRAGMA busy_timeout = 30000")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(
        f'CREATE TABLE IF NOT EXISTS "{table}" (run TEXT, key TEXT, kind TEXT, status TEXT, '
        "fn TEXT, result TEXT, started_at TEXT, finished_at TEXT, duration_ms REAL, "
        "attempt INTEGER, error TEXT, traceback TEXT, PRIMARY KEY (run, key))"
    )
    print("ready", flush=True)
    while not Path(go).exists():
        time.sleep(0.001)
    steps = locked = other = 0
    end = time.time() + seconds
    while time.time() < end:
        try:
            text = msgspec.json.encode(value).decode()
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                f"INSERT INTO \"{table}\" VALUES (?, ?, 'step', 'done', ?, ?, ?, ?, ?, 1, "
                "NULL, NULL)",
                ("r", f"s{steps}", "bench.produce", text, "2026", "2026", 0.1),
            )
            conn.execute("COMMIT")
            steps += 1
        except sqlite3.OperationalError as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if "locked" in str(exc):
                locked += 1
            else:
                other += 1
    print(json.dumps({"steps": steps, "locked": locked, "other": other}))


def trial(procs: int, shared_goal: bool, seconds: float, raw: bool = False) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        db, go = str(Path(d) / "journal.db"), str(Path(d) / "go")
        if raw:  # the floor's file in WAL mode before its writers start: switching a new
            # file to WAL from several processes at once can fail with "locked"
            import sqlite3

            made = sqlite3.connect(db)
            made.execute("PRAGMA journal_mode = WAL")
            made.close()
        children = []
        for i in range(procs):
            goal, run = ("shared", f"run-{i}") if shared_goal else (f"goal-{i}", "r")
            code = (
                "from benchmarks.contention import raw_worker; "
                f"raw_worker({db!r}, {'t' + str(i)!r}, {seconds}, {go!r})"
                if raw
                else "from benchmarks.contention import worker; "
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
                for other in children:  # none left waiting for a go that never comes
                    other.kill()
                    other.wait()
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
            # The floor right before, so both see the same machine.
            floor = trial(procs, False, args.seconds, raw=True)
            got = trial(procs, shared, args.seconds)
            rows.append(
                [
                    "named runs of one goal" if shared else "one goal each",
                    procs,
                    f"{got['total']:,.0f}",
                    f"{floor['total']:,.0f}",
                    f"{got['total'] / floor['total']:.2f}x",
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
            "raw SQLite steps/s",
            "ratio",
            "steps/s per process",
            "locked errors",
            "other errors",
        ],
        rows,
    )
    body += (
        "\n\nThe raw figure: the same number of processes, each writing the same rows to "
        "its own table of one file with plain sqlite3 (BEGIN IMMEDIATE, INSERT, COMMIT; WAL, "
        "synchronous=NORMAL), measured right before letitloop's row."
    )
    publish(
        "contention",
        "Contention: several processes, one journal file",
        f"python -m benchmarks.contention --seconds {args.seconds:g} --procs {args.procs}",
        body,
    )


if __name__ == "__main__":
    main()
