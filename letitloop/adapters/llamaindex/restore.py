"""What a resume of a LlamaIndex workflow run must check and undo, beside folding its ticks.

- ``routed_sends``: the sends a step run in flight at the kill had routed
  already (an agent's tool calls), so that its rerun does not route them again;
- ``Rewound``: the step runs in flight at the kill, in the order they were
  dispatched, so that their reruns' results, done together, are taken in
  that order (``JournalingAdapter.wait_for_next_task``);
- ``memory_lost``: an agent's state recorded without its memory (an earlier
  letitloop left it out), which the agents cannot go on without;
- ``refuse_skipped_memory``: the engine leaves a memory it cannot serialize out
  of the state, with a warning; this refuses it instead, before it is lost.
"""

from __future__ import annotations

import asyncio
from typing import Any

from workflows.context.serializers import BaseSerializer
from workflows.runtime.types.internal_state import BrokerState
from workflows.runtime.types.ticks import TickStepResult

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


class Rewound:
    """The step runs in flight when the process died, in the order they were dispatched.

    The engine restarts them at a resume by step name; a rerun done at the
    same time as another is ranked by the order of the runs the kill
    interrupted (their invocation numbers), known by step and event.
    """

    def __init__(self, state: BrokerState | None, serializer: BaseSerializer) -> None:
        found: list[tuple[int, str, str]] = []
        brokers = [state] if state is not None else []
        while brokers:
            broker = brokers.pop()
            brokers.extend(broker.children.values())
            for step_id, worker in broker.workers.items():
                for execution in worker.in_progress:
                    number = (execution.invocation_id or "").rsplit("_", 1)[-1]
                    found.append(
                        (
                            int(number) if number.isdigit() else 0,
                            str(step_id),
                            serializer.serialize(execution.event),
                        )
                    )
        found.sort()
        #: (step, event as recorded) -> the ranks of its runs in flight, first first.
        self.ranks: dict[tuple[str, str], list[int]] = {}
        for rank, (_, step, event) in enumerate(found):
            self.ranks.setdefault((step, event), []).append(rank)

    def __bool__(self) -> bool:
        return bool(self.ranks)

    def _key(self, task: asyncio.Task[Any], serializer: BaseSerializer) -> tuple[str, str] | None:
        """The step and event of a done worker task's result, if it is a restarted run's."""
        if not self.ranks or task.cancelled() or task.exception() is not None:
            return None
        result = task.result()
        if not isinstance(result, TickStepResult):
            return None
        try:
            key = (str(result.step_id), serializer.serialize(result.event))
        except (ValueError, TypeError):  # not the rerun of a recorded one: unranked
            return None
        return key if key in self.ranks else None

    def rank(self, task: asyncio.Task[Any], serializer: BaseSerializer) -> int | None:
        """The rank of the run a done worker task restarted, None for another task."""
        key = self._key(task, serializer)
        return None if key is None else self.ranks[key][0]

    def take(self, task: asyncio.Task[Any], serializer: BaseSerializer) -> None:
        """Forget the run ``task`` restarted, once the loop took its result."""
        key = self._key(task, serializer)
        if key is not None:
            self.ranks[key].pop(0)
            if not self.ranks[key]:
                del self.ranks[key]


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
