"""Durable nodes' connections: to the file at the path now, released when unused, safe across fork.

A durable node's journal reaches its file through the process's shared
connection (``stores.py``), which is reused only while the path still reaches
the same file. A file deleted, replaced or moved between invokes gets a fresh
connection (nothing is written into a file that is gone); a closed saver's
file leaves no descriptor behind once it is deleted; and a child forked while
another thread opens a node's journal does not wait for that thread.
"""

from __future__ import annotations

import functools
import os
import shutil
import sqlite3
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.graph", reason="LangGraph is not installed (letitloop[langgraph])")

from helpers import forked_exit_code, forked_exit_codes, in_fresh_interpreter
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from letitloop import Journal, step
from letitloop.adapters.langgraph import LetItLoopCheckpointSaver, durable_node
from letitloop.stores.sqlite.pool import close_idle_stores


class State(TypedDict):
    text: str


def _graph(saver: Any, node: Any) -> Any:
    g = StateGraph(State)
    g.add_node("work", node)
    g.add_edge(START, "work")
    g.add_edge("work", END)
    return g.compile(checkpointer=saver)


def _remove(db: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    shutil.rmtree(f"{db}-locks", ignore_errors=True)


def _done_runs(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(
            conn.execute(
                "SELECT count(*) FROM runs WHERE goal = 'langgraph:work' AND status = 'completed'"
            ).fetchone()[0]
        )
    finally:
        conn.close()


def _open_files() -> list[str]:
    names = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            names.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue
    return names


class TestADurableNodeWhoseFileWasDeletedReplacedOrMoved:
    def _node(self, calls: list[str]) -> Any:
        def upper(text: str) -> str:
            calls.append(text)
            return text.upper()

        @durable_node
        def work(state: State) -> dict[str, str]:
            return {"text": step("upper", upper, state["text"])}

        return work

    def _invoke(self, db: Path, work: Any) -> dict[str, str]:
        with LetItLoopCheckpointSaver(db) as saver:
            out: dict[str, str] = _graph(saver, work).invoke(
                {"text": "a"}, {"configurable": {"thread_id": "t"}}
            )
        return out

    def test_after_the_file_was_deleted_it_journals_into_a_fresh_file(self, db: Path) -> None:
        calls: list[str] = []
        work = self._node(calls)
        assert self._invoke(db, work) == {"text": "A"}
        _remove(db)
        assert self._invoke(db, work) == {"text": "A"}
        assert calls == ["a", "a"]  # nothing replayed from the deleted file
        assert _done_runs(db) == 1  # its run is in the file at the path

    def test_after_the_file_was_replaced_it_journals_into_the_replacement(
        self, db: Path, tmp_path: Path
    ) -> None:
        calls: list[str] = []
        work = self._node(calls)
        assert self._invoke(db, work) == {"text": "A"}
        other = tmp_path / "other.db"
        with Journal("elsewhere", path=other) as j:
            j.step("x", str, 1)
        close_idle_stores()  # a file this process has no connection to (a backup, say)
        _remove(db)
        os.replace(other, db)
        assert self._invoke(db, work) == {"text": "A"}
        assert calls == ["a", "a"]
        assert _done_runs(db) == 1

    def test_after_the_file_was_moved_the_moved_file_is_left_alone(
        self, db: Path, tmp_path: Path
    ) -> None:
        calls: list[str] = []
        work = self._node(calls)
        assert self._invoke(db, work) == {"text": "A"}
        moved = tmp_path / "moved.db"
        for suffix in ("", "-wal", "-shm"):
            if Path(f"{db}{suffix}").exists():
                os.rename(f"{db}{suffix}", f"{moved}{suffix}")
        before = _done_runs(moved)
        assert self._invoke(db, work) == {"text": "A"}
        assert calls == ["a", "a"]
        assert _done_runs(db) == 1
        assert _done_runs(moved) == before

    def test_with_another_checkpointer_a_deleted_file_is_made_again(
        self, db: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("LETITLOOP_DB", str(db))
        calls: list[str] = []
        work = self._node(calls)
        for thread in ("t1", "t2"):
            app = _graph(InMemorySaver(), work)
            assert app.invoke({"text": thread}, {"configurable": {"thread_id": thread}}) == {
                "text": thread.upper()
            }
            assert db.exists()
            assert _done_runs(db) == 1
            _remove(db)
        assert calls == ["t1", "t2"]


class TestTwoHundredJournalFilesUsedByDurableNodes:
    def test_leave_no_descriptor_behind_once_closed_and_deleted(self, tmp_path: Path) -> None:
        @durable_node
        def work(state: State) -> dict[str, str]:
            return {"text": step("upper", str.upper, state["text"])}

        def use(i: int) -> None:
            db = tmp_path / f"journal{i}.db"
            with LetItLoopCheckpointSaver(db) as saver:
                out = _graph(saver, work).invoke(
                    {"text": "a"}, {"configurable": {"thread_id": "t"}}
                )
            assert out == {"text": "A"}
            _remove(db)

        use(0)
        baseline = len(_open_files())
        for i in range(1, 200):
            use(i)
        assert len(_open_files()) <= baseline
        # Only the last file's idle connection is left, until the next open.
        left = {n.split(" ")[0] for n in _open_files() if n.startswith(str(tmp_path))}
        assert left <= {f"{tmp_path / 'journal199.db'}{s}" for s in ("", "-wal", "-shm")}, left


CHILD_OK = 0
#: How many children TestForkWhileAnotherThreadOpens forks (benchmarks/README.md: more).
FORK_CHILDREN = int(os.environ.get("LETITLOOP_FORK_CHILDREN", "200"))


class TestForkWhileAnotherThreadOpens:
    def test_two_hundred_forked_children_never_hang(self, tmp_path: Path) -> None:
        # In an interpreter of its own (helpers.in_fresh_interpreter says why).
        codes, errors = in_fresh_interpreter(
            "test_langgraph_connections", "forks_while_opening", str(tmp_path)
        )
        assert [i for i, code in enumerate(codes) if code is None] == []  # none hung
        assert codes == [CHILD_OK] * FORK_CHILDREN
        assert errors == []


@pytest.mark.skipif(
    sys.version_info >= (3, 12), reason="Python 3.12 dropped cached_property's lock"
)
class TestAChildForkedWhileAnotherThreadStartsAGraph:
    def test_runs_its_own_graph_though_that_thread_held_a_nodes_first_use_lock(
        self, tmp_path: Path
    ) -> None:
        # A new graph's first run computes each node's ``node`` (a cached_property) under
        # one lock that the class PregelNode shares: here another thread holds it at the
        # fork, as TestForkWhileAnotherThreadOpens's opener thread once did (a child of
        # 1,500 hung there). The child must not inherit it held.
        from langgraph.pregel._read import PregelNode

        @durable_node(path=tmp_path / "child.db")
        def work(state: State) -> dict[str, str]:
            return {"text": step("upper", str.upper, state["text"])}

        app = _graph(InMemorySaver(), work)
        held, done = threading.Event(), threading.Event()

        def hold() -> None:
            with PregelNode.__dict__["node"].lock:
                held.set()
                done.wait(60)

        holder = threading.Thread(target=hold)
        holder.start()
        try:
            assert held.wait(10)

            def child() -> int:
                out = app.invoke({"text": "c"}, {"configurable": {"thread_id": "c"}})
                return CHILD_OK if out == {"text": "C"} else 2

            code = forked_exit_code(child, timeout=15)
        finally:
            done.set()
            holder.join(10)
        assert code == CHILD_OK  # None: it hung
        with sqlite3.connect(tmp_path / "child.db") as conn:  # the child's node, recorded
            assert conn.execute("SELECT status FROM runs").fetchall() == [("completed",)]


def forks_while_opening(into: str) -> tuple[list[int | None], list[str]]:
    """:data:`FORK_CHILDREN` children forked while another thread keeps opening a durable
    node's journal, each running a node on a file of its own in the folder ``into``: their
    exit codes (None: it hung) and the errors of the opening thread."""
    folder = Path(into)

    @durable_node(path=folder / "parent.db")
    def parent_work(state: State) -> dict[str, str]:
        return {"text": step("upper", str.upper, state["text"])}

    stop, warm = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def keep_opening() -> None:
        n = 0
        try:
            while not stop.is_set():
                n += 1
                app = _graph(InMemorySaver(), parent_work)
                app.invoke({"text": "a"}, {"configurable": {"thread_id": f"p{n}"}})
                if n == 3:
                    warm.set()
        except BaseException as exc:
            errors.append(exc)
        finally:
            warm.set()

    opener = threading.Thread(target=keep_opening)
    opener.start()
    # LangChain imports modules on a graph's first runs: a child forked while
    # the thread holds Python's lock of a module being imported would wait
    # for it forever (CPython's, not ours), so the forks start after those.
    warm.wait(60)

    @durable_node  # its file: $LETITLOOP_DB, set by each child
    def child_work(state: State) -> dict[str, str]:
        return {"text": step("upper", str.upper, state["text"])}

    child_app = _graph(InMemorySaver(), child_work)

    def child(i: int) -> int:  # a node on its own file, then out
        os.environ["LETITLOOP_DB"] = str(folder / f"child{i}.db")
        out = child_app.invoke({"text": "c"}, {"configurable": {"thread_id": "c"}})
        return CHILD_OK if out == {"text": "C"} else 2

    # Two at a time: each child is still forked while the opener thread runs, and the
    # opener's loop keeps a core busy for as long as the forks go on (one at a time,
    # the test took twice the time and three times the CPU).
    try:
        codes = forked_exit_codes(
            [functools.partial(child, i) for i in range(FORK_CHILDREN)], at_once=2
        )
    finally:
        stop.set()
        opener.join(60)
    return codes, [repr(e) for e in errors]


def _fork_pool_journal(db: Path) -> tuple[str, str, bool]:
    """In a forked child: a journal of its own on ``db`` and a step; (error, message, DMS held)."""
    from test_connections import dms_held
    from test_forked_child import in_forked_child

    def child() -> None:
        with Journal("w", run="1", path=db) as j:
            j.step("s", str, 1)
            if not dms_held(db, os.getpid()):
                raise AssertionError("the child's connection holds no DMS lock")

    _, kind, message = in_forked_child(child)
    return kind, message, kind == ""


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="reads /proc/locks (Linux)")
class TestAChildForkedAfterDurableNodesUsedTheFile:
    def _use(self, db: Path) -> LetItLoopCheckpointSaver:
        @durable_node
        def work(state: State) -> dict[str, str]:
            return {"text": step("upper", str.upper, state["text"])}

        saver = LetItLoopCheckpointSaver(db)
        out = _graph(saver, work).invoke({"text": "a"}, {"configurable": {"thread_id": "t"}})
        assert out == {"text": "A"}
        return saver

    def test_with_the_saver_closed_its_own_journal_holds_sqlites_locks(self, db: Path) -> None:
        # The nodes' idle shared connection is copied into the child: closed there first.
        self._use(db).close()
        kind, message, ok = _fork_pool_journal(db)
        assert (kind, ok) == ("", True), message
        assert _done_runs(db) == 1

    def test_with_the_saver_still_open_its_journal_on_that_file_is_refused(self, db: Path) -> None:
        saver = self._use(db)
        try:
            kind, message, _ = _fork_pool_journal(db)
            assert kind == "ForkedJournalError", message
            assert "still in use there" in message
            assert saver.get_tuple({"configurable": {"thread_id": "t"}}) is not None
        finally:
            saver.close()
        conn = sqlite3.connect(db)
        try:
            assert conn.execute("SELECT count(*) FROM goals WHERE goal = 'w'").fetchone() == (0,)
        finally:
            conn.close()
