"""A journal belongs to the process that opened it: what a forked child gets of its parent's.

A child forked while journals are open (``os.fork``, a ``multiprocessing``
pool or process started with the ``fork`` method, the default on Linux
before Python 3.14) inherits them in memory: the ``Journal`` objects, the
current journal of the forking thread, and their SQLite connections. None of
it is the child's. The run's lock is held by the parent (its descriptor is
closed in the child: ``locks.py``), and SQLite forbids using a connection
across ``fork``: its locks stay with the parent, so two processes would
write one run as if each held it alone (a step's row overwritten by the
other's, every time).

So, in the child, at the fork (``os.register_at_fork``: opening.py's hook
calls :func:`disown`), every journal open in the parent is disowned: its
store is set to None, so the check every step already makes
(``steps.require_open``) finds it and raises
:class:`ForkedJournalError` at no cost to a step in the parent; the same
for async steps, markers, sleeps, waits, ``set_result``, opening it again and
closing it. The child never writes, checkpoints or closes through the
parent's connection (the connections are kept, unused, for the child's
life), never releases the parent's run lock or marker locks, and never marks
the parent's run ended. The parent is not touched: a child that simply exits
changes nothing of its run.

A Journal the child opens on a file that was open in its parent at the fork
is refused too: SQLite keeps one set of locks per file per process, and the
child's copy of the parent's says they are held where the kernel says the
child holds none, so a connection the child opens would hold no lock (its
commits can be lost when the parent closes the file). Another journal file
is fine. A file the parent had used and closed before the fork may still
have an idle connection of the parent's: the child closes its copy before it
opens the file (``connections.py``). The way to use a pool is ``spawn`` or
``forkserver``, whose workers start without the parent's memory and open
their own Journal (docs/processes.md).

This module is the one owner of ``Journal._opener`` (its ``pid`` and
``disowned``): written by the thread that opens the journal
(:func:`opened`) and, in a forked child, by the at-fork hook while the child
has one thread; read by any thread. It also gives the rest of the package
the journal's store and storage (:func:`require_open`,
:func:`require_storage`): the one check that tells a closed journal from a
forked child's copy, and raises the error that fits.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

from ..errors import ForkedJournalError, LetItLoopError, UnknownStoreError
from ..stores.sqlite.connections import WAY_OUT

if TYPE_CHECKING:
    from ..stores.storage import Storage
    from .journal import Journal

#: What the parent had open when this process was forked from it (empty in a
#: process that was not forked, or whose parent had no journal open): the
#: disowned journals with their store and storage, kept so that the child
#: never closes a connection its parent uses.
_inherited: list[tuple[Journal, Any, Any]] = []
#: The identity (SQLite: device, inode) of every journal file open in the parent at the fork.
inherited_files: set[Hashable] = set()


class Opener:
    """The process that opened a journal (``pid``; 0 before its first open), and whether
    this process is a child forked from it (``disowned``), where the journal refuses
    everything. Written by this module only."""

    __slots__ = ("disowned", "pid")

    def __init__(self) -> None:
        self.pid = 0
        self.disowned = False


def error(j: Journal, what: str) -> ForkedJournalError:
    """The refusal of ``what`` (``"step()"``, ``"closing it"``) on ``j`` in a forked child."""
    pid = os.getpid()
    run = f"run {j.run_name!r}, {j.run_id}" if j.run_name is not None else f"run {j.run_id}"
    return ForkedJournalError(
        f"journal of goal {j.goal!r} ({run}) was opened by process "
        f"{j._opener.pid}, and this is process {pid}, a child forked from it (os.fork, "
        f"or a multiprocessing pool started with 'fork'): a process cannot write a run "
        f"through a journal it did not open (the run's lock and the SQLite connection are "
        f"its parent's), so {what} was refused and nothing was recorded; {WAY_OUT}",
        goal=j.goal,
        run_id=j.run_id,
        opener_pid=j._opener.pid,
        pid=pid,
    )


def opened(j: Journal) -> None:
    """``j`` was opened by this process: it is this process's, until a fork."""
    j._opener.pid = os.getpid()


def refusal(j: Journal, what: str = "this call (a step, marker, sleep or wait)") -> LetItLoopError:
    """The error of ``what`` on a journal that is not open here: forked, or closed."""
    if j._opener.disowned:
        return error(j, what)
    return LetItLoopError(
        f"journal of goal {j.goal!r} is not open; use it as "
        f"'with Journal({j.goal!r}) as j:' or call j.open() first"
    )


def require_open(j: Journal) -> Storage:
    """``j``'s store; LetItLoopError when the journal is not open.

    ForkedJournalError in a child forked from the process that opened ``j``:
    the child's copy of ``j`` has no store.
    """
    store = j.store
    if store is None:
        raise refusal(j)
    return store


def require_storage(j: Journal) -> Storage:
    """What ``j``'s open attempt writes through (storage.py); the errors of :func:`require_open`."""
    storage = j._opened.storage
    if storage is None:
        raise refusal(j)
    return storage


def check_open(j: Journal) -> None:
    """Refuse ``j``'s open in a forked child: ``j`` inherited, or its file open in the parent."""
    if j._opener.disowned:
        raise error(j, "opening it again")
    if not inherited_files:
        return
    # Loaded here, not at `import letitloop` (the parent that had a journal open loaded it).
    from ..stores.sqlite.files import file_identity, resolve_file

    try:
        path = resolve_file(j._path_arg)
        identity = file_identity(path)
    except UnknownStoreError:
        return  # a URL: not a file the parent had open (the store decides, schemes.py)
    except OSError:
        return  # no such file yet: it cannot have been open in the parent
    if identity in inherited_files:
        pid = os.getpid()
        parent = os.getppid()
        raise ForkedJournalError(
            f"journal file {path}: this process (pid {pid}) was forked from process "
            f"{parent} while that process had the file open, so it inherited SQLite's state "
            f"of the file, whose locks are the parent's: a connection opened here would hold "
            f"none, and its commits could be lost when the parent closes the file; nothing "
            f"was opened; {WAY_OUT}",
            goal=j.goal,
            run_id=None,
            opener_pid=parent,
            pid=pid,
        )


def inherited_journal() -> Journal | None:
    """The newest journal the parent had open at the fork; None if none."""
    return _inherited[-1][0] if _inherited else None


def disown(j: Journal) -> Callable[[Any], None]:
    """In a forked child, at the fork (opening.py's hook, before it clears the attempt):
    ``j`` is its parent's, refused from now on; its store and storage are kept, so that
    the child never closes a connection its parent uses. Returns the step-row writer
    that refuses, which opening.py leaves in the attempt's."""
    _inherited.append((j, j.store, j._opened.storage))
    if j.store is not None:
        inherited_files.add(j.store.identity)
    j._opener.disowned = True

    def refuse(row: Any) -> None:
        raise error(j, f"recording step {row[1]!r}")

    return refuse
