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

from typing import Any

from agents.agent import Agent
from agents.result import RunResult
from agents.run import Runner
from agents.run_state import RunState

from letitloop.adapters.openai_agents.calls import journal_for
from letitloop.errors import LetItLoopError
from letitloop.unchecked import unchecked


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
    **kwargs: Any,
) -> RunResult:
    """``Runner.run(starting_agent, input, **kwargs)``, its approvals waited for durably.

    Call it inside an open journal, with the agent made durable
    (``durable_agent``). Returns the final ``RunResult`` (no interruptions
    left). Raises RunWaiting (exit status 75) when ``stop_after`` seconds
    pass without an answer; NoJournalError with no journal open.
    """
    journal = journal_for("run_durably()")
    result = await Runner.run(starting_agent, input, **kwargs)
    round_ = 0
    while result.interruptions:
        round_ += 1
        recorded = await journal.async_step(
            f"approvals:{round_}.state", state_json, round_, unchecked((result.to_state(),))
        )
        state = await RunState.from_json(starting_agent, recorded)
        for item in state.get_interruptions():
            name = f"approve:{item.tool_name}:{item.call_id}"
            approve, message = decision(
                name, await journal.async_wait_for(name, stop_after=stop_after)
            )
            if approve:
                state.approve(item)
            else:
                state.reject(item, rejection_message=message)
        result = await Runner.run(starting_agent, state, **kwargs)
    return result
