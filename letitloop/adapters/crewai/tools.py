"""A CrewAI tool's executions as journal steps: each one runs once, then replays.

:func:`wrap_tool` wraps the innermost call of one tool instance, the one
every path of CrewAI reaches (its native tool calls call ``tool.run``, its
text tool calls a structured copy made from ``tool._run``): ``func`` for a
``@tool`` function, ``_run`` for a ``BaseTool`` subclass. CrewAI's own
bookkeeping around it (argument validation, usage limits, its tool cache,
hooks and events) runs as it would unwrapped, on a replay too, so the
agent's state is rebuilt as the first attempt built it.

Under a kickoff of a wrapped crew each execution is the step
``tool:<name>:<digest>`` whose identity is its arguments: a replay hands
back the result recorded for the same arguments, whatever order the
parallel calls of one answer run in. The result must be a value the journal's codec
encodes (text, numbers, lists, dicts, dataclasses, pydantic models…);
anything else is refused before anything is written (EncodeError).
"""

from __future__ import annotations

from typing import Any

from crewai.tools import BaseTool
from crewai.tools.base_tool import Tool

from ...identity.step_names import named
from .calls import active, journaled, step_name
from .llms import WRAPPED, plain


class ToolCall:
    """One execution of a wrapped tool: the original function and its arguments."""

    def __init__(self, original: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.original = original
        self.args = args
        self.kwargs = kwargs


@named("letitloop:crewai.tool")
def tool_call(call: ToolCall, identity: Any) -> Any:
    """The step's function: run the tool's own code."""
    return call.original(*call.args, **call.kwargs)


def wrap_tool(tool: BaseTool) -> BaseTool:
    """Make ``tool``'s executions journal steps under a wrapped crew's kickoff; returns ``tool``.

    Wrapping twice is wrapping once. Outside a kickoff the tool runs as it
    would unwrapped.
    """
    if getattr(tool, WRAPPED, False):
        return tool
    attribute = "func" if isinstance(tool, Tool) else "_run"
    original = getattr(tool, attribute)
    name = f"tool:{step_name(tool.name)}"

    def journaled_run(*args: Any, **kwargs: Any) -> Any:
        session = active.get()
        if session is None:
            return original(*args, **kwargs)
        identity = {"args": plain(list(args)), "kwargs": plain(kwargs)}
        return journaled(session, name, tool_call, ToolCall(original, args, kwargs), identity)

    object.__setattr__(tool, attribute, journaled_run)
    object.__setattr__(tool, WRAPPED, True)
    return tool
