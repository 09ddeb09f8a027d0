"""The saver's transactions and reads, waiting for SQLite's locks in short polls.

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
"""

from __future__ import annotations

import contextlib
import functools
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from ...sqlerrors import _busy
from ...store import BUSY_TIMEOUT_MS, Store

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
    if not isinstance(exc, sqlite3.OperationalError) or not _busy(exc):
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


def commit(store: Store, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    """``sql`` once per row in one transaction (the hot path of ``put`` and ``put_writes``)."""
    store.commit_rows(sql, rows, functools.partial(_begin, store))


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
