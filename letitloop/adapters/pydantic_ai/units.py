"""Pydantic AI's durable units as journal steps: the run's state and the operation backend.

Every unit Pydantic AI hands a durable engine (a model request, a tool call,
toolset discovery, an event handler call) arrives at ``LetItLoopBackend.execute``
and becomes one async step of the journal. Its key is a sequence number in the
agent run plus the unit's name (``0003:support__model.request``): Pydantic AI's
``cache_key`` is not stable across processes, and tools run one at a time in a
durable run (the engine spec asks for it), so the order of the units is the
order of the run, the same in every attempt.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from pydantic_ai.durable_exec import (
    DurableOperationId,
    JournalCallableOperationBackend,
    ModelRequestId,
    RoleBasedOperationConfig,
    ToolsetCallToolId,
    record_durable_unit,
)
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import DeferredToolRequests

from ...errors import NoJournalError
from ...identity.step_names import Named
from ...primitives.waits import RunWaiting
from ...run.durable import usage
from ...run.journal import Journal
from ..approved import run_once
from ..reserving import max_tokens_of, reserve_call
from .decisions import call_text
from .streaming import in_stream_unit


@dataclass
class AgentRun:
    """One agent run inside a journal: the journal and the next unit's number.

    Shared by the tasks of the run (a ContextVar holds the object, not the
    number); units are numbered in the order they start, which the engine
    keeps sequential.
    """

    journal: Journal
    agent: str
    #: Empty for the first agent run in the journal's attempt, ``run2.`` for the
    #: second (each agent run runs in tasks of its own: two runs' ``0000:`` keys
    #: would be refused as concurrent calls of one name).
    prefix: str = ""
    count: int = 0
    #: The deferred calls the next wait is for (the capability's
    #: ``handle_deferred_tool_calls`` sets them; the waiter takes them).
    pending: DeferredToolRequests | None = None
    #: The call ids approved so far in this agent run (each runs once: approved.py).
    approved: set[str] = field(default_factory=set)
    #: The capability's ``stop_after``: how long a wait keeps the process.
    stop_after: float | None = None

    def next_key(self, name: str) -> str:
        """The key of the next unit named ``name``: ``0003:name`` (``run2.0003:name``)."""
        key = f"{self.prefix}{self.count:04d}:{name}"
        self.count += 1
        return key


#: The agent run in progress in this context (set by the capability's wrap_run).
active_run: ContextVar[AgentRun | None] = ContextVar("letitloop_pydantic_ai_run", default=None)

#: The approved tool call executing in this context (the capability's wrap_tool_execute).
approved_call: ContextVar[ToolCallPart | None] = ContextVar(
    "letitloop_pydantic_ai_approved_call", default=None
)


def tool_failed(message: str) -> dict[str, str]:
    """A tool unit's payload saying the call failed: Pydantic AI tells the model ``message``.

    The wire form of its ``CallToolResult`` (``kind`` ``tool_failed``), as the
    JSON codec dumps it.
    """
    return {"message": message, "kind": "tool_failed"}


def report_usage(payload: object) -> None:
    """Record a model response's tokens and model on the step running it (letitloop.usage).

    ``payload`` is the response as the JSON codec dumped it: ``usage`` holds
    ``input_tokens`` and ``output_tokens``, ``model_name`` the model. A response
    without usage reports nothing.
    """
    if not isinstance(payload, dict):
        return
    spent = payload.get("usage")
    if not isinstance(spent, dict):
        return
    tokens_in = spent.get("input_tokens")
    tokens_out = spent.get("output_tokens")
    model = payload.get("model_name")
    usage(
        input_tokens=tokens_in if isinstance(tokens_in, int) else None,
        output_tokens=tokens_out if isinstance(tokens_out, int) else None,
        model=model if isinstance(model, str) and model else None,
    )


class StoppedToWait(Exception):
    """Carries ``RunWaiting`` out of the agent run as an ordinary exception.

    Pydantic AI runs a tool's and ``ask``'s sync code in AnyIO worker threads;
    a ``SystemExit`` raised deep inside the agent run's tasks left such a thread
    waiting for work, and the process never exited (measured: it hung in
    ``threading._shutdown``). The capability re-raises ``run_waiting`` once
    the agent run's tasks are done.
    """

    def __init__(self, run_waiting: RunWaiting) -> None:
        super().__init__(str(run_waiting))
        self.run_waiting = run_waiting


class LetItLoopBackend(JournalCallableOperationBackend[None]):
    """Runs each durable unit as an async step of the active agent run's journal.

    A unit whose step returned in an earlier attempt is not run: its recorded
    payload comes back, and Pydantic AI is told it was replayed
    (``record_durable_unit(executed=False)``), so its spans and metrics are not
    reported twice. A model request reports its usage once, when it runs.
    """

    def __init__(self, *, agent_name: str, default_model_id: str | None) -> None:
        super().__init__(
            agent_name=agent_name,
            default_model_id=default_model_id,
            config=RoleBasedOperationConfig(model=None, event=None, capability=None, tool=None),
        )

    async def execute(
        self,
        *,
        operation_id: DurableOperationId,
        name: str,
        body: Callable[[], Awaitable[object]],
        cache_key: tuple[object, ...],
        config: None,
    ) -> object:
        run = active_run.get()
        if run is None:
            raise NoJournalError(
                f"Pydantic AI's durable unit {name!r} ran outside a letitloop agent run; run the "
                "agent inside 'with Journal(goal):' or give LetItLoopDurability(goal=...)"
            )
        ran = False
        is_model_request = isinstance(operation_id, ModelRequestId)
        streamed = is_model_request and getattr(operation_id, "streaming", False)
        approved = approved_call.get() if isinstance(operation_id, ToolsetCallToolId) else None

        async def unit() -> Any:
            nonlocal ran
            ran = True
            if is_model_request:  # cache_key: model id, messages, settings, parameters, …
                prompt, settings = (cache_key[1:2], cache_key[3:4]), cache_key[2:3]
                limit = partial(max_tokens_of, *settings)
                reserve_call(prompt, limit, getattr(operation_id, "model_name", None), None)
            if approved is not None:  # runs once, even if a process dies inside it
                try:
                    return await run_once(
                        run.journal,
                        approved.tool_call_id,
                        call_text(approved),
                        body,
                        tool_failed,
                        stop_after=run.stop_after,
                    )
                except RunWaiting as stop:  # no SystemExit inside the graph's tasks
                    raise StoppedToWait(stop) from None
            token = in_stream_unit.set(streamed)  # its model journals its stream (streaming.py)
            try:
                payload = await body()
            finally:
                in_stream_unit.reset(token)
            if is_model_request:
                report_usage(payload)
            return payload

        result = await run.journal.async_step(
            run.next_key(name), Named("letitloop:pydantic_ai.unit", unit)
        )
        record_durable_unit(executed=ran)
        return result
