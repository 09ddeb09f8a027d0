"""The in-memory store's data: ``MemoryDatabase`` (what ``memory://NAME`` holds) and a connection.

``MemoryConnection`` is the one base of each part of ``MemoryStorage``
(``memory_storage.py``: ``memory_runs.py``, ``memory_steps.py``, …): one
journal's connection to a database, its transactions (one lock per database),
the goal and run it writes, and its rows; the state the parts share, owned here.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from typing import Any

from ...errors import JournalFileError
from ...integrity.chains import Chain, Entry
from ...primitives import forksafe
from ..row_rules import ROW_COLUMNS
from ..storage_steps import RunKey


class Row(dict[str, Any]):
    """One journal row (a step, sleep, wait or marker), with its position (``rowid``)."""

    __slots__ = ("rowid",)

    def __init__(self, rowid: int) -> None:
        super().__init__(dict.fromkeys(ROW_COLUMNS))
        self.rowid = rowid

    @classmethod
    def copy_of(cls, row: Row) -> Row:
        """A copy, read outside the database's lock."""
        new = cls(row.rowid)
        new.update(row)
        return new


class MemoryDatabase:
    """What one ``memory://NAME`` holds: runs, goals' rows, global markers, tries, holds."""

    def __init__(self, location: str) -> None:
        self.location = location
        #: One transaction at a time; holds wait on ``changed``.
        self.lock = forksafe.rlock()
        self.changed = forksafe.condition(self.lock)
        #: Commits so far (what ``changes`` counts, less a connection's own).
        self.commits = 0
        self.runs: dict[str, dict[str, Any]] = {}
        #: Each goal's rows by (run, key), in the order they were first written.
        self.goals: dict[str, dict[tuple[str, str], Row]] = {}
        self.by_rowid: dict[int, Row] = {}
        self.global_markers: dict[str, Row] = {}
        #: (run, key, try) -> the try's columns.
        self.tries: dict[tuple[str, str, int], dict[str, Any]] = {}
        self.replays: list[tuple[str, int, tuple[str, ...]]] = []
        #: (run, call) -> a paid call's reservation: the columns of SQLite's ``reservations``.
        self.reservations: dict[tuple[str, int], dict[str, Any]] = {}
        #: (run, attempt, pid, host, started_at, version)
        self.attempts: list[tuple[str, int, int, str, str, str | None]] = []
        #: (run, attempt) -> the attempt's span as a W3C traceparent (otel.py).
        self.traces: dict[tuple[str, int], str] = {}
        #: How an attempt that closed its run ended: (ended_at, outcome, error).
        self.endings: dict[tuple[str, int], tuple[str, str, str | None]] = {}
        #: Each sealed run's chain: run id -> its entries in order (memory_seals.py).
        self.seals: dict[str, list[Entry]] = {}
        #: Each encrypted goal's key check value (encryption.Cipher.check): goal -> check.
        self.key_checks: dict[str, str] = {}
        #: Schedules by name: the columns of SQLite's ``schedules`` (memory_schedules.py).
        self.schedules: dict[str, tuple[Any, ...]] = {}
        #: (schedule, tick) -> the columns of SQLite's ``schedule_ticks``, as a list.
        self.ticks: dict[tuple[str, str], list[Any]] = {}
        #: (run, step key) -> the stream's chunks (``ChunkRow``) in order (memory/streams.py).
        self.chunks: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
        #: What is held, by slot (("run", id), ("marker", name)) -> the hold that
        #: holds it, and the connection it was taken through.
        self.holds: dict[tuple[str, str], tuple[object, MemoryConnection]] = {}
        self._rowids = itertools.count(1)
        self._runs = itertools.count(1)
        self._order_ids: dict[int, str] = {}

    def new_row(self) -> Row:
        row = Row(next(self._rowids))
        self.by_rowid[row.rowid] = row
        return row

    def run_order(self) -> int:
        """A new run's number: its ``order``, and its key in step rows (``StepRows.run_key``)."""
        return next(self._runs)

    def run_id_of(self, order: int) -> str:
        """The id of the run numbered ``order``."""
        run_id = self._order_ids.get(order)
        if run_id is None:
            for run in self.runs.values():
                self._order_ids[run["order"]] = run["id"]
            run_id = self._order_ids[order]
        return run_id

    def rows(self, goal: str) -> list[Row]:
        """The goal's rows in the order they were first written (SQLite: by rowid)."""
        return sorted(self.goals.get(goal, {}).values(), key=lambda r: r.rowid)


_databases: dict[str, MemoryDatabase] = {}
_databases_lock = forksafe.lock()


def database(location: str) -> MemoryDatabase:
    """The database ``memory://NAME`` names, made on first use (for the process's life)."""
    with _databases_lock:
        db = _databases.get(location)
        if db is None:
            db = _databases[location] = MemoryDatabase(location)
        return db


def existing(location: str) -> MemoryDatabase | None:
    """The database ``memory://NAME`` names if a journal of this process opened it, else None."""
    with _databases_lock:
        return _databases.get(location)


class MemoryConnection:
    """One journal's connection to a database: transactions, and its goal's rows."""

    def __init__(self, db: MemoryDatabase) -> None:
        self.db = db
        #: The goal whose rows this connection reads and writes (find_or_start_run sets it).
        self.goal = ""
        #: How messages name the goal's rows (SQLite: its journal table).
        self.table = ""
        #: The run the last ``find_or_start_run`` returned, as its StepRows name it.
        self.run_key = RunKey(-1)
        #: Set by ``memory_storage.abandon`` and by ``close``: this connection is gone.
        self.gone = False
        #: Commits made through this connection (not change notices for it).
        self._own = 0
        #: The runs this connection seals: run id -> its chain (memory_seals.py).
        self.sealing: dict[str, Chain] = {}

    def check(self) -> None:
        """Refuse anything from a connection that :func:`abandon` dropped."""
        if self.gone:
            raise JournalFileError(
                f"{self.db.location}: this journal's connection was dropped (abandoned, as by "
                f"a process that died, or closed); nothing was written. Open a new Journal",
                path=self.db.location,
            )

    @contextlib.contextmanager
    def _write(self) -> Iterator[MemoryDatabase]:
        """One transaction: the database's lock, a commit counted when the block ends cleanly."""
        db = self.db
        with db.lock:
            self.check()
            yield db
            db.commits += 1
            self._own += 1
            db.changed.notify_all()

    def _read(self) -> contextlib.AbstractContextManager[Any]:
        self.check()
        return self.db.lock

    def _rows(self) -> dict[tuple[str, str], Row]:
        return self.db.goals[self.goal]

    def _row(self, run_id: str, key: str) -> Row | None:
        """A copy of row ``key`` of run ``run_id``, read in a transaction of its own."""
        with self._read():
            row = self._rows().get((run_id, key))
            return None if row is None else Row.copy_of(row)

    def _upsert(self, run: str, key: str) -> Row:
        rows = self._rows()
        row = rows.get((run, key))
        if row is None:
            row = rows[(run, key)] = self.db.new_row()
            row["run"], row["key"] = run, key
        return row
