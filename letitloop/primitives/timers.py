"""Waiting inside a run: until a wall-clock time, or until something arrives in the store.

A durable sleep, a wait for outside input and a retry's backoff all pause
the same way (:func:`pause`, :func:`async_pause`): in short naps of
:data:`POLL_SECONDS`, each ending with one look at the storage's change
notice (``Holding.changes``: SQLite's ``PRAGMA data_version`` on the
journal's connection, which changes only when another connection committed
to the file). Only then (or every :data:`REREAD_SECONDS` anyway) is anything
read: the run's cancel request, and what the caller waits for. So a waiting
run costs a few microseconds of CPU per nap and no disk reads, and wakes
within about one nap of a value sent or a cancel.

Deadlines are wall-clock times from the journal's clock (``Journal(clock=)``),
because they are recorded in the file and must mean the same after a
restart, on another boot; a clock moved back lengthens the pause. A clock
that skips (``letitloop.testing.SkippingClock``) is moved to the deadline
instead of napping: a test's hour-long sleep takes no time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import LetItLoopError
from ..run import cancellation

if TYPE_CHECKING:
    from ..stores.storage_holding import Holding
    from .runs import PausingRun

#: Seconds between two looks at the file. The wake-up latency of ``wait_for``
#: after ``lil send`` is at most about this (benchmarks/bench_primitives.py
#: measures it); 20 naps a second cost a waiting process next to no CPU.
POLL_SECONDS = 0.05
#: Read the awaited row and the cancel request at least this often even when
#: the change notice says nothing changed (a write through this very storage
#: does not move it).
REREAD_SECONDS = 1.0

#: What :func:`pause` returns when the deadline passed, or this process's hold ran out.
DEADLINE = "deadline"
HOLD = "hold"


class _Looks:
    """When to look at the store again: after a change by someone else, or a while."""

    def __init__(self) -> None:
        self.version: int | None = None
        self.at = float("-inf")

    def due(self, version: int | None) -> bool:
        now = time.monotonic()
        if version is None:  # the store was busy: look next time
            return False
        if version != self.version or now - self.at >= REREAD_SECONDS:
            self.version, self.at = version, now
            return True
        return False


def _left(j: PausingRun, deadline: float | None, hold: float | None) -> tuple[str | None, float]:
    """Which bound passed (DEADLINE, HOLD or None), and the seconds until the nearest one."""
    nap = POLL_SECONDS
    if deadline is not None:
        left = deadline - j.clock()
        if left <= 0:
            return DEADLINE, 0.0
        nap = min(nap, left)
    if hold is not None:
        left = hold - time.monotonic()
        if left <= 0:
            return HOLD, 0.0
        nap = min(nap, left)
    return None, nap


def _skipped(j: PausingRun, deadline: float | None) -> bool:
    """Whether the journal's clock skipped to ``deadline`` instead of a nap.

    A test's clock that skips (``letitloop.testing.SkippingClock``: it has
    ``skip_to``) is moved to the deadline at once, after the pause's first
    look at the store; any other clock is napped on.
    """
    skip = getattr(j.clock, "skip_to", None) if deadline is not None else None
    if skip is None:
        return False
    skip(deadline)
    return True


def pause(
    j: PausingRun,
    store: Holding,
    deadline: float | None,
    *,
    probe: Callable[[], Any] | None = None,
    hold: float | None = None,
) -> Any:
    """Block until ``probe()`` gives something (returned), ``deadline`` or ``hold`` passes.

    ``deadline`` is a time of the journal's clock (returns :data:`DEADLINE`);
    ``hold`` a ``time.monotonic()`` time (returns :data:`HOLD`). Raises
    RunCancelledError as soon as the run is cancelled.
    """
    looks = _Looks()
    while True:
        if j._cancel.reason is not None:
            raise cancellation.error(j)
        if looks.due(store.changes()):
            cancellation.check(j)
            if probe is not None:
                got = probe()
                if got is not None:
                    return got
        passed, nap = _left(j, deadline, hold)
        if passed is not None:
            return passed
        if not _skipped(j, deadline):
            time.sleep(nap)


async def async_pause(
    j: PausingRun,
    store: Holding,
    deadline: float | None,
    *,
    probe: Callable[[], Any] | None = None,
    hold: float | None = None,
) -> Any:
    """:func:`pause` on the event loop: naps with ``asyncio.sleep``; never waits for the store.

    A look is skipped (and taken at the next nap) while another thread of this
    process uses the store (the journal's commit thread, say: ``Holding.if_free``),
    so the loop never waits behind a commit.
    """
    import asyncio

    looks = _Looks()
    while True:
        if j._cancel.reason is not None:
            raise cancellation.error(j)
        if looks.due(store.changes(wait=False)):
            with store.if_free() as free:
                if free:
                    cancellation.check(j)
                    got = probe() if probe is not None else None
            if not free:
                looks.version = None  # busy: look again after the next nap
            elif got is not None:
                return got
        passed, nap = _left(j, deadline, hold)
        if passed is not None:
            return passed
        if _skipped(j, deadline):
            await asyncio.sleep(0)  # others on the loop go on; the deadline has passed
        else:
            await asyncio.sleep(nap)


def check_seconds(what: str, seconds: object, *, optional: bool = True) -> float | None:
    """``seconds`` as a float >= 0 (None stays None if ``optional``); else LetItLoopError."""
    if seconds is None and optional:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise LetItLoopError(
            f"{what} must be a number of seconds, got {type(seconds).__name__} {seconds!r}"
        )
    if not seconds >= 0 or seconds == float("inf"):  # nan fails both
        raise LetItLoopError(f"{what} must be a finite number of seconds >= 0, got {seconds!r}")
    return float(seconds)
