"""Which run an agent run is when the capability opens the journal and no run is named.

The request itself (``request_run`` of letitloop/adapters/agentcalls.py): the
user prompt, and the conversation it continues (the ``message_history``
passed to ``agent.run``), so the same question in the same conversation is
the same run (a kill after the agent returned, a retried request, a second
copy at once: its recorded answer, no call paid) and a new prompt is a new
run. The history counts by what was said (each part's kind, text, tool name,
arguments and call id), not by when: a turn replayed from the journal
rebuilds the messages with new timestamps, and the next turn is still the
same request.

A run that was recorded for another request (a run named by the user, asked
a changed prompt) is refused by :func:`check_request` with the agent, what
differs and the three ways out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from ...errors import StepMismatchError
from ...identity.step_names import named
from ...identity.unchecked import unchecked
from ...run.journal import Journal
from ..agentcalls import digest, plain, request_run

#: Fields of a message or part that say when or where it was made, not what was said.
_VOLATILE = frozenset(
    {
        "timestamp",
        "run_id",
        "conversation_id",
        "usage",
        "provider_response_id",
        "provider_details",
        "provider_name",
        "provider_url",
        "model_name",
        "model_id",
        "metadata",
        "history_digest",
        "state",
        "finish_reason",
        "failed_attempts",
        "workspace_ref",
        "id",
    }
)


def _said(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _said(v) for k, v in value.items() if k not in _VOLATILE}
    if isinstance(value, list):
        return [_said(v) for v in value]
    return value


def history_identity(messages: Sequence[ModelMessage]) -> str | None:
    """What a message history said, as a digest; None for no history (a new conversation)."""
    if not messages:
        return None
    return digest(_said(ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")))


def request_of(prompt: Any, messages: Sequence[ModelMessage]) -> dict[str, Any]:
    """The request an agent run answers: its prompt and the history it continues."""
    return {"prompt": plain(prompt), "after": history_identity(messages)}


def run_name(agent: str, request: dict[str, Any]) -> str:
    """``{agent}.request:{digest}``: the run of ``request`` when no run is named."""
    return request_run(agent, request["prompt"], request["after"])


@named("letitloop:pydantic_ai.request")
def _recorded(request: dict[str, Any]) -> dict[str, Any]:
    """The step's function: the request the agent run was recorded for."""
    return request


def _clip(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


async def check_request(journal: Journal, agent: str, key: str, request: dict[str, Any]) -> None:
    """Record the request of this agent run (step ``key``), or check it against the one
    recorded: StepMismatchError naming the agent, what differs and the ways out."""
    # Unchecked: the comparison is made here, to say what differs.
    recorded = await journal.async_step(key, _recorded, unchecked(request))
    if recorded == request:
        return
    if recorded.get("prompt") != request["prompt"]:
        differs = (
            f"recorded for the prompt {_clip(recorded.get('prompt'))}, now asked "
            f"{_clip(request['prompt'])}"
        )
    else:
        differs = "recorded for the same prompt in another conversation (message_history)"
    name = journal.generation or journal.run_name or journal.run_id
    raise StepMismatchError(
        f"agent {agent!r}, step {key!r} (run {journal.run_id} of goal {journal.goal!r}): "
        f"the run was {differs}; its recorded model and tool calls answer the other "
        f"request. Ways out: name a new run (run=... on LetItLoopDurability or Journal; "
        f"with no run name each request is a run of its own), start this one over with "
        f"'lil reset {name} --yes', or keep what it recorded and branch with "
        f"'lil fork {journal.run_id} --from-step {key}'",
        run_id=journal.run_id,
        key=key,
        differences=differs,
    )
