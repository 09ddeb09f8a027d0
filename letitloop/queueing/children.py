"""A run enqueued from inside a run: a child, whose identity and result are its parent's steps.

``queue.enqueue(...)`` called while a run is open in this context (the run's
body, or a step's) is a step of that parent run, recorded under the
library's name ``letitloop:queue.enqueue`` and keyed ``enqueue:<task>`` (with
``:<run>`` when ``run=`` names the child), numbered like any step. Its result
is the child's entry id and run name, so a rerun of the parent replays it
and gets the same child: nothing is enqueued twice.

- The child's run name, unless ``run=`` gives one, is the parent's run id and
  the step's key (``01J…:enqueue:send``), and the step adds an entry only when
  the queue holds none of that name: a parent killed after the entry was
  added and before its step was recorded finds that entry again.
- ``handle.result()`` and ``await handle`` inside a run are a step too
  (``letitloop:queue.result``, keyed ``result:<entry id>``) whose result is the
  child's: once recorded, a rerun of the parent replays it without looking at
  the queue. While it waits, a kill of the parent leaves the step unrecorded:
  the next attempt waits again for the same child, which its worker went on
  running meanwhile (a kill of that worker is the queue's take-over).
- The wait stops at the parent's cancel or release (a draining worker lets
  go of the parent at once, instead of waiting for the child).
- A parent that a queue's worker runs does not wait in its worker thread: a
  child not ended yet suspends it (:class:`ChildPending`, a release of the
  run), its entry back in its queue, due when the child ends (the child's
  ``finish`` makes it due at once: ``parent_run`` on the child's entry) or
  after a short recheck; its slot and thread are free meanwhile, so a parent
  and its child fit one slot. Resumed, its recorded steps replay and the
  ``result:`` step runs again, this time finding the child ended.
"""

from __future__ import annotations

import asyncio
import time
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from ..errors import RunReleasedError
from ..identity.names import MAX_NAME_LENGTH
from ..identity.step_names import Named
from ..identity.unchecked import unchecked
from ..run import cancellation
from ..run.journal import Journal, current_journal
from ..run.steps import parent_step

if TYPE_CHECKING:
    from .queues import Handle, Queue

#: The steps' recorded names (identity/step_names.py): never a module path.
ENQUEUE = "letitloop:queue.enqueue"
RESULT = "letitloop:queue.result"

#: The longest a waiting parent naps between two looks at its child's entry.
MAX_NAP = 0.1

#: The queued run a worker runs in this context (``queue_worker.py``): a wait of it for a
#: child that has not ended suspends it instead of holding the worker's thread.
worker_run: ContextVar[Journal | None] = ContextVar("letitloop_queue_worker_run", default=None)


#: The child entry each suspended parent waits for, by ``id()`` of its journal: set when
#: it is let go of, taken by its worker (``waited_child``) however the task then ended
#: (a task that caught ChildPending and went on ends released all the same).
waiting: dict[int, str] = {}


def waited_child(j: Journal) -> str | None:
    """The child entry run ``j`` was let go of to wait for (forgotten here), if any."""
    return waiting.pop(id(j), None)


class ChildPending(RunReleasedError):
    """A queued parent let go of while its child runs: its worker queues it again, due when
    the child ends (``child`` is the child's entry id)."""

    def __init__(self, message: str, *, run_id: str, reason: str, child: str) -> None:
        super().__init__(message, run_id=run_id, reason=reason)
        self.child = child


def _suspend(j: Journal, handle: Handle) -> BaseException:
    """What a worker's parent raises when its child ``handle`` has not ended: ChildPending
    (the run released), or the cancel or release noted before."""
    reason = f"waiting for its child, entry {handle.id} of queue {handle.queue.name!r}"
    if not j._cancel.release(reason):
        return cancellation.error(j)
    waiting[id(j)] = handle.id  # read by queue_worker._let_go, however the task ends
    return ChildPending(
        f"run {j.run_id} of goal {j.goal!r}: {reason}; it is queued again, due when the "
        f"child ends, and its recorded steps replay then",
        run_id=j.run_id,
        reason=reason,
        child=handle.id,
    )


def parent() -> Journal | None:
    """The run open in this context (thread or task), if any: the parent of what it enqueues.

    Only this context's journal counts, never another thread's: a producer thread of a
    program that has a run open elsewhere enqueues top-level runs.
    """
    j = current_journal.get()
    return j if j is not None and j.is_open else None


def enqueue(
    j: Journal,
    queue: Queue,
    task: str,
    run: str | None,
    args: str,
    priority: int,
    dedup_key: str | None,
    delay: float,
) -> tuple[str, str]:
    """Enqueue a child of ``j`` as a step of it: ``(entry id, run name)``, replayed on rerun."""
    name = f"enqueue:{task}" if run is None else f"enqueue:{task}:{run}"
    if len(name) > MAX_NAME_LENGTH or "#" in name:
        name = f"enqueue:{task}"[:MAX_NAME_LENGTH].replace("#", "_")

    def add(queue_name: str, task: str, run: str | None, args: str, priority: int,
            dedup_key: str | None, delay: float) -> list[str]:  # fmt: skip
        here = parent_step.get()
        assert here is not None  # set by the step that calls this
        now = time.time()
        found = queue.store.enqueue(
            queue_name, task, run or child_name(here[0].run_id, here[1]), args, priority,
            dedup_key, now + delay, now, once=True, parent_run=here[0].run_id,
        )  # fmt: skip
        return [found[0], found[1]]

    # The delay is not the child's identity (computed at run time, "until 9:00", it differs
    # on a rerun): the step that recorded the child is found whatever it is now.
    got = j.step(name, Named(ENQUEUE, add), queue.name, task, run, args, priority, dedup_key,
                 unchecked(delay))  # fmt: skip
    return str(got[0]), str(got[1])


def child_name(parent_run: str, key: str) -> str:
    """The run name of a child enqueued by step ``key`` of run ``parent_run``."""
    name = f"{parent_run}:{key}"
    if len(name) <= MAX_NAME_LENGTH:
        return name
    import hashlib

    return f"{parent_run}:{hashlib.sha256(key.encode()).hexdigest()}"


def result(j: Journal, handle: Handle, timeout: float | None) -> Any:
    """``handle.result()`` in run ``j``: the child's result, as a step of ``j``."""

    def wait(entry_id: str) -> Any:
        deadline = None if timeout is None else time.monotonic() + timeout
        nap = 0.005
        while True:
            found = handle._ended()
            if found is not None:
                return found()
            if worker_run.get() is j:  # a queued parent: suspended, its thread freed
                raise _suspend(j, handle)
            if j._cancel.reason is not None:
                raise cancellation.error(j)
            if deadline is not None and time.monotonic() >= deadline:
                raise handle._timed_out(timeout)
            time.sleep(nap)
            nap = min(nap * 2, MAX_NAP)

    return j.step(f"result:{handle.id}", Named(RESULT, wait), handle.id)


async def async_result(j: Journal, handle: Handle) -> Any:
    """``await handle`` in run ``j``: the child's result, as an async step of ``j``."""

    async def wait(entry_id: str) -> Any:
        nap = 0.005
        while True:
            found = await asyncio.to_thread(handle._ended)
            if found is not None:
                return found()
            if worker_run.get() is j:  # a queued parent: suspended, its thread freed
                raise _suspend(j, handle)
            if j._cancel.reason is not None:
                raise cancellation.error(j)
            await asyncio.sleep(nap)
            nap = min(nap * 2, MAX_NAP)

    return await j.async_step(f"result:{handle.id}", Named(RESULT, wait), handle.id)
