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

The files and their records are modules of their own (``migration_files.py``,
``migration_records.py``), and so are running a file's SQL
(``migration_sql.py``), migration 0011 (``compact_migration.py``) and the
schema of a new file (``schema_file.py``), imported when a file is migrated:
what every open imports is :func:`check`.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from .migration_files import known_migrations, known_names
from .migration_records import (
    CHECKSUMS,
    COMPACT_ROWS,
    MIGRATION_SET,
    applied_migrations,
    check_not_foreign,
    check_not_newer,
    ensure_bookkeeping,
)
from .sqlerrors import DRIVER_ERRORS

if TYPE_CHECKING:
    from .store import Store


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
            applied = applied_migrations(conn)
            check_not_newer(path, applied, names)
            if not applied:
                check_not_foreign(conn, path)
        finally:
            if conn.in_transaction:
                conn.execute("COMMIT")
    except DRIVER_ERRORS as exc:
        from .sqlerrors import explain

        raise explain(exc, path) from None
    return applied == names


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
    from .compact_migration import compact_rows
    from .migration_sql import run_sql
    from .schema_file import create_current

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
            applied = applied_migrations(conn)
            check_not_newer(store.path, applied, names)
            if not applied:
                check_not_foreign(conn, store.path)
            if name in applied:
                continue
            ensure_bookkeeping(conn)
            run_sql(conn, sql_of[name], name)
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


# -- an adapter's own migration set -------------------------------------------------------


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
    from .migration_sql import run_sql

    names = [name for name, _ in migrations]
    with store.lock:
        try:
            applied = applied_migrations(store.conn, migration_set)
        except DRIVER_ERRORS as exc:
            raise store.explain(exc) from None
    check_not_newer(store.path, applied, names)
    if applied == names:
        return
    for name, sql in migrations:
        with store.write() as conn:
            applied = applied_migrations(conn, migration_set)
            check_not_newer(store.path, applied, names)
            if name in applied:
                continue
            ensure_bookkeeping(conn)
            run_sql(conn, sql)
            conn.execute(
                "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) VALUES (?, ?, ?)",
                (migration_set, name, str(datetime.now(timezone.utc))),
            )


def _migration_fn(sql: str) -> Any:
    from .migration_sql import run_sql

    def apply(db: Any) -> None:
        run_sql(db.conn, sql)

    return apply


if __name__ == "__main__":  # python -m letitloop.stores.sqlite.migrate > migrations/schema.sql
    import sys
    import tempfile

    from .schema_file import SCHEMA_OF, schema_dump
    from .store import Store as _Store

    with tempfile.TemporaryDirectory() as folder:
        fresh = _Store(os.path.join(folder, "schema.db"), migrate=False)
        migrate(fresh, stepwise=True)
        sys.stdout.write(
            "-- The schema every migration in this folder adds up to (generated by\n"
            "-- `python -m letitloop.stores.sqlite.migrate > migrations/schema.sql`; tested).\n"
            "-- A new journal file is created from it (migrate.create_current).\n"
            f"{SCHEMA_OF}{' '.join(known_names())}\n\n" + schema_dump(fresh)
        )
        fresh.close()
