"""LangGraph's prebuilt agent shapes made durable, and ``resume`` after a crash (issue 49).

The user's program (``tests/langgraph_prebuilt.py``) is written the way LangGraph's docs
write it: ``create_react_agent(model, tools)`` and a ``StateGraph`` with ``ToolNode`` and
``tools_condition``, the model wrapped with ``durable_model``, the tools with
``durable_node(ToolNode(...))``, the saver at its defaults. Children are forked by
``tests/preloaded.py`` (a real pid, a real SIGKILL at a random moment); the side file, not
the journal, says which calls were paid.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import sqlite3
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "langgraph.prebuilt", reason="LangGraph is not installed (letitloop[langgraph])"
)

if not hasattr(os, "fork"):  # pragma: no cover
    pytest.skip("the trials fork their children", allow_module_level=True)

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from typing import Annotated  # noqa: E402

from langchain_core.messages import ToolMessage  # noqa: E402
from langchain_core.tools import InjectedToolCallId  # noqa: E402
from langgraph.types import Command  # noqa: E402
from preloaded import LANGGRAPH_AGENTS, Preloaded  # noqa: E402
from trial_count import TRIALS  # noqa: E402

DEBUG = bool(os.environ.get("LG_DEBUG"))

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


#: What the forker imports: LangGraph's agents and what their run imports at its first call
#: (preloaded.LANGGRAPH_AGENTS), the SQLite saver and LangChain's agents; then the program's
#: module (``WARM``), so that a child (``PROGRAM``) runs only its ``main``, not its class and
#: tool definitions again (together about 25 ms of CPU a child, of ~400).
PRELOAD = (*LANGGRAPH_AGENTS, "langgraph.checkpoint.sqlite", "langchain.agents", "pkgutil")
WARM = f"import sys\nsys.path.append({str(HERE)!r})\nimport langgraph_prebuilt\n"
#: ``python tests/langgraph_prebuilt.py ARGS`` (the program) as a child of the forker
#: runs it: ``forker.start(*PROGRAM, ARGS)``.
PROGRAM = (HERE / "preloaded_main.py", "langgraph_prebuilt")


@pytest.fixture(scope="module")
def forker() -> Iterator[Preloaded]:
    with Preloaded(*PRELOAD, with_letitloop=True, warm=WARM) as p:
        yield p


def _lines(side: Path) -> list[tuple[str, str]]:
    if not side.exists():
        return []
    return [tuple(line.split(" ", 1)) for line in side.read_text().splitlines()]  # type: ignore[misc]


def _written(side: Path) -> bool:
    try:
        return side.stat().st_size > 0
    except FileNotFoundError:
        return False


def _again(side: Path, mark: str) -> int:
    """Calls started again after their ``mark`` line (``returned``: the step had returned)."""
    done: set[str] = set()
    count = 0
    for event, key in _lines(side):
        if event == "start" and key in done:
            count += 1
        elif event == mark:
            done.add(key)
    return count


@dataclass
class Counts:
    trials: int = 0
    kills: int = 0
    repeated: int = 0
    paid_twice: int = 0
    differing: int = 0
    errors: list[str] = field(default_factory=list)

    def row(self, name: str) -> str:
        return (
            f"| {name} | {self.trials} | {self.kills} | {self.repeated} | {self.paid_twice} "
            f"| {self.differing} | {len(self.errors)} |"
        )


def _answer(done: Any) -> Any:
    return json.loads(done.stdout.strip().splitlines()[-1])["answer"] if done.stdout else None


def trials(
    forker: Preloaded,
    folder: Path,
    graph: str,
    rerun: str,
    durability: str = "async",
    saver: str = "letitloop",
    first: str = "ask",
    n: int = TRIALS,
) -> Counts:
    """``n`` trials: the program (``first``) SIGKILLed at a random moment of its request,
    then run again (``rerun``); counted from the side files."""
    db = str(folder / "journal.db")
    rng = random.Random(f"{graph}-{rerun}-{durability}-{saver}-{first}")

    def run(thread: str, side: Path, mode: str) -> Any:
        return forker.start(*PROGRAM, graph, db, thread, str(side), mode, durability, saver)

    ref = run("reference", folder / "reference.side", first).wait()
    assert ref.returncode == 0, ref.stderr
    seconds = json.loads(ref.stdout.strip().splitlines()[-1])["seconds"]
    want = _answer(ref)
    got = Counts()
    for i in range(n):
        side = folder / f"trial-{i}.side"
        child = run(f"trial-{i}", side, first)
        while not _written(side) and child.running():  # its first line: "asking -"
            time.sleep(0.0005)
        time.sleep(rng.uniform(0, seconds))  # a random moment of the request
        with contextlib.suppress(ProcessLookupError):  # it may have ended already
            os.kill(child.pid, signal.SIGKILL)
        got.kills += child.wait().returncode == -signal.SIGKILL
        again = run(f"trial-{i}", side, rerun).wait()
        got.trials += 1
        got.repeated += _again(side, "returned")
        got.paid_twice += _again(side, "end")
        if again.returncode != 0:
            got.errors.append(f"trial {i}: exit {again.returncode}: {again.stderr[-600:]}")
        elif _answer(again) != want:
            got.differing += 1
            if DEBUG:
                got.errors.append(f"trial {i}: answered {_answer(again)!r}, not {want!r}")
    print(got.row(f"{graph} / {first} then {rerun} / {durability} / {saver}"), file=sys.stderr)
    return got


class TestAToolNodeGivenToDurableNode:
    def test_each_tool_call_is_a_step_named_by_its_call_id(
        self, forker: Preloaded, tmp_path: Path
    ) -> None:
        db = tmp_path / "j.db"
        done = forker.run(*PROGRAM, "toolnode", str(db), "t1", str(tmp_path / "side"))
        assert done.returncode == 0, done.stderr
        assert _answer(done) == "booked: booking of offer-17 and offer-17"
        with sqlite3.connect(db) as conn:
            views = dict(
                conn.execute(
                    "SELECT g.goal, m.name FROM goals g JOIN sqlite_master m "
                    "ON m.name = g.journal_table WHERE g.goal LIKE 'langgraph:%'"
                ).fetchall()
            )
            tools = conn.execute(f"SELECT key, status FROM [{views['langgraph:tools']}]").fetchall()
            models = conn.execute(
                f"SELECT key, input_tokens FROM [{views['langgraph:chatbot']}]"
            ).fetchall()
        assert sorted(tools) == [
            ("tool:b", "done"),
            ("tool:lookup-north", "done"),
            ("tool:lookup-south", "done"),
        ]
        # Each model call is a step of its own run, its usage reported.
        assert sorted(models) == [("model", 10), ("model", 40), ("model", 60)]

    def test_a_kill_inside_one_of_two_parallel_calls_repays_only_that_one(
        self, forker: Preloaded, tmp_path: Path
    ) -> None:
        db, side = str(tmp_path / "j.db"), tmp_path / "side"
        slow = {**os.environ, "SLOW": "tool lookup-south"}
        child = forker.start(*PROGRAM, "toolnode", db, "t1", str(side), env=slow)
        while "end tool lookup-north" not in (side.read_text() if side.exists() else ""):
            assert child.running(), child.wait().stderr
            time.sleep(0.001)
        time.sleep(0.3)  # lookup-north's step has returned; lookup-south is still running
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait().returncode == -signal.SIGKILL
        done = forker.run(*PROGRAM, "toolnode", db, "t1", str(side))
        assert done.returncode == 0, done.stderr
        assert _answer(done) == "booked: booking of offer-17 and offer-17"
        starts = [key for event, key in _lines(side) if event == "start"]
        assert starts.count("tool lookup-north") == 1
        assert starts.count("tool lookup-south") == 2  # in flight at the kill: runs again
        assert starts.count("model book a room after 0 tools") == 1

    def test_a_model_or_a_graph_is_refused_with_what_to_do(self, tmp_path: Path) -> None:
        import langgraph_prebuilt as program

        from letitloop.adapters.langgraph import durable_node
        from letitloop.errors import LetItLoopError

        with pytest.raises(LetItLoopError, match=r"durable_model\(model\)"):
            durable_node(program.FakeChat())  # type: ignore[call-overload]
        with pytest.raises(LetItLoopError, match="node function or a ToolNode"):
            durable_node(program.build("react", str(tmp_path / "j.db")))


class TestCreateAgentGivenDurableMiddleware:
    def test_each_model_call_and_each_tool_call_is_a_step(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        import langgraph_prebuilt as program

        from letitloop.adapters.langgraph import durable_middleware, durable_model

        monkeypatch.setenv("SIDE", str(tmp_path / "side"))
        db = tmp_path / "j.db"
        done = program.build("agent", str(db)).invoke(
            {"messages": [("user", program.TASK)]}, {"configurable": {"thread_id": "t"}}
        )
        assert done["messages"][-1].content == "booked: booking of offer-17 and offer-17"
        with sqlite3.connect(db) as conn:  # read from outside the writer
            steps = [
                (goal, run, key)
                for goal, table in conn.execute("SELECT goal, journal_table FROM goals")
                for run, key in conn.execute(
                    f"SELECT run, key FROM [{table}] WHERE status = 'done'"
                )
            ]
        assert sorted((goal, key) for goal, _, key in steps) == [
            ("langgraph:model", "model"),
            ("langgraph:model", "model"),
            ("langgraph:model", "model"),
            ("langgraph:tools", "tool:b"),
            ("langgraph:tools", "tool:lookup-north"),
            ("langgraph:tools", "tool:lookup-south"),
        ]
        assert len({name for _, name, _ in steps}) == 6  # a run per node execution
        model = durable_model(program.FakeChat())
        assert durable_middleware()._durable(model) is model  # a wrapped model is kept


class TestKilledAtRandom:
    """Real SIGKILLs at random moments of the request, then the program run again."""

    @pytest.mark.parametrize(
        ("graph", "mode"),
        [
            ("react", "ask"),
            ("toolnode", "ask"),
            ("react", "ainvoke"),
            ("agent", "ask"),  # LangChain 1.x's create_agent with durable_middleware()
            ("agent", "ainvoke"),
        ],
    )
    def test_no_finished_call_is_paid_twice_and_the_answer_is_the_same(
        self, forker: Preloaded, tmp_path: Path, graph: str, mode: str
    ) -> None:
        got = trials(forker, tmp_path, graph, mode, first=mode)
        assert got.errors == [] and got.differing == 0, got
        assert got.repeated == 0, got
        assert got.kills >= TRIALS // 4, got


class TestKilledAfterAToolReturnedBeforeItsRecord:
    """The kill point of the failed random trial (issue 48): ``create_react_agent`` sends each
    tool call to a ToolNode execution of its own, at once under ``ainvoke``; one call has
    returned (its ``on_tool_end`` fired, inside its step) but its step is not recorded yet,
    while the other's execution has ended."""

    @pytest.mark.parametrize("graph", ["react", "agent"])
    @pytest.mark.parametrize("mode", ["ask", "ainvoke"])
    def test_only_the_unrecorded_call_runs_again_and_the_ledger_says_it_was_in_flight(
        self, forker: Preloaded, tmp_path: Path, mode: str, graph: str
    ) -> None:
        db, side = tmp_path / "j.db", tmp_path / "side"
        held = {**os.environ, "HOLD": "tool lookup-south"}
        child = forker.start(*PROGRAM, graph, str(db), "t1", str(side), mode, env=held)
        while not {"end tool lookup-south", "returned tool lookup-north"} <= set(
            side.read_text().splitlines() if side.exists() else []
        ):
            assert child.running(), child.wait().stderr
            time.sleep(0.001)
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait().returncode == -signal.SIGKILL
        with sqlite3.connect(db) as conn:  # what the kill left, read from outside
            (table,) = conn.execute(
                "SELECT journal_table FROM goals WHERE goal = 'langgraph:tools'"
            ).fetchone()
            steps = conn.execute(f"SELECT key, status FROM [{table}]").fetchall()
        assert steps == [("tool:lookup-north", "done")]  # south returned, not recorded
        done = forker.run(*PROGRAM, graph, str(db), "t1", str(side), mode)
        assert done.returncode == 0, done.stderr
        assert _answer(done) == "booked: booking of offer-17 and offer-17"
        starts = [key for event, key in _lines(side) if event == "start"]
        assert starts.count("tool lookup-north") == 1
        assert starts.count("tool lookup-south") == 2  # in flight at the kill: runs again
        assert starts.count("model book a room after 0 tools") == 1
        assert _again(side, "returned") == 0  # the ledger never called south returned


class TestResumeAfterACrash:
    # Under LangGraph's default durability, "async": LangGraph runs a request whose
    # durability was left out exactly as one given "async" (``Pregel._defaults``), so the
    # trials with the argument left out, which ran the same code, were dropped (issue 47);
    # tests/test_langgraph_requests.py's programs leave it out.
    @pytest.mark.parametrize("saver", ["letitloop", "sqlite"])
    def test_it_finishes_the_request_whatever_get_state_next_says(
        self, forker: Preloaded, tmp_path: Path, saver: str
    ) -> None:
        got = trials(forker, tmp_path, "react", "resume", "async", saver)
        assert got.errors == [] and got.differing == 0, got
        assert got.repeated == 0, got
        assert got.kills >= TRIALS // 4, got

    def test_the_tutorial_rule_stops_half_way_and_resume_does_not(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # What a kill under "async" can leave (made here by deleting the rows the kill
        # would not have written): a superstep's writes saved, the checkpoint after it
        # not, the request not finished. get_state().next is then empty.
        import langgraph_prebuilt as program

        from letitloop.adapters.langgraph import resume

        side = tmp_path / "side"
        monkeypatch.setenv("SIDE", str(side))
        db = tmp_path / "j.db"
        graph = program.build("react", str(db))
        config: Any = {"configurable": {"thread_id": "t"}}
        want = graph.invoke({"messages": [("user", program.TASK)]}, config)
        with sqlite3.connect(db) as conn:
            (tools_step,) = conn.execute(
                "SELECT step FROM langgraph_checkpoints WHERE checkpoint_ns = '' AND "
                "checkpoint_id IN (SELECT checkpoint_id FROM langgraph_writes "
                "WHERE channel = 'messages' AND task_path LIKE '%pregel_push%') "
                "ORDER BY step LIMIT 1"
            ).fetchone()
            later = "SELECT checkpoint_id FROM langgraph_checkpoints WHERE step > ?"
            conn.execute(
                f"DELETE FROM langgraph_writes WHERE checkpoint_id IN ({later})", (tools_step,)
            )
            conn.execute("DELETE FROM langgraph_checkpoints WHERE step > ?", (tools_step,))
            conn.execute("UPDATE langgraph_requests SET status = 'running', to_checkpoint = NULL")
        paid = side.read_text().count("start ")
        assert graph.get_state(config).next == ()  # the tutorial's rule: nothing to resume
        assert len(graph.get_state(config).values["messages"]) < len(want["messages"])
        done = resume(graph, config)
        assert done["messages"][-1].content == want["messages"][-1].content
        assert side.read_text().count("start ") == paid  # every call replayed


class TestWhatAToolNodeMayHold:
    """In one process: a user's wrap_tool_call, and a tool that returns a Command."""

    @pytest.mark.parametrize("run", ["invoke", "ainvoke"])
    def test_a_command_and_a_wrapper_of_the_users_are_journaled(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run: str
    ) -> None:
        import asyncio

        import langgraph_prebuilt as program
        from langchain_core.tools import tool
        from langgraph.prebuilt import ToolNode, create_react_agent

        from letitloop.adapters.langgraph import (
            LetItLoopCheckpointSaver,
            durable_model,
            durable_node,
        )

        monkeypatch.setenv("SIDE", str(tmp_path / "side"))

        @tool
        def lookup(q: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:  # type: ignore[type-arg]
            """Find an offer (as a state update)."""
            return Command(
                update={"messages": [ToolMessage(f"offer {q}", tool_call_id=tool_call_id)]}
            )

        @tool
        def book(what: str) -> str:
            """Book it."""
            return f"booked {what}"

        wrapped: list[str] = []

        def wrap(request: Any, execute: Any) -> Any:
            wrapped.append(request.tool_call["id"])
            return execute(request)

        agent = create_react_agent(
            durable_model(program.FakeChat()),
            durable_node(ToolNode([lookup, book], wrap_tool_call=wrap)),
            checkpointer=LetItLoopCheckpointSaver(tmp_path / "j.db"),
        )
        ask = {"messages": [("user", "hi")]}
        config: Any = {"configurable": {"thread_id": "t"}}
        done = (
            agent.invoke(ask, config)
            if run == "invoke"
            else asyncio.run(agent.ainvoke(ask, config))
        )
        assert done["messages"][-1].content == "booked: booked offer hi north and offer hi south"
        assert sorted(wrapped) == ["b", "lookup-north", "lookup-south"]
        with sqlite3.connect(tmp_path / "j.db") as conn:
            (table,) = conn.execute(
                "SELECT journal_table FROM goals WHERE goal = 'langgraph:tools'"
            ).fetchone()
            rows = dict(conn.execute(f"SELECT key, result FROM [{table}]").fetchall())
        assert '"!langgraph.types.Command"' in rows["tool:lookup-north"]
        assert rows.keys() == {"tool:lookup-north", "tool:lookup-south", "tool:b"}


class TestAModelCallUnderABudget:
    def test_it_is_reserved_before_it_is_made_and_refused_when_it_does_not_fit(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        import langgraph_prebuilt as program
        from langgraph.prebuilt import ToolNode, create_react_agent

        from letitloop import Budget
        from letitloop.adapters.langgraph import (
            LetItLoopCheckpointSaver,
            durable_model,
            durable_node,
        )
        from letitloop.errors import BudgetExceededError

        side = tmp_path / "side"
        monkeypatch.setenv("SIDE", str(side))

        def agent(budget: Budget) -> Any:
            return create_react_agent(
                durable_model(program.FakeChat(), budget=budget),
                durable_node(ToolNode(program.TOOLS)),
                checkpointer=LetItLoopCheckpointSaver(tmp_path / "j.db"),
            )

        ask: Any = {"messages": [("user", program.TASK)]}
        with pytest.raises(BudgetExceededError):
            agent(Budget(tokens=0)).invoke(ask, {"configurable": {"thread_id": "t0"}})
        assert not side.exists()  # refused before the call: nothing paid
        done = agent(Budget(tokens=1000)).invoke(ask, {"configurable": {"thread_id": "t1"}})
        assert done["messages"][-1].content == "booked: booking of offer-17 and offer-17"
        with sqlite3.connect(tmp_path / "j.db") as conn:
            settled = conn.execute(
                "SELECT count(*) FROM reservations WHERE settled_at IS NOT NULL"
            ).fetchone()
        assert settled == (3,)  # the three model calls, each reserved then settled


class TestARequestUnderABudget:
    @pytest.mark.parametrize("way", ["invoke", "ainvoke"])
    def test_the_budget_bounds_all_its_calls_and_a_higher_one_resumes_it(
        self, way: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # Three model calls, each a run of its own; the budget fits each call alone but not
        # the three: the request is refused before the third, and asked again with a
        # higher budget it resumes, paying only the third.
        import langgraph_prebuilt as program
        from langgraph.prebuilt import ToolNode, create_react_agent

        from letitloop import Budget
        from letitloop.adapters.langgraph import (
            LetItLoopCheckpointSaver,
            durable_model,
            durable_node,
        )
        from letitloop.errors import BudgetExceededError

        class Limited(program.FakeChat):
            max_tokens: int = 10

        side = tmp_path / "side"
        monkeypatch.setenv("SIDE", str(side))

        class Agent:
            def __init__(self, budget: Budget) -> None:
                self.graph = create_react_agent(
                    durable_model(Limited(), budget=budget),
                    durable_node(ToolNode(program.TOOLS)),
                    checkpointer=LetItLoopCheckpointSaver(tmp_path / "j.db"),
                )

            def invoke(self, ask: Any, config: Any) -> Any:
                if way == "invoke":
                    return self.graph.invoke(ask, config)
                return asyncio.run(self.graph.ainvoke(ask, config))

        agent = Agent
        ask: Any = {"messages": [("user", program.TASK)]}
        agent(Budget(tokens=10_000)).invoke(ask, {"configurable": {"thread_id": "measured"}})
        with sqlite3.connect(tmp_path / "j.db") as conn:
            held = conn.execute(
                "SELECT tokens, settled_tokens FROM reservations ORDER BY reserved_at"
            ).fetchall()
        (r1, s1), (r2, s2), (r3, _) = held
        budget = Budget(tokens=s1 + s2 + r3 - 1)  # each call fits alone, not the request
        assert max(r1, r2, r3) <= budget.tokens
        config = {"configurable": {"thread_id": "t1"}}
        side.unlink()
        with pytest.raises(BudgetExceededError, match="request 1 of thread 't1'") as refused:
            agent(budget).invoke(ask, config)
        assert (refused.value.tokens, refused.value.key) == (s1 + s2, "model")
        starts = [x for x in side.read_text().splitlines() if x.startswith("start model")]
        assert len(starts) == 2  # the third call was not made
        done = agent(Budget(tokens=10_000)).invoke(ask, config)
        assert done["messages"][-1].content == "booked: booking of offer-17 and offer-17"
        starts = [x for x in side.read_text().splitlines() if x.startswith("start")]
        assert len(starts) == len(set(starts))  # nothing paid twice: only the third was added
        assert sum(x.startswith("start model") for x in starts) == 3


EXAMPLE = HERE.parent / "examples" / "langgraph_agent.py"


def _ran(stdout: str) -> list[str]:
    """The example's ``  ran  WHAT`` lines: the calls that really ran in that process."""
    return [line.split("ran  ", 1)[1] for line in stdout.splitlines() if "  ran  " in line]


class TestTheCookbook:
    """examples/langgraph_agent.py as a reader runs it: ``--crash``, then the same again."""

    def test_killed_inside_book_it_resumes_paying_only_book_and_the_last_model_call(
        self, forker: Preloaded, tmp_path: Path
    ) -> None:
        def run(db: str, *args: str) -> Any:
            return forker.run(EXAMPLE, *args, "--db", str(tmp_path / db), cwd=tmp_path)

        reference = run("reference.db")
        assert reference.returncode == 0, reference.stderr
        crashed = run("journal.db", "--crash")
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr
        first = _ran(crashed.stdout)
        assert first[0] == "model call 1"
        assert sorted(first[1:3]) == ["lookup('Lisbon')", "lookup('Porto')"]  # side by side
        assert first[3:] == ["model call 2", "book('Hotel Central Porto')"]
        resumed = run("journal.db")
        assert resumed.returncode == 0, resumed.stderr
        # No finished call ran again: only book (in flight at the kill), then the last call.
        assert _ran(resumed.stdout) == ["book('Hotel Central Porto')", "model call 3"]
        answer = [line for line in reference.stdout.splitlines() if line.startswith("answer: ")]
        assert answer == ["answer: Done: booked Hotel Central Porto, confirmation 7F3Q."]
        assert answer[0] in resumed.stdout.splitlines()  # the uninterrupted run's answer
        again = run("journal.db")  # the finished request: answered, nothing runs
        assert again.returncode == 0, again.stderr
        assert _ran(again.stdout) == []
        assert answer[0] in again.stdout.splitlines()
