"""The saver's own tables: the adapter's migration set, applied when a saver first opens a file.

A journal that never holds a LangGraph checkpoint has no LangGraph tables.
The numbered SQL files are in ``migrations/`` beside this module; their
records are rows of ``_sqlite_migrations`` under the set ``letitloop.langgraph``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ...stores.sqlite import migrate, migration_files
from ...stores.sqlite.store import Store

#: The adapter's migration set's name in ``_sqlite_migrations``.
MIGRATION_SET = "letitloop.langgraph"

#: The adapter's numbered SQL files (shipped in the wheel with the package).
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


@lru_cache(maxsize=1)
def migrations() -> tuple[tuple[str, str], ...]:
    """``(name, sql)`` of the adapter's migrations, in order."""
    return migration_files.set_migrations(MIGRATIONS_DIR)


def ensure(store: Store) -> None:
    """Create the saver's tables in ``store``'s file if its set is not fully applied yet.

    A file whose tables came from the core migration 0002 (before the adapter
    had a set of its own) keeps them and their rows: the set's first migration
    finds them (``IF NOT EXISTS``) and is recorded. Raises SchemaVersionError,
    changing nothing, for a file a newer adapter's migration reached.
    """
    migrate.apply_set(store, MIGRATION_SET, migrations())
