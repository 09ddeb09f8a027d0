"""A SQLite journal file's keys of runs and function names, as the rows hold them.

``SqliteKeys`` is the base of the SQLite storage's classes (``sqlite_markers.py``,
``sqlite_primitives.py``, ``sqlite_storage.py``): a row names its run by the
run's key (``runs.num``) and its function by ``functions.id``.
"""

from __future__ import annotations

import sqlite3
import sys

from .storage import FunctionKey
from .store import Store


class SqliteKeys:
    """Run ids and function names as the keys the goal's compact rows hold."""

    store: Store
    #: The goal's view (its readable name, in messages) and compact table (written).
    table: str
    rows: str
    #: Run id -> its key (``runs.num``), for the runs this storage met.
    run_keys: dict[str, int]

    def key_of_run(self, run_id: str) -> int:
        """The key (``runs.num``) of run ``run_id``; 0 for ``'*'`` (a goal-scoped marker's),
        -1 (no row has it) for a run that does not exist."""
        if run_id == "*":
            return 0
        key = self.run_keys.get(run_id)
        if key is None:
            found = self.store.query("SELECT num FROM runs WHERE id = ?", (run_id,))
            if not found or found[0][0] is None:
                return -1
            key = self.run_keys[run_id] = int(found[0][0])
        return key

    def function_key(self, name: str) -> FunctionKey:
        """``functions.id`` of ``name``, made the first time the file sees it; or ``name``
        itself, which the row then holds as text until its commit adds the name (see
        ``SqliteStorage.write_steps``), when adding it now would wait or commit on an
        event loop.

        Never waits for a lock and never commits on a running event loop: a fresh
        async step's commits go to a worker thread in power mode (commits.py), and
        another connection may hold the write lock. A new name otherwise costs one
        small commit, once per file and process.
        """
        store = self.store
        key: FunctionKey | None = store.function_keys.get(name)
        if key is not None:
            return key
        aio = sys.modules.get("asyncio")
        if aio is not None and aio._get_running_loop() is not None:
            return name
        with store.try_write() as c:
            if c is None:
                return name  # stored as text this time; its commit adds it
            made = self.intern(c, name)
        store.function_keys[name] = made
        return made

    def intern(self, c: sqlite3.Connection, name: str) -> int:
        """Inside a write transaction: ``functions.id`` of ``name``, added if new. Not
        remembered here: the caller does once the transaction commits."""
        c.execute("INSERT OR IGNORE INTO functions (name) VALUES (?)", (name,))
        (made,) = c.execute("SELECT id FROM functions WHERE name = ?", (name,)).fetchone()
        return int(made)
