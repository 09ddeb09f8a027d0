"""This process's SQLite connections to each journal file: the lock they open under, which are live.

POSIX record locks belong to the process, and closing *any* descriptor of a
file drops all of them (https://sqlite.org/howtocorrupt.html, section 2.2).
SQLite's unix VFS keeps every connection of the process to one file on one
record of that file, and never closes a descriptor while a lock is held; our
own code has to keep that rule too. So:

- a writable or read-only connection of ours to a file is opened under the
  file's lock (:func:`opening`): the read-only probe before a writable
  connection and the connection itself, together. SQLite shares one ``-shm``
  mapping per file per process, and the probe maps it read-only
  (``readonly_shm=1``): a writable connection opened by another thread while
  that mapping is current would stay read-only;
- every connection that may hold locks on the file is counted while it is
  open (:func:`register`, :func:`live`): the probe reads the ``-wal`` and
  ``-shm`` headers with plain ``open()`` only when no connection of ours is
  live, and a writable open of a file a writable connection of ours already
  has open needs no probe at all (:func:`checked`).

The lock is taken by the file's real path and, when the file exists, by its
(device, inode), so two paths to one file (a symlink, a second mount of its
folder) share it. Entries live while someone holds or waits for a lock, or
while a connection is open; a forked child starts with none (the parent's
threads may hold the locks, and the parent's locks on the file are not the
child's).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

_Key = tuple[str, object]


class _File:
    __slots__ = ("live", "lock", "users", "writable")

    def __init__(self) -> None:
        #: Reentrant: a caller that holds it (inspection's probe) may open a Store.
        self.lock = threading.RLock()
        #: Threads holding or waiting for ``lock``.
        self.users = 0
        #: Open connections of ours that may hold locks on the file, and how
        #: many of them are writable (only by the (device, inode) key).
        self.live = 0
        self.writable = 0


_files: dict[_Key, _File] = {}
_guard = threading.Lock()


def _take(key: _Key) -> _File:
    with _guard:
        entry = _files.get(key)
        if entry is None:
            entry = _files[key] = _File()
        entry.users += 1
    entry.lock.acquire()
    return entry


def _give_back(key: _Key, entry: _File) -> None:
    entry.lock.release()
    with _guard:
        entry.users -= 1
        if entry.users == 0 and entry.live == 0 and _files.get(key) is entry:
            del _files[key]


@contextlib.contextmanager
def opening(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold this process's lock of the file at ``path`` while a connection to it is opened.

    By the real path first (the file may not exist yet), then, if the file
    exists, by its (device, inode). Reentrant within one thread.
    """
    real = os.path.realpath(path)
    held: list[tuple[_Key, _File]] = []
    try:
        key: _Key = ("path", real)
        held.append((key, _take(key)))
        try:
            st = os.stat(real)
        except OSError:
            pass
        else:
            key = ("file", (st.st_dev, st.st_ino))
            held.append((key, _take(key)))
        yield
    finally:
        for key, entry in reversed(held):
            _give_back(key, entry)


def register(identity: tuple[int, int], *, writable: bool) -> None:
    """Count an open connection of ours to the file ``identity`` (until :func:`unregister`)."""
    key: _Key = ("file", identity)
    with _guard:
        entry = _files.get(key)
        if entry is None:
            entry = _files[key] = _File()
        entry.live += 1
        entry.writable += writable


def unregister(identity: tuple[int, int], writable: bool, pid: int) -> None:
    """The connection counted by :func:`register` (in process ``pid``) is closed."""
    if pid != os.getpid():
        return  # counted by the parent: a forked child started without it
    key: _Key = ("file", identity)
    with _guard:
        entry = _files.get(key)
        if entry is None:
            return
        entry.live -= 1
        entry.writable -= writable
        if entry.users == 0 and entry.live == 0:
            del _files[key]


def track(obj: object, identity: tuple[int, int], *, writable: bool) -> Callable[[], object]:
    """:func:`register` the connection ``obj`` holds; undone once, by calling the result or
    when ``obj`` is garbage."""
    register(identity, writable=writable)
    return weakref.finalize(obj, unregister, identity, writable, os.getpid())


def live(path: str | os.PathLike[str]) -> bool:
    """Whether a connection of ours to the file at ``path`` is open (False: no such file)."""
    entry = _entry(path)
    return entry is not None and entry.live > 0


def checked(path: str | os.PathLike[str]) -> bool:
    """Whether a writable connection of ours to the file at ``path`` is open: it was checked."""
    entry = _entry(path)
    return entry is not None and entry.writable > 0


def _entry(path: str | os.PathLike[str]) -> _File | None:
    try:
        st = os.stat(Path(path))
    except OSError:
        return None
    with _guard:
        return _files.get(("file", (st.st_dev, st.st_ino)))


class _ForkGate:
    """Counts the SQLite calls under way outside any store's lock (:func:`sqlite_entry`)."""

    def __init__(self) -> None:
        self.cond = threading.Condition(threading.Lock())
        self.inside = 0

    def enter(self) -> None:
        with self.cond:
            self.inside += 1

    def leave(self) -> None:
        with self.cond:
            self.inside -= 1


_gate = _ForkGate()

#: Every open store of this process (its ``lock`` is held around each of its
#: SQLite calls): a ``fork`` waits for all of them (:func:`_before_fork`).
_stores: weakref.WeakSet[Any] = weakref.WeakSet()
#: The store locks a ``fork`` under way holds.
_held_for_fork: list[Any] = []
_hooked = False


def guard_fork(store: Any) -> None:
    """Make ``fork`` wait while ``store`` (anything with a ``lock``) is in an SQLite call.

    SQLite has no fork handlers: a thread inside SQLite holds its process-wide
    mutexes (its page cache's, its allocator's, its list of open files) for
    moments, and a child forked at such a moment inherits them locked: its
    first SQLite call never returns. Every SQLite call of a store runs under
    its lock, so a ``fork`` takes every store's lock first (and releases them
    in both processes after).
    """
    global _hooked
    with _guard:
        _stores.add(store)
        if not _hooked and hasattr(os, "register_at_fork"):
            # Registered at the first store, after every module's own hooks:
            # the last registered runs first before a fork, so no other hook
            # holds a lock (locks.py's) that a thread in a store waits for.
            os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent)
            _hooked = True


@contextlib.contextmanager
def sqlite_entry() -> Iterator[None]:
    """Around SQLite calls made outside any store's lock: a ``fork`` waits for them."""
    gate = _gate
    gate.enter()
    try:
        yield
    finally:
        gate.leave()


def _before_fork() -> None:
    # Every lock at once, or none: a thread that holds one store's lock and
    # waits for another's must not meet a fork holding that one.
    while True:
        with _guard:
            stores = list(_stores)
        held = []
        for store in stores:
            if not store.lock.acquire(blocking=False):
                break
            held.append(store.lock)
        else:
            if _gate.cond.acquire(blocking=False):
                if _gate.inside == 0:
                    _held_for_fork[:] = held
                    return
                _gate.cond.release()
        for lock in reversed(held):
            lock.release()
        time.sleep(0.0002)


def _after_fork_in_parent() -> None:
    _gate.cond.release()
    for lock in reversed(_held_for_fork):
        lock.release()
    _held_for_fork.clear()


def _forget_after_fork() -> None:
    # The parent's threads may hold these locks, and its connections' locks on
    # the files are not the child's: the child starts with none.
    global _guard, _gate
    for lock in reversed(_held_for_fork):
        lock.release()  # held by this very thread, which the child continues
    _held_for_fork.clear()
    _guard = threading.Lock()
    _gate = _ForkGate()
    _files.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
