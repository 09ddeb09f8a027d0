"""What a resume of a LlamaIndex workflow run must check and undo, beside folding its ticks.

- ``routed_sends``: the sends a step run in flight at the kill had routed
  already (an agent's tool calls), so that its rerun does not route them again;
- ``Rewound``: the step runs in flight at the kill, in the order they were
  dispatched, so that their reruns' results, done together, are taken in
  that order (``JournalingAdapter.wait_for_next_task``);
- ``memory_lost``: an agent's state recorded without its memory (an earlier
  letitloop left it out), which the agents cannot go on without;
- ``refuse_skipped_memory``: the engine leaves a memory it cannot serialize out
  of the state, with a warning; this refuses it instead, before it is lost;
- ``check_start``: a run recorded with another start event than the one it is
  resumed with is refused.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from workflows.context.serializers import BaseSerializer
from workflows.events import StartEvent
from workflows.runtime.types.internal_state import BrokerState
from workflows.runtime.types.ticks import TickAddEvent, TickStepResult, WorkflowTick

from ...errors import EncodeError, StepMismatchError
from ...integrity.sealcheck import ways_out
from .serializer import RunSerializer, memory_record

if TYPE_CHECKING:
    from .journaled import JournaledRun


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


def shown(event: StartEvent) -> str:
    """A start event for an error: its type's name and its fields, cut short."""
    text = f"{type(event).__name__}({json.dumps(event.model_dump(mode='json'), sort_keys=True)})"
    return text if len(text) <= 200 else text[:199] + "…"


def check_start(run: JournaledRun, ticks: list[WorkflowTick], start: StartEvent) -> None:
    """Refuse to resume a run recorded with another start event than ``start``.

    Raises StepMismatchError naming the run, the key and both events: the run's
    recorded steps were made for the recorded start and are never handed to
    another (nothing is run, nothing written).
    """
    for n, t in enumerate(ticks):
        if isinstance(t, TickAddEvent) and isinstance(t.event, StartEvent):
            recorded = json.loads(run.serializer.serialize(t.event))
            called = json.loads(run.serializer.serialize(start))
            if recorded != called:
                journal = run.journal
                key = run.keys[n]
                name = journal.generation or journal.run_name or journal.run_id
                raise StepMismatchError(
                    f"workflow {run.prefix.rstrip('.')!r}: run {name!r} of goal "
                    f"{journal.goal!r} was started with {shown(t.event)} (step {key!r}), "
                    f"and this wf.run starts it with {shown(start)}: its recorded steps "
                    f"belong to the first start event; nothing was run. Ways out: give this "
                    f"request a run of its own (LetItLoopRuntime(run='...') or "
                    f"Journal(goal, run='...'); with neither, each start event is a run of "
                    f"its own), {ways_out(journal, key)}",
                    run_id=journal.run_id,
                    key=key,
                    differences="the start event",
                )
            return
