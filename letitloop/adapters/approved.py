"""An approved tool call runs once: the marker ``approved:<call id>`` around its execution.

A person approves one tool call (one call id of one run: Pydantic AI's
``RequestInput``, OpenAI Agents' ``run_durably``). The call is a step like
any other, so once it returned it replays; but a process that died *inside*
it (after the refund went out, before the step was recorded) would run it
again on the next attempt, and the approval, given for one execution, would
pay twice. So the adapters run an approved call inside the run-scoped
``atomic_marker(f"approved:{call_id}")``, within its step:

- offered, no earlier holder died inside: the call runs, once;
- an earlier attempt died inside it (``crashed_before``), or finished it and
  died before its step was recorded: the call is **not** run again on its
  own. The run waits for ``again:<call id>`` (under the call's step), with
  one line saying why: ``true`` (it did not happen: run it again, inside the
  marker ``approved:<call id>:again:<n>``) or ``false`` (leave it: the step
  records the adapter's "failed" result, and the model is told the call may
  have happened and was not repeated).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from letitloop.primitives.expects import Expect
from letitloop.run.journal import Journal

T = TypeVar("T")

#: The marker guarding an approved call: ``approved:call_abc123`` (run scope).
MARKER_PREFIX = "approved:"
#: The wait asking whether to run an approved call again: ``again:call_abc123``.
AGAIN_PREFIX = "again:"


def in_doubt_message(what: str, call_id: str) -> str:
    """What the model is told about an approved call cut short and not run again."""
    return (
        f"{what} (call {call_id!r}) was approved for one execution and an earlier attempt "
        f"died inside it: it may have happened, and it was not run again"
    )


def again_expect(what: str, call_id: str) -> Expect:
    """What the wait ``again:<call id>`` takes: true (run it again) or false."""
    return Expect(
        {"type": "boolean"},
        f"the approved call {what} (call {call_id!r}) was cut short when the process died "
        f"and may have happened: check, then send true to run it again or false to leave "
        f"it (the model is told it was not run)",
        False,
    )


async def run_once(
    journal: Journal,
    call_id: str,
    what: str,
    call: Callable[[], Awaitable[T]],
    in_doubt: Callable[[str], T],
    *,
    stop_after: float | None,
) -> T:
    """``await call()`` once, inside the marker ``approved:<call_id>`` (module docstring).

    Call it inside the call's step. Raises RunWaiting (exit status 75) when
    the call was cut short by a crash and ``again:<call_id>`` has no answer
    within ``stop_after`` seconds.
    """
    name = MARKER_PREFIX + call_id
    tries = 0
    while True:
        async with journal.atomic_marker(name) as offer:
            if offer and not offer.crashed_before:
                return await call()
        tries += 1
        answer: Any = await journal.async_wait_for(
            AGAIN_PREFIX + call_id, stop_after=stop_after, expect=again_expect(what, call_id)
        )
        if answer is not True:
            return in_doubt(in_doubt_message(what, call_id))
        name = f"{MARKER_PREFIX}{call_id}:again:{tries}"


def run_once_sync(
    journal: Journal,
    call_id: str,
    what: str,
    call: Callable[[], T],
    in_doubt: Callable[[str], T],
    *,
    stop_after: float | None,
) -> T:
    """:func:`run_once` for a call made on a thread: ``call()`` once, inside the marker
    ``approved:<call_id>``, the same rules and waits."""
    name = MARKER_PREFIX + call_id
    tries = 0
    while True:
        with journal.atomic_marker(name) as offer:
            if offer and not offer.crashed_before:
                return call()
        tries += 1
        answer: Any = journal.wait_for(
            AGAIN_PREFIX + call_id, stop_after=stop_after, expect=again_expect(what, call_id)
        )
        if answer is not True:
            return in_doubt(in_doubt_message(what, call_id))
        name = f"{MARKER_PREFIX}{call_id}:again:{tries}"
