"""A journal file's migration records: the rows of ``_sqlite_migrations`` (sqlite-utils'
table, kept in its format), what they say of the file, and writing them.

:func:`applied_migrations` reads a set's records; :func:`check_not_newer` refuses a file
a newer letitloop wrote, :func:`check_not_foreign` another application's
database, both leaving it untouched; :func:`record` and
:func:`ensure_bookkeeping` write them. Shared by :func:`migrate.check` (on
every open), :func:`migrate.migrate`, migration 0011 (``compact_migration.py``)
and an adapter's set (:func:`migrate.apply_set`).
"""

from __future__ import annotations

import os
import sqlite3
from datetime import datetime, timezone

from ...errors import JournalFileError, SchemaVersionError

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


def applied_migrations(conn: sqlite3.Connection, migration_set: str = MIGRATION_SET) -> list[str]:
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


def check_not_newer(path: str | os.PathLike[str], applied: list[str], names: list[str]) -> None:
    known = set(names)
    if COMPACT_ROWS in known:
        known.add(COMPACT_ROWS_MOVING)
    unknown = [name for name in applied if name not in known]
    if unknown:
        from ...identity.versions import LIBRARY_VERSION

        raise SchemaVersionError(
            f"{path}: this journal was written by a newer letitloop (it has migration "
            f"{unknown[-1]!r}; letitloop {LIBRARY_VERSION} knows up to "
            f"{names[-1]!r}); upgrade letitloop to open it. "
            f"The file was not changed.",
            path=str(path),
        )


def check_not_foreign(conn: sqlite3.Connection, path: str | os.PathLike[str]) -> None:
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


#: The bookkeeping table of sqlite-utils' migrations facility, exactly as
#: sqlite-utils creates it (``Migrations.ensure_migrations_table``), so that its
#: tools (``sqlite-utils migrate``, ``Migrations("letitloop").applied(db)``) read
#: our records and we read theirs.
BOOKKEEPING = (
    'CREATE TABLE "_sqlite_migrations" (\n'
    '   "id" INTEGER PRIMARY KEY,\n'
    '   "migration_set" TEXT,\n'
    '   "name" TEXT,\n'
    '   "applied_at" TEXT\n'
    ")",
    'CREATE UNIQUE INDEX "idx__sqlite_migrations_migration_set_name"\n'
    '    ON "_sqlite_migrations" ("migration_set", "name")',
)


def record(conn: sqlite3.Connection, name: str) -> None:
    conn.execute(
        "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) VALUES (?, ?, ?)",
        (MIGRATION_SET, name, str(datetime.now(timezone.utc))),
    )


def ensure_bookkeeping(conn: sqlite3.Connection) -> None:
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_sqlite_migrations'"
    ).fetchone()
    if not exists:
        for statement in BOOKKEEPING:
            conn.execute(statement)
