"""``MemoryHolding``: holding, change notices, identity and closing in the in-memory store.

``Holding`` on a ``MemoryDatabase``: holding a run or a marker is a slot in
the database that one ``MemoryHold`` holds at a time (a waiter sleeps on a
condition until it is free or its timeout passes); a change notice is a
commit by another connection; the identity is the database's name; closing
drops the connection (``memory_storage.abandon`` drops it as a death would).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Hashable, Iterator
from pathlib import Path

from .database import MemoryConnection, MemoryDatabase

__all__ = ["MemoryHold", "MemoryHolding"]


class MemoryHold:
    """One holder's claim on a slot of the database (a run or a marker)."""

    __slots__ = ("slot", "storage")

    def __init__(self, storage: MemoryConnection, slot: tuple[str, str]) -> None:
        self.storage = storage
        self.slot = slot

    @property
    def where(self) -> str:
        return f"{self.storage.db.location} {self.slot[0]} {self.slot[1]!r}"

    def acquire(self, timeout: float) -> bool:
        db = self.storage.db
        # math.inf waits forever, as -1 does (a Condition's wait refuses an infinite timeout).
        deadline = None if timeout < 0 or timeout == math.inf else time.monotonic() + timeout
        with db.lock:
            self.storage.check()
            while True:
                holder = db.holds.get(self.slot)
                if holder is None:
                    db.holds[self.slot] = (self, self.storage)
                    return True
                if holder[0] is self:
                    return True
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                db.changed.wait(left)

    def release(self) -> None:
        db = self.storage.db
        with db.lock:
            holder = db.holds.get(self.slot)
            if holder is not None and holder[0] is self:
                del db.holds[self.slot]
                db.changed.notify_all()


class MemoryHolding(MemoryConnection):
    """Holding, change notices, identity and closing for one journal's connection."""

    def __init__(self, db: MemoryDatabase) -> None:
        super().__init__(db)
        self.path = Path(db.location)

    @property
    def identity(self) -> Hashable:
        return ("memory", self.db.location)

    def run_hold(self, run_id: str) -> MemoryHold:
        return MemoryHold(self, ("run", run_id))

    def marker_hold(self, name: str) -> MemoryHold:
        return MemoryHold(self, ("marker", name))

    def is_run_held(self, run_id: str) -> bool:
        with self.db.lock:
            return ("run", run_id) in self.db.holds

    def run_holder(self, run_id: str) -> tuple[int | None, str | None, str | None] | None:
        with self._read():
            run = self.db.runs.get(run_id)
            return (
                None if run is None else (run["holder_pid"], run["holder_host"], run["updated_at"])
            )

    def changes(self, *, wait: bool = True) -> int | None:
        if not self.db.lock.acquire(blocking=wait):
            return None
        try:
            self.check()
            return self.db.commits - self._own
        finally:
            self.db.lock.release()

    @contextlib.contextmanager
    def if_free(self) -> Iterator[bool]:
        if not self.db.lock.acquire(blocking=False):
            yield False
            return
        try:
            yield True
        finally:
            self.db.lock.release()

    def close(self) -> None:
        self.gone = True
