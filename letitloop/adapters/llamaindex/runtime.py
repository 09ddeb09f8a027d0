"""``LetItLoopRuntime``: a LlamaIndex workflow runtime whose tick log is the journal.

llama-index-workflows drives a workflow by *ticks* (an event added, a step's
result, a timeout…) that a reducer folds into the run's broker state; its
runtime API hands each tick to the run's internal adapter (``on_tick``) after
folding it and before acting on it, and ``BasicRuntime.restore`` folds a
recorded tick log back into a state ready to run. This runtime records every
tick as one step of the open journal, keyed by its number in the workflow run
(``Pipeline.00004:step_result:count``), with the context state (``ctx.store``)
beside a step's result whenever it changed. A workflow run in a journal that
holds ticks resumes from them: the broker state is folded back (a step whose
result was recorded is done; the events that were in flight are queued again)
and the context state is the last one recorded, so ``await workflow.run()``
runs only what was not finished. A run whose final ``StopEvent`` was recorded
returns it and runs nothing.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from typing import Any, cast

from workflows.context.context_types import SerializedContext
from workflows.context.serializers import BaseSerializer
from workflows.context.state_store import DictState, InMemoryStateStore
from workflows.events import StartEvent, StopEvent
from workflows.plugins.basic import (
    BasicRuntime,
    InternalAsyncioAdapter,
    JournalRecord,
    get_current_run_id,
)
from workflows.runtime.types.internal_state import BrokerState
from workflows.runtime.types.plugin import ExternalRunAdapter, InternalRunAdapter
from workflows.runtime.types.results import StepWorkerResult, StepWorkerStateContextVar
from workflows.runtime.types.ticks import (
    TickAddEvent,
    TickStepResult,
    WorkflowTick,
    WorkflowTickAdapter,
)
from workflows.workflow import Workflow

from ...errors import DecodeError, StepMismatchError
from ...inspection import open_inspector
from ...journal import Journal, current_journal
from ...unchecked import unchecked
from .agents import accept_runtime
from .llms import agents_of, current_run, journal_llms
from .restore import memory_lost, refuse_skipped_memory, routed_sends
from .serializer import RunSerializer


async def tick(row: dict[str, Any]) -> dict[str, Any]:
    """A tick's step function: the tick (and the state after a step) as recorded."""
    return row


#: Workflow runs started so far in each open journal (their keys' prefix).
_runs: weakref.WeakKeyDictionary[Journal, int] = weakref.WeakKeyDictionary()


def open_journal() -> Journal | None:
    """The journal open in this context, or None."""
    journal = current_journal.get()
    return journal if journal is not None and journal.is_open else None


def label(t: WorkflowTick) -> str:
    """What a tick's key says after its number: its type, and the step it is for."""
    step = getattr(t, "step_id", None)
    return f"{t.type}:{step}" if step else t.type


class JournaledRun:
    """One workflow run in a journal: its keys' prefix, its next tick's number, its state.

    Owned by the run's internal adapter once the run starts (the control loop
    calls ``on_tick`` one tick at a time), by ``LetItLoopRuntime.run_workflow``
    before.
    """

    def __init__(self, journal: Journal, prefix: str, serializer: BaseSerializer) -> None:
        self.journal = journal
        self.prefix = prefix
        self.serializer = serializer
        self.seq = 0
        #: The StopEvent recorded with its result's type (``record``), once read back.
        self.stop: Any = None
        #: Sends of step runs that were in flight when the process died, already routed:
        #: (step name, work item) -> the sends' numbers (see ``JournalingAdapter.send_event``).
        self.routed: dict[tuple[str, str | None], set[int]] = {}
        #: Sends dropped as routed already, by the invocation that made them again.
        self.dropped: dict[str, set[int]] = {}
        #: The context state last recorded (JSON text), to record it only when it changed.
        self.state_text: str | None = None

    def recorded_keys(self) -> dict[int, str]:
        """This run's recorded tick keys by number (read-only, from the journal file)."""
        inspector = open_inspector(self.journal.path)
        try:
            keys = inspector.step_keys(self.journal.run_id, self.prefix)
        finally:
            inspector.close()
        by_number: dict[int, str] = {}
        for key in keys:
            number = key[len(self.prefix) :].split(":", 1)[0]
            if number.isdigit():
                by_number[int(number)] = key
        return by_number

    def replay(self) -> tuple[list[WorkflowTick], dict[str, Any] | None]:
        """The ticks recorded for this run, in order, and the last context state recorded.

        Each comes back through the journal (a replayed step): nothing is
        called. Numbering goes on after them. Raises DecodeError naming the
        key when a recorded tick cannot be read back with this workflow's
        serializer (nothing runs, nothing is written).
        """
        journal = self.journal
        if journal.attempt == 1 and not journal.was_completed:
            return [], None  # a run this process started: nothing recorded before
        keys = self.recorded_keys()
        ticks: list[WorkflowTick] = []
        state: dict[str, Any] | None = None
        while len(ticks) in keys:
            # Replayed, never called (the key is recorded): the recorded row comes back.
            key = keys[len(ticks)]
            row = cast("dict[str, Any]", self.journal.step(key, tick, unchecked(None)))
            try:
                with self.serializer.validation_context():
                    ticks.append(
                        WorkflowTickAdapter.validate_python(
                            self.serializer.deserialize(json.dumps(row["tick"]))
                        )
                    )
                    if "stop" in row:
                        self.stop = self.serializer.deserialize(json.dumps(row["stop"]))
            except (ValueError, TypeError, KeyError) as exc:
                raise self.unreadable(key, exc) from exc
            if row.get("state") is not None:
                state = row["state"]
        self.seq = len(ticks)
        if state is not None:
            self.state_text = json.dumps(state, sort_keys=True)
        return ticks, state

    def unreadable(self, key: str, exc: BaseException) -> DecodeError:
        """The error for a recorded tick or state this workflow cannot read back."""
        journal = self.journal
        return DecodeError(
            f"workflow {self.prefix.rstrip('.')!r} in run {journal.run_id} of goal "
            f"{journal.goal!r}: step {key!r} was recorded with a value this workflow cannot "
            f"read back ({exc}); run it with the workflow (agents, events, state type) that "
            f"recorded it, or reset it with 'lil reset {journal.goal} --run {journal.run_id}'"
        )

    async def record(self, t: WorkflowTick, state: dict[str, Any] | None) -> None:
        """Record tick ``t`` as the run's next step (committed when this returns).

        A step result that returned a StopEvent also keeps that event in the
        row (``stop``) as this serializer writes it, so its result comes back
        with its type (an agent's ``AgentOutput``), where the tick's own JSON
        form holds it as a dict.
        """
        row: dict[str, Any] = {"tick": json.loads(self.serializer.serialize(t))}
        final = final_event([t])
        if final is not None:
            row["stop"] = json.loads(self.serializer.serialize(final))
        if state is not None:
            text = json.dumps(state, sort_keys=True)
            if text != self.state_text:
                row["state"] = state
                self.state_text = text
        key = f"{self.prefix}{self.seq:05d}:{label(t)}"
        self.seq += 1
        await self.journal.async_step(key, tick, unchecked(row))


def final_event(ticks: list[WorkflowTick]) -> StopEvent | None:
    """The StopEvent a recorded step returned: the run's result, once it finished."""
    for t in reversed(ticks):
        if isinstance(t, TickStepResult):
            for r in t.result:
                if isinstance(r, StepWorkerResult) and isinstance(r.result, StopEvent):
                    return r.result
    return None


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
                key = f"{run.prefix}{n:05d}:{label(t)}"
                raise StepMismatchError(
                    f"workflow {run.prefix.rstrip('.')!r} in run {journal.run_id} of goal "
                    f"{journal.goal!r} was started with {json.dumps(recorded)[:200]} (step "
                    f"{key!r}) and is now run with {json.dumps(called)[:200]}: its recorded "
                    f"steps belong to the first start event. Run it with the same input to "
                    f"resume it, give this input a run of its own (Journal(goal, run=...)), "
                    f"or reset it with 'lil reset {journal.goal} --run {journal.run_id}'"
                )
            return


class JournalingAdapter(InternalAsyncioAdapter):
    """The run's internal adapter: each tick is recorded before the control loop acts on it."""

    def __init__(self, runtime: LetItLoopRuntime, run_id: str, run: JournaledRun) -> None:
        super().__init__(runtime.queues_of(run_id))
        self.run = run

    async def send_event(self, t: WorkflowTick) -> None:
        """Forward a tick, but not a send the killed run of this step had routed already.

        The rerun of a step makes its sends in the same order as the run the
        kill interrupted; the n-th is dropped when that run's n-th was routed
        (and left out of the step's recorded result, ``on_tick``), so a tool
        call an agent's step had sent is not called twice.
        """
        run = self.run
        if run.routed and isinstance(t, TickAddEvent) and t.emission is not None:
            try:
                worker = StepWorkerStateContextVar.get().state
            except LookupError:
                worker = None
            if worker is not None:
                routed = run.routed.get((worker.step_name, worker.work_item_id), set())
                if t.emission.index in routed:
                    run.dropped.setdefault(t.emission.invocation_id, set()).add(t.emission.index)
                    return
        await super().send_event(t)

    async def on_tick(self, t: WorkflowTick) -> None:
        recorded = t
        if isinstance(t, TickStepResult) and t.invocation_id in self.run.dropped:
            dropped = self.run.dropped[t.invocation_id]
            # Recorded without them: a later resume must not deliver them again.
            recorded = t.model_copy(
                update={"sends": [s for s in t.sends if s.index not in dropped]}
            )
        state = None
        if isinstance(t, TickStepResult):
            store = self.get_state_store()
            if store is not None:
                state = store.to_dict(self.run.serializer)
                await refuse_skipped_memory(store, state, self.run.serializer)
        await self.run.record(recorded, state)
        await super().on_tick(t)


class LetItLoopRuntime(BasicRuntime):
    """A workflow runtime whose runs are durable inside ``with Journal(goal):``.

    ``Pipeline(runtime=LetItLoopRuntime())``; then ``await wf.run(...)`` inside
    an open journal (``with``/``async with Journal``, ``@durable_async``)
    records every tick as a step and resumes a run killed half-way at the
    steps that had not returned. Outside a journal it runs as
    ``BasicRuntime`` does, journaling nothing. The n-th workflow run in one
    journal's run is keyed ``Pipeline.`` for the first, ``Pipeline#2.`` for the
    second: run them one after the other.
    """

    def __init__(self) -> None:
        super().__init__()
        accept_runtime()  # FunctionAgent(..., runtime=LetItLoopRuntime()) keeps it
        # An allow-list, empty but for what each workflow declares (its events and
        # its state type, added by get_serializer): a recorded tick never makes the
        # serializer import a class because the journal file names it.
        self._default_serializer = RunSerializer(allowed_types=())
        self._journaled: dict[str, JournaledRun] = {}

    def queues_of(self, run_id: str) -> Any:
        """The asyncio queues BasicRuntime keeps for the run ``run_id``."""
        return self._queues[run_id]

    def run_workflow(
        self,
        run_id: str,
        workflow: Workflow,
        init_state: BrokerState,
        start_event: StartEvent | None = None,
        serialized_state: dict[str, Any] | None = None,
        serializer: BaseSerializer | None = None,
    ) -> ExternalRunAdapter:
        journal = open_journal()
        if journal is None:
            return super().run_workflow(
                run_id, workflow, init_state, start_event, serialized_state, serializer
            )
        # The workflow's own serializer if it has one, else ours: never the unrestricted
        # default a fresh Context hands in.
        active = self.get_serializer(workflow)
        number = _runs.get(journal, 0) + 1
        _runs[journal] = number
        name = type(workflow).__name__
        run = JournaledRun(journal, f"{name}." if number == 1 else f"{name}#{number}.", active)
        ticks, state = run.replay()
        if ticks:
            if start_event is not None:
                check_start(run, ticks, start_event)
            final = run.stop if run.stop is not None else final_event(ticks)
            store = self._recorded_store(run, state, active)
            if agents_of(workflow) and memory_lost(state):
                raise run.unreadable(
                    f"{run.prefix}* (context state)",
                    ValueError(
                        "the agents' memory is not in it: an earlier letitloop left it out, "
                        "and the agents cannot go on without it"
                    ),
                )
            if final is not None:
                return self._finished(run_id, init_state, final, store, active)
            records = [JournalRecord(seq=n, data=active.serialize(t)) for n, t in enumerate(ticks)]
            try:
                restored = self.restore(workflow, None, records, active).to_dict(serializer=active)
                init_state = BrokerState.from_serialized(
                    SerializedContext.from_dict_auto(restored, active), workflow, active
                )
            except (ValueError, TypeError, KeyError) as exc:
                raise run.unreadable(f"{run.prefix}*", exc) from exc
            run.routed = routed_sends(init_state)
            start_event = None  # the recorded one was added already
            serialized_state = state
        self._journaled[run_id] = run
        journal_llms(workflow)
        # The run's tasks (its control loop, then its steps) are made now and copy this
        # context: an agent's model calls find their run there (llms.py).
        token = current_run.set(run)
        try:
            adapter = super().run_workflow(
                run_id, workflow, init_state, start_event, serialized_state, active
            )
        finally:
            current_run.reset(token)
        self._queues[run_id].complete.add_done_callback(lambda _: self._journaled.pop(run_id, None))
        return adapter

    @staticmethod
    def _recorded_store(
        run: JournaledRun, state: dict[str, Any] | None, serializer: BaseSerializer
    ) -> InMemoryStateStore[Any]:
        """The context state last recorded, as a store; DecodeError if it cannot be read back."""
        if state is None:
            return InMemoryStateStore(DictState())
        try:
            return InMemoryStateStore.from_dict(state, serializer)
        except (ValueError, TypeError, KeyError) as exc:
            raise run.unreadable(f"{run.prefix}* (context state)", exc) from exc

    def _finished(
        self,
        run_id: str,
        init_state: BrokerState,
        final: StopEvent,
        store: InMemoryStateStore[Any],
        serializer: BaseSerializer,
    ) -> ExternalRunAdapter:
        """A run that returned ``final`` in an earlier attempt: it comes back, nothing runs."""
        queues = self._get_or_create_queues(run_id, init_state)
        queues.state_store = store
        queues.serializer = serializer

        async def finished() -> StopEvent:
            queues.publish_queue.put_nowait(final)
            return final

        queues.complete = asyncio.get_running_loop().create_task(finished())
        return self.get_external_adapter(run_id)

    def get_internal_adapter(self, workflow: Workflow) -> InternalRunAdapter:
        run_id = get_current_run_id()
        run = self._journaled.get(run_id) if run_id is not None else None
        if run is None or run_id is None:
            return super().get_internal_adapter(workflow)
        return JournalingAdapter(self, run_id, run)
