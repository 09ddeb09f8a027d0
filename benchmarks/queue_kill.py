"""Work queues under SIGKILL: N queued runs of 3 steps, worker processes killed at random.

    python -m benchmarks.queue_kill [--runs 1000] [--takeovers 30] [--seed S] [--no-write]

Two measurements, each on a fresh journal file, with the workers of
benchmarks/queue_app.py (``Worker(threads=2, processes=2).run()``: 4 workers in 2
processes, a supervisor that starts again a worker process that dies):

- **kill trial**: ``--runs`` entries of the task ``three`` (3 steps of 10 ms) on a
  queue with ``concurrency=3``, while a killer SIGKILLs a random worker process
  every 50-250 ms. From the steps' own ledger (benchmarks/queue_app.py): every run
  completes with the right result, no step runs again unless the process that ran
  it was killed (a finished step is never run twice), and no more than 3 runs have
  a step running at any instant.
- **take-over**: ``--takeovers`` times, a run whose holder hangs in its step; the
  holder is SIGKILLed and the time until another worker claimed its entry
  (``attempt`` 2 committed) and until the run completed is measured.

Bias: one 2-core machine shared with other work; wall-clock figures are noisy.
The last line of stdout is the outcome as JSON (the smoke test reads it).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

APP = Path(__file__).resolve().parent / "queue_app.py"

#: Starts ``python APP serve THREADS PROCESSES`` with ``env``: (its pid, a wait for its exit code).
Starter = Callable[[dict[str, str], int, int], tuple[int, Callable[[], int]]]


def subprocess_starter(env: dict[str, str], threads: int, processes: int) -> tuple[int, Any]:
    proc = subprocess.Popen(
        [sys.executable, str(APP), "serve", str(threads), str(processes)], env=env
    )
    return proc.pid, proc.wait


def stop(pid: int, wait: Callable[[], int], grace: float = 30.0) -> int | None:
    """SIGTERM the supervisor ``pid`` and wait for its exit code; None when it had not
    drained within ``grace`` seconds (it and its workers are then SIGKILLed)."""
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not alive(pid):
            return wait()
        time.sleep(0.01)
    for child in children(pid):
        os.kill(child, signal.SIGKILL)
    os.kill(pid, signal.SIGKILL)
    wait()
    return None


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (not gone, not a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (Linux's /proc): read from its threads' lists of
    children where the kernel keeps them (a few small files), else from every process's
    parent (a scan of /proc: some thousand files on a busy machine, which a caller that
    polls would read back to back)."""
    try:
        listed = [
            int(word)
            for task in os.listdir(f"/proc/{pid}/task")
            for word in Path(f"/proc/{pid}/task/{task}/children").read_text().split()
        ]
    except OSError:  # gone, or a kernel without the lists: the scan says
        pass
    else:
        return [child for child in listed if alive(child)]
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[1]) == pid:
            found.append(int(name))
    return found


def app_env(folder: Path, concurrency: int | None, db: str | None = None) -> dict[str, str]:
    env = {
        **os.environ,
        "QUEUE_DB": db or str(folder / "journal.db"),
        "QUEUE_LEDGER": str(folder / "ledger"),
    }
    if concurrency is not None:
        env["QUEUE_CONCURRENCY"] = str(concurrency)
    return env


def producer(env: dict[str, str]) -> Any:
    """The queue as a producer declares it (the tasks by name only)."""
    from letitloop import Queue

    q = Queue("work", path=env["QUEUE_DB"], listen=env.get("QUEUE_LISTEN", "1") == "1")
    q.task(lambda *a: None, name="three")
    q.task(lambda *a: None, name="hang")
    return q


def statuses(db: str) -> dict[str, int]:
    """How many entries in each status, on the file or on PostgreSQL."""
    sql = "SELECT status, count(*) FROM {} GROUP BY status"
    if db.startswith(("postgresql://", "postgres://")):
        import psycopg

        with psycopg.connect(db, autocommit=True) as c:
            return dict(c.execute(sql.format("ll_queue_entries")).fetchall())
    with sqlite3.connect(db, timeout=30) as c:
        return dict(c.execute(sql.format("queue_entries")))


def kill_trial(
    folder: Path,
    runs: int,
    rng: random.Random,
    start: Starter = subprocess_starter,
    *,
    db: str | None = None,
    processes: int = 2,
    threads: int = 2,
) -> dict[str, Any]:
    """``runs`` runs of 3 steps on a queue with concurrency 3, ``threads`` workers in each of
    ``processes`` processes SIGKILLed at random; what the steps' ledger says. ``db``: the
    journal (default: a file in ``folder``; a postgresql:// URL)."""
    concurrency = 3
    env = app_env(folder, concurrency, db)
    q = producer(env)
    handles = [q.enqueue("three", i) for i in range(runs)]
    began = time.monotonic()
    pid, wait = start(env, threads, processes)
    killed: dict[int, float] = {}
    deadline = time.monotonic() + 60 + runs * 0.1
    try:
        while statuses(env["QUEUE_DB"]).get("completed", 0) < runs:
            if time.monotonic() > deadline:
                raise AssertionError(f"not done in time: {statuses(env['QUEUE_DB'])}")
            time.sleep(rng.uniform(0.05, 0.25))
            workers = children(pid)
            if workers:
                victim = rng.choice(workers)
                killed[victim] = time.monotonic()
                os.kill(victim, signal.SIGKILL)
        elapsed = time.monotonic() - began
    finally:
        code = stop(pid, wait)
    results = [h.result(timeout=5) for h in handles]
    return {
        "runs": runs,
        "kills": len(killed),
        "wrong_results": sum(r != 3 for r in results),
        "supervisor_exit": code,
        "seconds": round(elapsed, 2),
        **ledger_verdict(Path(env["QUEUE_LEDGER"]), killed, runs, concurrency),
    }


def ledger_verdict(
    ledger: Path, killed: dict[int, float], runs: int, concurrency: int
) -> dict[str, Any]:
    """From the steps' own lines: steps run again by a process that was not killed, steps
    never finished, and the most runs with a step running at one instant."""
    starts: dict[tuple[int, int], list[int]] = defaultdict(list)
    finished: set[tuple[int, int]] = set()
    events: list[tuple[float, int, int]] = []  # (time, +1/-1, run)
    open_: dict[tuple[int, int, int], float] = {}
    for line in ledger.read_text().splitlines():
        kind, *rest = line.split()
        if kind not in ("S", "E"):
            continue
        i, k, pid, t = int(rest[0]), int(rest[1]), int(rest[2]), float(rest[3])
        if kind == "S":
            starts[(i, k)].append(pid)
            open_[(i, k, pid)] = t
        else:
            finished.add((i, k))
            events += [(open_.pop((i, k, pid)), 1, i), (t, -1, i)]
    for (i, _k, pid), t in open_.items():  # a step its process's SIGKILL cut short
        end = killed.get(pid)
        if end is None:
            raise AssertionError(f"a step of run {i} started by pid {pid} never ended")
        events += [(t, 1, i), (max(end, t), -1, i)]
    # A step ran again only where the process that ran it before was killed.
    rerun_by_live = sum(1 for pids in starts.values() for p in pids[:-1] if p not in killed)
    running: dict[int, int] = defaultdict(int)
    most = 0
    for _, delta, i in sorted(events, key=lambda e: (e[0], e[1])):
        running[i] += delta
        if running[i] == 0:
            del running[i]
        most = max(most, len(running))
    return {
        "steps_run_again_by_a_live_process": rerun_by_live,
        "steps_rerun_after_a_kill": sum(len(p) - 1 for p in starts.values()),
        "steps_never_finished": 3 * runs - len(finished),
        "most_runs_at_once": most,
        "concurrency": concurrency,
    }


def takeover_trial(
    folder: Path, trials: int, start: Starter = subprocess_starter, *, db: str | None = None
) -> dict[str, Any]:
    """``trials`` SIGKILLs of the worker holding a run: seconds until another claimed it, and
    until the run completed."""
    env = app_env(folder, None, db)
    q = producer(env)
    pid, wait = start(env, 1, 2)
    claimed: list[float] = []
    completed: list[float] = []
    ledger = Path(env["QUEUE_LEDGER"])
    try:
        for n in range(trials):
            until(lambda: len(children(pid)) == 2, "two worker processes")
            flag = str(folder / f"flag{n}")
            h = q.enqueue("hang", flag)
            found: list[int] = []

            def in_step(flag: str = flag, found: list[int] = found) -> bool:
                found[:] = [p for p in [holder_of(ledger, flag)] if p is not None]
                return bool(found)

            until(in_step, "its holder's step")
            holder = found[0]
            t0 = time.monotonic()
            os.kill(holder, signal.SIGKILL)
            while q.store.state(h.id).attempt < 2:
                time.sleep(0.001)
            claimed.append(time.monotonic() - t0)
            h.result(timeout=30)
            completed.append(time.monotonic() - t0)
    finally:
        code = stop(pid, wait)
    return {
        "trials": trials,
        "supervisor_exit": code,
        "claimed_s": summary(claimed),
        "completed_s": summary(completed),
    }


def holder_of(ledger: Path, flag: str) -> int | None:
    """The pid that hangs in the step of the run of ``flag`` (its ledger line), if any."""
    if not ledger.exists():
        return None
    for line in ledger.read_text().splitlines():
        words = line.split()
        if words[:2] == ["H", flag]:
            return int(words[2])
    return None


def until(done: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.002)


def summary(xs: list[float]) -> dict[str, float]:
    s = sorted(xs)
    return {
        "min": round(s[0], 4),
        "median": round(statistics.median(s), 4),
        "p90": round(s[int(0.9 * (len(s) - 1))], 4),
        "max": round(s[-1], 4),
        "mean": round(statistics.fmean(s), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--takeovers", type=int, default=30)
    parser.add_argument("--seed", default="queue")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--db", help="a postgresql:// URL (default: a journal file in a temporary folder)"
    )
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        kills = kill_trial(Path(a), args.runs, rng, db=args.db, processes=args.processes)
        over = takeover_trial(Path(b), args.takeovers, db=args.db)
    if not args.no_write:
        from benchmarks._report import publish, table

        rows = [[k, v] for k, v in kills.items()] + [[f"take-over {k}", v] for k, v in over.items()]
        publish(
            "queue_kill",
            "Work queues under SIGKILL",
            f"python -m benchmarks.queue_kill --runs {args.runs} --takeovers {args.takeovers}",
            table(["measure", "value"], rows),
        )
    print(json.dumps({"kill": kills, "takeover": over}))


if __name__ == "__main__":
    main()
