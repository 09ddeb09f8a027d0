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
import os
import weakref
from datetime import timedelta
from typing import Any

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
from workflows.runtime.types.named_task import (
    NamedTask,
    PendingStart,
    PullTask,
    WorkerTask,
    all_tasks,
)
from workflows.runtime.types.plugin import (
    ExternalRunAdapter,
    InternalRunAdapter,
    WaitForNextTaskResult,
)
from workflows.runtime.types.results import StepWorkerStateContextVar
from workflows.runtime.types.ticks import (
    TickAddEvent,
    TickStepResult,
    WorkflowTick,
)
from workflows.workflow import Workflow

from ...run.journal import Journal, current_journal
from ..agentcalls import DEFAULT_TIMEOUT
from .agents import accept_runtime
from .journaled import JournaledRun, final_event
from .llms import agents_of, current_run, journal_llms
from .owned import RunOptions, closed_with
from .restore import Rewound, check_start, memory_lost, refuse_skipped_memory, routed_sends
from .serializer import RunSerializer

#: Workflow runs started so far in each open journal (their keys' prefix).
_runs: weakref.WeakKeyDictionary[Journal, int] = weakref.WeakKeyDictionary()


def open_journal() -> Journal | None:
    """The journal open in this context, or None."""
    journal = current_journal.get()
    return journal if journal is not None and journal.is_open else None


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

    async def wait_for_next_task(
        self,
        running: list[NamedTask],
        pending: list[PendingStart],
        timeout: float | None = None,
    ) -> WaitForNextTaskResult:
        """The next task done; of those done together, the first in one order, whatever
        their age: the pull, then the workers in the order their steps were dispatched.

        The engine's own choice takes the tasks of earlier passes of its loop
        first (workers in no set order), then workers before its mailbox's pull.
        A resumed run's first pass has a new pull where the interrupted run's
        was waiting already, and restarts the steps in flight at the kill by
        name, not in the order they were dispatched: the same tasks done
        together were taken in another order, a tick recorded before another
        instead of after it, and every later tick's key changed. Here the pull
        comes first (a step's sends reached it before the step returned), then
        the steps restarted by the resume in the order the interrupted run had
        dispatched them, then the others in the order they were started.
        """
        run = self.run
        started = [p.start(asyncio.create_task(p.coro)) for p in pending]
        for nt in started:
            if isinstance(nt, WorkerTask):
                run.dispatched[nt.task] = next(run.dispatches)
        named = running + started
        tasks = all_tasks(named)
        if not tasks:
            return WaitForNextTaskResult(None, started)
        done, _ = await asyncio.wait(tasks, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finished = [nt for nt in named if nt.task in done]
        if not finished:
            return WaitForNextTaskResult(None, started)
        first = min(finished, key=self.rank) if len(finished) > 1 else finished[0]
        run.dispatched.pop(first.task, None)
        if run.rewound:
            run.rewound.take(first.task, run.serializer)
        return WaitForNextTaskResult(first.task, started)

    def rank(self, task: NamedTask) -> tuple[int, int]:
        """A done task's place among those done together (``wait_for_next_task``)."""
        if isinstance(task, PullTask):
            return (0, task.sequence)
        restarted = self.run.rewound.rank(task.task, self.run.serializer)
        if restarted is not None:
            return (1, restarted)
        return (2, self.run.dispatched.get(task.task, 0))

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
        if not self.run.hold(t):
            await self.run.record(recorded, state)
        await super().on_tick(t)


class LetItLoopRuntime(BasicRuntime):
    """A workflow runtime whose every run is durable: ``Pipeline(runtime=LetItLoopRuntime())``.

    ``await wf.run(...)`` records every tick as a step and resumes a run
    killed half-way at the steps that had not returned. Outside an open
    journal each ``wf.run`` is a journal run of its own (owned.py), of goal
    ``goal`` (default: the workflow's class name): ``run``'s turn (``run``,
    ``{run}.turn2`` …), else the request itself, the start event and the
    context state it continues (a conversation's next turn, ``wf.run(ctx=ctx,
    ...)``, is a request of its own). The same request is the same run:
    resumed after a kill, replayed once completed (for ``reuse`` seconds,
    default ``agentcalls.DEFAULT_REUSE``, an hour; ``fresh=True`` asks for a
    new answer), waited for while another process runs it (up to ``timeout``
    seconds; default: as long as it lives). ``path``: the journal file
    (default: ``$LETITLOOP_DB``, else ``.letitloop/journal.db``). Inside an
    open journal (``with``/``async with Journal``, ``@durable_async``) the
    run's ticks go to that journal's run instead: the n-th workflow run in it
    is keyed ``Pipeline.`` for the first, ``Pipeline#2.`` for the second; run
    them one after the other.
    """

    def __init__(
        self,
        goal: str | None = None,
        *,
        run: str | None = None,
        reuse: float | timedelta | None = None,
        fresh: bool = False,
        path: str | os.PathLike[str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        super().__init__()
        accept_runtime()  # FunctionAgent(..., runtime=LetItLoopRuntime()) keeps it
        # An allow-list, empty but for what each workflow declares (its events and
        # its state type, added by get_serializer): a recorded tick never makes the
        # serializer import a class because the journal file names it.
        self._default_serializer = RunSerializer(allowed_types=())
        self._journaled: dict[str, JournaledRun] = {}
        #: The run of each wf.run outside an open journal (owned.py).
        self.options = RunOptions(goal, run, reuse, fresh, path, timeout)

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
        if journal is not None:
            return self._journaled_run(
                journal, run_id, workflow, init_state, start_event, serialized_state
            )
        owned = self.options.open(type(workflow).__name__, start_event, serialized_state)
        # The run's tasks are made now and copy this context: the journal is theirs.
        token = current_journal.set(owned)
        try:
            adapter = self._journaled_run(
                owned, run_id, workflow, init_state, start_event, serialized_state
            )
        except BaseException as exc:
            owned.close(exc)
            raise
        finally:
            current_journal.reset(token)
        queues = self._queues[run_id]
        queues.complete = asyncio.get_running_loop().create_task(
            closed_with(owned, queues.complete)
        )
        return adapter

    def _journaled_run(
        self,
        journal: Journal,
        run_id: str,
        workflow: Workflow,
        init_state: BrokerState,
        start_event: StartEvent | None,
        serialized_state: dict[str, Any] | None,
    ) -> ExternalRunAdapter:
        """Run ``workflow`` in ``journal``'s run: replay its recorded ticks, then go on."""
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
                return self._finished(run_id, init_state, ticks, final, store, active)
            # Folded onto the state the run started from: a new one's, or, for a turn that
            # continues a context (wf.run(ctx=...)), that context's, whose tick count the
            # records' numbers go on from.
            base = init_state.journal_seq
            snapshot = init_state.to_serialized(active).model_dump(mode="python")
            records = [
                JournalRecord(seq=base + n, data=active.serialize(t)) for n, t in enumerate(ticks)
            ]
            try:
                restored = self.restore(workflow, snapshot, records, active).to_dict(
                    serializer=active
                )
                init_state = BrokerState.from_serialized(
                    SerializedContext.from_dict_auto(restored, active), workflow, active
                )
            except (ValueError, TypeError, KeyError) as exc:
                raise run.unreadable(f"{run.prefix}*", exc) from exc
            run.routed = routed_sends(init_state)
            run.rewound = Rewound(init_state, active)
            if any(isinstance(t, TickAddEvent) and isinstance(t.event, StartEvent) for t in ticks):
                start_event = None  # the recorded one was added already
            # Else the run was killed before its start event's tick was recorded (only its
            # session's start was): the start event is added now, or the run waits forever.
            if state is not None:  # else the state it started from (a turn's, continued)
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
        ticks: list[WorkflowTick],
        final: StopEvent,
        store: InMemoryStateStore[Any],
        serializer: BaseSerializer,
    ) -> ExternalRunAdapter:
        """A run that returned ``final`` in an earlier attempt: it comes back, nothing runs.

        Its context is the finished run's (its state folded from ``ticks`` on the
        state it started from), so a next turn that continues it (``wf.run(ctx=...)``)
        asks what it asked after the uninterrupted run.
        """
        queues = self._get_or_create_queues(run_id, init_state)
        queues.ticks = list(ticks)
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
