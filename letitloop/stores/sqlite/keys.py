"""A SQLite journal file's goal table and keys of runs and function names, as the rows hold them.

``SqliteKeys`` is the one base of each part of the SQLite storage
(``sqlite_runs.py``, ``sqlite_steps.py``, ``sqlite_markers.py``, …): the state
they share, owned here. Which goal's table the journal writes (``use_table``,
told by the opener's ``find_or_start_run``), the run's key (``runs.num``)
that the goal's compact rows hold instead of its id, and a function name's
key (``functions.id``).
"""

from __future__ import annotations

import sqlite3
import sys

from ..storage_steps import FunctionKey, RunKey
from .goals import rows_table
from .reads import RecordedSteps
from .store import Store


class SqliteKeys:
    """The goal's table, and run ids and function names as the keys its compact rows hold."""

    def __init__(self, store: Store) -> None:
        self.store = store
        #: The goal's view (journal_<goal>, its readable name, in messages) and its compact
        #: table (written), known once ``find_or_start_run`` made them (``use_table``).
        self.table = ""
        self.rows = ""
        #: The key of the run the last ``find_or_start_run`` returned, for its StepRows.
        self.run_key = RunKey(-1)
        #: Run id -> its key (``runs.num``), for the runs this storage met.
        self.run_keys: dict[str, int] = {}
        #: ``(run id, recorded_steps)`` read by the claim of the run in its transaction
        #: (``SqliteRunRows.claim_run``), handed to the opener's ``recorded_steps`` that
        #: follows (``SqliteStepRows``), once: the same rows, without a second scan.
        self.claimed_read: tuple[str, RecordedSteps] | None = None

    def use_table(self, table: str) -> None:
        """Write and read the goal's journal table ``table`` (its view's name) from now on.

        A part that binds statements to the table extends this (``SqliteStepRows``)."""
        self.table = table
        self.rows = rows_table(table)

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
        ``SqliteStepRows.write_steps``), when adding it now would wait or commit on an
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
