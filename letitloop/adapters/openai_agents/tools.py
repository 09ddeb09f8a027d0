"""A function tool's calls as journal steps, keyed by the call id the model gave them.

The SDK runs the tool calls of one model response concurrently, each in a
task of its own, so a call is keyed ``tool:{name}:{call_id}``: the id comes
from the journaled model response, the same in every attempt, and never
depends on which call starts or finishes first. The identity checked on
replay is the arguments' JSON text.

``wrap_tool`` replaces the tool's ``on_invoke_tool`` (in place, once) with a
:class:`JournaledInvoker` that hands every other attribute to the SDK's own
invoker (argument preparation for approvals, the failure handling that turns
an exception into a message for the model): a tool that failed that way is
recorded with the message the model saw.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agents.tool import FunctionTool
from agents.tool_context import ToolContext

from letitloop.adapters.agentcalls import plain_text
from letitloop.adapters.approved import run_once
from letitloop.adapters.openai_agents.calls import StoppedToWait, approved, journal_for
from letitloop.identity.step_names import named
from letitloop.identity.unchecked import unchecked
from letitloop.primitives.waits import RunWaiting
from letitloop.run.journal import Journal

Invoke = Callable[[ToolContext[Any], str], Awaitable[Any]]


@named("letitloop:openai_agents.tool")
async def call_tool(arguments: str, call: tuple[Invoke, ToolContext[Any]]) -> Any:
    """The step's function: the tool's real call (``arguments`` is its identity too)."""
    invoke, ctx = call
    return plain_text(await invoke(ctx, arguments))


@named("letitloop:openai_agents.approved_tool")
async def call_approved(
    arguments: str, call: tuple[Invoke, ToolContext[Any], Journal, float | None]
) -> Any:
    """The step's function of an approved call: run once (approved.py), the answer its
    output; cut short by a crash, not run again unless a person says so."""
    invoke, ctx, journal, stop_after = call
    what = f"{ctx.tool_name}({arguments})"

    async def run() -> Any:
        return plain_text(await invoke(ctx, arguments))

    try:
        return await run_once(
            journal, ctx.tool_call_id, what, run, lambda message: message, stop_after=stop_after
        )
    except RunWaiting as stop:
        raise StoppedToWait(stop) from None


class JournaledInvoker:
    """A tool's ``on_invoke_tool`` whose every call is the step ``tool:{name}:{call_id}``."""

    def __init__(self, invoke: Invoke) -> None:
        self.invoke = invoke

    async def __call__(self, ctx: ToolContext[Any], arguments: str) -> Any:
        journal = journal_for(f"tool call {ctx.tool_name!r}")
        key = f"tool:{ctx.tool_name}:{ctx.tool_call_id}"
        calls = approved.get(journal, {})
        if ctx.tool_call_id in calls:
            return await journal.async_step(
                key,
                call_approved,
                arguments,
                unchecked((self.invoke, ctx, journal, calls[ctx.tool_call_id])),
            )
        return await journal.async_step(key, call_tool, arguments, unchecked((self.invoke, ctx)))

    def __agents_bind_function_tool__(self, tool: FunctionTool) -> JournaledInvoker:
        # A copied tool (FunctionTool.__copy__) rebinds its invoker: keep it journaled.
        bind = getattr(self.invoke, "__agents_bind_function_tool__", None)
        return self if bind is None else JournaledInvoker(bind(tool))

    def __getattr__(self, name: str) -> Any:
        # Everything else is the SDK's invoker's: prepare_arguments, its markers.
        return getattr(self.invoke, name)


def wrap_tool(tool: FunctionTool) -> FunctionTool:
    """``tool`` with its calls journaled (in place, once); returns it."""
    if not isinstance(tool.on_invoke_tool, JournaledInvoker):
        tool.on_invoke_tool = JournaledInvoker(tool.on_invoke_tool)
    return tool
