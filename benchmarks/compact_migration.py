"""Migration 0011 (the compact row) on a file as letitloop 0010 left it: its time and size.

    python benchmarks/compact_migration.py [--steps 1000000] [--goals 1]

Builds a journal file at schema 0010 (every migration before 0011 applied
step by step) holding ``--steps`` small steps (the 70-byte result of
``bench_steps.py``, a qualified function name, two ISO-8601 times, a
two-argument fingerprint) in runs of 1,000 steps spread over ``--goals``
goals, checkpoints it, then opens it with this letitloop in a fresh process
(which migrates it) and reports the time of that open, and the file before and
after (checkpointed). ``build_old_file`` is also what tests/test_compact_rows.py
builds its files with.

What it does not show: a cold page cache (the file was just written), results
much larger than 70 bytes (the migration copies them as they are), a file with
many goals' worth of views to parse.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from letitloop.identity.ids import new_run_id  # noqa: E402
from letitloop.primitives.clock import utc_iso  # noqa: E402
from letitloop.stores.sqlite import migrate  # noqa: E402
from letitloop.stores.sqlite.store import Store  # noqa: E402

#: The last migration before the compact row.
BEFORE = "0010_every_call"
RESULT = '{"id": 123, "name": "Ada Lovelace", "email": "ada@example.com", "ok": true}'
FUNCTIONS = ("app.crm.fetch_user", "app.mail.send_welcome", "app.llm.summarize")


def build_old_file(path: Path, steps: int, goals: int = 1, per_run: int = 1000) -> None:
    """A journal file at schema 0010 with ``steps`` done steps in runs of ``per_run``.

    Each run also has a run-scoped marker, a 'running' step (a duration, no end)
    and a 'sleeping' sleep; each goal a goal-scoped marker ('*'): the shapes of
    row the migration must carry over.
    """
    store = Store(path, migrate=False)
    try:
        migrate.migrate(store, stepwise=True, until=BEFORE)
        t = 1_796_000_000.0
        with store.write() as c:
            tables = [store.ensure_goal(c, f"goal{g}", t) for g in range(goals)]
            for table in tables:
                c.execute(
                    f'INSERT INTO "{table}" (run, key, kind, status, started_at, finished_at, '
                    f"duration_ms, attempt, claims, crashes, holder_run) "
                    f"VALUES ('*', 'once', 'marker', 'done', ?, ?, 1.5, 1, 1, 0, 'x')",
                    (utc_iso(t), utc_iso(t + 0.0015)),
                )
            made, n = 0, 0
            while made < steps:
                table = tables[n % goals]
                t += 1.0
                run = new_run_id(t)
                c.execute(
                    "INSERT INTO runs (id, goal, status, attempts, holder_pid, holder_host, "
                    "started_at, updated_at, finished_at) "
                    "VALUES (?, ?, 'completed', 1, 1, 'h', ?, ?, ?)",
                    (run, f"goal{n % goals}", utc_iso(t), utc_iso(t), utc_iso(t + 1)),
                )
                c.execute(
                    "INSERT INTO attempts (run, attempt, pid, host, started_at) "
                    "VALUES (?, 1, 1, 'h', ?)",
                    (run, utc_iso(t)),
                )
                count = min(per_run, steps - made)
                rows = []
                for i in range(count):
                    began = t + i * 0.000731
                    ended = began + 0.000123
                    rows.append(
                        (
                            run,
                            f"step{i}",
                            FUNCTIONS[i % 3],
                            RESULT,
                            utc_iso(began),
                            utc_iso(ended),
                            (ended - began) * 1000.0,
                            f"a1b2c3d4e5f6 user_id={i:012x}",
                        )
                    )
                c.executemany(
                    f'INSERT INTO "{table}" (run, key, kind, status, fn, result, started_at, '
                    f"finished_at, duration_ms, attempt, args_fp) "
                    f"VALUES (?, ?, 'step', 'done', ?, ?, ?, ?, ?, 1, ?)",
                    rows,
                )
                c.execute(
                    f'INSERT INTO "{table}" (run, key, kind, status, started_at, finished_at, '
                    f"duration_ms, attempt, claims, crashes, holder_pid, holder_host, "
                    f"holder_run, holder_token) VALUES (?, 'notify', 'marker', 'done', ?, ?, "
                    f"0.25, 1, 1, 0, 1, 'h', ?, 'tok')",
                    (run, utc_iso(t), utc_iso(t + 0.00025), run),
                )
                c.execute(
                    f'INSERT INTO "{table}" (run, key, kind, status, fn, started_at, '
                    f"duration_ms, attempt, args_fp, input_tokens, cost, model) VALUES (?, "
                    f"'slow', 'step', 'running', 'app.llm.summarize', ?, 812.5, 1, '', 10, "
                    f"0.01, 'm')",
                    (run, utc_iso(t + 0.5)),
                )
                c.execute(
                    f'INSERT INTO "{table}" (run, key, kind, status, fn, started_at, attempt, '
                    f"args_fp, wake_at) VALUES (?, 'nap', 'sleep', 'sleeping', "
                    f"'letitloop.sleep', ?, 1, '', ?)",
                    (run, utc_iso(t + 0.6), utc_iso(t + 60.6)),
                )
                made += count
                n += 1
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        store.close()


def readable_rows(path: Path) -> list[tuple[object, ...]]:
    """Every goal's rows as a reader sees them (``journal_<goal>``), in journal order.

    ``duration_ms`` rounded to the microsecond, as the compact row keeps it (a
    0010 row held the float of a difference of two float times: 0.12302… ms).
    """
    conn = sqlite3.connect(path)
    try:
        out: list[tuple[object, ...]] = []
        for goal, table in conn.execute("SELECT goal, journal_table FROM goals ORDER BY goal"):
            out.extend(
                (goal, *row[:9], None if row[9] is None else round(row[9], 3), *row[10:])
                for row in conn.execute(
                    f"SELECT rowid, run, key, kind, status, fn, result, started_at, "
                    f"finished_at, duration_ms, attempt, error, traceback, claims, crashes, "
                    f"holder_pid, holder_host, holder_run, holder_token, args_fp, "
                    f'input_tokens, output_tokens, cost, model, wake_at FROM "{table}" '
                    f"ORDER BY rowid"
                )
            )
        return out
    finally:
        conn.close()


#: The child that opens (and so migrates) the file.
OPEN = "import sys; from letitloop.stores.sqlite.store import Store; Store(sys.argv[1]).close()"


def _size(path: Path) -> int:
    return sum(os.path.getsize(p) for p in (path, Path(f"{path}-wal")) if p.exists())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--goals", type=int, default=1)
    args = parser.parse_args()
    print(f"Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "journal.db"
        t0 = time.perf_counter()
        build_old_file(path, args.steps, args.goals)
        built = time.perf_counter() - t0
        before = _size(path)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", OPEN, str(path)], check=True, cwd=ROOT)
        took = time.perf_counter() - t0
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        unvacuumed = _size(path)  # the old table's pages are free, not yet given back
        conn.execute("VACUUM")
        conn.close()
        after = _size(path)
        print(f"built {args.steps:,} steps in {args.goals} goal(s) at 0010 in {built:.1f} s")
        print(
            f"| steps | goals | migrate (spawn to close) | file at 0010 | after 0011 | "
            f"after VACUUM | per 1,000 steps before | after VACUUM |\n"
            f"|---|---|---|---|---|---|---|---|\n"
            f"| {args.steps:,} | {args.goals} | {took:.1f} s | {before / 1e6:,.1f} MB | "
            f"{unvacuumed / 1e6:,.1f} MB | {after / 1e6:,.1f} MB | "
            f"{before / args.steps:,.0f} KB | {after / args.steps:,.0f} KB |"
        )


if __name__ == "__main__":
    main()
