"""A LangGraph program whose ``interrupt()`` is answered by ``lil send`` (issue 48).

    python tests/langgraph_answers.py DB THREAD SIDE

A node asks a human with ``interrupt()`` before it books (a durable node whose booking
is an ``approved_step``: run once, even when the process dies inside it); the program
asks its request, then ``wait_for_answers(graph, config, stop_after=0)``: the first run
stops to wait (exit 75, one line saying how to answer), ``lil send`` answers, the
program run again books and prints the answer. The booking writes ``start``/``end``
lines to SIDE and ``returned`` once its step returned; ``SLOW`` makes it take a minute.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt

from letitloop.adapters.langgraph import (
    LetItLoopCheckpointSaver,
    approved_step,
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


def main(db: str, thread: str, side: str) -> None:
    os.environ["SIDE"] = side
    builder = StateGraph(MessagesState)
    builder.add_node("approve_and_book", approve_and_book)
    builder.add_edge(START, "approve_and_book")
    builder.add_edge("approve_and_book", END)
    graph = builder.compile(checkpointer=LetItLoopCheckpointSaver(db))
    config: Any = {"configurable": {"thread_id": thread}}
    log("asking -")
    ask: Any = {"messages": [("user", "book a room")]}
    graph.invoke(ask, config)
    result = wait_for_answers(graph, config, stop_after=0)
    print(json.dumps({"answer": result["messages"][-1].content}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
