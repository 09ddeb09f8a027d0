"""A user's LangGraph agent written the way LangGraph's docs write it, made durable (issue 49).

    python tests/langgraph_prebuilt.py GRAPH DB THREAD SIDE [MODE] [DURABILITY] [SAVER]

GRAPH is ``react`` (``create_react_agent(durable_model(model),
durable_node(ToolNode(tools)))``), ``toolnode`` (a ``StateGraph`` with a model node,
``durable_node(ToolNode(tools))`` and ``tools_condition``) or ``agent`` (LangChain 1.x's
``create_agent(model, tools, middleware=[durable_middleware()])``). The offline fake model
asks for two ``lookup`` calls at once (parallel tool calls), then ``book`` with what they
found, then answers. Every model and tool call writes ``start KEY`` / ``end KEY`` to the
side file SIDE (an ``O_APPEND`` write that outlives a SIGKILL), and a callback writes
``returned KEY`` once the call's step returned (a model call's ``on_llm_end``, which
LangChain fires after the durable model's step; for a tool call, the ``on_chain_end`` of the
tool node execution that ran it, after its steps). Nothing here reads the journal. SLOW
names a call that takes a minute; HOLD a tool call whose ``on_tool_end`` takes a minute (the
call returned, its step not yet recorded).

MODE ``ask`` (the default) invokes the request and prints its answer; ``resume`` is the
rerun of a crashed program: ``resume(graph, config)`` (``letitloop.adapters.langgraph``);
``next`` is the tutorial's rule the docs warn about: ``invoke(None)`` only when
``get_state(config).next`` is non-empty. DURABILITY is LangGraph's (``async``, its default,
when absent); SAVER ``letitloop`` (the default) or ``sqlite`` (LangGraph's SqliteSaver, the
durable nodes journaling in DB's own file).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
from typing import Annotated, Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, create_react_agent, tools_condition

from letitloop.adapters.langgraph import (
    LetItLoopCheckpointSaver,
    durable_model,
    durable_node,
    resume,
)
from letitloop.errors import LetItLoopError

TASK = "book a room"
#: Seconds each fake call takes: long enough for a kill to land inside a call.
CALL_SECONDS = 0.004


def log(text: str) -> None:
    fd = os.open(os.environ["SIDE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (text + "\n").encode())
    finally:
        os.close(fd)


def _text(message: BaseMessage) -> str:
    return message.content if isinstance(message.content, str) else json.dumps(message.content)


def model_key(messages: list[BaseMessage]) -> str:
    asked = next(m for m in reversed(messages) if isinstance(m, HumanMessage))
    tools = [m for m in messages if isinstance(m, ToolMessage)]
    return f"model {_text(asked)} after {len(tools)} tools"


class FakeChat(BaseChatModel):
    """Offline: two ``lookup`` calls at once, then ``book`` what they found, then answer."""

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        key = model_key(messages)
        log(f"start {key}")
        time.sleep(CALL_SECONDS)
        tools = [m for m in messages if isinstance(m, ToolMessage)]
        asked = _text(next(m for m in messages if isinstance(m, HumanMessage)))
        if not tools:
            calls = [
                {"name": "lookup", "args": {"q": f"{asked} {part}"}, "id": f"lookup-{part}"}
                for part in ("north", "south")
            ]
            reply = AIMessage("", tool_calls=calls)
        elif len(tools) == 2:
            found = " and ".join(sorted(_text(t) for t in tools))
            reply = AIMessage("", tool_calls=[{"name": "book", "args": {"what": found}, "id": "b"}])
        else:
            reply = AIMessage(f"booked: {_text(tools[-1])}")
        reply.usage_metadata = UsageMetadata(  # type: ignore[typeddict-item]
            input_tokens=10 * len(messages),
            output_tokens=7,
            total_tokens=10 * len(messages) + 7,
        )
        log(f"end {key}")
        return ChatResult(generations=[ChatGeneration(message=reply)])

    @property
    def _llm_type(self) -> str:
        return "fake-offline"

    def bind_tools(self, tools: Any, **kw: Any) -> Any:
        return self.bind(tools=[t.name for t in tools])


def _paid(key: str, out: str) -> str:
    log(f"start {key}")
    # SLOW names a call that takes a minute: a test kills the process inside it.
    time.sleep(60 if key == os.environ.get("SLOW") else CALL_SECONDS)
    log(f"end {key}")
    return out


@tool
def lookup(q: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
    """Find an offer for q."""
    return _paid(f"tool {tool_call_id}", f"offer-{len(q)}")


@tool
def book(what: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
    """Book an offer (a side effect)."""
    return _paid(f"tool {tool_call_id}", f"booking of {what}")


TOOLS = [lookup, book]


class Marks(BaseCallbackHandler):
    """``returned KEY`` once a call's step returned: LangChain fires ``on_llm_end`` after the
    durable model's step, and a tool node's ``on_chain_end`` after all its tool steps.

    A tool call is marked by the end of *its own* tool node execution (its ``on_tool_end``'s
    parent run): ``create_react_agent`` sends each tool call to a node execution of its own,
    and under ``ainvoke`` they run at once. ``on_tool_end`` fires inside the tool's step,
    before its record: marked by the end of a sibling execution, a call still in flight
    would count as returned (issue 48). HOLD names a call whose ``on_tool_end`` then waits a
    minute, holding its record back: a test kills the process there.
    """

    def __init__(self) -> None:
        self.models: dict[Any, str] = {}
        self.chains: dict[Any, str] = {}
        #: The tool calls that ended under each tool node execution (its run id).
        self.tools: dict[Any, list[str]] = {}
        self.lock = threading.Lock()

    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: Any, **kw: Any) -> Any:
        self.models[run_id] = model_key(messages[0])

    def on_llm_end(self, response: Any, *, run_id: Any, **kw: Any) -> None:
        key = self.models.pop(run_id, None)
        if key is not None:
            log(f"returned {key}")

    def on_tool_end(
        self, output: Any, *, run_id: Any, parent_run_id: Any = None, **kw: Any
    ) -> None:
        if isinstance(output, ToolMessage):
            with self.lock:
                self.tools.setdefault(parent_run_id, []).append(output.tool_call_id)
            if os.environ.get("HOLD") == f"tool {output.tool_call_id}":
                time.sleep(60)

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: Any, **kw: Any) -> None:
        self.chains[run_id] = str(kw.get("name"))

    def on_chain_end(self, outputs: Any, *, run_id: Any, **kw: Any) -> None:
        if self.chains.pop(run_id, None) != "tools":
            return
        with self.lock:
            done = self.tools.pop(run_id, [])
        for call_id in done:
            log(f"returned tool {call_id}")


def build(kind: str, db: str, saver_kind: str = "letitloop") -> Any:
    if saver_kind == "sqlite":
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver

        saver: Any = SqliteSaver(sqlite3.connect(db + ".lg", check_same_thread=False))
        os.environ["LETITLOOP_DB"] = db
    else:
        saver = LetItLoopCheckpointSaver(db)
    if kind == "agent":  # LangChain 1.x: the plain model and tools, and the middleware
        from langchain.agents import create_agent

        from letitloop.adapters.langgraph import durable_middleware

        return create_agent(
            FakeChat(), TOOLS, middleware=[durable_middleware()], checkpointer=saver
        )
    model = durable_model(FakeChat())
    if kind == "react":
        return create_react_agent(model, durable_node(ToolNode(TOOLS)), checkpointer=saver)
    llm = model.bind_tools(TOOLS)

    def chatbot(state: MessagesState) -> dict[str, Any]:
        return {"messages": [llm.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("chatbot", chatbot)
    builder.add_node("tools", durable_node(ToolNode(TOOLS)))
    builder.add_conditional_edges("chatbot", tools_condition)
    builder.add_edge("tools", "chatbot")
    builder.add_edge(START, "chatbot")
    return builder.compile(checkpointer=saver)


def main(argv: list[str]) -> None:
    kind, db, thread, side = argv[:4]
    mode = argv[4] if len(argv) > 4 else "ask"
    durability = argv[5] if len(argv) > 5 else "async"
    saver_kind = argv[6] if len(argv) > 6 else "letitloop"
    os.environ["SIDE"] = side
    graph = build(kind, db, saver_kind)
    config: Any = {"configurable": {"thread_id": thread}, "callbacks": [Marks()]}
    # "default": LangGraph's own default, the argument left out.
    options = {} if durability == "default" else {"durability": durability}
    ask = {"messages": [("user", TASK)]}
    log("asking -")
    began = time.monotonic()
    if mode == "resume":
        try:
            result = resume(graph, config, **options)
        except LetItLoopError as exc:
            if "invoke the request again with its input" not in str(exc):  # nothing to resume
                raise
            result = graph.invoke(ask, config, **options)  # as the error says
    elif mode == "next":
        if graph.get_state(config).next:
            result = graph.invoke(None, config, **options)
        else:
            result = graph.get_state(config).values
    elif mode == "ainvoke":
        result = asyncio.run(graph.ainvoke(ask, config, **options))
    else:
        result = graph.invoke(ask, config, **options)
    messages = (result or {}).get("messages") or []
    answer = _text(messages[-1]) if messages else None
    print(json.dumps({"answer": answer, "seconds": time.monotonic() - began}))


if __name__ == "__main__":
    main(sys.argv[1:])
