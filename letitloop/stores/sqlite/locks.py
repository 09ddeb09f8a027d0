"""Every lock file letitloop takes beside a journal: its name, taking, waiting, releasing, removing.

A lock is an OS file lock (``flock()``, taken by :class:`FlockLock` itself on
POSIX; filelock's ``FileLock`` on Windows) on a small file in
``<journal>-locks/`` beside the real journal file. The kernel drops it with
the process that held it, so a holder killed by SIGKILL releases at once.

- **Named by the file, not the path.** The folder sits beside the journal
  file with symlinks resolved, and a lock file's name depends only on what
  it locks (``run-<hash>.lock``, ``marker-<hash>.lock``), never on the path
  used to reach the journal: a symlink, or the folder mounted at a second
  path, meets the same locks.
- **Removed when released.** The holder unlinks its lock file while it still
  holds it, then lets go, so lock files do not pile up (one per run ever
  opened, one per marker name). This is safe because a waiter that opened
  the old file before the unlink notices, once it gets the lock, that the
  file it locked is no longer linked (``st_nlink``: FlockLock checks it, as
  filelock 4.1+ does), and tries again on the file now at the path, where newcomers meet it. A
  holder that died leaves its file behind; the next holder of that lock
  removes it, and ``lil gc`` removes those of forgotten runs.
- **No soft fallback.** Where the filesystem has no ``flock`` (some network
  and FUSE filesystems), filelock would fall back to a lock file that a
  SIGKILLed holder does not release; neither lock does (``FlockLock`` raises,
  ``FileLock`` is told not to), and letitloop refuses such a filesystem with
  a JournalFileError instead.
- **Readers never write.** :func:`is_held` tests a lock with a shared lock on
  a read-only descriptor and creates nothing.
- **Not kept by forked children.** A process forked while a lock is held
  does not hold it (its copy of the descriptor is closed at the fork), so a
  worker that outlives its parent does not keep the parent's run held.

Where ``fcntl`` exists (every POSIX system), :class:`FlockLock` takes these
locks itself, a few system calls that filelock's ``FileLock`` makes too;
importing filelock (about 10 ms, the first lock of every process, on the path
of every resume) is then not needed. Elsewhere (Windows) ``FileLock`` is the
lock. Both keep the rules above, and the tests run the same cases over both
(tests/test_locks.py).
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import time
from typing import TYPE_CHECKING, Any, TypeAlias

from ...errors import JournalFileError
from .files import folder_mode

try:
    import fcntl

    #: Whether this system has flock() (every POSIX one): FlockLock is then the lock.
    HAS_FLOCK = True
except ImportError:  # pragma: no cover - Windows: filelock's FileLock is the lock
    HAS_FLOCK = False

if TYPE_CHECKING:
    import filelock

#: Seconds between two tries of a lock someone else holds (filelock's default
#: poll interval: a waiter notices a release within this much).
POLL_SECONDS = 0.05

#: What a failed non-blocking flock() says when someone else holds the lock
#: (some filesystems answer EACCES).
_CONTENDED = frozenset({errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES})

#: The lock file opened for writing (it is created if missing, never followed
#: through a symlink); os.open makes it non-inheritable, so exec'd children
#: never get it.
_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)

#: Descriptors of FlockLocks, by descriptor, from their opening to their
#: closing: a forked child closes its copies (see _after_fork_in_child).
_open_fds: dict[int, FlockLock] = {}
#: Held while a descriptor is opened and recorded, and across every fork
#: (os.register_at_fork below): no child is forked between the two.
_fork_guard = threading.Lock()


class FlockLock:
    """An exclusive ``flock()`` on one lock file, taken and released by any thread.

    The POSIX lock of :func:`new_lock`: what filelock's ``FileLock`` does
    here (open the file, try ``flock`` without blocking, poll until the
    timeout; a file unlinked while this waited is let go and the file now at
    the path tried instead), without importing filelock. Not reentrant: one
    instance is one holder.
    """

    __slots__ = ("_fd", "lock_file")

    #: Never a soft lock (a file whose existence is the lock): a holder killed
    #: by SIGKILL would never release one. The attribute is filelock's name.
    fallback_to_soft = False

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.lock_file = os.fspath(path)
        self._fd: int | None = None

    @property
    def is_locked(self) -> bool:
        return self._fd is not None

    def acquire(self, timeout: float) -> bool:
        """Take the lock within ``timeout`` seconds (-1: wait forever); False if it timed out.

        Raises FileNotFoundError when the lock folder is missing, OSError
        when the file cannot be opened or locked (no flock: ENOSYS, ENOLCK).
        """
        if self._fd is not None:
            return True
        deadline = None if timeout < 0 else time.monotonic() + timeout
        while True:
            with _fork_guard:
                fd = os.open(self.lock_file, _OPEN_FLAGS, 0o666)
                _open_fds[fd] = self
            held = False
            try:
                while not _try_flock(fd):
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        return False
                    time.sleep(POLL_SECONDS if left is None else min(POLL_SECONDS, left))
                # Its holder unlinked the file while this waited (every release
                # does): newcomers meet the file now at the path, so that one is
                # the lock. Holding this one would let two holders in at once.
                if os.fstat(fd).st_nlink == 0:
                    continue
                held = True
                self._fd = fd
                return True
            finally:
                if not held:
                    _close(fd)

    def release(self) -> None:
        """Let go of the lock (closing its descriptor releases it); nothing if not held."""
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                _close(fd)


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in _CONTENDED:
            return False
        raise
    return True


def _close(fd: int) -> None:
    with _fork_guard:  # no child forked with a copy of it
        _open_fds.pop(fd, None)
        os.close(fd)


def _after_fork_in_child() -> None:
    # The child's copies of the descriptors share their locks with the parent's:
    # kept open, they would hold the parent's runs after it died. Closing them
    # releases nothing of the parent's (a flock lives while any copy is open).
    for fd, lock in list(_open_fds.items()):
        lock._fd = None
        with contextlib.suppress(OSError):
            os.close(fd)
    _open_fds.clear()
    _fork_guard.release()


if HAS_FLOCK and hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_fork_guard.acquire,
        after_in_parent=_fork_guard.release,
        after_in_child=_after_fork_in_child,
    )

#: A lock of :func:`new_lock`: a FlockLock, or filelock's FileLock where there is no flock.
Lock: TypeAlias = "FlockLock | filelock.BaseFileLock"


_FILELOCK: Any = None


def _filelock() -> Any:
    """The filelock module, imported by the first lock (~10 ms), not by ``import letitloop``.

    A first journal opened from deep in a call stack (a few frames from the
    recursion limit) could not import it there: it is then imported on a
    fresh thread, whose stack is empty.
    """
    global _FILELOCK
    if _FILELOCK is None:
        try:
            import filelock
        except RecursionError:
            import threading

            got: list[Any] = []
            loader = threading.Thread(target=lambda: got.append(__import__("filelock")))
            loader.start()
            loader.join()
            (filelock,) = got
        _FILELOCK = filelock
    return _FILELOCK


def new_lock(path: str | os.PathLike[str]) -> Lock:
    """A lock on ``path`` (not taken yet); see the module docstring for its rules."""
    if HAS_FLOCK:
        return FlockLock(path)
    return filelock_lock(path)  # pragma: no cover - Windows


def filelock_lock(path: str | os.PathLike[str]) -> filelock.BaseFileLock:
    """filelock's lock on ``path``: :func:`new_lock`'s where there is no flock (and in tests)."""
    # thread_local=False: an `async with` journal or marker takes its lock in a
    # worker thread and releases it on the event loop's thread.
    lock: filelock.BaseFileLock = _filelock().FileLock(
        path, thread_local=False, fallback_to_soft=False
    )
    return lock


def acquire(lock: Lock, timeout: float) -> bool:
    """Take ``lock`` within ``timeout`` seconds (-1: wait forever); False if it timed out.

    Creates the lock folder when needed. Raises JournalFileError when the
    folder or file cannot be created or locked (read-only, full, no flock).
    """
    path = os.fspath(lock.lock_file)
    try:
        if isinstance(lock, FlockLock):
            return lock.acquire(timeout)
        return _filelock_acquire(lock, timeout)
    except FileNotFoundError:
        _make_folder(os.path.dirname(path))
        return acquire(lock, timeout)
    except OSError as exc:
        raise lock_error(path, exc) from None


def _filelock_acquire(lock: filelock.BaseFileLock, timeout: float) -> bool:
    # Timeout is an OSError (TimeoutError): told apart before acquire()'s handlers.
    try:
        lock.acquire(timeout=timeout)
    except _filelock().Timeout:
        return False
    return True


def release(lock: Lock, *, remove: bool = True) -> None:
    """Let go of ``lock``, first unlinking its file (while still held) when ``remove``.

    A lock not held (a forked child's copy of its parent's) leaves the file alone.
    """
    if remove and lock.is_locked:
        # A read-only folder keeps the file, harmlessly: the next holder reuses it.
        with contextlib.suppress(OSError):
            os.unlink(lock.lock_file)
    if isinstance(lock, FlockLock):
        lock.release()
    else:
        lock.release(force=True)


def is_held(path: str | os.PathLike[str]) -> bool:
    """True when a live process holds the lock at ``path``; creates and writes nothing."""
    try:
        import fcntl
    except ImportError:  # no flock here (Windows): try to take the lock instead
        probe = new_lock(path)
        if not acquire(probe, 0):
            return True
        release(probe, remove=False)
        return False
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC)
    except FileNotFoundError:
        return False  # nobody holds a lock without its file
    except OSError as exc:
        raise lock_error(path, exc) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return True
        raise lock_error(path, exc) from None
    finally:
        os.close(fd)  # also drops the shared lock, if we got it
    return False


def _make_folder(folder: str) -> None:
    try:
        os.mkdir(folder, folder_mode())  # owner-only, as the journal file
    except FileExistsError as exc:
        if not os.path.isdir(folder):
            raise lock_error(folder, exc) from None
    except OSError as exc:
        raise lock_error(folder, exc) from None


def lock_error(path: str | os.PathLike[str], exc: OSError) -> JournalFileError:
    """A lock file or folder that cannot be used, explained."""
    what = f"{path}: cannot use the lock file beside the journal ({exc.strerror or exc})"
    if exc.errno == errno.ENOSPC:
        hint = "the disk (or its inodes) is full; free space and run again"
    elif exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        hint = (
            f"{os.path.dirname(path)} must be writable by this process (it holds one small "
            f"lock file per open run and marker); check its permissions and mount, or pass another "
            f"path= / LETITLOOP_DB"
        )
    elif exc.errno in (errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOLCK):
        hint = (
            f"its filesystem ({filesystem_of(path)}) does not support flock(), so a holder "
            f"that dies could not release its run; keep the journal on a local filesystem "
            f"(network and some FUSE filesystems are not supported)"
        )
    else:
        hint = "check the folder beside the journal"
    return JournalFileError(f"{what}; {hint}; nothing was recorded by this call", path=str(path))


def sweep(folder: str | os.PathLike[str]) -> int:
    """Remove the lock files in ``folder`` that no live process holds; returns how many.

    Each file is taken without waiting and unlinked while held (as a release
    does), so a file someone holds, or takes meanwhile, is never removed from
    under its holder. For ``lil gc``: files left by holders that died.
    """
    removed = 0
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return 0
    except OSError as exc:
        raise lock_error(folder, exc) from None
    for name in names:
        if not name.endswith(".lock"):
            continue
        lock = new_lock(os.path.join(folder, name))
        try:
            if not acquire(lock, 0):
                continue
        except JournalFileError:
            continue  # not a usable lock file (a folder, a link): leave it alone
        release(lock)
        removed += 1
    return removed


def filesystem_of(path: str | os.PathLike[str]) -> str:
    """The type and mount point of the filesystem holding ``path`` (Linux), for messages."""
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as f:
            mounts = [line.split()[1:3] for line in f if len(line.split()) >= 3]
    except OSError:
        return "unknown"
    real = os.path.realpath(path)
    best = ("", "unknown")
    for point, kind in mounts:
        point = point.replace("\\040", " ")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) > len(best[0]):
            best = (point, kind)
    return f"{best[1]} at {best[0]}" if best[0] else "unknown"
