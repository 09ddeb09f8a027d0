"""Durable sleep: ``j.sleep(name, seconds)``, whose wake-up time is in the file.

A sleep is a row of the goal's journal table, keyed and numbered like a
step (``nap``, ``nap#2``), with kind ``sleep``. When it starts, its row is
written ``sleeping`` with ``wake_at``, the wake-up time; a process killed
during the sleep leaves that row, and the next attempt sleeps only until
the recorded ``wake_at``. When it wakes, the row becomes ``done``, and
every later attempt replays it at once, like a step that returned.

The duration is not part of the sleep's identity (``seconds`` computed at
run time, "until 9:00", may differ on a later attempt): the wake-up time
recorded when the sleep first started is what counts.
"""

from __future__ import annotations

import contextlib
from datetime import datetime
from typing import TYPE_CHECKING

from ..errors import DamagedRowError
from ..identity.keys import Recorded
from ..identity.step_names import SLEEP, WAIT, same_function
from ..integrity.checksums import pause_sum
from ..run import cancellation
from . import timers
from .clock import utc_iso

if TYPE_CHECKING:
    from ..stores.storage_pauses import PauseStore
    from .runs import PausedRun

#: The ``fn`` of a sleep's row: a step recorded at the same key by a function is a mismatch.
SLEEP_FN = SLEEP


class PauseKey:
    """A sleep's or a wait's key, taken like a step's (see letitloop.identity.keys)."""

    __slots__ = ("full", "key", "owner", "replay", "storage", "store")

    def __init__(self, j: PausedRun, name: str, fn_name: str) -> None:
        self.store = j._require_open()
        self.storage: PauseStore = j._require_storage()
        if j._cancel.reason is not None:
            raise cancellation.error(j)
        self.owner = j._owner()
        self.full, self.key, replay, mismatch = j._key_for(name, "", self.owner)
        if mismatch is not None:
            raise j._mismatch(self.key, fn_name, "", mismatch)
        if replay is not None and not same_function(replay.fn, fn_name):
            j._replay(self.key, fn_name, replay)  # raises StepMismatchError: another function
        if replay is None and j.replay_only:  # nothing is written: refused, not slept
            j._opened.keys.release(self.full, self.owner)
            from ..errors import unrecorded_step

            raise unrecorded_step(j.run_id, j.goal, j.path, self.key, fn_name)
        self.replay: Recorded | None = replay

    def release(self, j: PausedRun) -> None:
        """The sleep or wait is over (a replay holds nothing to release)."""
        if self.replay is None:
            j._opened.keys.release(self.full, self.owner)


def traced(
    j: PausedRun, kind: str, name: str, key: str
) -> contextlib.AbstractContextManager[object]:
    """The span of a sleep or wait that runs (otel.py); nothing while tracing is off."""
    spans = j._trace
    return contextlib.nullcontext() if spans is None else spans.pause(kind, name, key)


def check_pause(
    j: PausedRun, recorded: Recorded, kind: str, result: str | None, error: str | None
) -> None:
    """Raise DamagedRowError if a done sleep's or wait's row fails its checksum
    (checksums.pause_sum); a row without one (written before it) replays unchecked."""
    if recorded.sum is None or recorded.sum == pause_sum(
        j.run_id, recorded.key, kind, result, error
    ):
        return
    raise DamagedRowError(
        f"{kind} {recorded.key!r} (run {j.run_id} of goal {j.goal!r}): its recorded row "
        f"fails its checksum, so the journal file was damaged (a disk or copy error) or "
        f"edited outside letitloop, and what it recorded is not handed back; restore the "
        f"file from a backup, or fork the run before it: lil fork {j.run_id} --from-step "
        f"{recorded.key}",
        run_id=j.run_id,
        key=recorded.key,
    )


def replayed_sleep(j: PausedRun, recorded: Recorded) -> None:
    """A sleep recorded done: its checksum, and its seal when the journal holds the key
    (ForgedRowError: docs/audit.md, "A sealed run replays only what its seal covers")."""
    check_pause(j, recorded, "sleep", None, None)
    if j._opened.sealed is not None:
        from ..integrity.sealcheck import check_stored, read_sealed

        check_stored(j, recorded.key, "sleep", read_sealed(j, recorded.key))


def parse_time(iso: object) -> float | None:
    """An ISO timestamp as written by the journal, as seconds since the epoch (None if not one)."""
    try:
        return datetime.fromisoformat(str(iso)).timestamp()
    except (TypeError, ValueError, OverflowError):
        return None


def started(
    j: PausedRun, storage: PauseStore, key: str, kind: str, status: str, due: float | None
) -> tuple[float, float | None]:
    """The row of a sleep or wait that starts (or resumes): ``(started, due)`` as recorded.

    A row this key left ``status`` (``sleeping``, ``waiting``) in an earlier
    attempt keeps its start and its ``wake_at``; otherwise the row is written
    now with ``due`` (None: no deadline).
    """
    row = storage.pause(j.run_id, key)
    if row and row[0] == kind and row[1] == status:
        began = parse_time(row[2])
        if began is not None:
            return began, parse_time(row[3])
    now = j.clock()
    storage.start_pause(
        (
            j.run_id,
            key,
            kind,
            status,
            SLEEP_FN if kind == "sleep" else WAIT,
            utc_iso(now),
            j.attempt,
            None if due is None else utc_iso(due),
        ),
    )
    return now, due


def _finish(j: PausedRun, storage: PauseStore, key: str, began: float) -> None:
    now = j.clock()
    storage.finish_sleep(j.run_id, key, utc_iso(now), (now - began) * 1000.0, j.attempt)


def sleep(j: PausedRun, name: str, seconds: float) -> None:
    """``Journal.sleep``: sleep until the wake-up time recorded when the sleep first started."""
    length = timers.check_seconds(f"sleep {name!r}: seconds", seconds, optional=False) or 0.0
    c = PauseKey(j, name, SLEEP_FN)
    if c.replay is not None:
        replayed_sleep(j, c.replay)
        return
    try:
        with traced(j, "sleep", name, c.key):
            began, due = started(j, c.storage, c.key, "sleep", "sleeping", j.clock() + length)
            timers.pause(j, c.store, due)
            _finish(j, c.storage, c.key, began)
    finally:
        c.release(j)


async def async_sleep(j: PausedRun, name: str, seconds: float) -> None:
    """``Journal.async_sleep``: :func:`sleep` that lets the event loop run meanwhile.

    Its two writes run in a worker thread: the loop never waits for a write lock.
    """
    import asyncio

    length = timers.check_seconds(f"sleep {name!r}: seconds", seconds, optional=False) or 0.0
    c = PauseKey(j, name, SLEEP_FN)
    if c.replay is not None:
        replayed_sleep(j, c.replay)
        return
    try:
        with traced(j, "sleep", name, c.key):
            began, wake = await asyncio.to_thread(
                started, j, c.storage, c.key, "sleep", "sleeping", j.clock() + length
            )
            await timers.async_pause(j, c.store, wake)
            await asyncio.to_thread(_finish, j, c.storage, c.key, began)
    finally:
        c.release(j)
