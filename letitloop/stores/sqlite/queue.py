"""A work queue on a journal file: its entries' rows (migration 0021), claims and holds.

``SqliteQueue`` is what ``queues.py`` and ``queue_worker.py`` ask of a
journal file; each call is one transaction on the process's shared
connection to the file (``stores.open_store``).

- **A claim is one write transaction** (``BEGIN IMMEDIATE``: SQLite's one
  writer is the queue's lock): the queue's held entries counted, its rate
  window counted, the best entry picked (a taken-over one first, then by
  priority, then by age), its lock file taken, its row written. No two
  claims overlap, so the limits hold across every process on the machine.
- **A claimed entry is held by its worker's lock file** (``queue-<hash>.lock``
  beside the journal, ``locks.py``): the kernel drops it with the process.
  A claimed entry whose lock is free was held by a process that died: the
  next claim takes it over (it no longer counts against the concurrency).
  On one machine the lock is the whole truth, so the file keeps no lease.
- **Every write of a holder is fenced by its attempt**: ``finish``,
  ``release`` and ``started`` change the entry only while its ``attempt`` is
  still the one claimed (and it is still ``claimed``).
- **Idle workers poll**: an entry added (or queued again) wakes this process's
  idle workers at once (``queue_records.WAKEUPS``); another process's are told
  nothing and see it at their next look (``listener``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, TypeAlias

from ...identity.ids import HOST, new_run_id
from ...primitives.clock import utc_iso
from ...queueing.queue_records import (
    CANDIDATES,
    POLL_SECONDS,
    WAKEUPS,
    Claimed,
    EntryState,
    Limits,
    seconds,
)
from . import locks
from .pool import close_store, open_store
from .shared_writes import SharedWrite

if TYPE_CHECKING:
    import sqlite3
    import threading
    from collections.abc import Callable
    from typing import Any

    from .pragmas import Durability
    from .store import Store

    #: A connection's ``execute``.
    _Execute: TypeAlias = Callable[..., sqlite3.Cursor]

_ENQUEUE = (
    "INSERT INTO queue_entries (id, queue, task, run_name, args, priority, dedup_key, status, "
    "not_before, enqueued_at, parent_run) VALUES (?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?)"
)
_ACTIVE_DEDUP = (
    "SELECT id, run_name FROM queue_entries WHERE queue = ? AND dedup_key = ? "
    "AND status IN ('queued', 'claimed')"
)
_NAMED = (
    "SELECT id FROM queue_entries WHERE queue = ? AND run_name = ? "
    "ORDER BY status = 'completed' DESC, id DESC LIMIT 1"
)
_HELD = "SELECT id, priority FROM queue_entries WHERE queue = ? AND status = 'claimed'"
_READY = (
    "SELECT id FROM queue_entries WHERE queue = ? AND status = 'queued' AND not_before <= ? "
    "ORDER BY priority DESC, not_before, id LIMIT ?"
)
_NEXT_DUE = "SELECT min(not_before) FROM queue_entries WHERE queue = ? AND status = 'queued'"
_IN_WINDOW = "SELECT count(*), min(at) FROM queue_starts WHERE queue = ? AND at > ?"
_CLAIM = (
    "UPDATE queue_entries SET status = 'claimed', attempt = attempt + 1, holder_pid = ?, "
    "holder_host = ?, claimed_at = ? WHERE id = ? "
    "RETURNING task, run_name, args, attempt"
)
_FENCE = " WHERE id = ? AND attempt = ? AND status = 'claimed'"
#: A child's end makes its parent due at once, if the parent is suspended waiting for it
#: (``children.py``): (now, now, child entry id); the parent's queue comes back.
_WAKE_PARENT = (
    "UPDATE queue_entries SET not_before = ? WHERE status = 'queued' AND not_before > ? "
    "AND run_id = (SELECT parent_run FROM queue_entries WHERE id = ?) RETURNING queue"
)


class SqliteQueue:
    """The queue entries of one journal file, for one process (any thread)."""

    def __init__(self, path: str | os.PathLike[str] | None, durability: Durability) -> None:
        self.path = path
        self.durability: Durability = durability

    def _store(self) -> Store:
        return open_store(self.path, durability=self.durability)

    def _write(self) -> SharedWrite:
        return SharedWrite(self._store())

    def lock_path(self, store: Store, entry_id: str) -> str:
        """The lock file that holds ``entry_id`` while a worker runs it."""
        return store.lock_name("queue", entry_id)

    # -- producers -------------------------------------------------------------

    def enqueue(
        self,
        queue: str,
        task: str,
        run_name: str | None,
        args: str,
        priority: int,
        dedup_key: str | None,
        not_before: float,
        now: float,
        once: bool = False,
        parent_run: str | None = None,
    ) -> tuple[str, str, bool]:
        """Add an entry; (its id, its run's name, True) — or, when ``dedup_key`` names an
        entry still queued or claimed, that entry's (id, run name, False), nothing added.
        ``once``: nor when the queue holds an entry whose run is ``run_name`` (a child
        enqueued again by its parent's rerun: ``children.py``). ``parent_run``: the id of
        the run that enqueues it (a child's parent)."""
        with self._write() as c:
            if once and run_name is not None:
                row = c.execute(_NAMED, (queue, run_name)).fetchone()
                if row is not None:
                    return str(row[0]), run_name, False
            if dedup_key is not None:
                row = c.execute(_ACTIVE_DEDUP, (queue, dedup_key)).fetchone()
                if row is not None:
                    return str(row[0]), str(row[1]), False
            entry_id = new_run_id(now)
            name = entry_id if run_name is None else run_name
            c.execute(
                _ENQUEUE,
                (
                    entry_id,
                    queue,
                    task,
                    name,
                    args,
                    priority,
                    dedup_key,
                    utc_iso(not_before),
                    utc_iso(now),
                    parent_run,
                ),
            )
        WAKEUPS.wake(queue)  # this process's idle workers look at once
        return entry_id, name, True

    def state(self, entry_id: str) -> EntryState | None:
        """The entry as it is now; None: no such entry."""
        store = self._store()
        try:
            rows = store.query(
                "SELECT status, run_id, result, error, attempt, not_before "
                "FROM queue_entries WHERE id = ?",
                (entry_id,),
            )
        finally:
            close_store(store)
        return EntryState(*rows[0]) if rows else None

    def named(self, queue: str, run_name: str) -> str | None:
        """The id of ``queue``'s entry whose run is named ``run_name`` (one that completed
        first, then the newest); None: there is none."""
        store = self._store()
        try:
            rows = store.query(_NAMED, (queue, run_name))
        finally:
            close_store(store)
        return str(rows[0][0]) if rows else None

    def cancel(self, entry_id: str, now: float, reason: str) -> str | None:
        """Cancel an entry: a queued one at once (``'cancelled'``: it never starts); a claimed
        one by a cancel request on its run, which its holder stops at at its next step
        (``'requested'``); an ended one is left as it is (its status). None: no such entry."""
        at = utc_iso(now)
        with self._write() as c:
            row = c.execute(
                "SELECT status, run_id FROM queue_entries WHERE id = ?", (entry_id,)
            ).fetchone()
            if row is None:
                return None
            status, run_id = row
            if status == "queued":
                c.execute(
                    "UPDATE queue_entries SET status = 'cancelled', finished_at = ?, error = ? "
                    "WHERE id = ?",
                    (at, f"RunCancelledError: {reason}", entry_id),
                )
                return "cancelled"
            if status != "claimed":
                return str(status)
            c.execute(
                "UPDATE queue_entries SET cancel_requested_at = ? WHERE id = ?", (at, entry_id)
            )
            if run_id is not None:
                c.execute(
                    "UPDATE runs SET cancel_requested_at = ?, cancel_reason = ? "
                    "WHERE id = ? AND status NOT IN ('completed', 'cancelled')",
                    (at, reason, run_id),
                )
            return "requested"

    def cancel_requested(self, entry_id: str) -> bool:
        """Whether a cancel was asked of the claimed entry (read by its holder)."""
        store = self._store()
        try:
            rows = store.query(
                "SELECT cancel_requested_at FROM queue_entries WHERE id = ?", (entry_id,)
            )
        finally:
            close_store(store)
        return bool(rows and rows[0][0] is not None)

    # -- workers ---------------------------------------------------------------

    def claim(self, queue: str, limits: Limits, now: float) -> Claimed | float:
        """Claim the queue's best entry for this process, or the seconds to wait before asking
        again (nothing ready, or a limit reached).

        A look without the write lock first: an idle worker's poll takes no lock
        unless there may be something to claim.
        """
        store = self._store()
        try:
            wait = self._look(store, store.conn.execute, queue, limits, now, peek=True)
            if not isinstance(wait, list):
                return wait
            with SharedWrite(store, keep=True) as c:
                picked = self._look(store, c.execute, queue, limits, now, peek=False)
                if not isinstance(picked, list):
                    return picked
                for entry_id in picked:
                    hold = locks.new_lock(self.lock_path(store, entry_id))
                    if not locks.acquire(hold, 0):
                        continue
                    try:
                        task, run_name, args, attempt = c.execute(
                            _CLAIM, (os.getpid(), HOST, utc_iso(now), entry_id)
                        ).fetchone()
                        if limits.rate is not None:
                            _count_start(c, queue, entry_id, now, limits.rate[1])
                    except BaseException:
                        locks.release(hold)
                        raise
                    return Claimed(entry_id, queue, task, run_name, args, attempt, hold)
                return POLL_SECONDS
        finally:
            close_store(store)

    def _look(
        self, store: Store, execute: _Execute, queue: str, limits: Limits, now: float, peek: bool
    ) -> list[str] | float:
        """The entries a claim may take, best first, or the seconds to wait."""
        lock = store.lock
        with lock:
            held = execute(_HELD, (queue,)).fetchall()
        # A claimed entry whose lock no process holds: its worker died. Taken over first.
        dead = [(-int(p), str(i)) for i, p in held if not locks.is_held(self.lock_path(store, i))]
        if limits.concurrency is not None and len(held) - len(dead) >= limits.concurrency:
            return POLL_SECONDS
        if limits.rate is not None:
            count, oldest = _window(lock, execute, queue, now, limits.rate[1])
            if count >= limits.rate[0]:
                return max(0.001, seconds(oldest) + limits.rate[1] - now)
        if dead:
            return [i for _, i in sorted(dead)]
        with lock:
            ready = execute(_READY, (queue, utc_iso(now), 1 if peek else CANDIDATES)).fetchall()
            if not ready:
                due = execute(_NEXT_DUE, (queue,)).fetchone()[0]
                return POLL_SECONDS if due is None else min(POLL_SECONDS, seconds(due) - now)
        return [str(r[0]) for r in ready]

    def renew(self, held: list[Claimed], now: float) -> None:
        """Nothing: on one machine the entries' lock files are the whole truth (no lease)."""

    def started(self, claimed: Claimed, run_id: str, now: float) -> tuple[bool, bool]:
        """Record the run the holder opened for its entry: (the entry is still its own, a
        cancel was asked of it). A cancel asked before the run had an id is written on the
        run now, where the holder's journal reads it (``cancellation.check``)."""
        with self._write() as c:
            row = c.execute(
                "UPDATE queue_entries SET run_id = ?" + _FENCE + " RETURNING cancel_requested_at",
                (run_id, claimed.id, claimed.attempt),
            ).fetchone()
            if row is None:
                return False, False
            if row[0] is not None:
                c.execute(
                    "UPDATE runs SET cancel_requested_at = coalesce(cancel_requested_at, ?), "
                    "cancel_reason = coalesce(cancel_reason, 'cancelled') WHERE id = ?",
                    (utc_iso(now), run_id),
                )
            return True, row[0] is not None

    def finish(
        self, claimed: Claimed, status: str, result: str | None, error: str | None, now: float
    ) -> bool:
        """End the holder's entry (completed, failed, cancelled) and let go of it; False: the
        entry was no longer its own (taken over), and nothing was written. A parent run
        suspended waiting for it is made due at once (and this process's workers woken)."""
        at = utc_iso(now)
        woken: list[str] = []
        try:
            with self._write() as c:
                mine = (
                    c.execute(
                        "UPDATE queue_entries SET status = ?, result = ?, error = ?, "
                        "finished_at = ?" + _FENCE,
                        (status, result, error, at, claimed.id, claimed.attempt),
                    ).rowcount
                    == 1
                )
                if mine:
                    woken = [str(r[0]) for r in c.execute(_WAKE_PARENT, (at, at, claimed.id))]
        finally:
            locks.release(claimed.hold)
        for queue in woken:
            WAKEUPS.wake(queue)
        return mine

    def release(
        self,
        claimed: Claimed,
        due: float | None = None,
        why: str | None = None,
        child: str | None = None,
    ) -> bool:
        """Give the holder's entry back to the queue unfinished: queued again, claimable at
        once (a worker draining), or from ``due`` on (a run suspended by a rate limit, or
        waiting for its ``child`` entry: due at once if that ended meanwhile; ``why`` kept in
        its ``error`` meanwhile); False: it was no longer the holder's."""
        sql = "UPDATE queue_entries SET status = 'queued'"
        args: tuple[str, str | None] | tuple[()] = ()
        try:
            with self._write() as c:
                if child is not None and _ended(c.execute, "queue_entries", "?", child):
                    due = None  # the child's end came first: nothing will wake the parent
                if due is not None:
                    sql += ", not_before = ?, error = ?"
                    args = (utc_iso(due), why)
                mine = c.execute(sql + _FENCE, (*args, claimed.id, claimed.attempt)).rowcount == 1
        finally:
            locks.release(claimed.hold)
        if due is None:  # claimable again at once by this process's idle workers
            WAKEUPS.wake(claimed.queue)
        return mine

    # -- idle workers ----------------------------------------------------------

    def listener(self) -> None:
        """None: a journal file notifies nothing across processes, and a look without the
        write lock costs one read (``claim``), so an idle worker of another process polls
        (every POLL_SECONDS); one of this process is woken by ``WAKEUPS``."""
        return None


def _ended(execute: Callable[..., Any], table: str, mark: str, entry_id: str) -> bool:
    """Whether entry ``entry_id`` ended (completed, failed, cancelled; gone counts too)."""
    row = execute(f"SELECT status FROM {table} WHERE id = {mark}", (entry_id,)).fetchone()
    return row is None or row[0] in ("completed", "failed", "cancelled")


def _window(
    lock: threading.RLock, execute: _Execute, queue: str, now: float, window: float
) -> tuple[int, str | None]:
    with lock:
        count, oldest = execute(_IN_WINDOW, (queue, utc_iso(now - window))).fetchone()
    return int(count), oldest


def _count_start(
    c: sqlite3.Connection, queue: str, entry_id: str, now: float, window: float
) -> None:
    c.execute(
        "INSERT INTO queue_starts (queue, at, entry) VALUES (?, ?, ?)",
        (queue, utc_iso(now), entry_id),
    )
    # Claims older than the window count for nothing any more.
    c.execute(
        "DELETE FROM queue_starts WHERE queue = ? AND at <= ?", (queue, utc_iso(now - window))
    )
