"""Every lock file letitloop takes beside a journal: its name, taking, waiting, releasing, removing.

A lock is an OS file lock (``flock``, through filelock) on a small file in
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
  file it locked is no longer linked (filelock 4.1+ checks ``st_nlink``),
  and tries again on the file now at the path, where newcomers meet it. A
  holder that died leaves its file behind; the next holder of that lock
  removes it, and ``lil gc`` removes those of forgotten runs.
- **No soft fallback.** Where the filesystem has no ``flock`` (some network
  and FUSE filesystems), filelock would fall back to a lock file that a
  SIGKILLed holder does not release; letitloop refuses such a filesystem
  with a JournalFileError instead.
- **Readers never write.** :func:`is_held` tests a lock with a shared lock on
  a read-only descriptor and creates nothing.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import JournalFileError

if TYPE_CHECKING:
    import filelock


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


def new_lock(path: Path) -> filelock.BaseFileLock:
    """A lock on ``path`` (not taken yet); see the module docstring for its rules."""
    # thread_local=False: an `async with` journal or marker takes its lock in a
    # worker thread and releases it on the event loop's thread.
    lock: filelock.BaseFileLock = _filelock().FileLock(
        path, thread_local=False, fallback_to_soft=False
    )
    return lock


def acquire(lock: filelock.BaseFileLock, timeout: float) -> bool:
    """Take ``lock`` within ``timeout`` seconds (-1: wait forever); False if it timed out.

    Creates the lock folder when needed. Raises JournalFileError when the
    folder or file cannot be created or locked (read-only, full, no flock).
    """
    filelock = _filelock()

    path = Path(lock.lock_file)
    try:
        lock.acquire(timeout=timeout)
    except filelock.Timeout:
        return False
    except FileNotFoundError:
        _make_folder(path.parent)
        return acquire(lock, timeout)
    except OSError as exc:
        raise lock_error(path, exc) from None
    return True


def release(lock: filelock.BaseFileLock, *, remove: bool = True) -> None:
    """Let go of ``lock``, first unlinking its file (while still held) when ``remove``."""
    if remove:
        # A read-only folder keeps the file, harmlessly: the next holder reuses it.
        with contextlib.suppress(OSError):
            os.unlink(lock.lock_file)
    lock.release(force=True)


def is_held(path: Path) -> bool:
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


def _make_folder(folder: Path) -> None:
    try:
        folder.mkdir(exist_ok=True)
    except OSError as exc:
        raise lock_error(folder, exc) from None


def lock_error(path: Path, exc: OSError) -> JournalFileError:
    """A lock file or folder that cannot be used, explained."""
    what = f"{path}: cannot use the lock file beside the journal ({exc.strerror or exc})"
    if exc.errno == errno.ENOSPC:
        hint = "the disk (or its inodes) is full; free space and run again"
    elif exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        hint = (
            f"{path.parent} must be writable by this process (it holds one small lock file "
            f"per open run and marker); check its permissions and mount, or pass another "
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


def sweep(folder: Path) -> int:
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
        lock = new_lock(folder / name)
        try:
            if not acquire(lock, 0):
                continue
        except JournalFileError:
            continue  # not a usable lock file (a folder, a link): leave it alone
        release(lock)
        removed += 1
    return removed


def filesystem_of(path: Path) -> str:
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
