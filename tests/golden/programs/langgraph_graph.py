"""The program that wrote tests/golden/langgraph.db: a LangGraph graph on the journal file.

``python langgraph_graph.py DB SIDE KILL_AT``: a linear graph of three
``durable_node`` nodes (research, write, review), each making two ``step()``
calls, compiled with ``LetItLoopCheckpointSaver`` (the journal file from
``LETITLOOP_DB``) and invoked on thread ``t1``, as docs/langgraph.md writes it.
Each step's function appends ``ran WHAT`` to SIDE and SIGKILLs the process at
``ran KILL_AT``. A later run with KILL_AT ``""`` resumes the thread
(``invoke(None, ...)`` when it has a checkpoint with work left) and prints the
final state as JSON. Keep this file as it is: it is part of the golden data.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import TypedDict

from langgraph.graph import END, START, StateGraph

from letitloop import step
from letitloop.adapters.langgraph import LetItLoopCheckpointSaver, durable_node

DB, SIDE, KILL_AT = sys.argv[1], sys.argv[2], sys.argv[3]


class State(TypedDict, total=False):
    topic: str
    notes: str
    draft: str
    review: str


def work(what: str) -> str:
    with open(SIDE, "a") as f:
        f.write(f"ran {what}\n")
    if what == KILL_AT:
        os.kill(os.getpid(), signal.SIGKILL)
    return what.upper()


@durable_node
def research(state: State) -> State:
    found = step("search", work, f"search {state['topic']}")
    return {"notes": found + " / " + step("summarize", work, f"summarize {found}")}


@durable_node
def write(state: State) -> State:
    outline = step("outline", work, f"outline {state['notes']}")
    return {"draft": step("draft", work, f"draft {outline}")}


@durable_node
def review(state: State) -> State:
    checked = step("check", work, f"check {state['draft']}")
    return {"review": step("verdict", work, f"verdict {checked}")}


builder = StateGraph(State)
builder.add_node("research", research)
builder.add_node("write", write)
builder.add_node("review", review)
builder.add_edge(START, "research")
builder.add_edge("research", "write")
builder.add_edge("write", "review")
builder.add_edge("review", END)
app = builder.compile(checkpointer=LetItLoopCheckpointSaver())
config = {"configurable": {"thread_id": "t1"}}

if __name__ == "__main__":
    left = app.get_state(config).next  # type: ignore[arg-type]
    state = app.invoke(None if left else {"topic": "eels"}, config)  # type: ignore[arg-type]
    print(json.dumps(state, sort_keys=True))
