"""The saver's writes and reads, waiting for SQLite's locks in short polls.

A journal file shared by the saver and durable nodes has one write lock for
both. SQLite's busy handler (``busy_timeout``) sleeps 1, 2, 5, 10, … up to
100 ms between tries, so a checkpoint write that meets a node's journal
commits (about 0.1 ms each) could sleep tens of milliseconds while the node
takes the lock in every gap, and LangGraph goes on meanwhile: a
``Command(resume=...)`` answer the node has already acted on could be lost
to a kill. Here a lock held by another connection is tried again every
0.05 ms, doubling to 1 ms, up to the store's busy timeout (30 s).

The saver's connection runs with ``busy_timeout = 0`` (set by
:func:`take_over`), so every statement on it goes through this module: a
lock is waited for here, never inside SQLite. ``Store.write`` is the
portable twin (same transaction, SQLite's sleeps);
``benchmarks/bench_langgraph.py`` measures both under a journal's commits.

``commit`` (the hot path of ``put`` and ``put_writes``) writes its rows as
one statement in SQLite's autocommit mode: the statement is its own
transaction, committed (WAL, the store's ``synchronous``) before it returns,
or rolled back whole. It is the same write as ``BEGIN IMMEDIATE``, the
INSERT and ``COMMIT`` in one sqlite3 call instead of three: about 5% off a
20-node graph's invoke (``bench_langgraph.py``; what a write still costs is
the commit and the GIL hand-off around it, see docs/langgraph.md, "Speed").
``Store.commit_rows`` with this module's polling ``BEGIN IMMEDIATE`` is its
portable twin, used for more rows than one statement should carry;
``tests/test_langgraph_polled.py`` checks that both store the same rows.
"""

from __future__ import annotations

import contextlib
import functools
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from ...stores.sqlite.sqlerrors import BUSY_TIMEOUT_MS, is_busy
from ...stores.sqlite.store import Store, rollback

#: First and longest sleep between two tries at a lock (seconds): a node's
#: transactions last about 0.1 ms, so a 0.05 ms poll finds the gaps between
#: them; 1 ms keeps a long wait (another process's big write) cheap.
POLL_FIRST = 0.00005
POLL_MAX = 0.001


def take_over(store: Store) -> None:
    """Make ``store``'s connection fail at once on a held lock; this module waits instead."""
    with store.lock:
        store.conn.execute("PRAGMA busy_timeout = 0")


def _retry(store: Store, exc: BaseException, deadline: float | None) -> float:
    """The deadline to wait until for a lock held elsewhere; raises when there is none left."""
    if not isinstance(exc, sqlite3.OperationalError) or not is_busy(exc):
        raise store.explain(exc) from None
    now = time.monotonic()
    if deadline is None:
        return now + BUSY_TIMEOUT_MS / 1000
    if now > deadline:
        raise store.explain(exc) from None
    return deadline


def _begin(store: Store, conn: sqlite3.Connection) -> None:
    """``BEGIN IMMEDIATE``, polling while another connection holds the write lock."""
    deadline: float | None = None
    delay = POLL_FIRST
    while True:
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except (sqlite3.Error, UnicodeError) as exc:
            deadline = _retry(store, exc, deadline)
        time.sleep(delay)
        delay = min(delay * 2, POLL_MAX)


def transaction(store: Store) -> contextlib.AbstractContextManager[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` on ``store``'s connection, rolled back on error.

    ``Store.write()`` with this module's polling begin: a sqlite3 error
    anywhere in the block rolls it all back and is explained as a
    JournalFileError by the store.
    """
    return store.write(functools.partial(_begin, store))


#: Most rows ``commit`` writes as one multi-row INSERT; more go through a
#: transaction. A task writes a few channels; each count of rows is one more
#: statement in the connection's cache (128), so the cap keeps them few.
MAX_STATEMENT_ROWS = 16


@functools.lru_cache(maxsize=64)
def _multi_row(sql: str, count: int) -> str:
    """``INSERT … VALUES (?, …)`` with its VALUES group repeated ``count`` times."""
    head, values, group = sql.rpartition("VALUES ")
    if not values or count == 1:
        return sql
    return head + values + ", ".join([group] * count)


def commit(store: Store, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    """``sql`` (one ``INSERT … VALUES (?, …)``) once per row, all committed or none.

    Up to MAX_STATEMENT_ROWS rows are one statement in autocommit mode (see
    the module); more, one ``BEGIN IMMEDIATE`` transaction (``commit_rows``).
    Either way the rows are committed when this returns, and a lock held
    elsewhere is polled for. Errors are explained as the store's.
    """
    if not rows:
        return
    if len(rows) > MAX_STATEMENT_ROWS:
        store.commit_rows(sql, rows, functools.partial(_begin, store))
        return
    if len(rows) == 1:
        params: Sequence[Any] = rows[0]
    else:
        sql = _multi_row(sql, len(rows))
        params = [value for row in rows for value in row]
    deadline: float | None = None
    delay = POLL_FIRST
    while True:
        with store.lock:
            conn = store.conn
            if conn.in_transaction:  # never: every write ends its own; then the twin explains
                store.commit_rows(sql, (params,), functools.partial(_begin, store))
                return
            try:
                conn.execute(sql, params)  # its own transaction, committed on return
                return
            except (sqlite3.Error, UnicodeError) as exc:
                rollback(conn)  # SQLite rolls a failed statement back; make sure
                deadline = _retry(store, exc, deadline)
        time.sleep(delay)
        delay = min(delay * 2, POLL_MAX)


def query(store: Store, sql: str, params: Sequence[Any] = ()) -> list[Any]:
    """The rows of a read; a lock that blocks it (a checkpoint of the WAL) is polled too."""
    deadline: float | None = None
    delay = POLL_FIRST
    while True:
        with store.lock:
            try:
                return store.conn.execute(sql, params).fetchall()
            except (sqlite3.Error, UnicodeError) as exc:
                deadline = _retry(store, exc, deadline)
        time.sleep(delay)
        delay = min(delay * 2, POLL_MAX)
