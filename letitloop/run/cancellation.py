"""Cancellation as the run that holds it sees it: noticed, then raised at its next step.

``lil cancel`` (and ``letitloop.cancel``, both in ``control.py``) cancels a
run nobody holds at once (status ``cancelled``), and asks the holder of a
live one to stop: ``runs.cancel_requested_at``. The holder learns of it

- when it opens the run (a named run that was cancelled is refused),
- every :data:`letitloop.run.inflight.SCAN_SECONDS` from the process's in-flight
  watcher thread (:func:`poll`, once the journal ran a fresh step), and
- at every look a sleep, a wait or a retry's backoff takes at the file
  (:func:`check`).

Then the journal's :class:`Cancel` holds the reason, and the journal's next
step, marker, sleep or wait raises RunCancelledError (:func:`error`): one
attribute test per step, no query. An async step in flight is interrupted
where it awaits (its task is cancelled and the CancelledError turned into
RunCancelledError, :func:`converted`); a sync step's function cannot be
interrupted, so the step finishes, is recorded, and the next one raises.
The journal then marks the run ``cancelled`` when it closes.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import TYPE_CHECKING, Any

from ..errors import RunCancelledError, RunReleasedError

if TYPE_CHECKING:
    from typing import Protocol

    from ..stores.storage_runs import RunEnds
    from .journal import Journal

    class CancellableRun(Protocol):
        """What a cancel's check reads of a journal (:func:`check`, :func:`error`): its
        run, its cancel, and its storage (a pause's journal: primitives/runs.py)."""

        @property
        def run_id(self) -> str: ...
        @property
        def goal(self) -> str: ...
        @property
        def _cancel(self) -> Cancel: ...
        def _require_storage(self) -> RunEnds: ...


#: The message a task is cancelled with, so that its CancelledError is known for ours.
TASK_MESSAGE = "letitloop: the run was cancelled"


class Cancel:
    """Whether this process learnt that its run was cancelled, and the async steps to interrupt.

    The one owner of that state (``Journal._cancel``, made with the journal);
    no other module writes it. Thread rules:

    - ``reason`` goes once from None to the cancel's reason, and never back:
      :meth:`note` is called by the opener's thread (a named run found
      cancelled), by the process's in-flight watcher thread (:func:`poll`),
      or by a thread whose sleep, wait or backoff looks at the file
      (:func:`check`); the first to note it wins, under ``lock``. Every step
      reads it without the lock: one attribute test.
    - ``tasks`` (asyncio task -> the key of the step it awaits) is written by
      each async step on its own event loop's thread (:meth:`awaiting`,
      :meth:`done`); the watcher thread reads a copy under ``lock`` when it
      interrupts them (:meth:`interrupt`), and the task is cancelled on its
      own loop (``call_soon_threadsafe``).
    """

    __slots__ = ("lock", "reason", "released", "tasks")

    def __init__(self) -> None:
        self.reason: str | None = None
        #: The run is let go of, not cancelled (a queue's worker draining: ``release``).
        self.released = False
        self.tasks: dict[Any, str] = {}
        self.lock = threading.Lock()

    def note(self, reason: str) -> bool:
        """The run was cancelled for ``reason``; False if it was known already (kept as it was)."""
        with self.lock:
            if self.reason is not None:
                return False
            self.reason = reason
            return True

    def release(self, reason: str) -> bool:
        """This process lets go of the run (a queue's worker draining: ``queue_worker.py``):
        the next step raises RunReleasedError, and the journal closes without marking the
        run (``closing.py``). The step in flight is not interrupted. False if a cancel (or
        a release) was noted already."""
        with self.lock:
            if self.reason is not None:
                return False
            self.reason = reason
            self.released = True
            return True

    def awaiting(self, task: Any, key: str) -> None:
        """``task`` awaits step ``key``: a cancel of the run interrupts it."""
        with self.lock:
            self.tasks[task] = key

    def done(self, task: Any) -> None:
        """``task``'s step no longer awaits its function."""
        with self.lock:
            self.tasks.pop(task, None)

    def interrupt(self) -> None:
        """Cancel every task awaiting a step's function, each on its own event loop."""
        with self.lock:
            tasks = list(self.tasks)
        for task in tasks:
            # A loop that is closed has nothing awaiting there any more.
            with contextlib.suppress(RuntimeError):
                task.get_loop().call_soon_threadsafe(task.cancel, TASK_MESSAGE)


def error(j: CancellableRun) -> RunCancelledError:
    """The error the holder of a cancelled run gets at its next step, marker or wait
    (RunReleasedError for a run its process lets go of)."""
    if j._cancel.released:
        return RunReleasedError(
            f"run {j.run_id} of goal {j.goal!r}: this worker lets go of it ({j._cancel.reason}); "
            f"it stops here, unmarked, and another worker resumes it at this step",
            run_id=j.run_id,
            reason=j._cancel.reason,
        )
    return RunCancelledError(
        f"run {j.run_id} of goal {j.goal!r} was cancelled ({j._cancel.reason}); this process stops "
        f"here and the run is marked cancelled. No opener resumes it: to run it again from a "
        f"step, fork it: lil fork {j.run_id} --from-step KEY",
        run_id=j.run_id,
        reason=j._cancel.reason,
    )


def requested(storage: RunEnds, run_id: str) -> str | None:
    """The reason recorded with a cancel request of ``run_id``, or None if none was made."""
    found = storage.cancel_request(run_id)
    if found is None or found[0] is None:
        return None
    at, reason = found
    return f"{reason or 'cancelled'}, at {at}"


def check(j: CancellableRun) -> None:
    """Read the run's cancel request (one query); raise RunCancelledError if there is one."""
    if j._cancel.reason is None:
        reason = requested(j._require_storage(), j.run_id)
        if reason is None:
            return
        j._cancel.note(reason)
    raise error(j)


def poll(j: Journal) -> None:
    """From the in-flight watcher: note a cancel request and interrupt the async steps awaiting.

    Never raises for a cancel (the holder raises at its own next step).
    """
    storage = j._opened.storage
    if storage is None or j._cancel.reason is not None:
        return
    reason = requested(storage, j.run_id)
    if reason is not None and j._cancel.note(reason):
        j._cancel.interrupt()


def converted(j: Journal, exc: BaseException) -> RunCancelledError | None:
    """The RunCancelledError a step's CancelledError stands for, if this module caused it.

    On Python 3.11+ the task's cancel request is withdrawn (``uncancel``), so
    that a timeout or task group around the step does not take the
    RunCancelledError for a cancellation of its own.
    """
    if j._cancel.reason is None or type(exc).__name__ != "CancelledError":
        return None
    if TASK_MESSAGE not in exc.args:
        return None
    aio: Any = sys.modules.get("asyncio")
    task = aio.current_task() if aio is not None else None
    if task is not None and hasattr(task, "uncancel"):
        task.uncancel()
    return error(j)
