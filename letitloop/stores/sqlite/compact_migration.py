"""Migration 0011, which moves every goal's rows to a compact table, resumably.

Its SQL file is its first transaction, recorded as ``COMPACT_ROWS_MOVING`` (a
name no older letitloop knows, so an older one refuses the file from then
on); each goal's rows then move in a transaction of their own
(:func:`move_goal_rows`), and the last replaces the record with
``COMPACT_ROWS``'s. A process killed at any point leaves a file the next
open finishes.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from .migration_records import (
    COMPACT_ROWS,
    COMPACT_ROWS_MOVING,
    MIGRATION_SET,
    applied_migrations,
    check_not_newer,
    ensure_bookkeeping,
    record,
)
from .migration_sql import run_sql

if TYPE_CHECKING:
    from .store import Store


def compact_rows(store: Store, sql: str, names: list[str]) -> None:
    """Migration 0011: its SQL, then every goal's rows moved to a compact table, resumably.

    The first transaction applies ``sql`` (the schema) with the record
    COMPACT_ROWS_MOVING; each goal then moves in a transaction of its own
    (:func:`move_goal_rows`); the transaction that finds no goal left replaces
    that record with COMPACT_ROWS's. Each transaction re-reads the records under
    the write lock, so a process killed at any point, or two processes
    migrating at once, leave a file that the next open finishes.
    """
    from .goals import refresh_journal_rows, rows_table

    with store.write() as conn:
        applied = applied_migrations(conn)
        check_not_newer(store.path, applied, names)
        if COMPACT_ROWS in applied:
            return
        if COMPACT_ROWS_MOVING not in applied:
            ensure_bookkeeping(conn)
            run_sql(conn, sql)
            record(conn, COMPACT_ROWS_MOVING)
    while True:
        with store.write() as conn:
            applied = applied_migrations(conn)
            if COMPACT_ROWS in applied:
                return
            moved = {
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
            left = [
                view
                for (view,) in conn.execute("SELECT journal_table FROM goals ORDER BY rowid")
                if rows_table(view) not in moved
            ]
            if not left:
                conn.execute(
                    "DELETE FROM _sqlite_migrations WHERE migration_set = ? AND name = ?",
                    (MIGRATION_SET, COMPACT_ROWS_MOVING),
                )
                record(conn, COMPACT_ROWS)
                refresh_journal_rows(conn)  # over the goals' views now
                return
            move_goal_rows(conn, left[0])


def move_goal_rows(conn: sqlite3.Connection, table: str) -> None:
    """Inside a write transaction: goal table ``table`` (as before 0011) becomes its compact
    table and a view of the same name; every row keeps its rowid (the journal order)."""
    from .goals import create_rows_table, create_view, rows_table, us_sql

    compact = rows_table(table)
    conn.execute(
        f'INSERT OR IGNORE INTO functions (name) SELECT DISTINCT fn FROM "{table}" '
        f"WHERE fn IS NOT NULL"
    )
    create_rows_table(conn, table)
    plain = (
        "key, kind, status, result, attempt, error, traceback, claims, crashes, holder_pid, "
        "holder_host, holder_run, holder_token, args_fp, input_tokens, output_tokens, cost, "
        "model, wake_at"
    )
    started, finished = us_sql("o.started_at"), us_sql("o.finished_at")
    conn.execute(
        f'INSERT INTO "{compact}" (rowid, run, fn, started, duration, {plain}) '
        f"SELECT o.rowid, CASE WHEN o.run = '*' THEN 0 ELSE r.num END, f.id, {started}, "
        f"coalesce(({finished}) - ({started}), CAST(round(o.duration_ms * 1000.0) AS INTEGER)), "
        + ", ".join(f"o.{col}" for col in plain.split(", "))
        + f' FROM "{table}" AS o LEFT JOIN runs AS r ON r.id = o.run '
        f"LEFT JOIN functions AS f ON f.name = o.fn "
        f"WHERE o.run = '*' OR r.num IS NOT NULL ORDER BY o.rowid"
    )
    conn.execute(f'DROP TABLE "{table}"')
    create_view(conn, table)
