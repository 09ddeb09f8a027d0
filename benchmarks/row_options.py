"""Candidate rows for a step, side by side: bytes per row and µs per INSERT + COMMIT.

    python benchmarks/row_options.py [--rows 2000] [--repeats 7] [--size-rows 10000]

Issue 30 asks for a smaller, cheaper step row before more stores copy it.
Each candidate is a goal's journal table built in a temporary file with
plain ``sqlite3`` (WAL, ``synchronous=NORMAL``, as a journal opens), holding
the values a step really writes (a 26-character ULID run id, the function's
qualified name, ISO-8601 UTC times, the result as JSON text, a two-argument
fingerprint), and written the way a step writes it: one autocommit
``INSERT … ON CONFLICT (run, key) DO UPDATE`` per row.

- **bytes per row**: ``--size-rows`` rows of the 70-byte result of
  bench_steps.py inserted into a fresh file, checkpointed, the file's growth
  over the same file with the empty table, divided by the rows: what 1,000
  steps cost on disk beyond the journal's fixed cost (times 1,000). With and
  without an argument fingerprint (bench_steps.py's small steps have none).
- **µs per INSERT + COMMIT**: ``--rows`` autocommit statements into a fresh
  file, every candidate once per round in turn, ``--repeats`` rounds; the
  median, and the median of each round's ratio to today's row. The floor of
  bench_steps.py (12 columns, "run" and "2026" for text) is a row of its own,
  and each round's ratio to it is taken too.

The candidates change one thing each against today's row, then combine:
an integer run key (the run's rowid in ``runs``; the text id kept once
there), integer microsecond times with a duration instead of a second
timestamp, the function's name interned in a small table, the fingerprint
as an 8-byte integer or blob, and a ``WITHOUT ROWID`` table keyed by
(run, key). The result stays JSON text in every one.

What it does not show: the Python around a step (encoding, key claim, the
views a person reads the file through), reads and replay, a file with many
runs or goals, or the cost of the migration.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import environment, table

RESULT = '{"id":123,"name":"Ada Lovelace","tags":["vip","eu"],"score":0.93}'
RUN_ID = "01M8SSG5CXB9RGERVMD9MHGQHD"  # a ULID, as runs.id holds
FN = "myapp.pipeline.fetch_user"
STARTED = "2026-12-01T21:52:14.750822+00:00"
FINISHED = "2026-12-01T21:52:14.755098+00:00"
FP_TEXT = "34c6b3dfbc21 7c0b3f2ba6c8"  # today's args_fp of two small arguments
FP_INT = -0x3B4C2040DE83F4D1  # 8 bytes, as a signed 64-bit integer
FP_BLOB = bytes.fromhex("34c6b3dfbc217c0b")
RUN_KEY = 412  # the run's rowid in runs
FN_ID = 7  # the function's id in a small table of names
STARTED_US = 1_796_161_934_750_822  # microseconds since the epoch
DURATION_US = 4_277

#: Today's journal table (migrations/schema.sql, ``_journal_template``).
TODAY_COLUMNS = (
    "run TEXT NOT NULL, key TEXT NOT NULL, kind TEXT NOT NULL, status TEXT NOT NULL, fn TEXT, "
    "result TEXT, started_at TEXT, finished_at TEXT, duration_ms REAL, attempt INTEGER NOT NULL, "
    "error TEXT, traceback TEXT, claims INTEGER, crashes INTEGER, holder_pid INTEGER, "
    "holder_host TEXT, holder_run TEXT, holder_token TEXT, args_fp TEXT, input_tokens INTEGER, "
    "output_tokens INTEGER, cost REAL, model TEXT, wake_at TEXT"
)


@dataclass(frozen=True)
class Option:
    """One candidate row: its columns, and the values one step writes into them."""

    name: str
    int_run: bool = False
    int_times: bool = False
    interned_fn: bool = False
    fp: str = "text"  # text | int | blob
    without_rowid: bool = False
    floor: bool = False

    def create(self) -> list[str]:
        if self.floor:
            return [
                "CREATE TABLE t (run TEXT, key TEXT, kind TEXT, status TEXT, fn TEXT, "
                "result TEXT, started_at TEXT, finished_at TEXT, duration_ms REAL, "
                "attempt INTEGER, error TEXT, traceback TEXT, PRIMARY KEY (run, key))"
            ]
        cols = TODAY_COLUMNS
        if self.int_run:
            cols = cols.replace("run TEXT NOT NULL", "run INTEGER NOT NULL", 1)
        if self.int_times:
            cols = cols.replace(
                "started_at TEXT, finished_at TEXT, duration_ms REAL",
                "started_us INTEGER, duration_us INTEGER",
            )
        if self.interned_fn:
            cols = cols.replace("fn TEXT", "fn INTEGER", 1)
        if self.fp != "text":
            cols = cols.replace("args_fp TEXT", f"args_fp {self.fp.upper()}")
        tail = " WITHOUT ROWID" if self.without_rowid else ""
        sql = [f"CREATE TABLE t ({cols}, PRIMARY KEY (run, key)){tail}"]
        if self.interned_fn:
            sql.append("CREATE TABLE fns (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)")
            sql.append(f"INSERT INTO fns VALUES ({FN_ID}, '{FN}')")
        return sql

    def insert(self) -> str:
        if self.floor:
            return "INSERT INTO t VALUES (?, ?, 'step', 'done', ?, ?, ?, ?, ?, 1, NULL, NULL)"
        times = (
            "started_us, duration_us" if self.int_times else "started_at, finished_at, duration_ms"
        )
        marks = "?, ?" if self.int_times else "?, ?, ?"
        return (
            f"INSERT INTO t (run, key, kind, status, fn, result, {times}, attempt, error, "
            "traceback, args_fp, input_tokens, output_tokens, cost, model) "
            f"VALUES (?, ?, 'step', 'done', ?, ?, {marks}, 1, NULL, NULL, ?, NULL, NULL, NULL, "
            "NULL) ON CONFLICT (run, key) DO UPDATE SET status = excluded.status, "
            "result = excluded.result"
        )

    def row(self, i: int, with_fp: bool = True) -> tuple[Any, ...]:
        if self.floor:
            return ("run", f"s{i}", "bench.produce", RESULT, "2026", "2026", 0.1)
        run: Any = RUN_KEY if self.int_run else RUN_ID
        fn: Any = FN_ID if self.interned_fn else FN
        times: tuple[Any, ...] = (
            (STARTED_US + i, DURATION_US) if self.int_times else (STARTED, FINISHED, 4.2767)
        )
        fp: Any = {"text": FP_TEXT, "int": FP_INT, "blob": FP_BLOB}[self.fp]
        if not with_fp:
            fp = "" if self.fp == "text" else None
        return (run, f"s{i}", fn, RESULT, *times, fp)


COMPACT = {"int_run": True, "int_times": True, "interned_fn": True, "fp": "int"}

OPTIONS = (
    Option("today's row (24 columns, text run id, ISO times)"),
    Option("integer run key (runs' rowid)", int_run=True),
    Option("integer µs start + duration (no second timestamp)", int_times=True),
    Option("function name interned (integer id)", interned_fn=True),
    Option("fingerprint as 8-byte integer", fp="int"),
    Option("fingerprint as 8-byte blob", fp="blob"),
    Option("WITHOUT ROWID, keyed by (run, key)", without_rowid=True),
    Option("integer run key + WITHOUT ROWID", int_run=True, without_rowid=True),
    Option("integer run key + integer µs times", int_run=True, int_times=True),
    Option("all four compact columns", **COMPACT),  # type: ignore[arg-type]
    Option("all four compact columns + WITHOUT ROWID", without_rowid=True, **COMPACT),  # type: ignore[arg-type]
    Option("bench_steps.py floor (12 columns, short text)", floor=True),
)


def connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


def build(path: Path, option: Option) -> sqlite3.Connection:
    conn = connect(path)
    for sql in option.create():
        conn.execute(sql)
    return conn


def settled_size(conn: sqlite3.Connection, path: Path) -> int:
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return os.stat(path).st_size


def bytes_per_row(folder: Path, option: Option, rows: int, with_fp: bool) -> float:
    path = folder / f"size-{id(option)}-{with_fp}.db"
    conn = build(path, option)
    empty = settled_size(conn, path)
    insert = option.insert()
    conn.execute("BEGIN")
    for i in range(rows):  # one transaction: the same b-trees as one commit per row
        conn.execute(insert, option.row(i, with_fp))
    conn.execute("COMMIT")
    grown = settled_size(conn, path) - empty
    conn.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return grown / rows


def commit_time(folder: Path, option: Option, rows: int) -> float:
    """Seconds per autocommit INSERT of ``option``'s row into a fresh file."""
    path = folder / "time.db"
    conn = build(path, option)
    insert, values = option.insert(), [option.row(i) for i in range(rows)]
    execute = conn.execute
    t0 = time.perf_counter()
    for v in values:
        execute(insert, v)
    elapsed = time.perf_counter() - t0
    conn.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return elapsed / rows


def rounds(
    repeats: int, options: Sequence[Option], measure: Callable[[Option], float]
) -> tuple[dict[Option, float], dict[Option, float], dict[Option, float]]:
    """Medians of ``measure`` over alternating rounds, and of each round's ratios to the
    first option (today's row) and to the last (the floor)."""
    values: dict[Option, list[float]] = {o: [] for o in options}
    to_first: dict[Option, list[float]] = {o: [] for o in options}
    to_last: dict[Option, list[float]] = {o: [] for o in options}
    for _ in range(repeats):
        this = {o: measure(o) for o in options}
        for o in options:
            values[o].append(this[o])
            to_first[o].append(this[o] / this[options[0]])
            to_last[o].append(this[o] / this[options[-1]])
    return tuple(  # type: ignore[return-value]
        {o: statistics.median(v) for o, v in d.items()} for d in (values, to_first, to_last)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2000, help="commits per timed block")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--size-rows", type=int, default=10_000, help="rows per size measure")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        sizes = {o: bytes_per_row(folder, o, args.size_rows, True) for o in OPTIONS}
        bare = {o: bytes_per_row(folder, o, args.size_rows, False) for o in OPTIONS}
        commit_time(folder, OPTIONS[0], args.rows)  # warm the page cache and the allocator
        times, ratios, to_floor = rounds(
            args.repeats, OPTIONS, lambda o: commit_time(folder, o, args.rows)
        )
    today = OPTIONS[0]
    floor = OPTIONS[-1]
    print(environment())
    print(
        f"\n{args.size_rows:,} rows per size; {args.rows:,} commits a block, median of "
        f"{args.repeats} rounds; ratios are per round, then median\n"
    )
    print(
        table(
            [
                "row",
                "bytes/row, 2-argument fingerprint",
                "bytes/row (KB per 1,000), no arguments",
                "µs per INSERT + COMMIT",
                "vs today",
                "vs floor",
            ],
            [
                [
                    o.name,
                    f"{sizes[o]:,.0f}",
                    f"{bare[o]:,.0f}",
                    f"{times[o] * 1e6:,.1f}",
                    f"{ratios[o]:.2f}x",
                    f"{to_floor[o]:.2f}x",
                ]
                for o in OPTIONS
            ],
        )
    )
    print(
        f"\ntoday's row: {sizes[today]:,.0f} bytes with a fingerprint; the floor's "
        f"{bare[floor]:,.0f} bytes"
    )


if __name__ == "__main__":
    main()
