"""An AutoGen agent's tool calls as journal steps.

A tool of a ``StaticWorkbench`` (what ``AssistantAgent(tools=[...])``
makes) has its ``run_json`` journaled; any other workbench (an MCP
workbench) has its ``call_tool`` journaled, its ``ToolResult`` kept as JSON
data. Handoffs are not tool calls here: AutoGen runs them itself, they only
name the next speaker. A tool that streams (``run_json_stream``) is not
journaled.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from autogen_core import CancellationToken
from autogen_core.tools import BaseTool, StaticWorkbench, ToolResult, Workbench

from letitloop.adapters.agentcalls import digest, plain, plain_text
from letitloop.adapters.autogen.calls import AgentCalls
from letitloop.identity.step_names import named
from letitloop.identity.unchecked import unchecked

#: The attribute a wrapped tool or workbench carries: its AgentCalls.
WRAPPED = "_letitloop_calls"


@named("letitloop:autogen.tool")
async def call_tool(identity: Any, call: tuple[Callable[[], Awaitable[Any]]]) -> Any:
    """The step's function: the tool's real call; text subclasses as plain text."""
    del identity
    (run,) = call
    return plain_text(await run())


def wrap_tool(tool: BaseTool[Any, Any], calls: AgentCalls) -> None:
    """Journal ``tool.run_json`` (in place, once)."""
    if getattr(tool, WRAPPED, None) is not None:
        return
    run_json = tool.run_json

    async def journaled_run_json(
        args: Mapping[str, Any], cancellation_token: CancellationToken, call_id: str | None = None
    ) -> Any:
        journal = calls.journal()
        identity = plain(dict(args))
        return await calls.step(
            journal,
            calls.tool_key(journal, tool.name, call_id or digest(identity)),
            call_tool,
            identity,
            unchecked((lambda: run_json(args, cancellation_token, call_id=call_id),)),
        )

    tool.run_json = journaled_run_json  # type: ignore[method-assign]
    setattr(tool, WRAPPED, calls)


def wrap_workbench(workbench: Workbench, calls: AgentCalls) -> None:
    """Journal the calls of ``workbench``'s tools (in place, once)."""
    if isinstance(workbench, StaticWorkbench):
        for tool in workbench._tools:
            if isinstance(tool, BaseTool):
                wrap_tool(tool, calls)
        return
    if getattr(workbench, WRAPPED, None) is not None:
        return
    call_tool_of = workbench.call_tool

    async def recorded(
        name: str, arguments: Mapping[str, Any] | None, token: Any, call_id: str | None
    ) -> dict[str, Any]:
        result = await call_tool_of(name, arguments, token, call_id)
        dumped: dict[str, Any] = result.model_dump(mode="json")
        return dumped

    async def journaled_call_tool(
        name: str,
        arguments: Mapping[str, Any] | None = None,
        cancellation_token: CancellationToken | None = None,
        call_id: str | None = None,
    ) -> ToolResult:
        journal = calls.journal()
        identity = plain(dict(arguments or {}))
        record = await calls.step(
            journal,
            calls.tool_key(journal, name, call_id or digest(identity)),
            call_tool,
            identity,
            unchecked((lambda: recorded(name, arguments, cancellation_token, call_id),)),
        )
        return ToolResult.model_validate(record)

    workbench.call_tool = journaled_call_tool  # type: ignore[method-assign]
    setattr(workbench, WRAPPED, calls)
