"""``durable_middleware()``: LangChain 1.x's ``create_agent`` made durable, imported on first use.

The middleware itself is ``agents.py``, which imports LangChain's agents
package; this module does not, so a graph without ``create_agent`` never
loads it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...codec import CodecRegistry
from ...primitives.budgets import Budget
from ...run.journal import DEFAULT_TIMEOUT
from ...stores.sqlite.pragmas import Durability
from .node import durable_model, durable_node

if TYPE_CHECKING:
    from langchain_core.language_models.chat_models import BaseChatModel

    from .agents import DurableMiddleware


def durable_middleware(
    *,
    path: str | os.PathLike[str] | None = None,
    durability: Durability | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    registry: CodecRegistry | None = None,
    budget: Budget | Mapping[str, Any] | None = None,
) -> DurableMiddleware:
    """A middleware of LangChain 1.x's ``create_agent`` that journals each model and tool call.

    ``create_agent(model, tools, middleware=[durable_middleware()],
    checkpointer=LetItLoopCheckpointSaver())``: each model call is given to
    ``durable_model(model)`` (a step ``model`` of a ``langgraph:model`` run),
    each tool call runs as the step ``tool:<tool call id>`` of its tool node
    execution's run (``langgraph:tools``), as ``create_react_agent`` with
    ``durable_model`` and ``durable_node(ToolNode(tools))`` records them
    (``agents.py``). Options are ``durable_node``'s (``registry``: for the
    tool calls' results) and ``durable_model``'s (``budget``: the model
    calls'). Listed first, it is the outermost middleware: the others'
    ``wrap_tool_call`` (a retry) runs inside the step. Raises ImportError
    when ``langchain`` is not installed.
    """
    from .agents import DurableMiddleware

    def make_model(model: BaseChatModel) -> BaseChatModel:
        return durable_model(
            model, path=path, durability=durability, timeout=timeout, budget=budget
        )

    make_durable = durable_node(
        path=path, durability=durability, timeout=timeout, registry=registry
    )
    return DurableMiddleware(make_durable, make_model)
