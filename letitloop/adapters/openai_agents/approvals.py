"""``run_durably``: ``Runner.run`` whose tool approvals wait durably for ``lil send``.

A tool with ``needs_approval`` interrupts the run. Here each interruption's
state is journaled as a step (``approvals:{n}.state``, the JSON of
``RunState.to_json()``), then each call waiting for approval is a journal
wait named ``approve:{tool}:{call_id}``: the process may wait, stop
(``stop_after``: RunWaiting, exit status 75, the run left ``waiting``) or be
killed; ``lil send RUN approve:refund:call_1 true`` answers it, and the
program run again rebuilds the state with ``RunState.from_json`` from the
journal, applies the answer and continues. The model calls before the
interruption replay from the journal.

An answer is ``true`` (approve), ``false`` (reject), or ``{"approve": false,
"message": "..."}`` (reject, with the text the model is told).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from agents.agent import Agent
from agents.result import RunResult
from agents.run import Runner
from agents.run_state import RunState

from letitloop.adapters.agentcalls import open_journal
from letitloop.adapters.openai_agents.calls import StoppedToWait, approved, journal_for
from letitloop.adapters.openai_agents.runner import (
    RunOptions,
    journal_of,
    registered,
    session_items,
)
from letitloop.errors import LetItLoopError
from letitloop.identity.step_names import named
from letitloop.identity.unchecked import unchecked
from letitloop.primitives.expects import Expect

#: What an approval's wait takes: true, false, or {"approve": false, "message": "..."}.
DECISION: dict[str, Any] = {
    "anyOf": [
        {"type": "boolean"},
        {
            "type": "object",
            "properties": {"approve": {"type": "boolean"}, "message": {"type": "string"}},
            "required": ["approve"],
            "additionalProperties": False,
        },
    ]
}


def expect_for(item: Any) -> Expect:
    """What the wait for approving ``item`` (a ``ToolApprovalItem``) takes."""
    arguments = getattr(item, "arguments", None)
    return Expect(
        DECISION,
        f"approval of {item.tool_name}({arguments or ''}), call {item.call_id!r}",
        True,
    )


@named("letitloop:openai_agents.approvals")
async def state_json(round_: int, state: tuple[RunState[Any, Any]]) -> dict[str, Any]:
    """The step's function: the interrupted run's state as the SDK serializes it."""
    del round_
    return state[0].to_json()


def decision(name: str, answer: Any) -> tuple[bool, str | None]:
    """``(approve, rejection message)`` from a value sent for wait ``name``."""
    if isinstance(answer, bool):
        return answer, None
    if isinstance(answer, dict) and isinstance(answer.get("approve"), bool):
        message = answer.get("message")
        return answer["approve"], message if isinstance(message, str) else None
    raise LetItLoopError(
        f'approval {name!r}: expected true, false or {{"approve": false, "message": '
        f"\"...\"}}, got {answer!r}; send one of those with 'lil send RUN {name} true'"
    )


async def run_durably(
    starting_agent: Agent[Any],
    input: Any,
    *,
    stop_after: float | None = None,
    goal: str | None = None,
    run: str | None = None,
    reuse: float | timedelta | None = None,
    fresh: bool = False,
    **kwargs: Any,
) -> RunResult:
    """``Runner.run(starting_agent, input, **kwargs)``, its approvals waited for durably.

    Call it with the agent made durable (``durable_agent``), inside an open
    journal, or with a goal (``goal=`` here, or ``durable_agent(agent,
    goal=...)``): it then opens ``Journal(goal, run=...)`` around the whole
    run, approvals included: ``run`` if given, else the request itself
    (runner.py), handed back for ``reuse`` seconds once completed. Returns the
    final ``RunResult`` (no interruptions left). Raises RunWaiting (exit
    status 75) when ``stop_after`` seconds pass without an answer;
    NoJournalError with no journal open and no goal.
    """
    options = registered(starting_agent)
    if goal is not None or run is not None or reuse is not None or fresh:
        base = options or RunOptions(goal or "")
        options = replace(
            base,
            goal=goal or base.goal,
            run=run if run is not None else base.run,
            reuse=reuse if reuse is not None else base.reuse,
            fresh=fresh or base.fresh,
        )
    if open_journal() is None and options is not None and options.goal:
        items = await session_items(kwargs.get("session"))
        async with journal_of(options, starting_agent, input, items):
            return await _approvals(starting_agent, input, stop_after, kwargs)
    return await _approvals(starting_agent, input, stop_after, kwargs)


async def _approvals(
    starting_agent: Agent[Any], input: Any, stop_after: float | None, kwargs: dict[str, Any]
) -> RunResult:
    journal = journal_for("run_durably()")
    result = await _run(starting_agent, input, kwargs)
    round_ = 0
    while result.interruptions:
        round_ += 1
        recorded = await journal.async_step(
            f"approvals:{round_}.state", state_json, round_, unchecked((result.to_state(),))
        )
        state = await RunState.from_json(starting_agent, recorded)
        for item in state.get_interruptions():
            name = f"approve:{item.tool_name}:{item.call_id}"
            answer = await journal.async_wait_for(
                name, stop_after=stop_after, expect=expect_for(item)
            )
            approve, message = decision(name, answer)
            if approve:
                state.approve(item)
                # It runs once, even if the process dies inside it (approved.py).
                if item.call_id is not None:
                    approved.setdefault(journal, {})[item.call_id] = stop_after
            else:
                state.reject(item, rejection_message=message)
        result = await _run(starting_agent, state, kwargs)
    return result


async def _run(agent: Agent[Any], input: Any, kwargs: dict[str, Any]) -> RunResult:
    """``Runner.run``; an approved call cut short that waits ends the program here (75)."""
    try:
        return await Runner.run(agent, input, **kwargs)
    except Exception as exc:
        stopped = _stopped_in(exc)
        if stopped is None:
            raise
        raise stopped.run_waiting from None


def _stopped_in(exc: BaseException) -> StoppedToWait | None:
    """The StoppedToWait ``exc`` is or wraps (the SDK raises a tool's error as the
    ``__cause__`` of its own ``UserError``), if any."""
    seen: set[int] = set()
    found: BaseException | None = exc
    while found is not None and id(found) not in seen:
        if isinstance(found, StoppedToWait):
            return found
        seen.add(id(found))
        found = found.__cause__ or found.__context__
    return None
