"""A durable node trusts only a checkpoint its checkpointer really holds, or the caller's key.

A durable node re-executed after LangGraph lost the checkpoint its superstep
started from takes the earlier execution's journal run (identity.py). With a
checkpointer that forgets, "lost" is indistinguishable from "never saw": a
new process with a fresh ``InMemorySaver`` and the same thread id is a new
conversation, not the re-execution of the last process's. Real processes
here: process A runs a graph to completion, process B runs it again with a
fresh saver; the calls of the node's step are counted in a side file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import write_script
from preloaded import LANGGRAPH, Preloaded

pytest.importorskip("langgraph.graph", reason="LangGraph is not installed (letitloop[langgraph])")

#: One process's graph: START -> answer -> END, ``answer`` a durable node whose
#: step appends a line to the side file and answers with its process id.
#: argv: journal, side file, durability, key ("-" for none).
_PROCESS = """
import json, os, sys
from typing import TypedDict
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from letitloop import step
from letitloop.adapters.langgraph import NODE_KEY, durable_node

journal, side, mode, key = sys.argv[1:5]

class State(TypedDict, total=False):
    question: str
    answer: str

def ask(question):
    with open(side, "a") as f:
        f.write(f"{os.getpid()}\\n")
    return f"{question} -> answered by {os.getpid()}"

@durable_node(path=journal)
def answer(state):
    return {"answer": step("ask", ask, state["question"])}

g = StateGraph(State)
g.add_node("answer", answer)
g.add_edge(START, "answer")
g.add_edge("answer", END)
app = g.compile(checkpointer=InMemorySaver())
config = {"configurable": {"thread_id": "t1"}}
if key != "-":
    config["configurable"][NODE_KEY] = key
out = app.invoke({"question": "q"}, config, durability=mode)
print(json.dumps({"pid": os.getpid(), "answer": out["answer"]}))
"""


@pytest.fixture(scope="module")
def langgraph() -> Iterator[Preloaded]:
    """Forks the processes from an interpreter that imported LangGraph and the adapter once
    (and opened no journal: to letitloop each child is a fresh process)."""
    with Preloaded(*LANGGRAPH, with_letitloop=True) as preloaded:
        yield preloaded


def _process(
    langgraph: Preloaded, tmp_path: Path, mode: str = "async", key: str | None = None
) -> dict[str, Any]:
    """The program run in a process of its own; what it printed."""
    script = write_script(tmp_path, "process.py", _PROCESS)
    args = (str(tmp_path / "journal.db"), str(tmp_path / "calls"), mode, key or "-")
    done = langgraph.run(script, *args)
    assert done.returncode == 0, done.stderr
    got: dict[str, Any] = json.loads(done.stdout)
    return got


def _calls(tmp_path: Path) -> list[str]:
    return (tmp_path / "calls").read_text().split()


class TestANewProcessWithAFreshInMemorySaver:
    @pytest.mark.parametrize("mode", ["sync", "async", "exit"])
    def test_it_runs_the_node_again_instead_of_replaying_the_last_process(
        self, tmp_path: Path, mode: str, langgraph: Preloaded
    ) -> None:
        a = _process(langgraph, tmp_path, mode)
        b = _process(langgraph, tmp_path, mode)
        assert _calls(tmp_path) == [str(a["pid"]), str(b["pid"])]
        assert b["answer"] == f"q -> answered by {b['pid']}"

    def test_the_same_explicit_key_replays_the_last_process_answer(
        self, tmp_path: Path, langgraph: Preloaded
    ) -> None:
        a = _process(langgraph, tmp_path, key="order-42")
        b = _process(langgraph, tmp_path, key="order-42")
        assert _calls(tmp_path) == [str(a["pid"])]
        assert b["answer"] == a["answer"] == f"q -> answered by {a['pid']}"

    def test_another_key_runs_the_node_again(self, tmp_path: Path, langgraph: Preloaded) -> None:
        a = _process(langgraph, tmp_path, key="order-42")
        b = _process(langgraph, tmp_path, key="order-43")
        assert _calls(tmp_path) == [str(a["pid"]), str(b["pid"])]
