"""Which journal run a durable node's execution is: lost checkpoints, copied and deleted threads.

Real graphs on real journal files. A checkpoint "lost in a crash" is made
by deleting its row after a node failed: exactly what a SIGKILL leaves when
the background write of that checkpoint never happened (LangGraph's
``"async"`` and ``"exit"`` modes); the SIGKILL trials themselves are in
tests/test_langgraph_kill.py and benchmarks/langgraph_kill.py.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph.graph", reason="LangGraph is not installed (letitloop[langgraph])")

import operator

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, Send, interrupt

from letitloop import LetItLoopError, async_step, step
from letitloop.adapters.langgraph import (
    NODE_KEY,
    LetItLoopCheckpointSaver,
    delete_node_runs,
    durable_node,
    node_run_key,
)
from letitloop.stores.sqlite.holding import run_lock_path


class Chain(TypedDict, total=False):
    topic: str
    acc: Annotated[list[str], operator.add]


def _calls_node(name: str, calls: list[str], fail_at: dict[str, int] | None = None) -> Any:
    """A durable node making three steps; ``fail_at[name] = i`` raises after step i returned."""

    def work(node: str, i: int, topic: str) -> str:
        calls.append(f"{node}/{i}")
        return f"{node}-{i}-{topic}"

    def body(state: Chain) -> dict[str, Any]:
        out = []
        for i in range(3):
            out.append(step(f"s{i}", work, name, i, state["topic"]))
            if fail_at is not None and fail_at.get(name) == i:
                del fail_at[name]
                raise ConnectionError(f"{name} died after step {i}")
        return {"acc": out}

    body.__name__ = body.__qualname__ = name
    return durable_node(body)


def _chain(saver: Any, calls: list[str], fail_at: dict[str, int] | None = None) -> Any:
    g = StateGraph(Chain)
    for name in ("a", "b", "c"):
        g.add_node(name, _calls_node(name, calls, fail_at))
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", "c")
    g.add_edge("c", END)
    return g.compile(checkpointer=saver)


def _lose_checkpoints_after(db: Path, thread: str, keep: int) -> int:
    """Delete the thread's checkpoints (and their writes) newer than the ``keep`` oldest.

    What a SIGKILL leaves when those checkpoints' background writes never
    happened; returns how many went.
    """
    with sqlite3.connect(db) as conn:
        ids = [
            r[0]
            for r in conn.execute(
                "SELECT checkpoint_id FROM langgraph_checkpoints WHERE thread_id = ? "
                "ORDER BY checkpoint_id",
                (thread,),
            )
        ][keep:]
        for cid in ids:
            conn.execute("DELETE FROM langgraph_writes WHERE checkpoint_id = ?", (cid,))
            conn.execute("DELETE FROM langgraph_checkpoints WHERE checkpoint_id = ?", (cid,))
    return len(ids)


def _runs(db: Path, thread: str | None = None) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT goal, name FROM runs ORDER BY rowid").fetchall()
    return [(g, n) for g, n in rows if thread is None or n.startswith(f"{thread}#")]


def _step_rows(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("SELECT journal_table FROM goals")]
        return sum(conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables)


class TestANodeWhoseStartingCheckpointWasLost:
    @pytest.mark.parametrize("mode", ["async", "exit"])
    def test_its_returned_calls_replay_when_langgraph_rebuilds_the_superstep(
        self, db: Path, mode: str
    ) -> None:
        calls: list[str] = []
        fail_at = {"b": 1}
        config = {"configurable": {"thread_id": "t"}}
        with LetItLoopCheckpointSaver(db) as saver:
            app = _chain(saver, calls, fail_at)
            with pytest.raises(ConnectionError):
                app.invoke({"topic": "x"}, config, durability=mode)
            # The crash: nothing of this turn reached the file (exit), or not the
            # checkpoint b started from (async: only input and a's start remain).
            lost = _lose_checkpoints_after(db, "t", 0 if mode == "exit" else 2)
            assert lost >= 1
            if mode == "exit":
                out = app.invoke({"topic": "x"}, config, durability=mode)
            else:
                out = app.invoke(None, config, durability=mode)
        assert out["acc"] == [f"{n}-{i}-x" for n in "abc" for i in range(3)]
        # a ran once (exit: its steps replayed when LangGraph ran it again), b's
        # two returned calls replayed and only its third ran, c ran once.
        assert calls == ["a/0", "a/1", "a/2", "b/0", "b/1", "b/2", "c/0", "c/1", "c/2"]

    def test_a_node_whose_input_changed_meanwhile_runs_afresh_without_a_mismatch(
        self, db: Path
    ) -> None:
        calls: list[str] = []
        fail_at = {"a": 0}
        config = {"configurable": {"thread_id": "t"}}
        with LetItLoopCheckpointSaver(db) as saver:
            app = _chain(saver, calls, fail_at)
            with pytest.raises(ConnectionError):
                app.invoke({"topic": "x"}, config, durability="exit")
            _lose_checkpoints_after(db, "t", 0)
            out = app.invoke({"topic": "y"}, config, durability="exit")
        assert out["acc"] == [f"{n}-{i}-y" for n in "abc" for i in range(3)]
        assert calls[:2] == ["a/0", "a/0"]  # another input: another execution


class TestATaskResumedFromItsOwnCheckpoint:
    def test_it_replays_by_its_task_even_when_its_input_fingerprint_cannot_tell(
        self, db: Path
    ) -> None:
        calls: list[str] = []
        fail_at = {"b": 0}
        config = {"configurable": {"thread_id": "t"}}
        with LetItLoopCheckpointSaver(db) as saver:
            app = _chain(saver, calls, fail_at)
            with pytest.raises(ConnectionError):
                app.invoke({"topic": "x"}, config, durability="sync")
            out = app.invoke(None, config, durability="sync")
        assert out["acc"][-3:] == ["c-0-x", "c-1-x", "c-2-x"]
        assert calls.count("b/0") == 1


class Greeting(TypedDict, total=False):
    greeting: str


def _session_graph(saver: Any, calls: list[str], *, decorated: bool = True) -> Any:
    def hello(name: str) -> str:
        calls.append(name)
        return f"hello {name}"

    def greet(state: Greeting) -> dict[str, str]:
        name = interrupt("what is your name?")
        if not decorated:
            return {"greeting": hello(name)}
        # No argument carries the name: only the run's identity can tell sessions apart.
        return {"greeting": step("greet", lambda: hello(name))}

    g = StateGraph(Greeting)
    g.add_node("greet", durable_node(greet) if decorated else greet)
    g.add_edge(START, "greet")
    g.add_edge("greet", END)
    return g.compile(checkpointer=saver)


def _conf(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


class TestASessionCopiedFromATemplateThread:
    @pytest.mark.parametrize("decorated", [True, False], ids=["durable", "undecorated"])
    def test_a_reset_session_gets_the_new_answer_not_the_deleted_one(
        self, db: Path, decorated: bool
    ) -> None:
        calls: list[str] = []
        with LetItLoopCheckpointSaver(db) as saver:
            app = _session_graph(saver, calls, decorated=decorated)
            app.invoke({}, _conf("template"))  # paused at interrupt()
            saver.copy_thread("template", "s1")
            first = app.invoke(Command(resume="Carol"), _conf("s1"))
            saver.delete_thread("s1")  # reset the session
            saver.copy_thread("template", "s1")
            second = app.invoke(Command(resume="Dave"), _conf("s1"))
        assert first["greeting"] == "hello Carol"
        assert second["greeting"] == "hello Dave"
        assert calls == ["Carol", "Dave"]

    def test_copying_the_template_over_a_session_retires_the_sessions_run(self, db: Path) -> None:
        calls: list[str] = []
        with LetItLoopCheckpointSaver(db) as saver:
            app = _session_graph(saver, calls)
            app.invoke({}, _conf("template"))
            saver.copy_thread("template", "s1")
            app.invoke(Command(resume="Carol"), _conf("s1"))
            assert len(_runs(db, "s1")) == 1
            saver.copy_thread("template", "s1")  # no delete: the copy is a new start
        assert _runs(db, "s1") == []
        assert len(_runs(db, "template")) == 1

    def test_a_session_paused_before_the_node_and_resumed_with_none_runs_it_afresh(
        self, db: Path
    ) -> None:
        calls: list[str] = []
        user = ["Carol"]

        def hello() -> str:
            calls.append(user[0])
            return f"hello {user[0]}"

        @durable_node
        def greet(state: Greeting) -> dict[str, str]:
            return {"greeting": step("greet", hello)}

        g = StateGraph(Greeting)
        g.add_node("greet", greet)
        g.add_edge(START, "greet")
        g.add_edge("greet", END)
        with LetItLoopCheckpointSaver(db) as saver:
            app = g.compile(checkpointer=saver, interrupt_before=["greet"])
            app.invoke({}, _conf("template"))
            saver.copy_thread("template", "s1")
            first = app.invoke(None, _conf("s1"))
            saver.delete_thread("s1")
            saver.copy_thread("template", "s1")
            user[0] = "Dave"
            second = app.invoke(None, _conf("s1"))
        assert (first["greeting"], second["greeting"]) == ("hello Carol", "hello Dave")

    def test_deleted_conversations_leave_no_runs_rows_or_lock_files(self, db: Path) -> None:
        calls: list[str] = []
        with LetItLoopCheckpointSaver(db) as saver:
            app = _session_graph(saver, calls)
            app.invoke({}, _conf("template"))
            for n in range(5):
                saver.copy_thread("template", f"s{n}")
                app.invoke(Command(resume=f"user {n}"), _conf(f"s{n}"))
            assert len(_runs(db)) == 1 + 5  # the template's paused node, and each session's
            # A holder that died leaves its lock file; the retirement removes it.
            with sqlite3.connect(db) as conn:
                (run_id,) = conn.execute(
                    "SELECT id FROM runs WHERE name LIKE 's0#%' LIMIT 1"
                ).fetchone()
            lock = run_lock_path(saver.store, run_id)
            lock.parent.mkdir(exist_ok=True)
            lock.touch()
            for n in range(5):
                saver.delete_thread(f"s{n}")
            folder = saver.store.lock_folder
        assert [n.split("#")[0] for _, n in _runs(db)] == ["template"]
        assert _step_rows(db) == 0  # the template's node had made no step yet
        assert not folder.exists() or list(folder.iterdir()) == []

    def test_a_journal_elsewhere_is_cleared_with_delete_node_runs(self, tmp_path: Path) -> None:
        journal = tmp_path / "nodes.db"
        calls: list[str] = []

        @durable_node(path=journal)
        def greet(state: Greeting) -> dict[str, str]:
            name = interrupt("name?")
            return {"greeting": step("greet", lambda: calls.append(name) or f"hello {name}")}

        g = StateGraph(Greeting)
        g.add_node("greet", greet)
        g.add_edge(START, "greet")
        g.add_edge("greet", END)
        with LetItLoopCheckpointSaver(tmp_path / "graph.db") as saver:
            app = g.compile(checkpointer=saver)
            app.invoke({}, _conf("template"))
            saver.copy_thread("template", "s1")
            app.invoke(Command(resume="Carol"), _conf("s1"))
            saver.delete_thread("s1")  # reaches the saver's file only
            assert len(_runs(journal, "s1")) == 1
            assert delete_node_runs("s1", path=journal) == 1
            saver.copy_thread("template", "s1")
            again = app.invoke(Command(resume="Dave"), _conf("s1"))
        assert again["greeting"] == "hello Dave"
        assert calls == ["Carol", "Dave"]


class TestPruningAndDeletingRuns:
    def test_keep_latest_retires_finished_supersteps_and_keeps_the_paused_node(
        self, db: Path
    ) -> None:
        calls: list[str] = []

        @durable_node
        def first(state: Greeting) -> dict[str, str]:
            return {"greeting": step("draft", lambda: calls.append("draft") or "draft")}

        @durable_node
        def second(state: Greeting) -> dict[str, str]:
            before = step("prepare", lambda: calls.append("prepare") or "ready")
            answer = interrupt("ok?")
            return {"greeting": f"{before} {answer}"}

        g = StateGraph(Greeting)
        g.add_node("first", first)
        g.add_node("second", second)
        g.add_edge(START, "first")
        g.add_edge("first", "second")
        g.add_edge("second", END)
        with LetItLoopCheckpointSaver(db) as saver:
            app = g.compile(checkpointer=saver)
            app.invoke({}, _conf("t"))
            assert [g for g, _ in _runs(db)] == ["langgraph:first", "langgraph:second"]
            saver.prune(["t"], strategy="keep_latest")
            assert [g for g, _ in _runs(db)] == ["langgraph:second"]
            out = app.invoke(Command(resume="yes"), _conf("t"))
        assert out["greeting"] == "ready yes"
        assert calls == ["draft", "prepare"]  # the paused node's step replayed

    def test_prune_delete_and_delete_for_runs_retire_their_runs(self, db: Path) -> None:
        calls: list[str] = []
        with LetItLoopCheckpointSaver(db) as saver:
            app = _chain(saver, calls)
            app.invoke({"topic": "x"}, {"configurable": {"thread_id": "p"}})
            app.invoke(
                {"topic": "x"},
                {"configurable": {"thread_id": "r"}, "metadata": {"run_id": "lg-run-1"}},
            )
            app.invoke({"topic": "x"}, {"configurable": {"thread_id": "kept"}})
            saver.prune(["p"], strategy="delete")
            saver.delete_for_runs(["lg-run-1"])
        assert {n.split("#")[0] for _, n in _runs(db)} == {"kept"}

    def test_a_run_a_live_node_holds_is_put_out_of_reach_then_deleted_later(self, db: Path) -> None:
        started, release = threading.Event(), threading.Event()

        def slow() -> str:
            started.set()
            release.wait(10)
            return "done"

        @durable_node
        def work(state: Chain) -> dict[str, list[str]]:
            return {"acc": [step("slow", slow)]}

        g = StateGraph(Chain)
        g.add_node("work", work)
        g.add_edge(START, "work")
        g.add_edge("work", END)
        with LetItLoopCheckpointSaver(db) as saver:
            app = g.compile(checkpointer=saver)
            running = threading.Thread(target=app.invoke, args=({"topic": "x"}, _conf("t")))
            running.start()
            try:
                assert started.wait(10)
                saver.delete_thread("t")  # while the node holds its run
                with sqlite3.connect(db) as conn:
                    (run_id, name) = conn.execute("SELECT id, name FROM runs").fetchone()
                assert name.startswith("t#") and name.endswith(f"@retired:{run_id}")
            finally:
                release.set()
                running.join()
            saver.delete_thread("t")  # no longer held: deleted with its rows
        assert _runs(db, "t") == []
        assert _step_rows(db) == 0


class TestTimeTravel:
    def test_running_again_from_one_checkpoint_twice_runs_the_calls_each_time(
        self, db: Path
    ) -> None:
        calls: list[str] = []
        with LetItLoopCheckpointSaver(db) as saver:
            app = _chain(saver, calls)
            config = _conf("t")
            app.invoke({"topic": "x"}, config)
            before_b = next(h for h in app.get_state_history(config) if h.next == ("b",))
            app.invoke(None, before_b.config)
            app.invoke(None, before_b.config)
        assert calls.count("b/0") == 3 and calls.count("a/0") == 1

    def test_a_fork_made_with_update_state_runs_the_calls_for_its_new_input(self, db: Path) -> None:
        calls: list[str] = []
        with LetItLoopCheckpointSaver(db) as saver:
            app = _chain(saver, calls)
            config = _conf("t")
            app.invoke({"topic": "x"}, config)
            before_b = next(h for h in app.get_state_history(config) if h.next == ("b",))
            forked = app.update_state(before_b.config, {"topic": "y"})
            out = app.invoke(None, forked)
        assert out["acc"][-3:] == ["c-0-y", "c-1-y", "c-2-y"]
        assert calls.count("b/0") == 2

    @pytest.mark.parametrize(("mode", "runs"), [("async", 2), ("exit", 1)])
    def test_running_again_with_the_same_input_from_an_earlier_turn(
        self, db: Path, mode: str, runs: int
    ) -> None:
        # The documented limit: "exit" saves nothing of the first time travel,
        # so the second, with the same input, is taken for its re-execution.
        calls: list[str] = []
        with LetItLoopCheckpointSaver(db) as saver:
            app = _chain(saver, calls)
            config = _conf("t")
            app.invoke({"topic": "x"}, config, durability=mode)
            first_turn = app.get_state(config).config
            app.invoke({"topic": "y"}, config, durability=mode)
            calls.clear()
            app.invoke({"topic": "z"}, first_turn, durability=mode)
            app.invoke({"topic": "z"}, first_turn, durability=mode)
        assert calls.count("a/0") == runs


class Fan(TypedDict, total=False):
    items: list[str]
    acc: Annotated[list[str], operator.add]


class TestSendAndSubgraphs:
    def test_two_identical_sends_to_one_node_are_two_executions(self, db: Path) -> None:
        calls: list[str] = []
        fail = [True]

        @durable_node
        def fetch(arg: dict[str, str]) -> dict[str, list[str]]:
            got = step("fetch", lambda: calls.append(arg["item"]) or arg["item"].upper())
            if arg["item"] == "b" and fail[0]:
                fail[0] = False
                raise ConnectionError("b failed after its step returned")
            return {"acc": [got]}

        g = StateGraph(Fan)
        g.add_node("fetch", fetch)
        g.add_conditional_edges(
            START, lambda s: [Send("fetch", {"item": i}) for i in s["items"]], ["fetch"]
        )
        g.add_edge("fetch", END)
        with LetItLoopCheckpointSaver(db) as saver:
            app = g.compile(checkpointer=saver)
            with pytest.raises(ConnectionError):
                app.invoke({"items": ["a", "a", "b"]}, _conf("t"))
            out = app.invoke(None, _conf("t"))
        assert sorted(out["acc"]) == ["A", "A", "B"]
        assert sorted(calls) == ["a", "a", "b"]  # each Send its own run; b replayed

    def test_a_durable_node_inside_a_subgraph_replays_after_a_failure(self, db: Path) -> None:
        calls: list[str] = []
        fail = [True]

        @durable_node
        def inner(state: Chain) -> dict[str, list[str]]:
            got = step("inner", lambda: calls.append("inner") or "in")
            if fail[0]:
                fail[0] = False
                raise ConnectionError("inner failed after its step returned")
            return {"acc": [got]}

        sub = StateGraph(Chain)
        sub.add_node("inner", inner)
        sub.add_edge(START, "inner")
        sub.add_edge("inner", END)
        g = StateGraph(Chain)
        g.add_node("outer", sub.compile())
        g.add_edge(START, "outer")
        g.add_edge("outer", END)
        with LetItLoopCheckpointSaver(db) as saver:
            app = g.compile(checkpointer=saver)
            with pytest.raises(ConnectionError):
                app.invoke({"topic": "x"}, _conf("t"), durability="sync")
            out = app.invoke(None, _conf("t"), durability="sync")
        assert out["acc"] == ["in"] and calls == ["inner"]


class TestOddThreadIds:
    @pytest.mark.parametrize(
        "thread",
        ["user\n1", "\x1b[31mred\x1b[0m", "tab\there", "a|b#c~d", "é" * 600, " ", "🦜\x00"],
        ids=["newline", "escape", "tab", "separators", "long", "blank", "nul"],
    )
    def test_every_thread_id_the_saver_accepts_works_in_a_durable_node(
        self, db: Path, thread: str
    ) -> None:
        calls: list[str] = []
        fail_at = {"b": 1}
        with LetItLoopCheckpointSaver(db) as saver:
            app = _chain(saver, calls, fail_at)
            with pytest.raises(ConnectionError):
                app.invoke({"topic": "x"}, _conf(thread))
            out = app.invoke(None, _conf(thread))
            saver.delete_thread(thread)
        assert out["acc"][-1] == "c-2-x"
        assert calls.count("b/0") == 1 and calls.count("b/1") == 1
        assert _runs(db) == []

    def test_a_thread_id_sqlite_cannot_store_is_refused_by_the_saver_with_a_clear_error(
        self, db: Path
    ) -> None:
        from letitloop.errors import InvalidNameError

        with LetItLoopCheckpointSaver(db) as saver:
            app = _chain(saver, [])
            with pytest.raises(InvalidNameError, match="lone surrogate"):
                app.invoke({"topic": "x"}, _conf("x\ud800y"))

    def test_two_ids_that_read_alike_keep_apart(self, db: Path) -> None:
        goal_a, run_a = node_run_key(
            {"configurable": {"thread_id": "a\nb", "checkpoint_ns": "n:t1"}}, {"x": 1}
        )
        goal_b, run_b = node_run_key(
            {"configurable": {"thread_id": "a\tb", "checkpoint_ns": "n:t1"}}, {"x": 1}
        )
        assert goal_a == goal_b == "langgraph:n"
        assert run_a.startswith("a?b#") and run_b.startswith("a?b#") and run_a != run_b


class TestConcurrentResumesInOneProcess:
    def _paused(self, saver: LetItLoopCheckpointSaver, node: Any, thread: str) -> Any:
        g = StateGraph(Chain)
        g.add_node("work", node)
        g.add_edge(START, "work")
        g.add_edge("work", END)
        g.compile(checkpointer=saver, interrupt_before=["work"]).invoke(
            {"topic": "x"}, _conf(thread)
        )
        return g.compile(checkpointer=saver)

    def test_two_threads_resuming_one_thread_run_the_call_once(self, db: Path) -> None:
        calls: list[str] = []

        def slow() -> str:
            calls.append("slow")
            time.sleep(0.3)
            return "done"

        @durable_node
        def work(state: Chain) -> dict[str, list[str]]:
            return {"acc": [step("slow", slow)]}

        results: list[Any] = []
        with LetItLoopCheckpointSaver(db) as saver:
            app = self._paused(saver, work, "t")

            def resume() -> None:
                try:
                    results.append(app.invoke(None, _conf("t"))["acc"])
                except Exception as exc:  # would fail the assertion below, with its text
                    results.append(repr(exc))

            threads = [threading.Thread(target=resume) for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        assert calls == ["slow"]
        assert results == [["done"], ["done"]]

    def test_two_tasks_resuming_one_thread_run_the_call_once(self, db: Path) -> None:
        calls: list[str] = []

        async def slow() -> str:
            calls.append("slow")
            await asyncio.sleep(0.3)
            return "done"

        @durable_node
        async def work(state: Chain) -> dict[str, list[str]]:
            return {"acc": [await async_step("slow", slow)]}

        async def scenario(app: Any) -> list[Any]:
            outs = await asyncio.gather(
                app.ainvoke(None, _conf("t")), app.ainvoke(None, _conf("t"))
            )
            return [o["acc"] for o in outs]

        with LetItLoopCheckpointSaver(db) as saver:
            app = self._paused(saver, work, "t")
            results = asyncio.run(scenario(app))
        assert calls == ["slow"]
        assert results == [["done"], ["done"]]

    def test_a_second_invocation_waits_for_the_whole_first_one_past_the_node_timeout(
        self, db: Path
    ) -> None:
        # Issue 48: the saver holds the thread for a whole invocation, so the
        # second waits for the first to return (not only for its superstep),
        # however long, and then finds nothing left to run.
        started, release = threading.Event(), threading.Event()
        calls: list[str] = []

        def slow() -> str:
            calls.append("slow")
            started.set()
            release.wait(10)
            return "done"

        @durable_node(timeout=0.2)
        def work(state: Chain) -> dict[str, list[str]]:
            return {"acc": [step("slow", slow)]}

        with LetItLoopCheckpointSaver(db) as saver:
            app = self._paused(saver, work, "t")
            holder = threading.Thread(target=app.invoke, args=(None, _conf("t")))
            holder.start()
            try:
                assert started.wait(10)
                threading.Timer(0.5, release.set).start()
                assert app.invoke(None, _conf("t"))["acc"] == ["done"]
            finally:
                release.set()
                holder.join()
        assert calls == ["slow"]


class TestNodeInputFingerprints:
    def test_message_ids_given_afresh_by_add_messages_do_not_make_a_new_execution(
        self, db: Path
    ) -> None:
        class Chat(TypedDict):
            messages: Annotated[list[Any], add_messages]

        calls: list[str] = []
        fail = [True]

        def model(messages: list[Any]) -> AIMessage:
            calls.append(messages[-1].content)
            return AIMessage(content=f"echo {messages[-1].content}")

        @durable_node
        def chat(state: Chat) -> dict[str, Any]:
            reply = step("model", model, state["messages"])
            if fail[0]:
                fail[0] = False
                raise ConnectionError("died after the model answered")
            return {"messages": [reply]}

        g = StateGraph(Chat)
        g.add_node("chat", chat)
        g.add_edge(START, "chat")
        g.add_edge("chat", END)
        with LetItLoopCheckpointSaver(db) as saver:
            app = g.compile(checkpointer=saver)
            with pytest.raises(ConnectionError):
                app.invoke({"messages": [HumanMessage("hi")]}, _conf("t"), durability="exit")
            _lose_checkpoints_after(db, "t", 0)
            # The same input again: add_messages gives the message a new uuid.
            out = app.invoke({"messages": [HumanMessage("hi")]}, _conf("t"), durability="exit")
        assert [m.content for m in out["messages"]] == ["hi", "echo hi"]
        assert calls == ["hi"]


class TestWithoutTheSaver:
    def test_a_graph_without_a_checkpointer_gets_a_clear_error(self, db: Path) -> None:
        @durable_node(path=db)
        def work(state: Chain) -> dict[str, list[str]]:
            return {"acc": [step("s", str, 1)]}

        g = StateGraph(Chain)
        g.add_node("work", work)
        g.add_edge(START, "work")
        g.add_edge("work", END)
        with pytest.raises(LetItLoopError, match="without a checkpointer"):
            g.compile().invoke({"topic": "x"}, _conf("t"))

    def test_another_checkpointer_is_asked_whether_a_checkpoint_was_lost(
        self, tmp_path: Path
    ) -> None:
        calls: list[str] = []
        fail_at: dict[str, int] = {}
        saver = InMemorySaver()
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("LETITLOOP_DB", str(tmp_path / "journal.db"))
            app = _chain(saver, calls, fail_at)
            app.invoke({"topic": "x"}, _conf("t"), durability="sync")
            first_turn = set(saver.storage["t"][""])
            calls.clear()
            fail_at["b"] = 1
            with pytest.raises(ConnectionError):
                app.invoke({"topic": "y"}, _conf("t"), durability="exit")
            # The crash: nothing of the second turn was saved.
            for cid in set(saver.storage["t"][""]) - first_turn:
                del saver.storage["t"][""][cid]
            out = app.invoke({"topic": "y"}, _conf("t"), durability="exit")
        assert out["acc"][-1] == "c-2-y"
        assert calls.count("b/0") == 1 and calls.count("a/0") == 1

    @pytest.mark.parametrize("key", [None, "turn-1"], ids=["no key", "explicit key"])
    def test_a_thread_the_checkpointer_forgot_runs_again_unless_the_caller_gave_a_key(
        self, tmp_path: Path, key: str | None
    ) -> None:
        calls: list[str] = []
        fail_at = {"b": 1}
        saver = InMemorySaver()
        config = _conf("t")
        if key is not None:
            config["configurable"][NODE_KEY] = key
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("LETITLOOP_DB", str(tmp_path / "journal.db"))
            app = _chain(saver, calls, fail_at)
            with pytest.raises(ConnectionError):
                app.invoke({"topic": "x"}, config, durability="exit")
            # Nothing of the turn is in the saver: a crash under "exit", or a
            # new process's fresh InMemorySaver. Only a key ties the two.
            saver.delete_thread("t")
            out = app.invoke({"topic": "x"}, config, durability="exit")
        assert out["acc"][-1] == "c-2-x"
        assert calls.count("a/0") == calls.count("b/0") == (1 if key else 2)

    def test_a_key_that_is_not_text_is_refused_with_a_clear_error(self, tmp_path: Path) -> None:
        saver = InMemorySaver()
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("LETITLOOP_DB", str(tmp_path / "journal.db"))
            app = _chain(saver, [])
            config = {"configurable": {"thread_id": "t", NODE_KEY: 42}}
            with pytest.raises(LetItLoopError, match="must be a str naming the invocation"):
                app.invoke({"topic": "x"}, config)
