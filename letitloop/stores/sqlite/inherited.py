"""A forked child's copies of its parent's SQLite connections to one file: closed safely, or
refused.

A forked child inherits the parent's open connections, as copies in its
memory, and with them SQLite's record of the locks the parent holds on each
file: a connection the child opened to such a file would join that record
and take no lock of its own (its commits could be lost when the parent closes
the file). So, in the child, the first ``connections.opening`` of such a file
first closes the inherited connections no one uses (the idle shared ones of
``stores.py``, ``connections.inherit_idle``), under a lock that keeps their
close from checkpointing or deleting anything (:func:`settle`); SQLite then
forgets its record and the child's own connection takes real locks. An
inherited connection still in use by an object of the parent's (an open
journal, a LangGraph saver, a reader) is never closed: the open is refused
(:class:`~letitloop.errors.ForkedJournalError`).

``connections.py`` keeps the record of the connections open at the fork and
imports this module only in a forked child, at its first open of such a file.
"""

from __future__ import annotations

import contextlib
import os
import struct
import time

from ...errors import ForkedJournalError
from .connections import WAY_OUT, Inherited

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no fork either
    fcntl = None  # type: ignore[assignment]

#: SQLite's SHARED lock on a database file (its unix VFS): a read lock on the
#: 510 bytes after its PENDING byte (1 GiB) and RESERVED byte.
_SHARED_FIRST = 0x40000000 + 2
_SHARED_SIZE = 510
#: How long a child waits for another process's EXCLUSIVE lock on the file
#: (held for a last close's checkpoint: moments) before it refuses the open.
_SHARED_WAIT = 10.0


def settle(entries: list[Inherited], identity: tuple[int, int], real: str) -> bool:
    """Close the inherited connections ``entries`` to the file ``identity`` at ``real``, or
    refuse; False: the path reaches another file now, nothing was closed.

    Raises ForkedJournalError while one of them is in use by an object of
    the parent's, or when they cannot be closed safely here.
    """
    busy = [e for e in entries if not e.idle]
    if busy or fcntl is None or not hasattr(fcntl, "F_OFD_SETLK"):
        why = (
            "and a connection of the parent's to it is still in use there (a journal, a "
            "LangGraph saver or a reader the parent had not closed)"
            if busy
            else "and its connection cannot be closed safely on this system"
        )
        raise _refusal(real, why)
    return _close_inherited(entries, identity, real)


def _close_inherited(entries: list[Inherited], identity: tuple[int, int], real: str) -> bool:
    """Close idle inherited connections to the file at ``real`` without touching the file.

    SQLite's close of a file's last connection in a process tries for an
    EXCLUSIVE lock, and on getting it checkpoints the WAL and deletes the
    ``-wal`` and ``-shm`` files. The child's copies believe they are that
    last connection; while the parent holds the file open its SHARED lock
    stops them, but the parent may have closed it since, and the copies'
    view of the ``-wal`` may be stale. So the child holds a SHARED lock of
    its own for the close, as an open file description lock (Linux's
    ``F_OFD_SETLK``), which conflicts with the process's own POSIX locks
    too: the copies' EXCLUSIVE lock always fails, and their close only
    unmaps and closes descriptors. The descriptor that held it is closed
    after them; the child holds no other lock on the file then. False: the
    path reaches another file now (replaced meanwhile), nothing was closed.
    """
    try:
        fd = os.open(real, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _refusal(
            real, f"and its connection could not be closed safely here ({exc})"
        ) from None
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != identity:
            return False
        # struct flock: l_type, l_whence, l_start, l_len, l_pid (0 for an OFD lock).
        shared = struct.pack("hhqqi4x", fcntl.F_RDLCK, os.SEEK_SET, _SHARED_FIRST, _SHARED_SIZE, 0)
        deadline = time.monotonic() + _SHARED_WAIT
        while True:
            try:
                fcntl.fcntl(fd, fcntl.F_OFD_SETLK, shared)
                break
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise _refusal(
                        real, f"and its connection could not be closed safely here ({exc})"
                    ) from None
                time.sleep(0.005)
        for entry in entries:
            with contextlib.suppress(Exception):
                entry.obj.close()
        return True
    finally:
        os.close(fd)  # releases the OFD lock


def _refusal(real: str, why: str) -> ForkedJournalError:
    pid = os.getpid()
    parent = os.getppid()
    return ForkedJournalError(
        f"journal file {real}: this process (pid {pid}) was forked from process {parent} "
        f"while that process had the file open, {why}; this process inherited SQLite's "
        f"state of the file, whose locks are the parent's, so a connection opened here "
        f"would hold none (its commits could be lost when the parent closes the file); "
        f"nothing was opened; {WAY_OUT}",
        opener_pid=parent,
        pid=pid,
    )
