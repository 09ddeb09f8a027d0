"""Work queues: how soon an idle worker claims a run that another process enqueued.

    python -m benchmarks.queue_start [--runs 100] [--seed S] [--no-write]

Three queues side by side in one run, each on a journal of its own with one
idle worker process of its own (benchmarks/queue_app.py, ``Worker(threads=1)``):

- **PostgreSQL, LISTEN/NOTIFY** (``Queue(..., listen=True)``, the default): the
  enqueue's transaction sends NOTIFY, the worker's listening session wakes it;
- **PostgreSQL, polling** (``listen=False``: what every worker did before): the
  worker looks every 0.1 s (``queue_records.POLL_SECONDS``);
- **journal file**: polling every 0.1 s (a file notifies nothing across processes).

Each round enqueues one run of the task ``three`` (3 steps of 0 s) on each
queue in turn from this process, waits until it completed, then sleeps a
random 0-100 ms, so that each enqueue falls at a random point of a polling
worker's nap. Measured per run: enqueue -> claim, the entry's ``claimed_at``
minus its ``enqueued_at`` as the two processes wrote them (``time.time()``,
one machine).

Bias: one 2-core machine shared with other work; the PostgreSQL server is the
tests' throwaway server (tests/pg_server.py) on a Unix socket, so a network's
round trip is not in these figures. The last line of stdout is the outcome as JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.queue_kill import app_env, producer, stop, subprocess_starter, summary

ROOT = Path(__file__).resolve().parent.parent


def claim_delays(db: str) -> list[float]:
    """Seconds from each entry's enqueue to its claim, on the file or on PostgreSQL."""
    sql = "SELECT enqueued_at, claimed_at FROM {} WHERE claimed_at IS NOT NULL ORDER BY id"
    if db.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(db, autocommit=True) as c:
            rows = c.execute(sql.format("ll_queue_entries")).fetchall()
    else:
        with sqlite3.connect(db) as c:
            rows = c.execute(sql.format("queue_entries")).fetchall()
    return [_seconds(claimed) - _seconds(enqueued) for enqueued, claimed in rows]


def _seconds(at: Any) -> float:
    if isinstance(at, datetime):
        return at.timestamp()
    return datetime.fromisoformat(str(at)).timestamp()


def trial(runs: int, rng: random.Random, folder: Path) -> dict[str, dict[str, float]]:
    """``runs`` rounds over the three queues; enqueue -> claim per queue, in seconds."""
    sys.path.insert(0, str(ROOT / "tests"))
    import pg_server

    modes = {
        "postgresql, LISTEN/NOTIFY": (pg_server.location(), "1"),
        "postgresql, polling": (pg_server.location(), "0"),
        "journal file, polling": (str(folder / "journal.db"), "1"),
    }
    started = []
    queues = {}
    try:
        for name, (db, listen) in modes.items():
            sub = folder / name.replace(" ", "_").replace(",", "").replace("/", "-")
            sub.mkdir()
            env = {**app_env(sub, None, db), "QUEUE_LISTEN": listen, "QUEUE_STEP_SECONDS": "0"}
            queues[name] = producer(env)
            started.append(subprocess_starter(env, 1, 1))
        for q in queues.values():  # each worker up, and its listening session listening
            q.enqueue("three", -1).result(timeout=60)
        time.sleep(0.5)
        for i in range(runs):
            for q in queues.values():
                q.enqueue("three", i).result(timeout=60)
                time.sleep(rng.uniform(0, 0.1))
    finally:
        for pid, wait in started:
            stop(pid, wait)
    # The warm-up run (the first enqueued) left out.
    return {name: summary(claim_delays(db)[1:]) for name, (db, _) in modes.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--seed", default="queue-start")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        got = trial(args.runs, random.Random(args.seed), Path(folder))
    if not args.no_write:
        from benchmarks._report import publish, table

        rows = [
            [name, f"{s['median'] * 1e3:.1f}", f"{s['p90'] * 1e3:.1f}", f"{s['max'] * 1e3:.1f}"]
            for name, s in got.items()
        ]
        publish(
            "queue_start",
            "Work queues: enqueue -> claim by an idle worker of another process",
            f"python -m benchmarks.queue_start --runs {args.runs}",
            table(["queue", "median ms", "p90 ms", "max ms"], rows),
        )
    print(json.dumps(got))


if __name__ == "__main__":
    main()
