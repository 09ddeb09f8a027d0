"""LangGraph's prebuilt pieces made durable: ``ToolNode`` (each tool call a step) and chat models.

The graphs LangGraph's docs write (``create_react_agent(model, tools)``, or a
``StateGraph`` with a model node, ``ToolNode(tools)`` and ``tools_condition``)
have no ``step()`` of the user's in them. Two wrappers journal their calls:

- ``durable_node(ToolNode(tools))`` (:func:`durable_tool_node`): a copy of the
  node that opens the node's journal run around each execution (as
  ``durable_node`` does for a function) and runs each tool call as the step
  ``tool:<tool call id>``, parallel calls included (each in its worker thread,
  or its task under ``ainvoke``). A tool call that returned replays; the one
  in flight at a crash runs again. A ``wrap_tool_call`` / ``awrap_tool_call``
  of the user's runs inside the step.
- ``durable_model(model)`` (:class:`DurableChatModel`): a chat model whose
  every call is a step. Inside a durable node it is a step of that node's
  run (``model``, ``model#2``, …); anywhere else in a graph (the model node of
  ``create_react_agent``, a plain node function) it opens the journal run of
  the node that calls it, keyed by that node's execution and the messages it
  is given, as ``durable_node`` keys a node's run. ``bind_tools`` and
  ``with_structured_output`` keep it durable. Its usage is reported
  (``letitloop.usage``) and, when the run has a budget, reserved before the
  call.

The steps' functions carry names of their own (``letitloop.langgraph.*``),
so nothing recorded depends on where this code lives.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableBinding
from langgraph.config import get_config
from langgraph.prebuilt import ToolNode
from pydantic import ConfigDict

from ...errors import LetItLoopError
from ...identity.step_names import named
from ...identity.unchecked import unchecked
from ...run.durable import usage
from ...run.journal import Journal, current_journal
from ..agentcalls import plain
from ..approved import run_once, run_once_sync
from ..reserving import chat_prompt, max_tokens_of, reserve_call
from .identity import CONFIG_KEY_SCRATCHPAD

# -- ToolNode ----------------------------------------------------------------------------


def tool_key(call: Any) -> str:
    """The step of one tool call: ``tool:<id>``, or ``tool:<name>:<args hash>`` with no id."""
    call_id = call.get("id")
    if isinstance(call_id, str) and call_id:
        return f"tool:{call_id}"
    args = json.dumps(plain(call.get("args")), sort_keys=True)
    return f"tool:{call.get('name')}:{hashlib.sha256(args.encode()).hexdigest()[:12]}"


def _identity(call: Any) -> dict[str, Any]:
    """What the step checks on replay: the tool's name and its arguments (the id is the key)."""
    return {"name": call.get("name"), "args": plain(call.get("args"))}


def node_journal(what: str) -> Journal:
    journal = current_journal.get()
    if journal is None or not journal.is_open:
        raise LetItLoopError(
            f"{what} ran outside its durable ToolNode's journal; add the node returned by "
            f"durable_node(ToolNode(...)) to the graph, not the ToolNode itself"
        )
    return journal


def _answered() -> bool:
    """Whether the task running now runs with an answer to an ``interrupt()`` (LangGraph's
    scratchpad holds a resume value for it): a tool that asked is being resumed."""
    try:
        pad = get_config()["configurable"].get(CONFIG_KEY_SCRATCHPAD)
    except RuntimeError:  # no LangGraph run in this context
        return False
    return pad is not None and (bool(pad.resume) or pad.get_null_resume(False) is not None)


def _what(call: Any) -> str:
    return f"{call.get('name')}({json.dumps(plain(call.get('args')), sort_keys=True)})"[:200]


def _in_doubt(call: Any) -> Callable[[str], Any]:
    """What the model is told of an answered tool call cut short and not run again."""
    return lambda text: ToolMessage(
        content=text, tool_call_id=call.get("id") or "", name=call.get("name"), status="error"
    )


@named("letitloop:langgraph.tool")
def tool_call(identity: Any, work: Callable[[], Any]) -> Any:
    """The step's function: the tool call (through the user's wrapper, if any)."""
    del identity  # the call's name and arguments, for the journal's argument check only
    return work()


@named("letitloop:langgraph.tool")
async def atool_call(identity: Any, work: Callable[[], Awaitable[Any]]) -> Any:
    """The async step's function: the tool call (through the user's wrapper, if any)."""
    del identity
    return await work()


def tool_step(journal: Journal, call: Any, run: Callable[[], Any]) -> Any:
    """``run()``, the tool call ``call``, as the step ``tool:<id>`` of ``journal``'s run.

    Resumed with an answer to its ``interrupt()``, what follows the answer runs once
    (``run_once_sync``): one cut short by a kill is not run again on its own.
    """
    key = tool_key(call)

    def work() -> Any:
        if not _answered():
            return run()
        return run_once_sync(journal, key, _what(call), run, _in_doubt(call), stop_after=0)

    return journal.step(key, tool_call, _identity(call), unchecked(work))


async def atool_step(journal: Journal, call: Any, run: Callable[[], Awaitable[Any]]) -> Any:
    """:func:`tool_step` for an awaited tool call."""
    key = tool_key(call)

    async def work() -> Any:
        if not _answered():
            return await run()
        return await run_once(journal, key, _what(call), run, _in_doubt(call), stop_after=0)

    return await journal.async_step(key, atool_call, _identity(call), unchecked(work))


def durable_tool_node(node: ToolNode, make_durable: Callable[[Any], Any]) -> ToolNode:
    """A copy of ``node`` whose executions are journal runs and whose tool calls are steps.

    ``make_durable`` is ``durable_node(...)`` with the caller's options: it
    wraps the node's functions. ``node`` itself is left as it was.
    """
    clone = copy.copy(node)
    user_wrap = node._wrap_tool_call
    user_awrap = node._awrap_tool_call

    def wrap(request: Any, execute: Callable[[Any], Any]) -> Any:
        def run() -> Any:
            return execute(request) if user_wrap is None else user_wrap(request, execute)

        return tool_step(node_journal("a tool call"), request.tool_call, run)

    async def awrap(request: Any, execute: Callable[[Any], Awaitable[Any]]) -> Any:
        async def run() -> Any:
            if user_awrap is not None:
                return await user_awrap(request, execute)
            return await execute(request)

        return await atool_step(node_journal("a tool call"), request.tool_call, run)

    clone._wrap_tool_call = wrap
    # A sync wrapper of the user's alone: ToolNode runs it (here ``wrap``) with a sync
    # execute under ainvoke too.
    clone._awrap_tool_call = awrap if user_awrap is not None or user_wrap is None else None
    clone.func = make_durable(clone._func)
    clone.afunc = make_durable(clone._afunc)
    return clone


# -- chat models ------------------------------------------------------------------------


def model_name(model: Any) -> str | None:
    for attr in ("model_name", "model", "model_id"):
        name = getattr(model, attr, None)
        if isinstance(name, str) and name:
            return name
    return None


def _record(result: ChatResult) -> dict[str, Any]:
    """A ChatResult as the step records it: its messages, and its extras as plain data."""
    return {
        "messages": [g.message for g in result.generations],
        "info": [plain(g.generation_info) for g in result.generations],
        "llm_output": plain(result.llm_output),
    }


def _result(row: dict[str, Any]) -> ChatResult:
    gens = [
        ChatGeneration(message=m, generation_info=i)
        for m, i in zip(row["messages"], row["info"], strict=True)
    ]
    return ChatResult(generations=gens, llm_output=row["llm_output"])


def _report(model: Any, result: ChatResult) -> None:
    for g in result.generations:
        if getattr(g.message, "usage_metadata", None):
            usage(g.message, model=model_name(model))


@named("letitloop:langgraph.model")
def model_call(identity: Any, call: Any) -> dict[str, Any]:
    """The step's function: one real call of the wrapped model, reserved and reported."""
    del identity  # the call's messages and options, for the journal's argument check only
    model, messages, stop, run_manager, kwargs = call
    prompt = functools.partial(chat_prompt, messages, kwargs.get("tools"))
    reserve_call(prompt, lambda: max_tokens_of(kwargs, model), model_name(model), None)
    result = model._generate(messages, stop=stop, run_manager=run_manager, **kwargs)
    _report(model, result)
    return _record(result)


@named("letitloop:langgraph.model")
async def amodel_call(identity: Any, call: Any) -> dict[str, Any]:
    """The async step's function: one real call of the wrapped model, reserved and reported."""
    del identity
    model, messages, stop, run_manager, kwargs = call
    prompt = functools.partial(chat_prompt, messages, kwargs.get("tools"))
    reserve_call(prompt, lambda: max_tokens_of(kwargs, model), model_name(model), None)
    result = await model._agenerate(messages, stop=stop, run_manager=run_manager, **kwargs)
    _report(model, result)
    return _record(result)


def call_identity(messages: list[BaseMessage], stop: Any, kwargs: dict[str, Any]) -> Any:
    """A model call as the journal checks it: the messages (ids left out), stop, options."""
    return {
        "messages": [
            {k: v for k, v in plain(m.model_dump(mode="json")).items() if k != "id"}
            for m in messages
        ],
        "stop": plain(stop),
        "options": plain({k: v for k, v in kwargs.items() if k != "tools"}),
        "tools": plain(kwargs.get("tools")),
    }


class DurableChatModel(BaseChatModel):
    """A chat model whose every call is a journaled step (see the module docstring).

    Made by :func:`durable_model`; ``model`` is the real one.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    model: BaseChatModel
    #: ``durable_node(...)`` around one model call, when no durable node runs it.
    node: Any = None
    anode: Any = None

    @property
    def _llm_type(self) -> str:
        return f"durable-{self.model._llm_type}"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        bound = self.model.bind_tools(tools, **kwargs)
        if bound is self.model:
            return self
        if isinstance(bound, RunnableBinding) and bound.bound is self.model:
            return RunnableBinding(bound=self, kwargs=bound.kwargs, config=bound.config)
        raise LetItLoopError(
            f"durable_model: {type(self.model).__name__}.bind_tools returned "
            f"{type(bound).__name__}, not the model bound to its tools, so its calls cannot be "
            f"journaled; bind the tools first and wrap a chat model whose bind_tools returns "
            f"model.bind(tools=...), or journal the call with step() in a durable_node"
        )

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        identity = call_identity(messages, stop, kwargs)
        call = unchecked((self.model, messages, stop, run_manager, kwargs))
        journal = current_journal.get()
        if journal is not None and journal.is_open:
            return _result(journal.step("model", model_call, identity, call))
        return _result(self.node(messages, identity, call))

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        identity = call_identity(messages, stop, kwargs)
        call = unchecked((self.model, messages, stop, run_manager, kwargs))
        journal = current_journal.get()
        if journal is not None and journal.is_open:
            return _result(await journal.async_step("model", amodel_call, identity, call))
        return _result(await self.anode(messages, identity, call))


def make_durable_model(model: BaseChatModel, make_durable: Callable[[Any], Any]) -> Any:
    """``model`` as a :class:`DurableChatModel`; ``make_durable`` is ``durable_node(...)``."""
    if isinstance(model, DurableChatModel):
        return model

    def one_call(messages: Any, identity: Any, call: Any, *, config: Any = None) -> Any:
        return current_journal.get().step("model", model_call, identity, call)  # type: ignore[union-attr]

    async def one_acall(messages: Any, identity: Any, call: Any, *, config: Any = None) -> Any:
        return await current_journal.get().async_step(  # type: ignore[union-attr]
            "model", amodel_call, identity, call
        )

    return DurableChatModel(model=model, node=make_durable(one_call), anode=make_durable(one_acall))


def refuse_non_function(node: Any) -> None:
    """Raise LetItLoopError, in one sentence, for what ``durable_node`` cannot make durable."""
    if isinstance(node, BaseChatModel):
        raise LetItLoopError(
            f"durable_node takes a node function or a ToolNode, found the chat model "
            f"{type(node).__name__}; wrap the model with durable_model(model) instead, and "
            f"pass that to create_react_agent or call it in your node"
        )
    if isinstance(node, Runnable) or not callable(node):
        raise LetItLoopError(
            f"durable_node takes a node function or a ToolNode, found {type(node).__name__}; "
            f"decorate the function the node runs (and call its expensive work with step()), "
            f"or wrap the tools as durable_node(ToolNode(tools)) and the model as "
            f"durable_model(model)"
        )
