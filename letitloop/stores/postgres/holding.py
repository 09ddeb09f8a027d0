"""Holding a run or a marker in a PostgreSQL journal: ``PostgresHold``, ``is_held``.

A hold is a session-level advisory lock (``pg_advisory_lock``) on a
connection of the hold's own, keyed by a 64-bit hash of what it holds
(``postgres_database.lock_key``); PostgreSQL releases it when that
connection ends, including when the holder's process dies (at once for a
killed process on the same host; over a network, once the server notices the
connection is gone: the TCP keepalives of ``postgres_database.KEEPALIVES``,
about 25 s). The journal's storage and the inspector hold runs alike.

``PostgresHolding`` is ``Holding`` on a journal's connection (a part of
``PostgresStorage``): its holds, who last held a run, its identity, the
change notices received on it (``LISTEN`` at open; every statement on
``ll_runs`` and the inspectors notify), reading them without a round trip.
"""

from __future__ import annotations

import contextlib
from collections.abc import Hashable, Iterator
from typing import Any

from .connection import PostgresConnection
from .database import connect, lock_key, psycopg, redact, server_error

__all__ = ["PostgresHold", "PostgresHolding", "is_held", "run_hold_text"]


def run_hold_text(schema: str, run_id: str) -> str:
    """What a run's hold holds: its schema and its id (lock_key makes the lock's key)."""
    return f"run\x1f{schema}\x1f{run_id}"


def is_held(conn: Any, what: str) -> bool:
    """Whether a live session holds the advisory lock of ``what``; takes nothing."""
    unsigned = lock_key(f"letitloop\x1f{what}") & 0xFFFFFFFFFFFFFFFF
    row = conn.execute(
        "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1 "
        "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
        "AND classid = %s::bigint::oid AND objid = %s::bigint::oid",
        (unsigned >> 32, unsigned & 0xFFFFFFFF),
    ).fetchone()
    return row is not None


#: The longest lock_timeout PostgreSQL takes, in milliseconds (an int setting).
_MAX_LOCK_MS = 2**31 - 1


class PostgresHold:
    """One holder's advisory lock on a run or a marker, on a connection of its own."""

    __slots__ = ("_conn", "key", "location", "what")

    def __init__(self, location: str, what: str) -> None:
        self.location = location
        self.what = what
        self.key = lock_key(f"letitloop\x1f{what}")
        self._conn: Any = None

    @property
    def where(self) -> str:
        return f"{redact(self.location)} advisory lock {self.key} ({self.what!r})"

    def acquire(self, timeout: float) -> bool:
        if self._conn is not None:
            return True
        conn = connect(self.location)
        import psycopg  # connect() has it: the extra is installed

        try:
            if timeout == 0:
                (got,) = conn.execute("SELECT pg_try_advisory_lock(%s)", (self.key,)).fetchone()
            else:
                # lock_timeout is whole milliseconds up to INT_MAX (about 24.8 days); 0
                # turns it off: -1, math.inf and any longer wait wait forever.
                ms = (
                    0
                    if timeout < 0 or timeout * 1000 >= _MAX_LOCK_MS
                    else max(1, int(timeout * 1000))
                )
                conn.execute(f"SET lock_timeout = {ms}")
                try:
                    conn.execute("SELECT pg_advisory_lock(%s)", (self.key,))
                    got = True
                except psycopg.errors.LockNotAvailable:
                    got = False
        except BaseException as exc:
            conn.close()
            known = server_error(exc, self.location) if isinstance(exc, psycopg.Error) else None
            if known is not None:
                raise known from exc
            raise
        if not got:
            conn.close()
            return False
        self._conn = conn
        return True

    def release(self) -> None:
        """Free the lock on the server, then close its connection. Closing alone frees it
        only once the server's session has ended, a moment after ``close`` returned: a hold
        taken at once by another connection (``lil reset`` after a run's ``with`` block, the
        next claim of an entry) could still find it held."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        import psycopg  # acquire() had it

        try:
            conn.execute("SELECT pg_advisory_unlock(%s)", (self.key,))
        except psycopg.Error:
            pass  # a broken session: the lock ends with it, as it closes
        finally:
            conn.close()


class PostgresHolding(PostgresConnection):
    """Holds, change notices, identity and closing for one journal's connection."""

    @property
    def identity(self) -> Hashable:
        return self._identity

    def run_hold(self, run_id: str) -> PostgresHold:
        return PostgresHold(self.location, run_hold_text(self._schema_name, run_id))

    def marker_hold(self, name: str) -> PostgresHold:
        return PostgresHold(self.location, f"marker\x1f{self._schema_name}\x1f{name}")

    def is_run_held(self, run_id: str) -> bool:
        with self._lock:
            self._check()
            return is_held(self.conn, run_hold_text(self._schema_name, run_id))

    def run_holder(self, run_id: str) -> tuple[int | None, str | None, str | None] | None:
        rows = self._run(
            "SELECT holder_pid, holder_host, updated_at FROM ll_runs WHERE id = %s", (run_id,)
        )
        return None if not rows else (rows[0][0], rows[0][1], rows[0][2])

    def changes(self, *, wait: bool = True) -> int | None:
        """Notices of other connections' changes to this schema received so far.

        The notifications that came in with other answers, and those waiting on the
        socket, read without a round trip (``LISTEN`` at open, migration 0003).
        """
        if not self._lock.acquire(blocking=wait):
            return None
        try:
            self._check()
            try:
                for notice in self.conn.notifies(timeout=0):
                    self._notice(notice.pid, notice.payload)
            except psycopg.OperationalError as exc:
                raise self._lost(exc) from exc
            return self._notices
        finally:
            self._lock.release()

    @contextlib.contextmanager
    def if_free(self) -> Iterator[bool]:
        if not self._lock.acquire(blocking=False):
            yield False
            return
        try:
            yield True
        finally:
            self._lock.release()

    def close(self) -> None:
        with self._lock:
            self.gone = True
            self.conn.close()
