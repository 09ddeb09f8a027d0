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

A forked child also inherits the parent's open connections, and with them
SQLite's record of the locks the parent holds on each file: its first
:func:`opening` of such a file first closes the inherited connections no one
uses (:func:`inherit_idle`: the idle shared ones of ``stores.py``), or refuses
while one is in use (``inherited.py``, loaded only then).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
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

#: Every object of this process with an open connection that may hold locks
#: (:func:`track`), and the (device, inode) of its file.
_connected: weakref.WeakKeyDictionary[Any, tuple[int, int]] = weakref.WeakKeyDictionary()


class Inherited:
    """A connection of the parent's, open at the fork, as this forked child has it."""

    __slots__ = ("idle", "obj")

    def __init__(self, obj: Any) -> None:
        self.obj = obj
        #: No user of the parent's had it (inherit_idle): the child may close it.
        self.idle = False


#: In a forked child: the parent's connections open at the fork, by file, until
#: the child's first :func:`opening` of that file closes them (or refuses).
#: Held strongly: a garbage collection must not close one at a random moment,
#: without the guard of ``inherited.settle``.
_inherited: dict[tuple[int, int], list[Inherited]] = {}

#: What a forked child refused a file should do instead (docs/processes.md shows it).
WAY_OUT = (
    "open a Journal in the worker of a 'spawn' or 'forkserver' pool "
    "(multiprocessing.get_context('spawn').Pool()), or in a process that is not a fork "
    "of one holding this journal file"
)


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
            identity = (st.st_dev, st.st_ino)
            key = ("file", identity)
            held.append((key, _take(key)))
            if _inherited:  # only in a forked child of a process that had connections
                _settle_inherited(identity, real)
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


def track(obj: Any, identity: tuple[int, int], *, writable: bool) -> Callable[[], object]:
    """:func:`register` the connection ``obj`` holds; undone once, by calling the result or
    when ``obj`` is garbage.

    ``obj`` (a ``Store``) has a ``close()``: a forked child closes it before
    it opens its own connection to the file, if ``obj`` is idle (see
    :func:`inherit_idle`).
    """
    register(identity, writable=writable)
    with _guard:
        _connected[obj] = identity
    done = weakref.finalize(obj, unregister, identity, writable, os.getpid())
    ref = weakref.ref(obj)

    def untrack() -> object:
        held = ref()
        if held is not None:
            with _guard:
                _connected.pop(held, None)
        return done()

    return untrack


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
        st = os.stat(path)
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
#: Held to add a store to ``_stores``, and by a ``fork`` from the moment it
#: lists them until the fork is done: a store made meanwhile (its thread would
#: take its new lock and open its connection while the fork holds the others')
#: waits for the fork instead. :func:`guard_fork` holds it for moments (with
#: ``_guard``), never while it waits for anything else.
_joining = threading.Lock()
#: The store locks a ``fork`` under way holds.
_held_for_fork: list[Any] = []
#: The thread whose ``fork`` holds the gate (from :func:`_before_fork` until it is done).
_forking: int | None = None
#: Connections of stores that became garbage unclosed in that thread while its fork
#: held the gate (:func:`close_unclosed`): closed when the fork is done.
_unclosed: list[Any] = []
#: In a forked child: those of the parent's, never closed here (see ``_inherited``).
_unclosed_of_parent: list[Any] = []
_hooked = False


def guard_fork(store: Any) -> None:
    """Make ``fork`` wait while ``store`` (anything with a ``lock``) is in an SQLite call.

    SQLite has no fork handlers: a thread inside SQLite holds its process-wide
    mutexes (its page cache's, its allocator's, its list of open files) for
    moments, and a child forked at such a moment inherits them locked: its
    first SQLite call never returns. Every SQLite call of a store runs under
    its lock, so a ``fork`` takes every store's lock first (and releases them
    in both processes after). Call it before the store's first SQLite call:
    while a fork is starting it waits until the fork is done.
    """
    global _hooked
    with _joining, _guard:
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


def close_unclosed(conn: Any) -> None:
    """Close the connection of a store that became garbage without ``close()``: a ``fork``
    waits for it, as for any SQLite call outside a store's lock.

    A store's finalizer calls it, in whichever thread the garbage collection
    happens; a collection inside this thread's own fork (another module's fork
    hook, while the fork holds the gate) leaves it to the end of the fork.
    """
    if _forking == threading.get_ident():
        _unclosed.append(conn)
        return
    with sqlite_entry():
        conn.close()


def _before_fork() -> None:
    # Every lock at once, or none: a thread that holds one store's lock and
    # waits for another's must not meet a fork holding that one. The list of
    # stores is closed (``_joining``) from the moment it is read until the fork
    # is done: a store that joined after it was read would be in SQLite (its
    # connection opening under its own lock) while the fork held every other.
    global _forking
    while True:
        _joining.acquire()
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
                    _forking = threading.get_ident()
                    return
                _gate.cond.release()
        for lock in reversed(held):
            lock.release()
        _joining.release()  # a thread in a store may be waiting to make another
        time.sleep(0.0002)


def _after_fork_in_parent() -> None:
    global _forking
    _forking = None
    while _unclosed:  # still under every lock: no other thread is in SQLite
        with contextlib.suppress(Exception):
            _unclosed.pop().close()
    _gate.cond.release()
    for lock in reversed(_held_for_fork):
        lock.release()
    _held_for_fork.clear()
    _joining.release()


def inherit_idle(objs: list[Any]) -> None:
    """In a forked child: these inherited connections had no user in the parent at the fork.

    They are closed before this process opens its own connection to their
    file. (``stores.py`` says which of its shared connections were idle; any
    other inherited connection is taken to be in use.)
    """
    mine = {id(obj) for obj in objs}
    with _guard:
        for entries in _inherited.values():
            for entry in entries:
                if id(entry.obj) in mine:
                    entry.idle = True


def _settle_inherited(identity: tuple[int, int], real: str) -> None:
    """Under the file's lock, in a forked child: close its inherited connections, or refuse.

    Raises ForkedJournalError while one of them is in use by an object of
    the parent's, or when they cannot be closed safely here (``inherited.py``).
    """
    with _guard:
        entries = _inherited.get(identity)
    if not entries:
        return
    from .inherited import settle  # only in a forked child, at its first open of such a file

    if settle(entries, identity, real):
        with _guard:
            _inherited.pop(identity, None)


def _forget_after_fork() -> None:
    # The parent's threads may hold these locks, and its connections' locks on
    # the files are not the child's: the child starts with none. Its open
    # connections are the parent's too: kept aside until the child opens the
    # file (_settle_inherited).
    global _guard, _gate, _joining, _forking
    for lock in reversed(_held_for_fork):
        lock.release()  # held by this very thread, which the child continues
    _held_for_fork.clear()
    _forking = None
    _unclosed_of_parent.extend(_unclosed)
    _unclosed.clear()
    _guard = threading.Lock()
    _gate = _ForkGate()
    _joining = threading.Lock()
    _files.clear()
    for obj, identity in list(_connected.items()):
        _inherited.setdefault(identity, []).append(Inherited(obj))
    _connected.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
