"""A LangGraph program whose ``interrupt()`` is answered by ``lil send`` (issue 48).

    python tests/langgraph_answers.py DB THREAD SIDE

A node asks a human with ``interrupt()`` before it books (a durable node whose booking
is an ``approved_step``: run once, even when the process dies inside it); the program
asks its request, then ``wait_for_answers(graph, config, stop_after=0)``: the first run
stops to wait (exit 75, one line saying how to answer), ``lil send`` answers, the
program run again books and prints the answer. The booking writes ``start``/``end``
lines to SIDE and ``returned`` once its step returned; ``SLOW`` makes it take a minute.
With ``GRAPH=tool`` the graph is ``create_react_agent`` whose tool asks with
``interrupt()`` and then books, without ``approved_step``: the durable ToolNode runs
what follows the answer once.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, create_react_agent
from langgraph.types import interrupt

from letitloop.adapters.langgraph import (
    LetItLoopCheckpointSaver,
    approved_step,
    durable_model,
    durable_node,
    wait_for_answers,
)


def log(text: str) -> None:
    fd = os.open(os.environ["SIDE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (text + "\n").encode())
    finally:
        os.close(fd)


def book(room: str) -> str:
    log(f"start book {room}")
    # SLOW: the booking takes a minute (a test kills the process inside it).
    time.sleep(60 if os.environ.get("SLOW") else 0.004)
    log(f"end book {room}")
    return f"room {room} booked"


@durable_node
def approve_and_book(state: MessagesState) -> dict[str, Any]:
    answer = interrupt({"approve": "book room 12"})
    if answer is not True:
        return {"messages": [AIMessage("not booked")]}
    done = approved_step("book", book, "12", stop_after=0)
    log("returned book 12")
    return {"messages": [AIMessage(done)]}


@tool
def book_room(room: str) -> str:
    """Book a room, once a person approved it."""
    if interrupt({"approve": f"book room {room}"}) is not True:
        return "not booked"
    return book(room)  # no approved_step: the durable ToolNode runs this part once


class Booker(BaseChatModel):
    """Offline: asks for ``book_room`` of room 12, then answers with what the tool said
    (logging ``returned book 12``: the tool's step had returned)."""

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        said = [m for m in messages if isinstance(m, ToolMessage)]
        if said:
            log("returned book 12")
            reply = AIMessage(str(said[-1].content))
        else:
            call = {"name": "book_room", "args": {"room": "12"}, "id": "call-book"}
            reply = AIMessage("", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=reply)])

    @property
    def _llm_type(self) -> str:
        return "booker"

    def bind_tools(self, tools: Any, **kw: Any) -> Any:
        return self.bind(tools=[t.name for t in tools])


def build(db: str) -> Any:
    """The graph: a durable node that asks, then books with ``approved_step``; or, with
    ``GRAPH=tool``, ``create_react_agent`` whose tool asks with ``interrupt()`` and books
    (``GRAPH=agent``: ``create_agent`` with ``durable_middleware()``, the same tool)."""
    saver = LetItLoopCheckpointSaver(db)
    if os.environ.get("GRAPH") == "tool":
        tools = durable_node(ToolNode([book_room]))
        return create_react_agent(durable_model(Booker()), tools, checkpointer=saver)
    if os.environ.get("GRAPH") == "agent":  # LangChain 1.x's create_agent, the same tool
        from langchain.agents import create_agent

        from letitloop.adapters.langgraph import durable_middleware

        return create_agent(
            Booker(), [book_room], middleware=[durable_middleware()], checkpointer=saver
        )
    builder = StateGraph(MessagesState)
    builder.add_node("approve_and_book", approve_and_book)
    builder.add_edge(START, "approve_and_book")
    builder.add_edge("approve_and_book", END)
    return builder.compile(checkpointer=saver)


def main(argv: list[str]) -> None:
    db, thread, side = argv[:3]
    os.environ["SIDE"] = side
    graph = build(db)
    config: Any = {"configurable": {"thread_id": thread}}
    log("asking -")
    ask: Any = {"messages": [("user", "book a room")]}
    graph.invoke(ask, config)
    result = wait_for_answers(graph, config, stop_after=0)
    print(json.dumps({"answer": result["messages"][-1].content}))


if __name__ == "__main__":
    main(sys.argv[1:])
