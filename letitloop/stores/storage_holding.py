"""``Holding``: which store this is, the runs and markers held in it, change notices, closing.

A run or a marker held by one holder at a time, across processes, released
when the holder dies (:class:`Hold`; SQLite: a lock file), and by whom a run was
last held; a number that moves
when someone else committed (``changes``; SQLite: ``PRAGMA data_version``),
for pauses that wait for a value sent or a cancel; which file or database this
is, whatever path or URL reached it; ``close``. Used by the opener (a run's
hold), ``markerhold.py`` (a marker's), ``timers.py`` (change notices) and
``closing.py``. Implemented by ``sqlite_holding.SqliteHolding``,
``memory_holding.MemoryHolding`` and ``postgres_holding.PostgresHolding``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Hashable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pathlib import Path


class Hold(Protocol):
    """One holder's claim on a run or a marker, against every other holder in any process.

    Made by ``Holding.run_hold``/``marker_hold``, not taken yet. Taken and
    released by any thread (an ``async with`` takes it in a worker thread and
    releases it on the loop's); not reentrant: one object is one holder. A
    holder that dies releases it: SQLite's lock file is dropped by the kernel
    with the process.
    """

    @property
    def where(self) -> str:
        """What is held, for messages and debugging (SQLite: the lock file)."""
        ...

    def acquire(self, timeout: float) -> bool:
        """Take it within ``timeout`` seconds (-1: wait forever); False if it timed out."""
        ...

    def release(self) -> None:
        """Let go of it; nothing if not held."""
        ...


class Holding(Protocol):
    """Which store this is, who holds its runs and markers, whether someone else wrote, closing."""

    @property
    def path(self) -> Path:
        """Where the runs are kept (the journal file), for messages and thread names."""
        ...

    @property
    def identity(self) -> Hashable:
        """Which file or database this is, whatever path or URL reached it: the runs this
        process holds and its markers' in-process locks are keyed by it."""
        ...

    def run_hold(self, run_id: str) -> Hold:
        """The hold an opener takes on ``run_id`` while it has the run open."""
        ...

    def marker_hold(self, name: str) -> Hold:
        """The hold of marker ``name`` (scope, owner and name, NUL-separated: markers.py)."""
        ...

    def is_run_held(self, run_id: str) -> bool:
        """Whether a live holder has ``run_id``'s hold; takes and writes nothing."""
        ...

    def run_holder(self, run_id: str) -> tuple[int | None, str | None, str | None] | None:
        """``(pid, host, since)`` of the run's last holder, None when there is no run."""
        ...

    def changes(self, *, wait: bool = True) -> int | None:
        """A number that moves when another connection or process commits (not on this
        storage's own commits); None when it cannot be read now without waiting (``wait``
        False and the store busy with another thread)."""
        ...

    def if_free(self) -> contextlib.AbstractContextManager[bool]:
        """A block in which this thread may read without waiting for another thread of the
        journal (True), or False at once when it would have to wait (the event loop's pauses)."""
        ...

    def close(self) -> None:
        """Give back what the journal used (SQLite: its connection, kept for the file's next
        journal). Holds are released by their holders before."""
        ...
