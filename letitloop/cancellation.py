"""Cancellation as the run that holds it sees it: noticed, then raised at its next step.

``lil cancel`` (and ``letitloop.cancel``, both in ``control.py``) cancels a
run nobody holds at once (status ``cancelled``), and asks the holder of a
live one to stop: ``runs.cancel_requested_at``. The holder learns of it

- when it opens the run (a named run that was cancelled is refused),
- every :data:`letitloop.inflight.SCAN_SECONDS` from the process's in-flight
  watcher thread (:func:`poll`, once the journal ran a fresh step), and
- at every look a sleep, a wait or a retry's backoff takes at the file
  (:func:`check`).

Then ``journal._cancel`` holds the reason, and the journal's next step,
marker, sleep or wait raises RunCancelledError (:func:`error`): one
attribute test per step, no query. An async step in flight is interrupted
where it awaits (its task is cancelled and the CancelledError turned into
RunCancelledError, :func:`converted`); a sync step's function cannot be
interrupted, so the step finishes, is recorded, and the next one raises.
The journal then marks the run ``cancelled`` when it closes.
"""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING, Any

from .errors import RunCancelledError

if TYPE_CHECKING:
    from .journal import Journal
    from .storage import Storage

#: The message a task is cancelled with, so that its CancelledError is known for ours.
TASK_MESSAGE = "letitloop: the run was cancelled"


def error(j: Journal) -> RunCancelledError:
    """The error the holder of a cancelled run gets at its next step, marker or wait."""
    return RunCancelledError(
        f"run {j.run_id} of goal {j.goal!r} was cancelled ({j._cancel}); this process stops "
        f"here and the run is marked cancelled. No opener resumes it: to run it again from a "
        f"step, fork it: lil fork {j.run_id} --from-step KEY",
        run_id=j.run_id,
        reason=j._cancel,
    )


def requested(storage: Storage, run_id: str) -> str | None:
    """The reason recorded with a cancel request of ``run_id``, or None if none was made."""
    found = storage.cancel_request(run_id)
    if found is None or found[0] is None:
        return None
    at, reason = found
    return f"{reason or 'cancelled'}, at {at}"


def check(j: Journal) -> None:
    """Read the run's cancel request (one query); raise RunCancelledError if there is one."""
    if j._cancel is None:
        assert j._storage is not None
        reason = requested(j._storage, j.run_id)
        if reason is None:
            return
        j._cancel = reason
    raise error(j)


def poll(j: Journal) -> None:
    """From the in-flight watcher: note a cancel request and interrupt the async steps awaiting.

    Never raises for a cancel (the holder raises at its own next step).
    """
    storage = j._storage
    if j.store is None or storage is None or j._cancel is not None:
        return
    reason = requested(storage, j.run_id)
    if reason is None:
        return
    j._cancel = reason
    for task in list(j._aio_tasks):
        # A loop that is closed has nothing awaiting there any more.
        with contextlib.suppress(RuntimeError):
            task.get_loop().call_soon_threadsafe(task.cancel, TASK_MESSAGE)


def converted(j: Journal, exc: BaseException) -> RunCancelledError | None:
    """The RunCancelledError a step's CancelledError stands for, if this module caused it.

    On Python 3.11+ the task's cancel request is withdrawn (``uncancel``), so
    that a timeout or task group around the step does not take the
    RunCancelledError for a cancellation of its own.
    """
    if j._cancel is None or type(exc).__name__ != "CancelledError":
        return None
    if TASK_MESSAGE not in exc.args:
        return None
    aio: Any = sys.modules.get("asyncio")
    task = aio.current_task() if aio is not None else None
    if task is not None and hasattr(task, "uncancel"):
        task.uncancel()
    return error(j)
