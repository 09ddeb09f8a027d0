"""``durable_agent``: an agent, and every agent it can hand off to, made durable in place.

Each agent whose ``model`` is a ``Model`` instance gets a :class:`DurableModel`
labelled with its name (keys ``{agent}.model:{n}``); each of its function
tools a journaled invoker (``tool:{name}:{call_id}``). An agent whose model
is a name (or unset) is resolved by the run's model provider: give the run
``RunConfig(model_provider=DurableModelProvider())``. Handoffs to agents
(``handoffs=[other]``, and ``handoff(other)``'s target where the SDK keeps
it) are wrapped too, so the run resumes in whichever agent it had reached:
the handoff itself is the journaled model response that asked for it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from agents.agent import Agent
from agents.handoffs import Handoff
from agents.models.interface import Model
from agents.tool import FunctionTool

from letitloop.adapters.agentcalls import Pricing
from letitloop.adapters.openai_agents.model import DurableModel
from letitloop.adapters.openai_agents.runner import RunOptions, register
from letitloop.adapters.openai_agents.tools import wrap_tool


def durable_agent(
    agent: Agent[Any],
    *,
    cost: Pricing | None = None,
    goal: str | None = None,
    run: str | None = None,
    reuse: float | timedelta | None = None,
    fresh: bool = False,
    path: str | None = None,
) -> Agent[Any]:
    """Journal ``agent``'s model and tool calls, and those of the agents it hands off to.

    In place, once per agent; returns ``agent``. ``cost(model_name,
    input_tokens, output_tokens)`` prices each model call (see DurableModel).
    With ``goal``, ``Runner.run(agent, input)`` outside a journal opens
    ``Journal(goal, run=...)`` itself: ``run`` if given, else the request
    (the input and the session's conversation), handed back for ``reuse``
    seconds once completed (runner.py).
    """
    if goal is not None:
        register(agent, RunOptions(goal, run, reuse, fresh, path))
    seen: set[int] = set()
    todo: list[Agent[Any]] = [agent]
    while todo:
        one = todo.pop()
        if id(one) in seen:
            continue
        seen.add(id(one))
        if isinstance(one.model, Model) and not isinstance(one.model, DurableModel):
            one.model = DurableModel(one.model, label=one.name, cost=cost)
        for tool in one.tools:
            if isinstance(tool, FunctionTool):
                wrap_tool(tool)
        for target in one.handoffs:
            if isinstance(target, Agent):
                todo.append(target)
            elif isinstance(target, Handoff):
                # The SDK keeps a handoff's target as a weak reference (handoff(agent)).
                ref = target._agent_ref
                other = ref() if ref is not None else None
                if isinstance(other, Agent):
                    todo.append(other)
    return agent
