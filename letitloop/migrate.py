"""Applies the numbered SQL files of ``migrations/`` to a journal file.

The files are applied in order, each in its own ``BEGIN IMMEDIATE``
transaction together with its record in ``_sqlite_migrations`` (the table of
sqlite-utils' migrations facility, kept in its format so its tools read it).
``BEGIN IMMEDIATE`` takes the write lock before reading the records: two
processes opening a fresh file at once would otherwise both see a migration
pending and one would fail half-way. Under the write lock the second one
re-reads the records and finds nothing left to do.

A statement that mentions ``{journal}`` is applied to the journal template
and to every goal's journal table, so a migration that changes the journal
table reaches every goal.

A file whose records name a migration this version does not know was
written by a newer letitloop: it is refused with SchemaVersionError and left
untouched.

A brand-new, empty file takes a shortcut: ``migrations/schema.sql`` (the
dump of a file every migration was applied to) and a record for every
migration, in one transaction (:func:`create_current`). Existing files
migrate step by step; a test checks that both paths give the same schema and
records.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Sequence
from datetime import datetime, timezone
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from .errors import JournalFileError, SchemaVersionError
from .sqlerrors import DRIVER_ERRORS

if TYPE_CHECKING:
    from .store import Store

#: The migration set's name in ``_sqlite_migrations``.
MIGRATION_SET = "letitloop"
#: The migration that moves every goal's rows to a compact table: its SQL file is
#: its first transaction, then each goal's rows move in one of their own
#: (:func:`compact_rows`).
COMPACT_ROWS = "0011_compact_rows"
#: Its record while goals' rows are still moving: a name no older letitloop
#: knows, so an older one refuses the file from the first transaction on; the
#: last goal's transaction replaces it with COMPACT_ROWS's own record.
COMPACT_ROWS_MOVING = "0011_compact_rows (moving rows)"
#: Migration 0012 adds a column every goal's view shows: the runner rebuilds the views.
CHECKSUMS = "0012_checksums"
#: The characters of a migration file's name after its number and underscore.
_NAME_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789_"


def _is_migration_file(name: str) -> bool:
    """``0001_initial.sql``: four digits, ``_``, then lowercase letters, digits and ``_``.

    String tests, not a regular expression: every open lists the folder
    (:func:`known_names`), and compiling one cost every import (issue 30).
    """
    stem = name[:-4]
    return (
        name.endswith(".sql")
        and len(stem) > 5
        and stem[:4].isascii()
        and stem[:4].isdigit()
        and stem[4] == "_"
        and not stem[5:].strip(_NAME_CHARS)
    )


def migrations_dir() -> str:
    """The folder of numbered SQL files: inside the installed wheel, or the source checkout's."""
    return _installed_migrations()


@lru_cache(maxsize=1)
def _installed_migrations() -> str:
    # Found once per process: every open lists the folder (known_names), and
    # resolving this file's path took four lstat() calls and a stat() each time.
    # Text, not a Path: every open reads it, and pathlib is left unloaded (files.py).
    here = os.path.dirname(os.path.realpath(__file__))
    packaged = os.path.join(here, "migrations")
    if os.path.isdir(packaged):
        return packaged
    return os.path.join(os.path.dirname(here), "migrations")


@lru_cache(maxsize=1)
def known_migrations() -> tuple[tuple[str, str], ...]:
    """``(name, sql)`` of every migration this version knows, in order."""
    folder = migrations_dir()
    return tuple((name, _read(os.path.join(folder, f"{name}.sql"))) for name in known_names())


def known_names() -> list[str]:
    """The names of the migrations this version knows, in order, without reading them.

    What :func:`check` needs on every open: listing the folder costs a
    resume a fraction of reading each file (:func:`known_migrations`).
    """
    folder = migrations_dir()
    # os.listdir, not Path.glob: glob compiles a pattern, which costs a resume a millisecond.
    names = sorted(name[:-4] for name in os.listdir(folder) if _is_migration_file(name))
    if not names:
        raise JournalFileError(f"no migrations found in {folder}; the installation is broken")
    return names


def schema_version() -> int:
    """The number of the newest migration this version knows."""
    return int(known_names()[-1][:4])


def _applied(conn: sqlite3.Connection, migration_set: str = MIGRATION_SET) -> list[str]:
    has_table = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_sqlite_migrations'"
    ).fetchone()
    if not has_table:
        return []
    return [
        r[0]
        for r in conn.execute(
            "SELECT name FROM _sqlite_migrations WHERE migration_set = ? ORDER BY rowid",
            (migration_set,),
        )
    ]


def _check_not_newer(path: str | os.PathLike[str], applied: list[str], names: list[str]) -> None:
    known = set(names)
    if COMPACT_ROWS in known:
        known.add(COMPACT_ROWS_MOVING)
    unknown = [name for name in applied if name not in known]
    if unknown:
        from . import __version__

        raise SchemaVersionError(
            f"{path}: this journal was written by a newer letitloop (it has migration "
            f"{unknown[-1]!r}; letitloop {__version__} knows up to "
            f"{names[-1]!r}); upgrade letitloop to open it. "
            f"The file was not changed.",
            path=str(path),
        )


def _check_not_foreign(conn: sqlite3.Connection, path: str | os.PathLike[str]) -> None:
    """Refuse to add our tables to another application's SQLite database."""
    others = [
        name
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "AND name != '_sqlite_migrations' ORDER BY name"
        )
    ]
    if others:
        shown = ", ".join(others[:5]) + (", …" if len(others) > 5 else "")
        raise JournalFileError(
            f"{path}: expected a letitloop journal or an empty file, found an SQLite "
            f"database with other tables ({shown}); pass another path= / LETITLOOP_DB. "
            f"The file was not changed.",
            path=str(path),
        )


def _statements(sql: str) -> list[str]:
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
_WRITABLE_SCHEMA = r"(?im)^\s*PRAGMA\s+writable_schema\s*=\s*(\w+)"


def _schema_edit(conn: sqlite3.Connection, statement: str, cookie: int | None) -> int | None:
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
    m = re.search(_WRITABLE_SCHEMA, statement)
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


def _run_sql(conn: sqlite3.Connection, sql: str, name: str = "") -> None:
    from .goals import JOURNAL_TEMPLATE, rows_table

    tables = [JOURNAL_TEMPLATE]
    cookie: int | None = None
    for statement in _statements(sql):
        if "{journal}" not in statement:
            cookie = _schema_edit(conn, statement, cookie)
            continue
        if name and name < COMPACT_ROWS and _compact(conn):
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


def _compact(conn: sqlite3.Connection) -> bool:
    """Whether the file's journal template is 0011's compact one."""
    return bool(
        conn.execute(
            "SELECT 1 FROM pragma_table_info('_journal_template') WHERE name = 'started'"
        ).fetchone()
    )


def check(conn: sqlite3.Connection, path: str | os.PathLike[str]) -> bool:
    """Read-only: True if the file is already at this version's schema.

    Raises SchemaVersionError for a file from a newer letitloop, JournalFileError
    for a file that is not SQLite or is another application's database. Runs
    before anything (even the WAL switch) writes to the file, on a read-only
    connection for a file that has content (see Store), so a refused file is
    left untouched.
    """
    names = known_names()
    try:
        # One read transaction: another process's first migration may commit
        # between two reads, and the second must not see its tables without
        # the record the first did not see (and call the file foreign).
        conn.execute("BEGIN")
        try:
            applied = _applied(conn)
            _check_not_newer(path, applied, names)
            if not applied:
                _check_not_foreign(conn, path)
        finally:
            if conn.in_transaction:
                conn.execute("COMMIT")
    except DRIVER_ERRORS as exc:
        from .sqlerrors import explain

        raise explain(exc, path) from None
    return applied == names


#: The bookkeeping table of sqlite-utils' migrations facility, exactly as
#: sqlite-utils creates it (``Migrations.ensure_migrations_table``), so that its
#: tools (``sqlite-utils migrate``, ``Migrations("letitloop").applied(db)``) read
#: our records and we read theirs.
_BOOKKEEPING = (
    'CREATE TABLE "_sqlite_migrations" (\n'
    '   "id" INTEGER PRIMARY KEY,\n'
    '   "migration_set" TEXT,\n'
    '   "name" TEXT,\n'
    '   "applied_at" TEXT\n'
    ")",
    'CREATE UNIQUE INDEX "idx__sqlite_migrations_migration_set_name"\n'
    '    ON "_sqlite_migrations" ("migration_set", "name")',
)


def migrate(store: Store, *, stepwise: bool = False, until: str | None = None) -> None:
    """Bring ``store``'s file up to this version's schema (call :func:`check` first).

    ``until`` (a migration's name) stops after that migration, step by step: a
    file as an older letitloop left it, for tests and benchmarks of an upgrade.

    An empty file gets the whole schema at once (:func:`create_current`)
    unless ``stepwise``; otherwise each pending migration is applied in its
    own write transaction with its record. Raises SchemaVersionError (file
    untouched) for a file from a newer version, JournalFileError for a file
    that is not a usable SQLite journal.

    The records are sqlite-utils' (table ``_sqlite_migrations``, one row per
    applied migration with its set, name and UTC time, written in the format
    sqlite-utils writes), but sqlite-utils itself is not imported: importing it
    imports click and costs a new journal file's first open about 50 ms, on
    the step path of every process that creates one. A migration is one
    ``BEGIN IMMEDIATE`` transaction holding its SQL and its record, which is
    what ``Migrations.apply`` would do inside it.
    """
    if until is None and not stepwise and create_current(store):
        return
    conn = store.conn
    names = known_names()
    sql_of = dict(known_migrations())
    for name in names:
        if until is not None and name > until:
            break
        if name == COMPACT_ROWS:
            compact_rows(store, sql_of[name], names)
            continue
        with store.write():
            applied = _applied(conn)
            _check_not_newer(store.path, applied, names)
            if not applied:
                _check_not_foreign(conn, store.path)
            if name in applied:
                continue
            _ensure_bookkeeping(conn)
            _run_sql(conn, sql_of[name], name)
            if name == CHECKSUMS:
                from .goals import rebuild_views

                rebuild_views(conn)  # they list their columns: now with the checksum
            conn.execute(
                "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) VALUES (?, ?, ?)",
                (MIGRATION_SET, name, str(datetime.now(timezone.utc))),
            )
    from .goals import refresh_journal_rows

    with store.write() as conn:
        # The browsing view lists goal tables by name; rebuild it over every goal.
        refresh_journal_rows(conn)


def _record(conn: sqlite3.Connection, name: str) -> None:
    conn.execute(
        "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) VALUES (?, ?, ?)",
        (MIGRATION_SET, name, str(datetime.now(timezone.utc))),
    )


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
        applied = _applied(conn)
        _check_not_newer(store.path, applied, names)
        if COMPACT_ROWS in applied:
            return
        if COMPACT_ROWS_MOVING not in applied:
            _ensure_bookkeeping(conn)
            _run_sql(conn, sql)
            _record(conn, COMPACT_ROWS_MOVING)
    while True:
        with store.write() as conn:
            applied = _applied(conn)
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
                _record(conn, COMPACT_ROWS)
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


#: The line of ``schema.sql``'s header naming the migrations it adds up to.
_SCHEMA_OF = "-- Migrations: "


def current_schema() -> tuple[str, ...] | None:
    """The statements of ``migrations/schema.sql``, or None if it is not this version's.

    None when the file is missing or its header names other migrations than
    this version's (one added without regenerating the dump): new files then
    migrate step by step, which is always right.
    """
    return _schema_statements(migrations_dir(), " ".join(known_names()))


@lru_cache(maxsize=4)
def _schema_statements(folder: str | os.PathLike[str], names: str) -> tuple[str, ...] | None:
    try:
        text = _read(os.path.join(folder, "schema.sql"))
    except OSError:
        return None
    if f"\n{_SCHEMA_OF}{names}\n" not in text:
        return None
    return tuple(_statements(text))


def create_current(store: Store) -> bool:
    """On an empty file: the whole current schema and every migration's record, in one transaction.

    The statements of ``migrations/schema.sql`` (what applying every
    migration gives; tested), then one ``_sqlite_migrations`` row per
    migration, as step-by-step migration leaves them: sqlite-utils' tools
    read the file as migrated. About 20 statements in one transaction
    instead of some 160 in nine: a new journal's first open is ~8 ms shorter.
    ``executescript`` would be one call, but it commits before it runs, so
    the file's emptiness could not be checked under the same write lock.

    Returns False, having changed nothing, when the file is not empty under
    the write lock (another process created it first, or it holds anything
    at all) or schema.sql is not this version's; :func:`migrate` then goes
    step by step.
    """
    statements = current_schema()
    if statements is None:
        return False
    applied_at = str(datetime.now(timezone.utc))
    with store.write() as conn:
        if conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone():
            return False
        for statement in statements:
            conn.execute(statement)
        conn.executemany(
            "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) VALUES (?, ?, ?)",
            [(MIGRATION_SET, name, applied_at) for name in known_names()],
        )
    return True


def _ensure_bookkeeping(conn: sqlite3.Connection) -> None:
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_sqlite_migrations'"
    ).fetchone()
    if not exists:
        for statement in _BOOKKEEPING:
            conn.execute(statement)


# -- an adapter's own migration set -------------------------------------------------------


def set_migrations(folder: str | os.PathLike[str]) -> tuple[tuple[str, str], ...]:
    """``(name, sql)`` of the numbered SQL files in ``folder``, in order: an adapter's set."""
    names = sorted(name[:-4] for name in os.listdir(folder) if _is_migration_file(name))
    return tuple((name, _read(os.path.join(folder, f"{name}.sql"))) for name in names)


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def apply_set(store: Store, migration_set: str, migrations: Sequence[tuple[str, str]]) -> None:
    """Apply the pending migrations of an adapter's own set (its tables) to ``store``'s file.

    The set's records are rows of ``_sqlite_migrations`` under its own
    ``migration_set`` name, beside the core's ``letitloop`` rows, as
    sqlite-utils' named migration sets keep them; :func:`check` and the
    core's migrations read only their own. A file already at the set's last
    migration is only read. Each pending one is applied in its own write
    transaction with its record, as :func:`migrate` applies the core's. A
    file whose set holds a migration this version does not know (a newer
    adapter wrote it) is refused with SchemaVersionError, untouched.
    """
    names = [name for name, _ in migrations]
    with store.lock:
        try:
            applied = _applied(store.conn, migration_set)
        except DRIVER_ERRORS as exc:
            raise store.explain(exc) from None
    _check_not_newer(store.path, applied, names)
    if applied == names:
        return
    for name, sql in migrations:
        with store.write() as conn:
            applied = _applied(conn, migration_set)
            _check_not_newer(store.path, applied, names)
            if name in applied:
                continue
            _ensure_bookkeeping(conn)
            _run_sql(conn, sql)
            conn.execute(
                "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) VALUES (?, ?, ?)",
                (migration_set, name, str(datetime.now(timezone.utc))),
            )


def _migration_fn(sql: str) -> Any:
    def apply(db: Any) -> None:
        _run_sql(db.conn, sql)

    return apply


def schema_dump(store: Store) -> str:
    """The schema of ``store``'s file as SQL, tables, indexes, views, each in creation order.

    Goals' own journal tables are left out (each is a copy of the template),
    so the dump of a freshly migrated file is what ``migrations/schema.sql`` holds.
    Creation order (``sqlite_master``'s rowid), not names: SQLite lists a
    table's indexes in the order they were created (the query planner's
    order among equals), so a file created from the dump lists them as a
    file migrated step by step does.
    """
    rows = store.query(
        "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL "
        "AND name NOT IN (SELECT journal_table FROM goals) "
        "AND tbl_name NOT IN (SELECT journal_table FROM goals) "
        "AND tbl_name NOT IN (SELECT '_' || journal_table FROM goals) "
        "ORDER BY CASE type WHEN 'table' THEN 0 WHEN 'index' THEN 1 ELSE 2 END, rowid"
    )
    return "".join(f"{sql};\n\n" for _, _, sql in rows).rstrip() + "\n"


if __name__ == "__main__":  # python -m letitloop.migrate > migrations/schema.sql
    import sys
    import tempfile

    from .store import Store as _Store

    with tempfile.TemporaryDirectory() as folder:
        fresh = _Store(os.path.join(folder, "schema.db"), migrate=False)
        migrate(fresh, stepwise=True)
        sys.stdout.write(
            "-- The schema every migration in this folder adds up to (generated by\n"
            "-- `python -m letitloop.migrate > migrations/schema.sql`; tested). A new\n"
            "-- journal file is created from it (migrate.create_current).\n"
            f"{_SCHEMA_OF}{' '.join(known_names())}\n\n" + schema_dump(fresh)
        )
        fresh.close()
