"""One connection per journal file per process, kept across runs (:func:`open_store`).

Idle connections are reused while their file is unchanged, closed at exit
(SQLite checkpoints the WAL then), and forgotten by a forked child.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sqlite3
import threading
from pathlib import Path

from .files import file_identity, resolve_path
from .store import Durability, Store

#: Idle connections kept open per process: a program that opens runs of a few
#: journal files in turn reuses each file's connection instead of paying a new
#: one per run (connect, probe, pragmas, and on close a checkpoint that also
#: deletes the -wal file). Beyond this many idle ones, the oldest is closed.
MAX_IDLE_STORES = 8


class _Shared:
    __slots__ = ("stamp", "store", "users")

    def __init__(self, store: Store) -> None:
        self.store = store
        self.users = 0
        #: (mtime, size) of the file and of its -wal when the last user let go;
        #: None while in use.
        self.stamp: tuple[int, int, int, int] | None = None


_shared: dict[tuple[str, str], _Shared] = {}
_shared_lock = threading.Lock()


def _stamp(path: Path) -> tuple[int, int, int, int] | None:
    """(mtime, size) of the file and its -wal: anyone's write since changes one of them."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    try:
        wal = os.stat(f"{path}-wal")
    except OSError:
        return (st.st_mtime_ns, st.st_size, 0, -1)
    return (st.st_mtime_ns, st.st_size, wal.st_mtime_ns, wal.st_size)


#: Connections to files that changed behind SQLite's back while they were
#: idle: never closed before exit (closing the last connection to a file
#: checkpoints its WAL into it, which must not happen to a file that was
#: replaced, nor to one just refused as newer or foreign).
_abandoned: list[Store] = []


def open_store(
    path: str | os.PathLike[str] | None = None, *, durability: Durability = "process"
) -> Store:
    """A connection to the journal at ``path`` for one user, shared in this process.

    Reuses this process's connection to the same file and durability when it
    is still valid: the same file (device and inode); if no one was using it,
    unchanged since its last user let go (mtime and size of the file and its
    -wal: a file another process wrote, or a copy rewrote, gets a fresh
    connection, so nothing read before is trusted); and
    the same schema, or one this version still accepts (a newer letitloop's
    migration is refused, as on a first open). Give it back with
    :func:`close_store`. Raises what ``Store()`` raises.
    """
    resolved = resolve_path(path)
    key = (os.path.realpath(resolved), durability)
    stale: Store | None = None
    with _shared_lock:
        entry = _shared.get(key)
        if entry is not None:
            store = entry.store
            try:
                same = file_identity(resolved) == store.identity and (
                    entry.users > 0 or (entry.stamp is not None and entry.stamp == _stamp(resolved))
                )
            except OSError:
                same = False
            if same:
                entry.users += 1
                entry.stamp = None
            elif entry.users == 0:
                del _shared[key]
                stale = store
    if entry is not None and stale is None:
        try:
            store.recheck_schema()
        except BaseException:
            close_store(store)
            raise
        return store
    try:
        store = Store(resolved, durability=durability)
    except BaseException:
        if stale is not None:
            _abandoned.append(stale)
        raise
    if stale is not None:
        stale.close()  # not the last connection now: no checkpoint into the file
    with _shared_lock:
        entry = _shared.get(key)
        if entry is not None:  # another thread made one meanwhile: keep ours private
            return store
        entry = _shared[key] = _Shared(store)
        entry.users += 1
    store.shared = True
    return store


def close_store(store: Store) -> None:
    """Give back a connection from :func:`open_store` (closed if it was not shared)."""
    if not store.shared:
        store.close()
        return
    key = (str(store.real_path), store.durability)
    with _shared_lock:
        entry = _shared.get(key)
        if entry is None or entry.store is not store:
            store.close()
            return
        entry.users -= 1
        if entry.users > 0:
            return
        entry.stamp = _stamp(store.path)
        idle = [k for k, e in _shared.items() if e.users == 0]
        closing = [_shared.pop(k).store for k in idle[: max(0, len(idle) - MAX_IDLE_STORES)]]
    for old in closing:
        old.close()


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
    # A forked child must not use (nor close) its parent's connections.
    global _shared_lock
    _shared.clear()
    _abandoned.clear()
    _shared_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)

atexit.register(close_idle_stores)
