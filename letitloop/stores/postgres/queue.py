"""A work queue on a PostgreSQL journal: its entries (``ll_queue_entries``, migration
postgres/0012), claims and holds; what ``sqlite_queue.py`` is to a journal file.

- **A claim is one transaction under the queue's lock** (``pg_advisory_xact_lock`` of
  the queue's name): claims of one queue are made one at a time, from any host, so
  the concurrency and the rate window are counted as SQLite's single writer counts
  them; entries are picked by the same rules (a dead holder's first, then priority,
  then age).
- **A claimed entry is held by a session advisory lock** on a connection of the
  holder's own (``postgres_holding.PostgresHold``): the server drops it when that
  connection ends (at once for a killed process on the server's host; over a network,
  once its TCP keepalives give up). A claimed entry whose lock is free had a holder
  that died: the next claim takes it over.
- **A lease for a host that vanished**: each worker renews the entries it holds
  every ``lease / 3`` seconds (``renew``); an entry whose lease ran out is taken over
  even while its holder's sessions live (a host that lost its network keeps them
  until the server's keepalives give up), and the server ends those sessions
  (``pg_terminate_backend`` of the holders of the entry's lock and of its run's:
  the same role, or ``pg_signal_backend``), so the run's lock is free for its next
  holder.
- **Every write of a holder is fenced by its attempt**, as on the file; the run's
  rows by the run's attempt (``postgres_connection.py``).
- **Idle workers are woken by NOTIFY** (``listening.py``): an entry added or
  queued again notifies the journal's channel in its transaction, and each
  worker's listening session wakes its idle threads; they poll as well.

One connection per process for the queue's own statements (made again in a forked
child), used under a lock by the process's threads; one per claimed entry for its hold.
"""

from __future__ import annotations

import os
import time
from typing import Any

from ...identity.ids import HOST, new_run_id
from ...primitives import forksafe
from ...primitives.clock import utc_iso
from ...queueing.queue_records import (
    POLL_SECONDS,
    WAKEUPS,
    Claimed,
    EntryState,
    Limits,
)
from .database import connect, lock_key, migrate, server_errors
from .holding import PostgresHold
from .listening import Listener, channel
from .queue_looks import look

_FENCE = " WHERE id = %s AND attempt = %s AND status = 'claimed'"
#: A child's end makes its suspended parent due at once (as ``sqlite_queue._WAKE_PARENT``).
_WAKE_PARENT = (
    "UPDATE ll_queue_entries SET not_before = %s WHERE status = 'queued' AND not_before > %s "
    "AND run_id = (SELECT parent_run FROM ll_queue_entries WHERE id = %s) RETURNING queue"
)


#: A queue's entry by its run's name: one that completed first, then the newest.
_NAMED = (
    "SELECT id FROM ll_queue_entries WHERE queue = %s AND run_name = %s "
    "ORDER BY status = 'completed' DESC, id DESC LIMIT 1"
)


class PostgresQueue:
    """The queue entries of one PostgreSQL journal, for one process (any thread)."""

    def __init__(self, location: str, lease: float = 10.0, listen: bool = True) -> None:
        self.path = location
        #: Seconds a claim holds without renewal (``renew``) before it may be taken over.
        self.lease = lease
        #: Whether entries added send NOTIFY and idle workers LISTEN (``listening.py``).
        self.listen = listen
        self._lock = forksafe.lock()
        self._conn: Any = None
        self._pid = 0
        self._schema = ""

    def _connection(self) -> Any:
        """This process's connection (under ``_lock``), made and migrated on first use."""
        if self._conn is None or self._pid != os.getpid() or self._conn.closed:
            conn = connect(self.path)
            migrate(conn, self.path)
            self._schema = str(conn.execute("SELECT current_schema()").fetchone()[0])
            self._conn, self._pid = conn, os.getpid()
        return self._conn

    def _queue_key(self, queue: str) -> int:
        """The advisory lock a claim of ``queue`` (in this schema) takes for its transaction."""
        return lock_key(f"letitloop\x1fqueue\x1f{self._schema}\x1f{queue}")

    def _hold_text(self, entry_id: str) -> str:
        return f"queue\x1f{self._schema}\x1f{entry_id}"

    def _run(self, fn: Any) -> Any:
        with self._lock, server_errors(self.path):
            conn = self._connection()
            try:
                with conn.transaction():
                    return fn(conn)
            except Exception:
                if conn.closed or conn.broken:
                    self._conn = None  # made again at the next call
                raise

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
        """As ``SqliteQueue.enqueue``; a dedup key is checked under the queue's lock."""

        def add(c: Any) -> tuple[str, str, bool]:
            if once and run_name is not None:
                row = c.execute(_NAMED, (queue, run_name)).fetchone()
                if row is not None:
                    return str(row[0]), run_name, False
            if dedup_key is not None:
                c.execute("SELECT pg_advisory_xact_lock(%s)", (self._queue_key(queue),))
                row = c.execute(
                    "SELECT id, run_name FROM ll_queue_entries WHERE queue = %s AND "
                    "dedup_key = %s AND status IN ('queued', 'claimed')",
                    (queue, dedup_key),
                ).fetchone()
                if row is not None:
                    return str(row[0]), str(row[1]), False
            entry_id = new_run_id(now)
            name = entry_id if run_name is None else run_name
            c.execute(
                "INSERT INTO ll_queue_entries (id, queue, task, run_name, args, priority, "
                "dedup_key, status, not_before, enqueued_at, parent_run) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, 'queued', %s, %s, %s)",
                (entry_id, queue, task, name, args, priority, dedup_key,
                 utc_iso(not_before), utc_iso(now), parent_run),
            )  # fmt: skip
            self._notify(c, queue)
            return entry_id, name, True

        result: tuple[str, str, bool] = self._run(add)
        if result[2]:
            WAKEUPS.wake(queue)  # this process's idle workers look at once
        return result

    def state(self, entry_id: str) -> EntryState | None:
        row = self._run(
            lambda c: c.execute(
                "SELECT status, run_id, result, error, attempt, not_before "
                "FROM ll_queue_entries WHERE id = %s",
                (entry_id,),
            ).fetchone()
        )
        return None if row is None else EntryState(*row)

    def named(self, queue: str, run_name: str) -> str | None:
        """The id of the entry whose run is ``run_name`` (a completed one, else the newest)."""
        row = self._run(lambda c: c.execute(_NAMED, (queue, run_name)).fetchone())
        return None if row is None else str(row[0])

    def cancel(self, entry_id: str, now: float, reason: str) -> str | None:
        """As ``SqliteQueue.cancel``."""
        done: str | None = self._run(lambda c: _cancel(c, entry_id, utc_iso(now), reason))
        return done

    # -- workers ---------------------------------------------------------------

    def claim(self, queue: str, limits: Limits, now: float) -> Claimed | float:
        """As ``SqliteQueue.claim``: a look without the queue's lock first."""
        wait = self._run(lambda c: look(self, c, queue, limits, now, peek=True))
        if not isinstance(wait, list):
            return float(wait)

        def take(c: Any) -> Claimed | float:
            c.execute("SELECT pg_advisory_xact_lock(%s)", (self._queue_key(queue),))
            picked = look(self, c, queue, limits, now, peek=False)
            if not isinstance(picked, list):
                return float(picked)
            for entry_id in picked:
                hold = PostgresHold(self.path, self._hold_text(entry_id))
                if not hold.acquire(0):
                    continue
                try:
                    task, run_name, args, attempt = c.execute(
                        "UPDATE ll_queue_entries SET status = 'claimed', attempt = attempt + 1, "
                        "holder_pid = %s, holder_host = %s, claimed_at = %s, lease_until = %s "
                        "WHERE id = %s RETURNING task, run_name, args, attempt",
                        (os.getpid(), HOST, utc_iso(now), utc_iso(now + self.lease), entry_id),
                    ).fetchone()
                    if limits.rate is not None:
                        c.execute(
                            "INSERT INTO ll_queue_starts (queue, at, entry) VALUES (%s, %s, %s)",
                            (queue, utc_iso(now), entry_id),
                        )
                        c.execute(
                            "DELETE FROM ll_queue_starts WHERE queue = %s AND at <= %s",
                            (queue, utc_iso(now - limits.rate[1])),
                        )
                except BaseException:
                    hold.release()
                    raise
                return Claimed(entry_id, queue, task, run_name, args, attempt, hold)
            return POLL_SECONDS

        got: Claimed | float = self._run(take)
        if isinstance(got, Claimed) and self._state_of(got) != got.attempt:
            got.hold.release()  # the commit failed after the hold was taken: not ours
            return POLL_SECONDS
        return got

    def _state_of(self, claimed: Claimed) -> int | None:
        found = self.state(claimed.id)
        return None if found is None or found.status != "claimed" else found.attempt

    def renew(self, held: list[Claimed], now: float) -> None:
        """Renew the lease of the entries this process holds (while still its own)."""
        if not held:
            return
        until = utc_iso(now + self.lease)

        def renew(c: Any) -> None:
            for e in held:
                c.execute(
                    "UPDATE ll_queue_entries SET lease_until = %s" + _FENCE,
                    (until, e.id, e.attempt),
                )

        self._run(renew)

    def started(self, claimed: Claimed, run_id: str, now: float) -> tuple[bool, bool]:
        def started(c: Any) -> tuple[bool, bool]:
            row = c.execute(
                "UPDATE ll_queue_entries SET run_id = %s"
                + _FENCE
                + " RETURNING cancel_requested_at",
                (run_id, claimed.id, claimed.attempt),
            ).fetchone()
            if row is None:
                return False, False
            if row[0] is not None:
                c.execute(
                    "UPDATE ll_runs SET cancel_requested_at = coalesce(cancel_requested_at, %s), "
                    "cancel_reason = coalesce(cancel_reason, 'cancelled') WHERE id = %s",
                    (utc_iso(now), run_id),
                )
            return True, row[0] is not None

        got: tuple[bool, bool] = self._run(started)
        return got

    def finish(
        self, claimed: Claimed, status: str, result: str | None, error: str | None, now: float
    ) -> bool:
        sets = "status = %s, result = %s, error = %s, finished_at = %s"
        at = utc_iso(now)
        return self._fenced(claimed, sets, (status, result, error, at), False, wake_parent=at)

    def release(
        self,
        claimed: Claimed,
        due: float | None = None,
        why: str | None = None,
        child: str | None = None,
    ) -> bool:
        """As ``SqliteQueue.release``: queued again; due now, this journal's idle workers woken."""
        if child is not None and due is not None:  # due at once if the child ended meanwhile
            sets = (
                "status = 'queued', error = %s, not_before = CASE WHEN coalesce((SELECT "
                "status FROM ll_queue_entries WHERE id = %s), 'completed') IN ('completed', "
                "'failed', 'cancelled') THEN %s ELSE %s END"
            )
            now = utc_iso(time.time())
            return self._fenced(claimed, sets, (why, child, now, utc_iso(due)), True)
        if due is None:
            return self._fenced(claimed, "status = 'queued'", (), True)
        sets = "status = 'queued', not_before = %s, error = %s"  # due later: nobody to wake
        return self._fenced(claimed, sets, (utc_iso(due), why), False)

    def _fenced(
        self,
        claimed: Claimed,
        sets: str,
        args: tuple[Any, ...],
        queued: bool,
        wake_parent: str | None = None,
    ) -> bool:
        """One write of the holder on its entry, fenced by its attempt, then its hold let go
        of; ``queued``: the entry is claimable again (notified). ``wake_parent`` (now): the
        entry ended, and a parent run suspended waiting for it is due at once (notified).
        False: not its own."""
        woken: list[str] = []

        def write(c: Any) -> bool:
            n = c.execute(f"UPDATE ll_queue_entries SET {sets}" + _FENCE, (*args, claimed.id,
                          claimed.attempt)).rowcount  # fmt: skip
            if n == 1 and queued:
                self._notify(c, claimed.queue)
            if n == 1 and wake_parent is not None:
                woken.extend(
                    str(r[0])
                    for r in c.execute(_WAKE_PARENT, (wake_parent, wake_parent, claimed.id))
                )
                for queue in set(woken):
                    self._notify(c, queue)
            return bool(n == 1)

        try:
            mine: bool = self._run(write)
        finally:
            claimed.hold.release()
        if queued:
            WAKEUPS.wake(claimed.queue)
        for queue in set(woken):
            WAKEUPS.wake(queue)
        return mine

    # -- idle workers ----------------------------------------------------------

    def _notify(self, c: Any, queue: str) -> None:
        """NOTIFY the journal's listeners, at this transaction's commit, that ``queue`` has an
        entry to claim (nothing when ``listen`` is off: a NOTIFY serialises the commits of
        every transaction that sends one, database-wide)."""
        if self.listen:
            c.execute("SELECT pg_notify(%s, %s)", (channel(self._schema), queue))

    def listener(self) -> Listener | None:
        """A listening session for a worker of this process (None when ``listen`` is off): it
        moves ``queue_records.WAKEUPS`` for each entry added; the worker stops it."""
        if not self.listen:
            return None
        with self._lock:
            self._connection()  # the schema, whose channel it is
        return Listener(self.path, channel(self._schema))


def _cancel(c: Any, entry_id: str, at: str, reason: str) -> str | None:
    """``PostgresQueue.cancel`` in its transaction (see ``SqliteQueue.cancel``)."""
    row = c.execute(
        "SELECT status, run_id FROM ll_queue_entries WHERE id = %s FOR UPDATE", (entry_id,)
    ).fetchone()
    if row is None:
        return None
    status, run_id = row
    if status == "queued":
        c.execute(
            "UPDATE ll_queue_entries SET status = 'cancelled', finished_at = %s, error = %s "
            "WHERE id = %s",
            (at, f"RunCancelledError: {reason}", entry_id),
        )
        return "cancelled"
    if status != "claimed":
        return str(status)
    c.execute("UPDATE ll_queue_entries SET cancel_requested_at = %s WHERE id = %s", (at, entry_id))
    if run_id is not None:
        c.execute(
            "UPDATE ll_runs SET cancel_requested_at = %s, cancel_reason = %s "
            "WHERE id = %s AND status NOT IN ('completed', 'cancelled')",
            (at, reason, run_id),
        )
    return "requested"
