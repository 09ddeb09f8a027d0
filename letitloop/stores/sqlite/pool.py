"""One connection per journal file per process, kept across runs (:func:`open_store`).

A connection is reused only while its file is the same file (the path still
reaches its device and inode: not deleted, replaced or moved away), its
schema rechecked when another connection wrote; a new one is opened under the
file's lock (``connections.py``), so threads opening one file at once share
one. Idle connections are bounded (:data:`MAX_IDLE_STORES`), closed when their
file is gone and at exit (SQLite checkpoints the WAL then), and forgotten by a
forked child, which closes the idle ones before it opens its own connection to
their file (``connections.inherit_idle``).
A large ``-wal`` is checkpointed and truncated when the last
user of its file's connection gives it back (:func:`_shrink_wal`).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sqlite3
import threading
import weakref

from .connections import inherit_idle, opening
from .files import file_identity, resolve_file
from .pragmas import Durability
from .sqlerrors import BUSY_TIMEOUT_MS
from .store import Store

#: Idle connections kept open per process: a program that opens runs of a few
#: journal files in turn reuses each file's connection instead of paying a new
#: one per run (connect, probe, pragmas, and on close a checkpoint that also
#: deletes the -wal file). Beyond this many idle ones, the oldest is closed.
MAX_IDLE_STORES = 8

#: A ``-wal`` larger than this when the last user of a file's connection in
#: this process gives it back is checkpointed into the file and truncated
#: (:func:`_shrink_wal`), if the connection wrote at least
#: :data:`WAL_TRUNCATE_ROWS` rows since it was last idle: the idle connection
#: stays open, and SQLite would keep the ``-wal`` at its high-water mark (about
#: 1 MB after a 1,000-step run) until the process exits. Half a MiB: with the
#: journal's 1 KiB pages (connect.PAGE_SIZE) SQLite's automatic checkpoint every
#: 1,000 pages keeps a ``-wal`` at or under 1,048,032 bytes, so a 1 MiB limit was
#: never passed.
WAL_TRUNCATE_BYTES = 1 << 19
#: Not after fewer rows: a program of short runs would pay for it on every run.
#: The checkpoint costs an fsync or two (about 1 ms here), and a truncated
#: ``-wal`` grows again from nothing, each commit extending the file: a 3-step
#: run took 1.28x as long with a 3 MiB limit alone, 1.43x with 1 MiB
#: (``benchmarks/disk.py``), where SQLite reuses a ``-wal`` it keeps.
WAL_TRUNCATE_ROWS = 256

#: Rows written through each shared connection when it was last given back idle.
_rows_when_idle: weakref.WeakKeyDictionary[Store, int] = weakref.WeakKeyDictionary()


class _Shared:
    __slots__ = ("store", "users")

    def __init__(self, store: Store) -> None:
        self.store = store
        self.users = 0


#: The connection to use for each (real path, durability).
_shared: dict[tuple[str, str], _Shared] = {}
#: Connections whose file was replaced while they were in use: closed when
#: their last user gives them back (by id of the store).
_retired: dict[int, _Shared] = {}
_shared_lock = threading.Lock()

#: Connections refused on reuse (a newer letitloop's schema): never closed
#: before exit, since closing the last connection to a file checkpoints its
#: WAL into it, which must not happen to a file just refused as newer.
_abandoned: list[Store] = []


def _same_file(store: Store, path: str) -> bool:
    """Whether ``path`` still reaches ``store``'s file: same device and inode (so still linked)."""
    try:
        return file_identity(path) == store.identity
    except OSError:
        return False


def _reuse(key: tuple[str, str], path: str) -> Store | None:
    """The shared connection of ``key`` for one more user, if its file is still ``path``'s."""
    with _shared_lock:
        entry = _shared.get(key)
        if entry is None:
            return None
        store = entry.store
        same = _same_file(store, path)
        stale = not same and entry.users == 0
        if same:
            entry.users += 1
        else:
            del _shared[key]
            if entry.users:
                _retired[id(store)] = entry  # closed by its last user
    if not same:
        if stale:
            # Its file was deleted, replaced or moved: SQLite does not checkpoint
            # into a file that moved, nor delete the -wal now at its old path.
            with contextlib.suppress(sqlite3.Error):
                store.close()
        return None
    try:
        store.recheck_schema()
    except BaseException:
        _drop(store)
        raise
    return store


def _drop(store: Store) -> None:
    """A reused connection whose file was refused: not handed out again, nor closed before exit."""
    with _shared_lock:
        key = (str(store.real_file), store.durability)
        entry = _shared.get(key)
        if entry is not None and entry.store is store:
            del _shared[key]
        else:
            entry = _retired.get(id(store))
        if entry is None:
            return
        entry.users -= 1
        if entry.users == 0:
            _retired.pop(id(store), None)
            _abandoned.append(store)
        else:
            _retired[id(store)] = entry


def open_store(
    path: str | os.PathLike[str] | None = None, *, durability: Durability = "process"
) -> Store:
    """A connection to the journal at ``path`` for one user, shared in this process.

    Reuses this process's connection to the same file and durability while
    the path still reaches that file (its device and inode): a file deleted,
    replaced or moved away gets a fresh connection, and the old one is closed
    once no one uses it. Before a reuse the schema is checked again when
    another connection has written since (a newer letitloop's migration is
    refused, as on a first open). A new connection is made under the file's
    lock, so threads opening one file at once share one. Give it back with
    :func:`close_store`. Raises what ``Store()`` raises.
    """
    resolved = resolve_file(path)
    key = (os.path.realpath(resolved), durability)
    store = _reuse(key, resolved)
    if store is not None:
        return store
    with opening(resolved):
        store = _reuse(key, resolved)  # another thread made one meanwhile
        if store is not None:
            return store
        _close_gone()
        store = Store(resolved, durability=durability)
        store.shared = True
        with _shared_lock:
            entry = _shared[key] = _Shared(store)
            entry.users += 1
    return store


def close_store(store: Store) -> None:
    """Give back a connection from :func:`open_store` (closed if it was not shared).

    Kept open while it is idle, up to :data:`MAX_IDLE_STORES` idle ones; closed
    now when its file is gone.
    """
    if not store.shared:
        store.close()
        return
    key = (str(store.real_file), store.durability)
    closing: list[Store] = []
    idle: Store | None = None
    with _shared_lock:
        entry = _shared.get(key)
        if entry is None or entry.store is not store:
            entry = _retired.get(id(store))
            if entry is None:  # dropped: refused on reuse
                return
            entry.users -= 1
            if entry.users == 0:
                del _retired[id(store)]
                closing.append(store)
        else:
            entry.users -= 1
            if entry.users == 0:
                if not _same_file(store, store.real_file):
                    del _shared[key]
                    closing.append(store)
                else:
                    idle = store
                    unused = [k for k, e in _shared.items() if e.users == 0]
                    for k in unused[: max(0, len(unused) - MAX_IDLE_STORES)]:
                        closing.append(_shared.pop(k).store)
    for old in closing:
        with contextlib.suppress(sqlite3.Error):
            old.close()
    if idle is not None and idle not in closing:
        _shrink_wal(idle)


def _shrink_wal(store: Store) -> None:
    """Checkpoint and truncate the ``-wal`` of ``store``'s file if it is large and no one is busy.

    Only above :data:`WAL_TRUNCATE_BYTES` (its size read with ``os.stat``,
    never opened outside SQLite) and after :data:`WAL_TRUNCATE_ROWS` rows
    written since the connection was last idle. ``wal_checkpoint(TRUNCATE)`` with no busy
    wait: while another connection (of any process) writes or reads from the
    ``-wal``, it copies what it can, as a passive checkpoint, and leaves the
    ``-wal`` as it is, instead of waiting. Another writer waits for it in its
    own busy handler, as for any checkpoint. Never raises: a checkpoint that
    fails leaves the file as SQLite's own would (committed rows stay in the
    ``-wal`` until a later one).
    """
    with store.lock, contextlib.suppress(sqlite3.Error):
        conn = store.conn
        rows = conn.total_changes  # rows this connection wrote since it opened
        written = rows - _rows_when_idle.get(store, 0)
        _rows_when_idle[store] = rows
        if written < WAL_TRUNCATE_ROWS:
            return
        try:
            size = os.stat(f"{store.real_file}-wal").st_size
        except OSError:
            return
        if size <= WAL_TRUNCATE_BYTES:
            return
        # 0: SQLite's busy handler answers "busy" at once, and the checkpoint
        # gives up the part that would wait (the truncation) instead of waiting.
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        finally:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")


def _close_gone() -> None:
    """Close the idle connections whose file was deleted, replaced or moved away."""
    with _shared_lock:
        gone = [
            k
            for k, e in _shared.items()
            if e.users == 0 and not _same_file(e.store, e.store.real_file)
        ]
        closing = [_shared.pop(k).store for k in gone]
    for store in closing:
        with contextlib.suppress(sqlite3.Error):
            store.close()


def close_idle_stores() -> None:
    """Close every shared connection no one is using (at exit: SQLite checkpoints the WAL)."""
    with _shared_lock:
        idle = [k for k, e in _shared.items() if e.users == 0]
        closing = [_shared.pop(k).store for k in idle]
    closing += _abandoned
    _abandoned.clear()
    for store in closing:
        with contextlib.suppress(sqlite3.Error):
            store.close()


def _forget_after_fork() -> None:
    # A forked child must not use its parent's connections, and the parent's
    # threads may hold the lock. The idle ones are closed (safely: connections.py)
    # before the child opens their file; the others are in use by the parent's
    # objects (its open journals), and their file is refused.
    global _shared_lock
    inherit_idle([e.store for e in _shared.values() if e.users == 0])
    _shared.clear()
    _retired.clear()
    _abandoned.clear()
    _shared_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)

atexit.register(close_idle_stores)
