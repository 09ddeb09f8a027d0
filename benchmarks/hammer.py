"""Processes of threads opening one new journal file at once: errors, lost steps, markers run twice.

    python benchmarks/hammer.py [--runs 20] [--procs 8] [--threads 4] [--opens 6] [--code PATH]

Each run starts on a new file: ``--procs`` processes of ``--threads``
threads each, released together; every thread opens ``--opens`` journals in
turn on the file (its own named run; odd threads with
``durability="power"``, so both kinds of connection share the file), writes
3 steps in each, and enters a marker of ``scope="global"`` named after the
open's number, which all threads contend for: each marker's block must run
exactly once in the whole file. After the run the file is read from outside:

- errors: exceptions in the threads, and processes that did not exit 0
  (SIGBUS included: a process whose SQLite locks were dropped dies of it);
- lost steps: steps that returned in a thread but are not in the file;
- duplicate markers: marker blocks that ran more than once.

The target is zero of each, in every run. ``--code`` runs the workers on
another checkout's ``letitloop`` (``--code /work/main`` for the figures
before a change). Bias: a tiny step body, a warm page cache, a local disk;
the CPU is shared by ``procs × threads`` threads, so this measures
correctness under contention, not speed.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import publish, table

ROOT = Path(__file__).resolve().parent.parent

WORKER = textwrap.dedent(
    """
    import json, os, sys, threading, time, traceback
    from letitloop import Journal

    db, go, ran, me = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    threads, opens = int(sys.argv[5]), int(sys.argv[6])
    counts = {"errors": 0, "steps": 0}
    lock = threading.Lock()
    first_error = []

    def work(t):
        durability = "power" if t % 2 else "process"
        for i in range(opens):
            try:
                with Journal("hammer", run=f"{me}-{t}-{i}", path=db, durability=durability,
                             timeout=120) as j:
                    for s in range(3):
                        j.step(f"s{s}", str, s)
                        with lock:
                            counts["steps"] += 1
                    with j.atomic_marker(f"m{i}", scope="global", timeout=120) as first:
                        if first:
                            fd = os.open(ran, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
                            os.write(fd, f"m{i}\\n".encode())
                            os.close(fd)
            except Exception:
                with lock:
                    counts["errors"] += 1
                    if not first_error:
                        first_error.append(traceback.format_exc(limit=3))

    start = threading.Event()

    def released(t):
        start.wait()
        work(t)

    pool = [threading.Thread(target=released, args=(t,)) for t in range(threads)]
    for t in pool:
        t.start()
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.0005)
    start.set()  # every thread's first open at once
    for t in pool:
        t.join()
    print(json.dumps({**counts, "first_error": first_error[0] if first_error else ""}))
    """
)


def start_worker(argv: list[str], env: dict[str, str]) -> Any:
    """A worker process running ``argv`` (``python worker.py ARGS``) with ``env``: a
    ``Popen`` with its stdout and stderr pipes (what :func:`one_run` uses of it: a
    ``readline`` of its stdout, ``communicate``, ``kill`` and ``returncode``)."""
    return subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def one_run(
    procs: int,
    threads: int,
    opens: int,
    code: Path,
    start: Callable[[list[str], dict[str, str]], Any] = start_worker,
) -> dict[str, object]:
    """One new file hammered once; what went wrong. ``start``: how a worker process is
    started (:func:`start_worker`; the tests fork theirs from an interpreter that
    imported letitloop)."""
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        db, go, ran = folder / "journal.db", folder / "go", folder / "ran"
        script = folder / "worker.py"
        script.write_text(WORKER, encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": str(code)}
        children = [
            start(
                [
                    sys.executable,
                    str(script),
                    str(db),
                    str(go),
                    str(ran),
                    f"p{p}",
                    str(threads),
                    str(opens),
                ],
                env,
            )
            for p in range(procs)
        ]
        for child in children:
            assert child.stdout is not None
            child.stdout.readline()  # "ready" (or nothing, if it failed)
        go.touch()
        errors = steps = 0
        statuses: list[int] = []
        first = ""
        for child in children:
            try:
                out, err = child.communicate(timeout=600)
            except subprocess.TimeoutExpired:
                child.kill()
                out, err = child.communicate()
            statuses.append(child.returncode)
            if child.returncode != 0:
                errors += 1
                first = first or f"exit {child.returncode}: {err.strip()[-300:]}"
                continue
            counts = json.loads(out.strip().splitlines()[-1])
            errors += counts["errors"]
            steps += counts["steps"]
            first = first or counts["first_error"]
        recorded = 0
        if db.exists():
            conn = sqlite3.connect(db)
            try:
                (table_name,) = conn.execute(
                    "SELECT journal_table FROM goals WHERE goal = 'hammer'"
                ).fetchone()
                (recorded,) = conn.execute(
                    f"SELECT count(*) FROM \"{table_name}\" WHERE kind = 'step' AND status = 'done'"
                ).fetchone()
            except (sqlite3.Error, TypeError):
                recorded = 0
            finally:
                conn.close()
        lines = ran.read_text().split() if ran.exists() else []
        duplicates = len(lines) - len(set(lines))
    return {
        "errors": errors,
        "lost": max(0, steps - recorded),
        "duplicates": duplicates,
        "sigbus": sum(1 for s in statuses if s == -7),
        "steps": steps,
        "first": first,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--procs", type=int, default=8)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--opens", type=int, default=6)
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout whose letitloop runs")
    args = parser.parse_args()
    rows = []
    failed = 0
    started = time.perf_counter()
    for r in range(args.runs):
        got = one_run(args.procs, args.threads, args.opens, args.code.resolve())
        bad = bool(got["errors"] or got["lost"] or got["duplicates"])
        failed += bad
        rows.append(
            [
                r + 1,
                got["steps"],
                got["errors"],
                got["sigbus"],
                got["lost"],
                got["duplicates"],
                str(got["first"]).strip().splitlines()[-1][:90] if got["first"] else "",
            ]
        )
    body = table(
        ["run", "steps returned", "errors", "SIGBUS", "lost steps", "duplicate markers", "first"],
        rows,
    )
    body += (
        f"\n\n{failed} of {args.runs} runs failed (an error, a lost step or a marker run "
        f"twice); {time.perf_counter() - started:.0f} s in all. Code: {args.code.resolve()}."
    )
    publish(
        "hammer",
        f"Hammer: {args.procs} processes x {args.threads} threads opening one new file",
        f"python benchmarks/hammer.py --runs {args.runs} --procs {args.procs} "
        f"--threads {args.threads} --opens {args.opens}",
        body,
    )
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
