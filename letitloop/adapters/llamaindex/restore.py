"""What a resume of a LlamaIndex workflow run must check and undo, beside folding its ticks.

- ``routed_sends``: the sends a step run in flight at the kill had routed
  already (an agent's tool calls), so that its rerun does not route them again;
- ``memory_lost``: an agent's state recorded without its memory (an earlier
  letitloop left it out), which the agents cannot go on without;
- ``refuse_skipped_memory``: the engine leaves a memory it cannot serialize out
  of the state, with a warning; this refuses it instead, before it is lost.
"""

from __future__ import annotations

from typing import Any

from workflows.context.serializers import BaseSerializer
from workflows.runtime.types.internal_state import BrokerState

from ...errors import EncodeError
from .serializer import RunSerializer, memory_record


def routed_sends(state: BrokerState) -> dict[tuple[str, str | None], set[int]]:
    """The sends already routed by step runs that were in flight when the process died.

    Such a run starts again from its event, and sends again what it sent before
    (``ctx.send_event``: an agent's tool calls); the engine gives the new run a
    new invocation, so its sends would be routed a second time. Keyed by step
    and work item (the rerun keeps its work item), numbered in call order.
    """
    routed: dict[tuple[str, str | None], set[int]] = {}
    brokers = [state]
    while brokers:
        broker = brokers.pop()
        brokers.extend(broker.children.values())
        for step_id, worker in broker.workers.items():
            for execution in worker.in_progress:
                if execution.received:
                    routed[(str(step_id), execution.work_item_id)] = set(execution.received)
    return routed


def memory_lost(state: dict[str, Any] | None) -> bool:
    """Whether an agent's recorded state lacks the memory its first step put there."""
    data = (state or {}).get("state_data")
    values = data.get("_data") if isinstance(data, dict) else None
    return isinstance(values, dict) and "user_msg_str" in values and "memory" not in values


async def refuse_skipped_memory(
    store: Any, state: dict[str, Any], serializer: BaseSerializer
) -> None:
    """Raise EncodeError when the engine left the agents' memory out of ``state``.

    The engine skips a ``memory`` it cannot serialize, with a warning; a run
    resumed from that state would go on with an empty memory, so the memory is
    refused instead, saying what to do.
    """
    data = state.get("state_data")
    if not isinstance(data, dict) or "memory" in data.get("_data", {"memory": None}):
        return
    memory = await store.get("memory", default=None)
    if memory is None:
        return
    if isinstance(serializer, RunSerializer):
        memory_record(serializer, memory)  # raises EncodeError saying what to do
    raise EncodeError(
        f"the agents' memory ({type(memory).__name__}) could not be recorded with the "
        f"workflow's serializer ({type(serializer).__name__}), so a resumed run would lose "
        f"it; leave the workflow's serializer= out (LetItLoopRuntime records the agents' "
        f"default ChatMemoryBuffer), or run it without the runtime"
    )
