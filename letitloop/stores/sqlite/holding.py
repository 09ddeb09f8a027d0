"""A SQLite journal file besides its SQL: holding runs and markers, change notices, identity.

``SqliteHolding`` is ``Holding`` (``storage_holding.py``) on a journal file,
one of the parts of ``SqliteStorage`` (``sqlite_storage.py``): what is not
statements of the goal's rows.

- **Holding** a run or a marker is an OS file lock on a lock file beside the
  journal (``locks.py``, named by ``Store.lock_file``): the kernel drops it
  with the process that held it, so a holder killed by SIGKILL releases at
  once. :func:`run_lock_path` is where a run's lock lives (``lil`` reads it).
- **A change** by another connection, of any process, is noticed through
  ``PRAGMA data_version`` on this journal's connection: a few microseconds,
  no disk read.
- **Identity**: the file's (device, inode), whatever path reached it; who last
  held a run is its row's ``holder_pid``/``holder_host`` (``run_holder``).
- **Closing** gives the connection back to the process's shared ones
  (``stores.close_store``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Hashable, Iterator
from typing import TYPE_CHECKING

from . import locks
from .keys import SqliteKeys
from .pool import close_store
from .store import Store

if TYPE_CHECKING:
    from pathlib import Path


def run_lock_path(store: Store, run_id: str) -> Path:
    """The lock file a process holds while it has ``run_id`` open (see ``lil reset``).

    Named by the run id alone, in the lock folder beside the real journal
    file: every path that reaches the file reaches this lock.
    """
    from pathlib import Path  # lil's and tests' (a run's hold takes the name: run_hold)

    return Path(store.lock_name("run", run_id))


class FileHold:
    """A run's or a marker's hold on a SQLite journal: one lock file, for one holder.

    Taken and released by any thread (an ``async with`` takes it in a worker
    thread and lets go on the loop's); not reentrant. Released, the lock file
    is removed (``locks.release``).
    """

    __slots__ = ("_lock",)

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._lock = locks.new_lock(path)

    @property
    def where(self) -> str:
        """The lock file."""
        return os.fspath(self._lock.lock_file)

    def acquire(self, timeout: float) -> bool:
        """Take it within ``timeout`` seconds (-1: wait forever); False if it timed out.

        Raises JournalFileError when the lock file cannot be used (locks.py).
        """
        return locks.acquire(self._lock, timeout)

    def release(self) -> None:
        """Let go of it (its file unlinked first); nothing if not held."""
        locks.release(self._lock)


class SqliteHolding(SqliteKeys):
    """Holding, change notices, identity and closing for one journal's ``Store``."""

    @property
    def path(self) -> Path:
        """The journal file (``Store.path``: made when asked; a step never asks)."""
        return self.store.path

    @property
    def identity(self) -> Hashable:
        """The journal file's (device, inode): which file, whatever path reached it."""
        return self.store.identity

    def run_hold(self, run_id: str) -> FileHold:
        return FileHold(self.store.lock_name("run", run_id))

    def marker_hold(self, name: str) -> FileHold:
        return FileHold(self.store.lock_name("marker", name))

    def is_run_held(self, run_id: str) -> bool:
        return locks.is_held(self.store.lock_name("run", run_id))

    def run_holder(self, run_id: str) -> tuple[int | None, str | None, str | None] | None:
        rows = self.store.query(
            "SELECT holder_pid, holder_host, updated_at FROM runs WHERE id = ?", (run_id,)
        )
        return tuple(rows[0]) if rows else None

    def changes(self, *, wait: bool = True) -> int | None:
        """``PRAGMA data_version`` of the journal's connection (None: the connection was busy)."""
        store = self.store
        if not store.lock.acquire(blocking=wait):
            return None
        try:
            return int(store.conn.execute("PRAGMA data_version").fetchone()[0])
        except Exception as exc:  # sqlite3.Error: explained like any other read
            raise store.explain(exc) from None
        finally:
            store.lock.release()

    @contextlib.contextmanager
    def if_free(self) -> Iterator[bool]:
        """The connection's lock for this block if it is free now (True), else False at once."""
        lock = self.store.lock
        if not lock.acquire(blocking=False):
            yield False
            return
        try:
            yield True
        finally:
            lock.release()

    def close(self) -> None:
        """Give the connection back (kept open, idle, for the file's next journal)."""
        close_store(self.store)
