"""Both tiers of one marker's lock, taken and let go for one holder: :class:`MarkerHold`.

The process-local lock (``markerlocks.py``) first, then the storage's hold of
the marker (``Holding.marker_hold``: SQLite's is a lock file, ``locks.py``),
waited for with a timeout and an optional stop event, from a thread or, for
``async with``, from a worker thread; ``markers.py`` uses it.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import LetItLoopError, MarkerHeldError
from ..identity.ids import HOST as _HOST
from .markerlocks import local_disown, local_enter, local_holder, local_leave

if TYPE_CHECKING:
    from ..stores.storage_holding import Hold, Holding
    from ..stores.storage_markers import MarkerAt, MarkerRows

#: How often an async waiter's worker thread checks whether its task was
#: cancelled: a cancelled wait frees its thread within this many seconds.
_STOP_SLICE_S = 0.1


class MarkerHold:
    """The two locks of one marker, for one holder (one ``with`` block).

    ``lock_name`` names the marker within the journal file (its scope, owner
    and name); ``what`` is how errors name the marker.
    """

    def __init__(self, storage: Holding, lock_name: str, what: str) -> None:
        self._storage = storage
        self._lock_name = lock_name
        # The process-local key adds the store's identity (SQLite: the file's
        # device and inode), to tell apart the journal files one process has
        # open whatever paths reach them.
        self._key = f"{storage.identity}\0{lock_name}"
        self._what = what
        self._flock: Hold | None = None
        #: True while this holder has both locks.
        self.holding = False

    @property
    def lock_file(self) -> Path:
        """The marker's lock file (another store: what its hold names, ``Hold.where``)."""
        return Path(self._storage.marker_hold(self._lock_name).where)

    def acquire(
        self, owner: object, who: str, timeout: float, stop: threading.Event | None = None
    ) -> bool:
        """Take the process-local lock, then the storage's hold of the marker.

        False if ``timeout`` ran out, or ``stop`` was set while waiting (then
        the wait ends within one slice, ``_STOP_SLICE_S``). ``owner`` is the
        thread or task entering, ``who`` how an error names it.
        """
        deadline = None if math.isinf(timeout) else time.monotonic() + timeout

        def wait(try_once: Callable[[float], bool]) -> bool:
            while True:
                left = -1.0 if deadline is None else max(0.0, deadline - time.monotonic())
                if stop is not None:
                    left = _STOP_SLICE_S if left < 0 else min(left, _STOP_SLICE_S)
                if try_once(left):
                    return True
                if stop is not None and stop.is_set():
                    return False
                if deadline is not None and time.monotonic() >= deadline:
                    return False

        entry = local_enter(self._key)
        # Only this thread or task can have set owner to itself: no guard needed.
        if entry.owner is not None and entry.owner == owner:
            local_leave(self._key)
            raise LetItLoopError(
                f"{self._what} was entered again inside its own block (same thread "
                f"or task); the inner block would wait for itself. Test the outer offer "
                f"instead or give the inner marker another name; in async code, use "
                f"'async with' so that tasks of one thread can wait for each other"
            )
        try:
            got = wait(lambda t: entry.lock.acquire(timeout=t))
        except BaseException:
            local_leave(self._key)
            raise
        if not got:
            local_leave(self._key)
            return False
        flock = self._storage.marker_hold(self._lock_name)
        try:
            got = wait(flock.acquire)
        except BaseException:
            got = False
            raise
        finally:
            if not got:
                entry.lock.release()
                local_leave(self._key)
        if not got:
            return False
        entry.owner = owner
        entry.holder = who
        self._flock = flock
        self.holding = True
        return True

    async def acquire_in_thread(self, owner: object, who: str, timeout: float) -> bool:
        """:meth:`acquire` in a worker thread, so the event loop keeps running.

        If the waiting task is cancelled, the worker stops waiting within
        ``_STOP_SLICE_S`` and lets go of locks it got in the meantime.
        """
        import asyncio  # here, not at the top: sync programs do not pay its import time

        stop = threading.Event()
        guard = threading.Lock()
        acquired = False

        def wait() -> bool:
            nonlocal acquired
            got = self.acquire(owner, who, timeout, stop)
            with guard:
                if got and stop.is_set():
                    self.release()  # the waiting task was cancelled meanwhile
                    return False
                acquired = got
            return got

        try:
            return await asyncio.to_thread(wait)
        except BaseException:
            with guard:
                stop.set()
                if acquired:
                    self.release()
            raise

    def release(self) -> None:
        """Let go of both locks, the storage's hold first; nothing if not holding."""
        if not self.holding:
            return
        self.holding = False
        try:
            if self._flock is not None:
                flock, self._flock = self._flock, None
                flock.release()
        finally:
            entry = local_disown(self._key)
            entry.lock.release()
            local_leave(self._key)

    def held_error(
        self, storage: MarkerRows, at: MarkerAt, name: str, timeout: float
    ) -> MarkerHeldError:
        """The error of a wait that timed out, naming the holder (read from ``storage``)."""
        thread = local_holder(self._key)
        found = storage.marker(at)
        pid = host = run = since = None
        if found is not None and found.status == "pending":
            pid, host, run, since = found[4:8]
        if thread:
            who = f"{thread} of this process (pid {os.getpid()} on {_HOST})"
            pid, host = os.getpid(), _HOST
        elif pid is not None:
            who = f"process {pid} on {host} (run {run}, since {since})"
        else:
            who = "another process that has not recorded its claim yet"
        return MarkerHeldError(
            f"{self._what} is held by {who}; waited {timeout:g} s for it to "
            f"leave the block. Wait for it to finish, stop it, or pass a longer timeout=",
            name=name,
            pid=pid,
            host=host,
            run_id=run,
        )
