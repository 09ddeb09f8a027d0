"""``migrations/schema.sql``: the schema every migration adds up to, as one file.

A brand-new, empty journal file is created from it in one transaction, with
a record for every migration (:func:`create_current`), instead of migrating
step by step; :func:`schema_dump` writes it (``python -m letitloop.stores.sqlite.migrate >
migrations/schema.sql``), and a test checks that both paths give the same
schema and records.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from functools import lru_cache
from typing import TYPE_CHECKING

from .migration_files import known_names, migrations_dir, read
from .migration_records import MIGRATION_SET
from .migration_sql import statements

if TYPE_CHECKING:
    from .store import Store


#: The line of ``schema.sql``'s header naming the migrations it adds up to.
SCHEMA_OF = "-- Migrations: "


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
        text = read(os.path.join(folder, "schema.sql"))
    except OSError:
        return None
    if f"\n{SCHEMA_OF}{names}\n" not in text:
        return None
    return tuple(statements(text))


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
