"""``approved_step``: the call a person approved with an ``interrupt()`` answer, run once.

In a durable node, the call after ``interrupt()`` is a step like any other:
once it returned it replays. But a process killed *inside* it (the room
booked, the step not yet recorded) would run it again on the next attempt,
and the approval, given for one execution, would pay twice. ``approved_step``
runs it inside the run-scoped marker ``approved:<step>`` (``adapters/approved.py``):
cut short by a crash, it is not run again on its own; the run waits for
``again:<step>`` (``lil send RUN again:<step> true`` to run it again,
``false`` to leave it: the step then returns the "in doubt" text).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ...identity.step_names import named
from ...identity.unchecked import unchecked
from ...run.durable import current
from ...run.steps import parent_step
from ..approved import run_once_sync

T = TypeVar("T")


@named("letitloop:langgraph.approved_call")
def approved_call(what: str, stop_after: float | None, call: Any, *identity: Any) -> Any:
    """The step's function: the approved call, once (``run_once_sync``), in a marker named
    after the step's own key (``book``, ``book#2``, …)."""
    del identity  # the call's arguments, for the journal's argument check only
    running = parent_step.get()
    assert running is not None  # a step's function runs inside its step
    journal, key = running
    return run_once_sync(journal, key, what, call, lambda text: text, stop_after=stop_after)


def approved_step(
    name: str,
    fn: Callable[..., T],
    /,
    *args: Any,
    stop_after: float | None = None,
    **kwargs: Any,
) -> T | str:
    """``step(name, fn, *args, **kwargs)`` for a call a person approved: run once, even when
    the process dies inside it (module docstring).

    Call it in a durable node (or any open journal) after the ``interrupt()``
    that asked for the approval. ``stop_after``: how long to wait for
    ``again:<step>`` when an earlier attempt died inside the call (None: as
    long as it takes; 0: stop at once, RunWaiting, exit 75 with one line).
    Returns ``fn``'s result, or, when the answer was not to run it again, the
    text saying it may have happened and was not repeated.
    """
    journal = current("approved_step()")
    what = f"{name}{args!r}"[:200]

    def call() -> T:
        return fn(*args, **kwargs)

    result: T | str = journal.step(
        name, approved_call, what, stop_after, unchecked(call), *args, **kwargs
    )
    return result
