"""``LetItLoopDurability``: a Pydantic AI durability capability whose engine is the journal.

Attached to an agent (``Agent(..., capabilities=[LetItLoopDurability()])``), it
makes each agent run a durable run: inside ``with Journal(goal):`` (or
``@durable``) the run's units are steps of that journal; with ``goal=`` it
opens a journal for each agent run itself. Outside both, the agent runs as
usual, journaling nothing.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import Mapping
from datetime import timedelta
from functools import partial
from typing import Any

from pydantic_ai.agent import EventStreamHandler
from pydantic_ai.capabilities.abstract import WrapRunHandler, WrapToolExecuteHandler
from pydantic_ai.durable_exec import (
    JSON_CODEC,
    BaseDurabilityCapability,
    DurabilityEngineSpec,
    conversation_id_from_run_id,
    external_event_scope,
    replay_scope,
)
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.models import Model
from pydantic_ai.run import AgentRunResult
from pydantic_ai.tools import (
    AgentDepsT,
    DeferredToolRequests,
    DeferredToolResults,
    RunContext,
    ToolDefinition,
)

from ...primitives.budgets import Budget
from ...primitives.waits import RunWaiting
from ...run.journal import Journal, current_journal
from ..agentcalls import DEFAULT_REUSE, DEFAULT_TIMEOUT
from .requests import check_request, request_of, run_name
from .streaming import JournaledStreamModel, recovery_of
from .units import AgentRun, LetItLoopBackend, StoppedToWait, active_run, approved_call
from .waiter import JournalWaiter


def _exit(run_waiting: RunWaiting, task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: asyncio does not log it as never retrieved
    raise run_waiting


def exit_when_done(run_waiting: RunWaiting) -> None:
    """End the program with ``run_waiting`` (exit 75, quietly) once this task is done.

    A ``SystemExit`` raised by a task's own code leaves the event loop at once,
    before the callbacks of the task's end run: AnyIO's worker threads (sync
    tools, ``ask``), stopped by one of them, were left waiting for work and the
    process never exited under ``run_sync``; under ``asyncio.run`` it printed
    60 lines of traceback. So the task ends with ``StoppedToWait`` (an
    ordinary exception: journals close ``waiting``), and a done callback,
    registered after AnyIO's, raises the ``RunWaiting`` out of the loop.
    """
    task = asyncio.current_task()
    if task is not None:
        task.add_done_callback(partial(_exit, run_waiting))


#: Agent runs started so far in each open journal (a replay-stable run_id).
_runs_started: weakref.WeakKeyDictionary[Journal, int] = weakref.WeakKeyDictionary()
#: Durable agent runs so far in each open journal (their keys' prefix).
_runs_wrapped: weakref.WeakKeyDictionary[Journal, int] = weakref.WeakKeyDictionary()


def open_journal() -> Journal | None:
    """The journal open in this context, or None."""
    journal = current_journal.get()
    return journal if journal is not None and journal.is_open else None


class LetItLoopDurability(BaseDurabilityCapability[AgentDepsT]):
    """Makes an agent's runs durable in the letitloop journal file.

    ``goal``, ``run``, ``reuse``, ``fresh``, ``path``, ``budget``: the journal
    each agent run opens when none is open around it (``Journal(goal, run=run,
    reuse=reuse, fresh=fresh, path=path, budget=budget)``). With no ``run``,
    the run is the request itself (the prompt and the ``message_history`` it
    continues: requests.py), its recorded answer handed back for ``reuse``
    seconds (default ``DEFAULT_REUSE``, an hour) once completed, and waited
    for while another process runs it. Without ``goal``, an agent run outside
    a journal is not durable. ``stop_after``: seconds a
    wait for outside input (``RequestInput``) keeps the process before it stops
    with ``RunWaiting`` (exit status 75); None waits in the process.
    ``stream_recovery``: what a streamed model request cut by a kill does on the
    next attempt (streaming.py): ``"continue"`` from the journaled text,
    ``"restart"``, or ``"auto"`` (continue an OpenAI-compatible chat model's,
    restart any other's).
    ``models``, ``event_stream_handler``, ``name``: as for every Pydantic AI
    durability capability (the agent's name names its units).
    """

    engine_spec = DurabilityEngineSpec(
        engine_name="letitloop",
        durable_unit_noun="step",
        durable_container_noun="run",
        # Each unit's payload is a step's result: JSON text in the journal, readable.
        codec=JSON_CODEC,
        wrapped_toolset_kinds=frozenset({"function", "mcp", "dynamic"}),
        # MCP: a unit enters the server on first use, so a run replayed to its
        # end never starts the server process.
        toolset_lifecycles={
            "function": "enter-always",
            "mcp": "enter-in-durable-unit",
            "dynamic": "enter-never",
        },
        journal_discovery=True,
        # Units are keyed by their order in the run: tools must run one at a time.
        sequential_tools_in_durable_context=True,
    )

    def __init__(
        self,
        *,
        goal: str | None = None,
        run: str | None = None,
        reuse: float | timedelta | None = None,
        fresh: bool = False,
        path: str | os.PathLike[str] | None = None,
        budget: Budget | Mapping[str, Any] | None = None,
        stop_after: float | None = None,
        stream_recovery: str = "auto",
        models: Mapping[str, Model] | None = None,
        event_stream_handler: EventStreamHandler[AgentDepsT] | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(models=models, event_stream_handler=event_stream_handler, name=name)
        self.goal = goal
        self.run_name = run
        self.reuse = reuse
        self.fresh = fresh
        self.path = path
        self.budget = budget
        self.stop_after = stop_after
        self.stream_recovery = recovery_of(stream_recovery)

    @property
    def in_durable_context(self) -> bool:
        return active_run.get() is not None

    def get_wrapper_model(self, model: Model) -> Model | None:
        # Streamed requests inside a durable unit journal their chunks (streaming.py).
        return JournaledStreamModel(model, self.stream_recovery)

    def get_durable_operation_backend(self) -> LetItLoopBackend:
        return LetItLoopBackend(agent_name=self.name, default_model_id=self.default_model_id)

    def get_default_run_id(self) -> str | None:
        # The same run_id in every attempt: the journal run's id and the agent
        # run's number in it. With goal= the journal is not open yet: None.
        journal = open_journal()
        if journal is None:
            return None
        number = _runs_started.get(journal, 0)
        _runs_started[journal] = number + 1
        return f"{journal.run_id}:{number}"

    def get_default_conversation_id(self, run_id: str) -> str | None:
        return conversation_id_from_run_id(run_id) if open_journal() is not None else None

    async def wrap_run(
        self, ctx: RunContext[AgentDepsT], *, handler: WrapRunHandler
    ) -> AgentRunResult[Any]:
        journal = open_journal()
        if journal is not None:
            request = request_of(ctx.prompt, ctx.messages)
            return await self._durable_run(journal, ctx, handler, request)
        if self.goal is None:
            return await handler()
        request = request_of(ctx.prompt, ctx.messages)
        named = self.run_name is not None
        async with Journal(
            self.goal,
            run=self.run_name if named else run_name(self.name, request),
            reuse=self.reuse if named or self.reuse is not None else DEFAULT_REUSE,
            fresh=self.fresh,
            path=self.path,
            budget=self.budget,
            timeout=DEFAULT_TIMEOUT,
        ) as opened:
            return await self._durable_run(opened, ctx, handler, request)

    async def handle_deferred_tool_calls(
        self, ctx: RunContext[AgentDepsT], *, requests: DeferredToolRequests
    ) -> DeferredToolResults | None:
        # Answers nothing: notes the calls the next wait is for (RequestInput, after this).
        run = active_run.get()
        if run is not None:
            run.pending = requests
        return None

    async def wrap_tool_execute(
        self,
        ctx: RunContext[AgentDepsT],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: dict[str, Any],
        handler: WrapToolExecuteHandler,
    ) -> Any:
        run = active_run.get()
        if run is None or call.tool_call_id not in run.approved:
            return await handler(args)
        token = approved_call.set(call)  # its unit runs once (units.py, approved.py)
        try:
            return await handler(args)
        finally:
            approved_call.reset(token)

    async def on_node_run_error(
        self, ctx: RunContext[AgentDepsT], *, node: Any, error: Exception
    ) -> Any:
        if isinstance(error, StoppedToWait):
            exit_when_done(error.run_waiting)
        raise error

    async def _durable_run(
        self,
        journal: Journal,
        ctx: RunContext[AgentDepsT],
        handler: WrapRunHandler,
        request: dict[str, Any],
    ) -> AgentRunResult[Any]:
        number = _runs_wrapped.get(journal, 0) + 1
        _runs_wrapped[journal] = number
        run = AgentRun(
            journal,
            self.name,
            prefix="" if number == 1 else f"run{number}.",
            stop_after=self.stop_after,
        )
        token = active_run.set(run)
        try:
            await check_request(journal, self.name, f"{run.prefix}{self.name}.request", request)
            waiter = JournalWaiter(run, stop_after=self.stop_after)
            with replay_scope(), external_event_scope(waiter):
                return await super().wrap_run(ctx, handler=handler)
        finally:
            active_run.reset(token)
