"""What a work queue's stores hand each other: limits, a claimed entry, an entry's state, and
the wake-ups of idle workers in this process. No I/O.

A queue (``queues.py``) keeps its entries in the journal's own store:
``sqlite_queue.py`` on a journal file. These records are what its workers
(``queue_worker.py``) and handles read from it, the same for every store.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..primitives import forksafe

#: Seconds an idle worker waits before it looks again when nothing woke it: a dead holder's
#: entry is taken over within this much (plus the claim), and an entry added by another
#: process on a journal file (or on PostgreSQL without LISTEN) is started within it.
POLL_SECONDS = 0.1
#: How many ready entries a claim tries, best first, before it gives up this time.
CANDIDATES = 8

#: An entry's statuses: ``queued`` (waiting for a worker), ``claimed`` (a worker
#: holds it: its run is running), and the three endings.
STATUSES = ("queued", "claimed", "completed", "failed", "cancelled")

#: The endings: an entry in one of them is never claimed again.
ENDED = frozenset({"completed", "failed", "cancelled"})


class Limits(NamedTuple):
    """What a queue allows: how many runs at once (None: any), and how many claims per window."""

    concurrency: int | None
    #: (claims, window in seconds), or None: no rate limit.
    rate: tuple[int, float] | None


class Claimed(NamedTuple):
    """An entry a worker claimed: what it runs, and the hold that keeps it its own."""

    id: str
    queue: str
    task: str
    run_name: str
    args: str
    #: This claim's number: every write of the holder on its entry names it.
    attempt: int
    #: The entry's hold (a lock file on the journal file): released by ``finish``/``release``.
    hold: Any


class EntryState(NamedTuple):
    """An entry as a handle reads it."""

    status: str
    run_id: str | None
    result: str | None
    error: str | None
    attempt: int
    #: When it is due (ISO-8601 UTC): a queued entry not due yet is ``delayed``.
    not_before: str = ""


def seconds(iso: str | None) -> float:
    """ISO-8601 text as seconds since the epoch (None: 0)."""
    from datetime import datetime

    if iso is None:
        return 0.0
    return datetime.fromisoformat(iso).timestamp()


class Wakeups:
    """A count per queue name, moved by each event that may let an idle worker claim (an
    entry added or queued again in this process, a PostgreSQL notification, a drain):
    an idle worker takes a :meth:`token` before it looks, and :meth:`wait` returns as
    soon as the count moved since (at once if it moved meanwhile: no wake-up is lost
    between a look and the wait). Process-wide; its lock is free in a forked child
    (``forksafe``)."""

    def __init__(self) -> None:
        self._cond = forksafe.condition()
        self._counts: dict[str, int] = {}

    def token(self, queue: str) -> int:
        with self._cond:
            return self._counts.get(queue, 0)

    def wake(self, queue: str) -> None:
        with self._cond:
            self._counts[queue] = self._counts.get(queue, 0) + 1
            self._cond.notify_all()

    def wait(self, queue: str, token: int, seconds: float) -> bool:
        """Wait up to ``seconds`` for ``queue``'s count to move from ``token``; whether it did."""
        with self._cond:
            return self._cond.wait_for(lambda: self._counts.get(queue, 0) != token, seconds)


#: This process's wake-ups, for every queue store.
WAKEUPS = Wakeups()
