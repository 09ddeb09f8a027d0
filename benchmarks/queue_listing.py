"""Work queues seen from outside: ``lil queues`` and ``lil runs`` on a journal of 100,000
entries, before and after the index on ``queue_entries.run_id`` and the count in SQL.

    python -m benchmarks.queue_listing [--entries 100000] [--rounds 7] [--no-write]

One journal file is filled with ``--entries`` entries on 4 queues (most completed,
some failed, cancelled, queued, delayed, claimed by a worker that is gone, each with
its run id); a copy of it loses the indexes migration 0023 added. Side by side, in
turns, on each:

- **lil queues** (``queue_stats``): *before*, every entry read and counted in Python
  (the code of 2026-12-07 13:00, kept below as ``stats_before``), on the copy;
  *after*, ``queue_stats`` (``GROUP BY`` in SQLite, from the entries' index; the
  claimed ones read one by one), on the indexed file;
- **lil runs**, tagging a page of 20 runs with their entries (``tagged``:
  ``run_id IN (...)``): a scan of the table without the index, an index look-up with it.

Measured: CPU time of this process (``time.process_time``, user + sys) per call,
median of ``--rounds``; the two answers are checked equal. Bias: one 2-core machine
shared with other work (CPU time, not wall time, for that reason); the file is in the
OS cache. The last line of stdout is the outcome as JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

RESULTS = Path(__file__).resolve().parent / "results" / "queue_listing.md"


def fill(db: Path, entries: int, rng: random.Random) -> list[str]:
    """The journal at ``db`` with ``entries`` entries; the run ids of 20 of them (a page)."""
    from letitloop import Journal
    from letitloop.identity.ids import new_run_id
    from letitloop.primitives.clock import utc_iso

    with Journal("setup", path=db):  # the file made and migrated
        pass
    now = time.time()
    rows = []
    for i in range(entries):
        at = now - 86400 + i * 0.5
        status = rng.choices(
            ["completed", "failed", "cancelled", "queued", "claimed"], [90, 3, 2, 4, 1]
        )[0]
        due = at + (7200 if status == "queued" and rng.random() < 0.5 else 0)
        entry = new_run_id(at)
        run = None if status in ("queued", "cancelled") else new_run_id(at + 0.1)
        rows.append(
            (entry, f"q{i % 4}", "send", entry, run, "[[], {}]", 0, status, utc_iso(due),
             1 if run else 0, 4242, "gone-host", utc_iso(at))
        )  # fmt: skip
    with sqlite3.connect(db) as c:
        c.executemany(
            "INSERT INTO queue_entries (id, queue, task, run_name, run_id, args, priority, "
            "status, not_before, attempt, holder_pid, holder_host, enqueued_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
    started = [r[4] for r in rows if r[4] is not None]
    return rng.sample(started, 20)


def stats_before(inspector: Any) -> list[Any]:
    """``queue_stats`` as it was: every entry read, then counted in Python."""
    from letitloop.inspection.entries import ENTRY_STATES
    from letitloop.inspection.queue_listing import QueueStats, queue_entries

    by_queue: dict[str, list[Any]] = {}
    for entry in queue_entries(inspector):
        by_queue.setdefault(entry.queue, []).append(entry)
    out = []
    for name in sorted(by_queue):
        entries = by_queue[name]
        counts = dict.fromkeys(ENTRY_STATES, 0)
        for e in entries:
            counts[e.state] = counts.get(e.state, 0) + 1
        due = [max(e.enqueued_at, e.not_before) for e in entries if e.state == "queued"]
        workers = sorted(
            {f"{e.holder_pid}@{e.holder_host}" for e in entries if e.state == "running"}
        )
        out.append(QueueStats(name, counts, min(due) if due else None, workers))
    return out


def cpu(fn: Any) -> tuple[float, Any]:
    start = time.process_time()
    got = fn()
    return time.process_time() - start, got


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    from letitloop.inspection import open_inspector
    from letitloop.inspection.queue_listing import queue_entries, queue_stats

    folder = Path(tempfile.mkdtemp(prefix="queue_listing_"))
    try:
        after_db, before_db = folder / "indexed.db", folder / "before.db"
        page = fill(after_db, args.entries, random.Random(52))
        shutil.copy(after_db, before_db)
        with sqlite3.connect(before_db) as c:
            c.execute("DROP INDEX queue_entries_run")
            c.execute("DROP INDEX queue_entries_parent")
        before, after = open_inspector(before_db), open_inspector(after_db)
        times: dict[str, list[float]] = {k: [] for k in ("queues_before", "queues_after",
                                                          "tag_before", "tag_after")}  # fmt: skip
        for _ in range(args.rounds):
            t, old = cpu(lambda: stats_before(before))
            times["queues_before"].append(t)
            t, new = cpu(lambda: queue_stats(after))
            times["queues_after"].append(t)
            assert [s.as_dict() for s in old] == [s.as_dict() for s in new], (old, new)
            t, old = cpu(lambda: queue_entries(before, run_ids=page))
            times["tag_before"].append(t)
            t, new = cpu(lambda: queue_entries(after, run_ids=page))
            times["tag_after"].append(t)
            assert old == new and len(new) == 20
        outcome: dict[str, Any] = {
            "entries": args.entries,
            "rounds": args.rounds,
            **{k: round(statistics.median(v) * 1000, 2) for k, v in times.items()},
            "python": sys.version.split()[0],
            "sqlite": sqlite3.sqlite_version,
            "at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    text = (
        f"# queue_listing: lil queues and lil runs' tags on {args.entries:,} entries\n\n"
        f"`python -m benchmarks.queue_listing --entries {args.entries} --rounds "
        f"{args.rounds}`, {outcome['at']}, Python {outcome['python']}, SQLite "
        f"{outcome['sqlite']}; CPU time of one call (user + sys), median of "
        f"{args.rounds}, before and after side by side in one run:\n\n"
        f"| | before | after |\n| --- | --- | --- |\n"
        f"| `lil queues` (`queue_stats`) | {outcome['queues_before']} ms | "
        f"{outcome['queues_after']} ms |\n"
        f"| `lil runs`: a page of 20 runs tagged with their entries | "
        f"{outcome['tag_before']} ms | {outcome['tag_after']} ms |\n"
    )
    print(text)
    if not args.no_write:
        RESULTS.write_text(text, encoding="utf-8")
    print(json.dumps(outcome))
    return outcome


if __name__ == "__main__":
    main()
