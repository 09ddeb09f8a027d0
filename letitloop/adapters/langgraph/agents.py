"""LangChain 1.x's ``create_agent`` made durable: a middleware whose model and tool calls are steps.

``create_agent(model, tools, middleware=[durable_middleware()],
checkpointer=LetItLoopCheckpointSaver())``: ``create_agent`` builds its own
tool node from a list of tools (it takes no ``durable_node(ToolNode(...))``),
so the journaling goes where LangChain lets a program reach each call, its
middleware hooks:

- ``wrap_model_call`` / ``awrap_model_call``: the request's model is given as
  ``durable_model(model)`` (the same wrapped model each time), so each model
  call is a step ``model`` of a run of the model node's execution, found
  again after a kill as ``create_react_agent``'s model calls are
  (``prebuilt.py``). A model already wrapped by ``durable_model`` is kept.
- ``wrap_tool_call`` / ``awrap_tool_call``: each tool call opens the journal
  run of its tool node execution (``durable_node`` keyed by the call: the
  thread, the node, the superstep, ``create_agent``'s ``Send`` of it, and the
  call itself) and runs as its step ``tool:<tool call id>``, what a
  ``durable_node(ToolNode(tools))`` records (``prebuilt.tool_step``).

LangChain's agents package is imported by this module only, and this module
only by ``durable_middleware`` (``middleware.py``), when it is called: a graph
without ``create_agent`` never imports it.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Awaitable, Callable
from typing import Any

try:
    from langchain.agents.middleware import AgentMiddleware
    from langchain.agents.middleware.types import ModelRequest, ModelResponse, ToolCallRequest
except ImportError as exc:  # pragma: no cover - exercised only without langchain
    raise ImportError(
        f"durable_middleware is a middleware of LangChain 1.x's create_agent, and langchain "
        f"is not installed ({exc}); install it from your letitloop checkout with: "
        f"pip install -e '.[langgraph]'"
    ) from exc
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import ToolMessage
from langgraph.types import Command

from .prebuilt import atool_step, node_journal, tool_step

ToolResult = ToolMessage | Command[Any]


def _config(request: ToolCallRequest) -> Any:
    """The tool node's config for this call (``ToolRuntime.config``), None outside a graph."""
    runtime = getattr(request, "runtime", None)
    return getattr(runtime, "config", None)


class DurableMiddleware(AgentMiddleware[Any, Any, Any]):
    """Every model call and tool call of a ``create_agent`` agent a journaled step.

    Made by ``durable_middleware`` (``middleware.py``): ``make_durable`` is
    ``durable_node(...)`` with its options, ``make_model`` is
    ``durable_model(..., **options)``. See the module docstring.
    """

    def __init__(
        self,
        make_durable: Callable[[Any], Any],
        make_model: Callable[[BaseChatModel], BaseChatModel],
    ) -> None:
        super().__init__()
        self._make_model = make_model
        self._tool = make_durable(_one_tool_call)
        self._atool = make_durable(_one_atool_call)
        #: The durable twin of each model the agent called (by the model's id, the model kept).
        self._models: dict[int, tuple[BaseChatModel, BaseChatModel]] = {}
        self._lock = threading.Lock()

    def _durable(self, model: BaseChatModel) -> BaseChatModel:
        with self._lock:
            known = self._models.get(id(model))
            if known is None or known[0] is not model:
                known = (model, self._make_model(model))
                self._models[id(model)] = known
            return known[1]

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse]
    ) -> ModelResponse:
        return handler(request.override(model=self._durable(request.model)))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        return await handler(request.override(model=self._durable(request.model)))

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolResult]
    ) -> ToolResult:
        run = functools.partial(handler, request)
        result: ToolResult = self._tool(request.tool_call, run, config=_config(request))
        return result

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolResult]],
    ) -> ToolResult:
        run = functools.partial(handler, request)
        result: ToolResult = await self._atool(request.tool_call, run, config=_config(request))
        return result


def _one_tool_call(call: Any, run: Callable[[], Any], *, config: Any = None) -> Any:
    """One tool call inside the journal run ``durable_node`` opened for it (keyed by ``call``)."""
    return tool_step(node_journal("a tool call"), call, run)


async def _one_atool_call(
    call: Any, run: Callable[[], Awaitable[Any]], *, config: Any = None
) -> Any:
    """:func:`_one_tool_call`, awaited."""
    return await atool_step(node_journal("a tool call"), call, run)
