"""The names the library records for its own steps, and the names files written before hold.

A step's row records the function that made it, and a replay must find the
same function called there (replay.py). A user's function is recorded as its
``module.qualname``: where the user's code lives is the user's to keep. The
steps the library records itself (a budget, a patch decision, a wait's
expectation, the adapters' model, tool and session calls) are recorded under
a name of their own, ``letitloop:`` and a word, never derived from where the
code that makes them lives: moving a module changes no file (DESIGN.md, "The
file format is a public API"). The colon keeps them apart from every
``module.qualname``, which holds none.

Files written before recorded other names for the same steps (module paths,
or the dotted names ``letitloop.sleep`` and the like): ``OLD_NAMES`` maps each
to its name now, and a replay takes a recorded old name for its new one
(:func:`same_function`), so a run in flight in such a file resumes without
calling again what it recorded (tests/golden/ pins it). Rows keep the name
they were written with; each row's checksum is of that name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

#: A sleep's row (sleeps.py) and a wait's (waits.py).
SLEEP = "letitloop:sleep"
WAIT = "letitloop:wait_for"


class Named(Generic[P, R]):
    """``fn``, recorded as a step under ``name`` instead of its ``module.qualname``.

    ``steps.function_name`` reads the name; the step calls ``fn`` itself.
    Calling a ``Named`` calls ``fn``.
    """

    __slots__ = ("fn", "name")

    def __init__(self, name: str, fn: Callable[P, R]) -> None:
        if name not in NAMES:
            raise ValueError(f"{name!r} is not one of step_names.NAMES; add it there first")
        self.name = name
        self.fn = fn

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Named({self.name!r}, {self.fn!r})"


def named(name: str) -> Callable[[Callable[P, R]], Named[P, R]]:
    """Decorate a function the library records as a step: ``@named("letitloop:budget")``."""

    def mark(fn: Callable[P, R]) -> Named[P, R]:
        return Named(name, fn)

    return mark


#: Each name the library records now, and the names files written before hold for it
#: (letitloop 0.1.0 up to the change that gave these names, main at 66860b7).
HISTORY: dict[str, tuple[str, ...]] = {
    "letitloop:budget": ("letitloop.budgets.record_budget",),
    "letitloop:patch": ("letitloop.patches.decide",),
    SLEEP: ("letitloop.sleep",),
    WAIT: ("letitloop.wait_for",),
    "letitloop:wait_for.expects": ("letitloop.wait_for.expects",),
    "letitloop:autogen.model": ("letitloop.adapters.autogen.client.call_model",),
    "letitloop:autogen.tool": ("letitloop.adapters.autogen.tools.call_tool",),
    "letitloop:demo.work": ("letitloop.demo._work",),
    "letitloop:crewai.llm": ("letitloop.adapters.crewai.llms.model_call",),
    "letitloop:crewai.tool": ("letitloop.adapters.crewai.tools.tool_call",),
    "letitloop:dspy.lm": ("letitloop.adapters.dspy.lm.lm_call",),
    "letitloop:dspy.lm_async": ("letitloop.adapters.dspy.lm.lm_acall",),
    "letitloop:llamaindex.tick": ("letitloop.adapters.llamaindex.journaled.tick",),
    "letitloop:llamaindex.chat": (
        "letitloop.adapters.llamaindex.llms.journaled_chat.<locals>.achat.<locals>.call",
    ),
    "letitloop:llamaindex.stream_chat": (
        "letitloop.adapters.llamaindex.llms.journaled_stream.<locals>.astream_chat.<locals>.call",
    ),
    "letitloop:mcp.tools": ("letitloop.mcp.calls.DurableMCP._listed",),
    "letitloop:mcp.call": ("letitloop.mcp.calls.DurableMCP._call",),
    "letitloop:mcp.sent": ("letitloop.mcp.calls.DurableMCP._sending",),
    "letitloop:openai_agents.model": ("letitloop.adapters.openai_agents.model.call_model",),
    "letitloop:openai_agents.tool": ("letitloop.adapters.openai_agents.tools.call_tool",),
    "letitloop:openai_agents.approved_tool": ("letitloop.openai_agents.approved_call",),
    "letitloop:openai_agents.approvals": ("letitloop.adapters.openai_agents.approvals.state_json",),
    "letitloop:openai_agents.session.get": ("letitloop.adapters.openai_agents.session.read_items",),
    "letitloop:openai_agents.session.add": ("letitloop.adapters.openai_agents.session.add_items",),
    "letitloop:openai_agents.session.pop": ("letitloop.adapters.openai_agents.session.pop_item",),
    "letitloop:openai_agents.session.clear": ("letitloop.adapters.openai_agents.session.clear",),
    "letitloop:pydantic_ai.request": ("letitloop.pydantic_ai.request",),
    "letitloop:pydantic_ai.unit": (
        "letitloop.adapters.pydantic_ai.units.LetItLoopBackend.execute.<locals>.unit",
    ),
    # Pydantic AI's own function, recorded by where it lives in Pydantic AI.
    "letitloop:pydantic_ai.ask": (
        "pydantic_ai.external_events.wait_for_external_event.<locals>.ask_with_token",
    ),
    # Steps added after 66860b7: no file holds another name for them.
    "letitloop:smolagents.code": (),
    "letitloop:langgraph.approved_call": (),
    "letitloop:langgraph.tool": (),  # a ToolNode's call, sync or async alike
    "letitloop:langgraph.model": (),  # durable_model's call, sync or async alike
    "letitloop:crewai.item": (),  # a kickoff_for_each item's inputs, with a run name
    "letitloop:queue.enqueue": (),  # a child run enqueued by its parent (queueing/children.py)
    "letitloop:queue.result": (),  # the child's result, awaited by its parent
    "letitloop:smolagents.model": ("letitloop.adapters.smolagents.model.call_model",),
    "letitloop:smolagents.tool": ("letitloop.adapters.smolagents.agent.call_tool",),
    "letitloop:smolagents.agent": ("letitloop.adapters.smolagents.agent.call_agent",),
    "letitloop:openai.chat": (),  # a streamed chat completion (adapters/openai/chat.py)
    "letitloop:openai.responses": (),  # a streamed response (adapters/openai/responses.py)
    "letitloop:pydantic_ai.stream": (),  # a durable agent's streamed model request's chunks
    "letitloop:openai_agents.stream": (),  # a streamed model turn (openai_agents/streaming.py)
    "letitloop:langgraph.stream": (),  # durable_model's streamed call (langgraph/streaming.py)
}

#: Every name the library records for its own steps.
NAMES = frozenset(HISTORY)

#: A name files written before hold -> the name recorded for the same step now.
OLD_NAMES: dict[str, str] = {old: new for new, olds in HISTORY.items() for old in olds}


def same_function(recorded: str | None, called: str) -> bool:
    """Whether a row recorded by ``recorded`` was made by the function now named ``called``:
    the same name, or a name files written before hold for it (``OLD_NAMES``)."""
    return recorded == called or (recorded is not None and OLD_NAMES.get(recorded) == called)
