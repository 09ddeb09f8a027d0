"""A durable node inside a subgraph, killed half-way: which modes replay its returned calls.

Pins the behaviour docs/langgraph.md states under "Subgraphs": the node's
journal run is keyed under the namespace its subgraph runs in, and LangGraph
names that namespace after the parent task's id, which it derives from the
parent superstep's checkpoint. When that checkpoint was lost (``"exit"``
saves nothing before the graph stops) the rebuilt parent task has another
id, and the subgraph's durable node another run: its returned calls run
again. A subgraph compiled with ``checkpointer=True`` has a namespace without
the task id, and replays; so does ``"sync"`` once the parent's checkpoint is
saved. Real processes, a real SIGKILL right after a step returned; the
step's calls are counted in a side file.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import write_script
from preloaded import LANGGRAPH, Preloaded

pytest.importorskip("langgraph.graph", reason="LangGraph is not installed (letitloop[langgraph])")

#: argv: journal, side file, durability, kill ("1": SIGKILL after the first
#: step returned), stateful ("1": the subgraph compiled with checkpointer=True).
#: The graph: START -> prepare -> outer (a subgraph: START -> inner -> END) -> END.
_PROCESS = """
import operator, os, signal, sys
from typing import Annotated, TypedDict
from langgraph.graph import END, START, StateGraph
from letitloop import step
from letitloop.adapters.langgraph import LetItLoopCheckpointSaver, durable_node

journal, side, mode, kill, stateful = sys.argv[1:6]

class State(TypedDict, total=False):
    topic: str
    acc: Annotated[list[str], operator.add]

def call(i, topic):
    with open(side, "a") as f:
        f.write(f"call{i}\\n")
    return f"{topic}-{i}"

@durable_node
def inner(state):
    first = step("first", call, 0, state["topic"])
    if kill == "1":
        os.kill(os.getpid(), signal.SIGKILL)
    return {"acc": [first, step("second", call, 1, state["topic"])]}

sub = StateGraph(State)
sub.add_node("inner", inner)
sub.add_edge(START, "inner")
sub.add_edge("inner", END)
g = StateGraph(State)
g.add_node("prepare", lambda state: {"topic": state["topic"].upper()})
g.add_node("outer", sub.compile(checkpointer=True if stateful == "1" else None))
g.add_edge(START, "prepare")
g.add_edge("prepare", "outer")
g.add_edge("outer", END)
with LetItLoopCheckpointSaver(journal) as saver:
    app = g.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    # As a user resumes: invoke(None) if the thread has work left, else the input again.
    todo = app.get_state(config).next
    out = app.invoke(None if todo else {"topic": "x"}, config, durability=mode)
    print(out["acc"][-2:])
"""


@pytest.fixture(scope="module")
def langgraph() -> Iterator[Preloaded]:
    """Forks the processes from an interpreter that imported LangGraph and the adapter once
    (and opened no journal: to letitloop each child is a fresh process)."""
    with Preloaded(*LANGGRAPH, with_letitloop=True) as preloaded:
        yield preloaded


def _killed_then_resumed(
    langgraph: Preloaded, tmp_path: Path, mode: str, stateful: bool
) -> list[str]:
    """The calls counted over a process killed after the first step and one that resumes."""
    script = write_script(tmp_path, "process.py", _PROCESS)
    args = [str(tmp_path / "journal.db"), str(tmp_path / "calls"), mode]
    flag = "1" if stateful else "0"
    killed = langgraph.run(script, *args, "1", flag)
    assert killed.returncode == -9, killed.stderr
    done = langgraph.run(script, *args, "0", flag)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['X-0', 'X-1']"
    return (tmp_path / "calls").read_text().split()


class TestADurableNodeInASubgraphKilledHalfWay:
    def test_under_exit_its_returned_call_runs_again_as_documented(
        self, tmp_path: Path, langgraph: Preloaded
    ) -> None:
        # The limit, pinned: the parent's checkpoint was never saved, so the
        # rebuilt parent task has another id, and the node another run.
        assert _killed_then_resumed(langgraph, tmp_path, "exit", stateful=False) == [
            "call0",
            "call0",
            "call1",
        ]

    def test_under_sync_its_returned_call_replays(
        self, tmp_path: Path, langgraph: Preloaded
    ) -> None:
        assert _killed_then_resumed(langgraph, tmp_path, "sync", stateful=False) == [
            "call0",
            "call1",
        ]

    @pytest.mark.parametrize("mode", ["exit", "async"])
    def test_a_subgraph_with_its_own_checkpointer_replays_it_in_every_mode(
        self, tmp_path: Path, mode: str, langgraph: Preloaded
    ) -> None:
        assert _killed_then_resumed(langgraph, tmp_path, mode, stateful=True) == ["call0", "call1"]
