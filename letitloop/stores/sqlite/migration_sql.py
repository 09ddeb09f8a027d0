"""Running one migration's SQL on a journal file, inside the caller's write transaction.

A migration file is split into complete statements (:func:`statements`). A
statement that mentions ``{journal}`` is applied to the journal template and
to every goal's journal table (their compact tables from migration 0011 on),
so a migration that changes the journal table reaches every goal
(:func:`run_sql`); an edit of ``sqlite_master`` under ``PRAGMA
writable_schema`` follows SQLite's procedure (:func:`schema_edit`).
"""

from __future__ import annotations

import re
import sqlite3
from typing import TYPE_CHECKING

from ...errors import JournalFileError
from .migration_records import COMPACT_ROWS

if TYPE_CHECKING:
    pass


def statements(sql: str) -> list[str]:
    """Split a migration file into complete statements (comments kept with their statement)."""
    out: list[str] = []
    buf = ""
    for line in sql.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                out.append(buf.strip())
            buf = ""
    if buf.strip() and not all(
        ln.strip().startswith("--") or not ln.strip() for ln in buf.splitlines()
    ):
        raise JournalFileError(f"incomplete SQL statement at the end of a migration: {buf!r}")
    return out


#: ``PRAGMA writable_schema = ON|OFF`` in a migration: the start and end of an edit of
#: sqlite_master (a constraint loosened in place; see 0007_primitives.sql).
#: A pattern, compiled by ``re`` when a migration runs (not at every import).
WRITABLE_SCHEMA = r"(?im)^\s*PRAGMA\s+writable_schema\s*=\s*(\w+)"


def schema_edit(conn: sqlite3.Connection, statement: str, cookie: int | None) -> int | None:
    """Around ``PRAGMA writable_schema``: what SQLite's procedure asks beyond the SQL itself.

    SQLite documents how to loosen a constraint in place (lang_altertable.html):
    edit the table's text in sqlite_master under ``writable_schema``, then raise
    ``schema_version`` by one, or no connection (this one included) reloads the
    schema and the old constraint stays in force. At ``ON`` this returns the
    version it read; at ``OFF`` it raises it by one, then makes SQLite parse the
    edited schema, so a text that does not parse fails the migration (rolled
    back) instead of every later open. The procedure's ``integrity_check`` is
    left out: it reads the whole file, and a constraint that only gets looser
    cannot make a stored row invalid.
    """
    m = re.search(WRITABLE_SCHEMA, statement)
    if m is None:
        conn.execute(statement)
        return cookie
    if m.group(1).upper() in ("ON", "1", "TRUE", "YES"):
        (version,) = conn.execute("PRAGMA schema_version").fetchone()
        conn.execute(statement)
        return int(version)
    if cookie is not None:
        conn.execute(f"PRAGMA schema_version = {cookie + 1}")
    conn.execute(statement)
    conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()  # parses the new schema
    return None


def run_sql(conn: sqlite3.Connection, sql: str, name: str = "") -> None:
    from .goals import JOURNAL_TEMPLATE, rows_table

    tables = [JOURNAL_TEMPLATE]
    cookie: int | None = None
    for statement in statements(sql):
        if "{journal}" not in statement:
            cookie = schema_edit(conn, statement, cookie)
            continue
        if name and name < COMPACT_ROWS and is_compact(conn):
            # A migration from before 0011 applied after it (merged late): the
            # compact template and tables already hold every column it adds.
            continue
        # Goals created by earlier migrations each have a table to reach too.
        has_goals = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'goals'"
        ).fetchone()
        goal_tables = (
            [r[0] for r in conn.execute("SELECT journal_table FROM goals")] if has_goals else []
        )
        # From 0011 on a goal's rows are in its compact table; its journal_table is a view.
        views = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'view'")}
        goal_tables = [rows_table(t) if t in views else t for t in goal_tables]
        for table in tables + goal_tables:
            conn.execute(statement.replace("{journal}", table))


def is_compact(conn: sqlite3.Connection) -> bool:
    """Whether the file's journal template is 0011's compact one."""
    return bool(
        conn.execute(
            "SELECT 1 FROM pragma_table_info('_journal_template') WHERE name = 'started'"
        ).fetchone()
    )
