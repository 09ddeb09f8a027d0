"""The LangGraph adapter: LangGraph's own conformance suite, a SIGKILLed graph, shared files.

Real journal files in temporary folders, real child interpreters killed with
a real SIGKILL, results checked from outside the writer (a fresh saver, a
plain sqlite3 connection). Skipped only when LangGraph is not installed; the
``test`` extra installs it, so CI runs all of it.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, TypedDict

import pytest

pytest.importorskip("langgraph.graph", reason="LangGraph is not installed (letitloop[langgraph])")

from helpers import sqlite_store
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from preloaded import LANGGRAPH, Preloaded

from letitloop import LetItLoopError, async_step, step
from letitloop.adapters.langgraph import (
    LetItLoopCheckpointSaver,
    durable_node,
    node_run_key,
)
from letitloop.errors import DecodeError

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "langgraph_resume.py"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LETITLOOP_")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def _checkpoint(cid: str, values: dict[str, Any]) -> dict[str, Any]:
    return {
        "v": 1,
        "id": cid,
        "ts": "2026-11-30T00:00:00+00:00",
        "channel_values": values,
        "channel_versions": {k: 1 for k in values},
        "versions_seen": {},
        "pending_sends": [],
        "updated_channels": None,
    }


def _uuid6() -> str:
    from langgraph.checkpoint.base.id import uuid6

    return str(uuid6(clock_seq=-1))


class TestLangGraphsConformanceSuite:
    @pytest.mark.parametrize("durability", ["process", "power"])
    def test_every_base_and_extended_check_passes(self, tmp_path: Path, durability: str) -> None:
        from langgraph.checkpoint.conformance import checkpointer_test, validate
        from langgraph.checkpoint.conformance.capabilities import (
            BASE_CAPABILITIES,
            EXTENDED_CAPABILITIES,
        )

        @checkpointer_test(name=f"letitloop-{durability}")
        async def factory() -> Any:
            saver = LetItLoopCheckpointSaver(tmp_path / "journal.db", durability=durability)
            yield saver
            saver.close()

        report = asyncio.run(validate(factory))

        failures = {name: r.failures for name, r in report.results.items() if r.failures}
        assert failures == {}
        expected = {c.value for c in BASE_CAPABILITIES | EXTENDED_CAPABILITIES}
        assert set(report.results) == expected
        for name, result in report.results.items():
            assert result.detected, f"{name} not detected"
            assert result.passed is True, f"{name} did not pass"
            assert result.tests_failed == 0 and result.tests_skipped == 0
        base = sum(report.results[c.value].tests_passed for c in BASE_CAPABILITIES)
        extended = sum(report.results[c.value].tests_passed for c in EXTENDED_CAPABILITIES)
        # 0.0.2 has 58 base and 23 extended checks; a new version must be re-pinned on purpose.
        assert (base, extended) == (58, 23)
        assert report.passed_all() and report.conformance_level() == "FULL"


@pytest.fixture(scope="module")
def killed_and_resumed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Run the cookbook example once: a child SIGKILLed mid-node 3, then a resuming child."""
    folder = tmp_path_factory.mktemp("example")
    db, ledger = folder / "journal.db", folder / "ledger.jsonl"
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--crash", "--db", str(db), "--ledger", str(ledger)],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )
    lines = [json.loads(x) for x in ledger.read_text(encoding="utf-8").splitlines()]
    return {"done": done, "db": db, "ledger": lines}


class TestTheCookbookWithoutCrash:
    def test_it_runs_the_graph_once_each_node_and_call_once(self, tmp_path: Path) -> None:
        db, ledger = tmp_path / "journal.db", tmp_path / "ledger.jsonl"
        done = subprocess.run(
            [sys.executable, str(EXAMPLE), "--db", str(db), "--ledger", str(ledger)],
            capture_output=True,
            text=True,
            timeout=120,
            env=_env(),
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "SIGKILL" not in done.stdout and "run it with --crash" in done.stdout
        lines = [json.loads(x) for x in ledger.read_text(encoding="utf-8").splitlines()]
        assert {e["phase"] for e in lines} == {"once"}
        assert _ran(lines, "once", "node") == ["plan", "research", "write", "review"]
        assert _ran(lines, "once", "call") == [
            "outline",
            "search:history",
            "search:practice",
            "draft:intro",
            "draft:body",
            "draft:conclusion",
            "review",
        ]


def _ran(ledger: list[dict[str, Any]], phase: str, kind: str) -> list[str]:
    key = "node" if kind == "node" else "call"
    return [e[kind][key] for e in ledger if e["phase"] == phase and kind in e]


class TestAGraphKilledWithSigkillAfterItsSecondNode:
    def test_the_first_process_died_of_sigkill_and_the_resume_finished(
        self, killed_and_resumed: dict[str, Any]
    ) -> None:
        done = killed_and_resumed["done"]
        assert done.returncode == 0, done.stdout + done.stderr
        assert "exit -9 (SIGKILL)" in done.stdout
        pids = {e["phase"]: e["pid"] for e in killed_and_resumed["ledger"]}
        assert set(pids) == {"first", "resume"} and pids["first"] != pids["resume"]

    def test_nodes_completed_before_the_kill_never_run_again(
        self, killed_and_resumed: dict[str, Any]
    ) -> None:
        ledger = killed_and_resumed["ledger"]
        assert _ran(ledger, "first", "node") == ["plan", "research", "write"]
        assert _ran(ledger, "resume", "node") == ["write", "review"]

    def test_the_interrupted_node_replays_its_finished_calls_and_runs_only_the_rest(
        self, killed_and_resumed: dict[str, Any]
    ) -> None:
        ledger = killed_and_resumed["ledger"]
        assert _ran(ledger, "first", "call") == [
            "outline",
            "search:history",
            "search:practice",
            "draft:intro",
            "draft:body",
        ]
        assert _ran(ledger, "resume", "call") == ["draft:conclusion", "review"]

    def test_a_fresh_saver_reads_the_finished_thread_from_the_file(
        self, killed_and_resumed: dict[str, Any]
    ) -> None:
        with LetItLoopCheckpointSaver(killed_and_resumed["db"]) as saver:
            latest = saver.get_tuple({"configurable": {"thread_id": "article-1"}})
            history = list(saver.list({"configurable": {"thread_id": "article-1"}}))
        assert latest is not None
        values = latest.checkpoint["channel_values"]
        assert set(values) >= {"topic", "outline", "notes", "draft", "review"}
        assert values["draft"].count("\n") == 2  # intro, body (replayed), conclusion
        steps = sorted(t.metadata["step"] for t in history)
        assert steps == [-1, 0, 1, 2, 3, 4]


CHILD = """
import os, sys, time
from typing import TypedDict

from langgraph.checkpoint.base.id import uuid6
from langgraph.graph import END, START, StateGraph

from letitloop.adapters.langgraph import LetItLoopCheckpointSaver

db, me, go = sys.argv[1], int(sys.argv[2]), sys.argv[3]
saver = LetItLoopCheckpointSaver(db)


class S(TypedDict):
    n: int


def add(state):
    return {"n": state["n"] + 1}


g = StateGraph(S)
for name in ("a", "b", "c"):
    g.add_node(name, add)
g.add_edge(START, "a")
g.add_edge("a", "b")
g.add_edge("b", "c")
g.add_edge("c", END)
app = g.compile(checkpointer=saver)

open(f"{go}-ready-{me}", "w").close()
while not os.path.exists(go):  # start together, to collide on the write lock
    time.sleep(0.005)
parent = None
for i in range(30):
    conf = {"configurable": {"thread_id": f"proc-{me}", "checkpoint_ns": ""}}
    if parent:
        conf["configurable"]["checkpoint_id"] = parent
    cid = str(uuid6(clock_seq=-1))
    checkpoint = {
        "v": 1, "id": cid, "ts": "", "channel_values": {"i": i},
        "channel_versions": {"i": 1}, "versions_seen": {}, "pending_sends": [],
    }
    stored = saver.put(conf, checkpoint, {"source": "loop", "step": i, "proc": me}, {"i": 1})
    saver.put_writes(stored, [("ch", f"{me}-{i}")], f"task-{i}")
    parent = cid
for turn in range(3):
    app.invoke({"n": turn}, {"configurable": {"thread_id": f"graph-{me}"}})
print("ok", me)
"""


class TestFourProcessesSharingOneJournalFile:
    def test_none_sees_a_lock_error_and_every_checkpoint_is_readable(self, tmp_path: Path) -> None:
        db, go = tmp_path / "journal.db", tmp_path / "go"
        LetItLoopCheckpointSaver(db).close()  # migrate once, so the children only write rows
        script = tmp_path / "child.py"
        script.write_text(CHILD, encoding="utf-8")
        # Four processes of their own (pids, connections, locks), forked from one
        # interpreter that imported LangGraph and the adapter once (tests/preloaded.py).
        with Preloaded(*LANGGRAPH, with_letitloop=True) as forker:
            children = [
                forker.start(script, str(db), str(n), str(go), env=_env()) for n in range(4)
            ]
            deadline = time.monotonic() + 90
            while not all(Path(f"{go}-ready-{n}").exists() for n in range(4)):
                assert time.monotonic() < deadline, "children did not start"
                assert all(c.running() for c in children), "a child died before starting"
                time.sleep(0.01)
            go.touch()
            results = [c.wait() for c in children]

        for done in results:
            assert done.returncode == 0, done.stderr
            assert "locked" not in done.stderr.lower()
        with LetItLoopCheckpointSaver(db) as saver:
            for n in range(4):
                tuples = list(saver.list({"configurable": {"thread_id": f"proc-{n}"}}))
                assert len(tuples) == 30
                assert sorted(t.checkpoint["channel_values"]["i"] for t in tuples) == list(
                    range(30)
                )
                for t in tuples:
                    i = t.checkpoint["channel_values"]["i"]
                    assert t.metadata["proc"] == n
                    assert t.pending_writes == [(f"task-{i}", "ch", f"{n}-{i}")]
                graph = list(saver.list({"configurable": {"thread_id": f"graph-{n}"}}))
                # 3 turns x (input + the loop's first checkpoint + 3 nodes) = 15 checkpoints
                assert len(graph) == 15
                latest = saver.get_tuple({"configurable": {"thread_id": f"graph-{n}"}})
                assert latest is not None and latest.checkpoint["channel_values"]["n"] == 2 + 3


class TestTheSaversRows:
    def test_ids_and_metadata_are_text_and_the_payload_is_the_serdes_bytes(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "journal.db"
        cid = _uuid6()
        with LetItLoopCheckpointSaver(db) as saver:
            stored = saver.put(
                {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
                _checkpoint(cid, {"greeting": "héllo"}),
                {"source": "input", "step": -1, "run_id": "r1", "parents": {}},
                {"greeting": 1},
            )
            saver.put_writes(stored, [("greeting", "again")], "task-1", task_path="~a")
        conn = sqlite3.connect(db)
        row = conn.execute(
            "SELECT thread_id, checkpoint_id, run_id, source, step, type, typeof(checkpoint), "
            "metadata FROM langgraph_checkpoints"
        ).fetchone()
        assert row[:7] == ("t", cid, "r1", "input", -1, "msgpack", "blob")
        assert json.loads(row[7]) == {"source": "input", "step": -1, "run_id": "r1", "parents": {}}
        writes = conn.execute("SELECT task_id, task_path, channel, type FROM langgraph_writes")
        assert writes.fetchall() == [("task-1", "~a", "greeting", "msgpack")]
        conn.close()

    def test_a_value_msgpack_cannot_encode_is_refused_not_pickled(self, tmp_path: Path) -> None:
        class Opaque:
            __slots__ = ("x",)

        with LetItLoopCheckpointSaver(tmp_path / "journal.db") as saver:
            with pytest.raises(TypeError):
                saver.put(
                    {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
                    _checkpoint(_uuid6(), {"v": Opaque()}),
                    {"source": "input", "step": -1},
                    {"v": 1},
                )
            assert list(saver.list(None)) == []

    def test_a_row_forged_as_pickle_is_refused_on_read(self, tmp_path: Path) -> None:
        import pickle

        db, canary = tmp_path / "journal.db", tmp_path / "pwned"

        class Evil:
            def __reduce__(self) -> Any:
                return (Path.touch, (canary,))

        with LetItLoopCheckpointSaver(db) as saver:
            saver.put(
                {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
                _checkpoint(_uuid6(), {}),
                {"source": "input", "step": -1},
                {},
            )
            with sqlite3.connect(db) as conn:
                conn.execute(
                    "UPDATE langgraph_checkpoints SET type = 'pickle', checkpoint = ?",
                    (pickle.dumps(Evil()),),
                )
            with pytest.raises(DecodeError, match="stored as 'pickle'"):
                saver.get_tuple({"configurable": {"thread_id": "t"}})
        assert not canary.exists()

    def test_list_filters_on_lists_and_odd_keys_and_across_threads(self, tmp_path: Path) -> None:
        with LetItLoopCheckpointSaver(tmp_path / "journal.db") as saver:
            for thread, tags in (("a", ["x"]), ("b", ["y"]), ("c", ["x"])):
                saver.put(
                    {"configurable": {"thread_id": thread, "checkpoint_ns": ""}},
                    _checkpoint(_uuid6(), {}),
                    {"source": "input", "step": -1, "tags": tags, "naïve\\key": thread},
                    {},
                )
            found = [t.config["configurable"]["thread_id"] for t in saver.list(None)]
            tagged = list(saver.list(None, filter={"tags": ["x"]}, limit=1))
            odd = list(saver.list(None, filter={"naïve\\key": "b", "step": -1}))
        assert found == ["c", "b", "a"]
        assert [t.config["configurable"]["thread_id"] for t in tagged] == ["c"]
        assert [t.config["configurable"]["thread_id"] for t in odd] == ["b"]

    def test_a_journal_written_before_the_adapter_is_upgraded_and_keeps_its_steps(
        self, tmp_path: Path
    ) -> None:
        from letitloop import Journal

        db = tmp_path / "journal.db"
        with Journal("older", run="r1", path=db) as j:
            j.step("kept", str, 42)
        # Make it the file a version without migration 0002 wrote (a journal
        # never given to the saver has no LangGraph tables today either).
        with sqlite3.connect(db) as conn:
            conn.execute("DROP TABLE IF EXISTS langgraph_writes")
            conn.execute("DROP TABLE IF EXISTS langgraph_checkpoints")
            conn.execute("DELETE FROM _sqlite_migrations WHERE name = '0002_langgraph'")
        with LetItLoopCheckpointSaver(db) as saver:
            saver.put(
                {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
                _checkpoint(_uuid6(), {}),
                {"source": "input", "step": -1},
                {},
            )
            assert saver.get_tuple({"configurable": {"thread_id": "t"}}) is not None
        with Journal("older", run="r1", path=db) as j:
            assert j.step("kept", str, 42) == "42"

    def test_a_file_written_by_langgraphs_sqlite_saver_is_refused_untouched(
        self, tmp_path: Path
    ) -> None:
        from langgraph.checkpoint.sqlite import SqliteSaver

        from letitloop.errors import JournalFileError

        db = tmp_path / "checkpoints.sqlite"
        with sqlite3.connect(db) as conn:
            SqliteSaver(conn).setup()
        before = db.read_bytes()
        with pytest.raises(JournalFileError, match=r"other tables \(checkpoints, writes\)"):
            LetItLoopCheckpointSaver(db)
        assert db.read_bytes() == before

    def test_the_core_package_never_imports_langgraph(self) -> None:
        code = (
            "import sys, letitloop, letitloop.cli, letitloop.run.journal, letitloop.run.durable\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('langgraph', 'langchain_core', 'letitloop.adapters'))\n"
            "print(bad)"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "[]"


def _tables(db: Path) -> set[str]:
    with sqlite3.connect(db) as conn:
        return {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _schema(db: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name"
        ).fetchall()


def _records(db: Path, migration_set: str) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [
            n
            for (n,) in conn.execute(
                "SELECT name FROM _sqlite_migrations WHERE migration_set = ? ORDER BY rowid",
                (migration_set,),
            )
        ]


class TestTheSaversOwnTables:
    """The LangGraph tables are the adapter's migration set, applied by the saver's first open."""

    def test_a_journal_never_given_to_the_saver_has_no_langgraph_tables(
        self, tmp_path: Path
    ) -> None:
        from letitloop import Journal

        db = tmp_path / "journal.db"
        with Journal("plain", path=db) as j:
            j.step("one", str, 1)
        assert not {t for t in _tables(db) if t.startswith("langgraph_")}
        assert _records(db, "letitloop.langgraph") == []

    def test_the_saver_creates_them_and_records_its_set_beside_the_core(
        self, tmp_path: Path
    ) -> None:
        from letitloop.adapters.langgraph import tables

        db = tmp_path / "journal.db"
        with LetItLoopCheckpointSaver(db):
            pass
        assert {"langgraph_checkpoints", "langgraph_writes"} <= _tables(db)
        assert _records(db, tables.MIGRATION_SET) == [name for name, _ in tables.migrations()]
        assert "0002_langgraph" in _records(db, "letitloop")
        before = _schema(db)
        with LetItLoopCheckpointSaver(db):  # a second open finds the set applied
            pass
        assert _schema(db) == before
        assert len(_records(db, tables.MIGRATION_SET)) == len(tables.migrations())

    def test_a_file_whose_tables_came_from_the_core_migration_keeps_them_and_its_checkpoints(
        self, tmp_path: Path
    ) -> None:
        from letitloop.adapters.langgraph import tables

        db = tmp_path / "journal.db"
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        with LetItLoopCheckpointSaver(db) as saver:
            saver.put(config, _checkpoint(_uuid6(), {"n": 1}), {"source": "input", "step": -1}, {})
        # What an earlier letitloop left: the tables from core migration 0002 (the
        # same SQL), with rows, and no record of the adapter's set.
        with sqlite3.connect(db) as conn:
            conn.execute(
                "DELETE FROM _sqlite_migrations WHERE migration_set = ?", (tables.MIGRATION_SET,)
            )
        before = _schema(db)
        with LetItLoopCheckpointSaver(db) as saver:
            found = saver.get_tuple({"configurable": {"thread_id": "t"}})
        assert found is not None and found.checkpoint["channel_values"] == {"n": 1}
        assert _schema(db) == before
        assert _records(db, tables.MIGRATION_SET) == [name for name, _ in tables.migrations()]

    def test_a_file_a_newer_adapter_migrated_is_refused_untouched(self, tmp_path: Path) -> None:
        from letitloop.adapters.langgraph import tables
        from letitloop.errors import SchemaVersionError

        db = tmp_path / "journal.db"
        with LetItLoopCheckpointSaver(db):
            pass
        with sqlite3.connect(db) as conn:
            conn.execute(
                "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
                "VALUES (?, '9999_from_the_future', '')",
                (tables.MIGRATION_SET,),
            )
        before = _schema(db), _records(db, tables.MIGRATION_SET)
        with pytest.raises(SchemaVersionError, match="9999_from_the_future"):
            LetItLoopCheckpointSaver(db)
        assert (_schema(db), _records(db, tables.MIGRATION_SET)) == before


class TestTheAsyncMethods:
    def test_they_leave_the_event_loop_free_while_another_process_holds_the_write_lock(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "journal.db"
        saver = LetItLoopCheckpointSaver(db)
        blocker = sqlite3.connect(db, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")  # another writer holds the lock

        async def scenario() -> tuple[int, bool, CheckpointTuple | None]:
            put = asyncio.ensure_future(
                saver.aput(
                    {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
                    _checkpoint(_uuid6(), {"k": "v"}),
                    {"source": "input", "step": -1},
                    {"k": 1},
                )
            )
            ticks = 0
            for _ in range(30):  # ~0.3 s of a loop that must keep turning
                await asyncio.sleep(0.01)
                ticks += 1
            done_while_locked = put.done()
            blocker.execute("COMMIT")
            stored = await put
            return ticks, done_while_locked, await saver.aget_tuple(stored)

        ticks, done_while_locked, tup = asyncio.run(scenario())
        blocker.close()
        saver.close()
        assert ticks == 30
        assert not done_while_locked
        assert tup is not None and tup.checkpoint["channel_values"] == {"k": "v"}

    def test_an_async_graph_with_a_durable_sync_node_checkpoints_and_replays(
        self, tmp_path: Path
    ) -> None:
        calls: list[str] = []

        def model(text: str) -> str:
            calls.append(text)
            if len(calls) == 1:
                raise ConnectionError("first call fails after nothing was recorded")
            return text[::-1]

        @durable_node
        def work(state: Counter) -> dict[str, str]:
            first = step("echo", str, state["text"])
            return {"out": step("model", model, first)}

        async def scenario() -> dict[str, Any]:
            async with LetItLoopCheckpointSaver(tmp_path / "journal.db") as saver:
                app = _graph(saver, work)
                config = {"configurable": {"thread_id": "async"}}
                with pytest.raises(ConnectionError):
                    await app.ainvoke({"text": "abc"}, config)
                out: dict[str, Any] = await app.ainvoke(None, config)
                history = [t async for t in saver.alist(config)]
                out["steps"] = sorted(t.metadata["step"] for t in history)
                return out

        out = asyncio.run(scenario())
        assert out["out"] == "cba"
        assert calls == ["abc", "abc"]
        assert out["steps"] == [-1, 0, 1]


class Counter(TypedDict):
    text: str
    out: str


def _graph(saver: LetItLoopCheckpointSaver, node: Any) -> Any:
    g = StateGraph(Counter)
    g.add_node("work", node)
    g.add_edge(START, "work")
    g.add_edge("work", END)
    return g.compile(checkpointer=saver)


class TestDurableNodesShareTheFilesConnection:
    @pytest.mark.parametrize("kind", ["sync", "async"])
    def test_every_execution_uses_the_processs_one_connection(
        self, tmp_path: Path, kind: str
    ) -> None:
        # The saver writes to the file between two nodes; a node's journal must
        # still reuse the process's connection instead of opening one per node.
        from letitloop.run.durable import current

        stores: list[int] = []

        def seen() -> None:
            stores.append(id(sqlite_store(current())))  # the connection, not the storage

        def plain(state: Counter) -> dict[str, str]:
            seen()
            return {"out": step("upper", str.upper, state["text"])}

        async def coroutine(state: Counter) -> dict[str, str]:
            seen()
            return {"out": await async_step("upper", str.upper, state["text"])}

        work = durable_node(plain if kind == "sync" else coroutine)

        async def invoke_async(app: Any, thread: str) -> Any:
            return await app.ainvoke({"text": thread}, {"configurable": {"thread_id": thread}})

        with LetItLoopCheckpointSaver(tmp_path / "journal.db") as saver:
            app = _graph(saver, work)
            for thread in ("a", "b", "c"):
                if kind == "sync":
                    out = app.invoke({"text": thread}, {"configurable": {"thread_id": thread}})
                else:
                    out = asyncio.run(invoke_async(app, thread))
                assert out["out"] == thread.upper()
        assert len(stores) == 3 and len(set(stores)) == 1
        conn = sqlite3.connect(tmp_path / "journal.db")
        done = conn.execute(
            "SELECT count(*) FROM runs WHERE goal = 'langgraph:work' AND status = 'completed'"
        ).fetchone()[0]
        conn.close()
        assert done == 3


class TestDurableNodeKeys:
    def test_a_node_that_takes_config_itself_still_gets_it(self, tmp_path: Path) -> None:
        from langchain_core.runnables import RunnableConfig

        seen: list[str] = []

        @durable_node
        def work(state: Counter, config: RunnableConfig) -> dict[str, str]:
            seen.append(config["configurable"]["thread_id"])
            return {"out": step("upper", str.upper, state["text"])}

        assert list(inspect.signature(work).parameters) == ["state", "config"]
        with LetItLoopCheckpointSaver(tmp_path / "journal.db") as saver:
            out = _graph(saver, work).invoke({"text": "hi"}, {"configurable": {"thread_id": "c"}})
        assert out["out"] == "HI" and seen == ["c"]

    @pytest.mark.parametrize("kind", ["sync", "async"])
    def test_the_node_asks_langgraph_for_the_config_instead_of_reading_the_context(
        self, tmp_path: Path, kind: str
    ) -> None:
        # Python 3.10's tasks do not inherit the context LangGraph's get_config()
        # reads: a config= in the signature is how an async node gets it there.
        def plain(state: Counter) -> dict[str, str]:
            return {"out": step("upper", str.upper, state["text"])}

        async def coroutine(state: Counter) -> dict[str, str]:
            return {"out": await async_step("upper", str.upper, state["text"])}

        work = durable_node(plain if kind == "sync" else coroutine)
        assert list(inspect.signature(work).parameters) == ["state", "config"]
        config = {"configurable": {"thread_id": kind}}
        with LetItLoopCheckpointSaver(tmp_path / "journal.db") as saver:
            app = _graph(saver, work)
            out = app.invoke({"text": "a"}, config) if kind == "sync" else None
            if kind == "async":
                out = asyncio.run(app.ainvoke({"text": "a"}, config))
        assert out is not None and out["out"] == "A"

    def test_a_later_turn_on_the_same_thread_runs_the_calls_again(self, tmp_path: Path) -> None:
        calls: list[str] = []

        def model(text: str) -> str:
            calls.append(text)
            return text.upper()

        @durable_node
        def work(state: Counter) -> dict[str, str]:
            return {"out": step("model", model, state["text"])}

        with LetItLoopCheckpointSaver(tmp_path / "journal.db") as saver:
            app = _graph(saver, work)
            config = {"configurable": {"thread_id": "chat"}}
            first = app.invoke({"text": "one"}, config)
            second = app.invoke({"text": "two"}, config)
        assert (first["out"], second["out"]) == ("ONE", "TWO")
        assert calls == ["one", "two"]

    def test_time_travel_from_an_earlier_checkpoint_runs_the_calls_afresh(
        self, tmp_path: Path
    ) -> None:
        calls: list[str] = []

        def model(text: str) -> str:
            calls.append(text)
            return text.upper()

        @durable_node
        def work(state: Counter) -> dict[str, str]:
            return {"out": step("model", model, state["text"])}

        with LetItLoopCheckpointSaver(tmp_path / "journal.db") as saver:
            app = _graph(saver, work)
            config = {"configurable": {"thread_id": "t"}}
            app.invoke({"text": "once"}, config)
            before_work = next(h for h in app.get_state_history(config) if h.next == ("work",))
            app.invoke(None, before_work.config)
        assert calls == ["once", "once"]

    def test_a_node_that_failed_replays_its_finished_calls_when_resumed(
        self, tmp_path: Path
    ) -> None:
        calls: list[str] = []

        def fetch(name: str) -> str:
            calls.append(name)
            if name == "second" and calls.count("second") == 1:
                raise ConnectionError("flaky upstream")
            return name

        @durable_node
        def work(state: Counter) -> dict[str, str]:
            return {"out": step("a", fetch, "first") + step("b", fetch, "second")}

        with LetItLoopCheckpointSaver(tmp_path / "journal.db") as saver:
            app = _graph(saver, work)
            config = {"configurable": {"thread_id": "t"}}
            with pytest.raises(ConnectionError):
                app.invoke({"text": "x"}, config)
            result = app.invoke(None, config)
        assert result["out"] == "firstsecond"
        assert calls == ["first", "second", "second"]

    def test_a_retry_policy_retry_replays_the_calls_that_returned(self, tmp_path: Path) -> None:
        from langgraph.types import RetryPolicy

        calls: list[str] = []

        def fetch(name: str) -> str:
            calls.append(name)
            if name == "second" and calls.count("second") == 1:
                raise ConnectionError("flaky upstream")
            return name

        @durable_node
        def work(state: Counter) -> dict[str, str]:
            return {"out": step("a", fetch, "first") + step("b", fetch, "second")}

        g = StateGraph(Counter)
        g.add_node("work", work, retry_policy=RetryPolicy(initial_interval=0.01, jitter=False))
        g.add_edge(START, "work")
        g.add_edge("work", END)
        with LetItLoopCheckpointSaver(tmp_path / "journal.db") as saver:
            result = g.compile(checkpointer=saver).invoke(
                {"text": "x"}, {"configurable": {"thread_id": "t"}}
            )
        assert result["out"] == "firstsecond"
        assert calls == ["first", "second", "second"]

    def test_a_node_looping_over_supersteps_runs_its_calls_each_time(self, tmp_path: Path) -> None:
        calls: list[int] = []

        class Loop(TypedDict):
            n: int

        def bump(n: int) -> int:
            calls.append(n)
            return n + 1

        @durable_node
        def inc(state: Loop) -> dict[str, int]:
            return {"n": step("bump", bump, state["n"])}

        g = StateGraph(Loop)
        g.add_node("inc", inc)
        g.add_edge(START, "inc")
        g.add_conditional_edges("inc", lambda s: END if s["n"] >= 3 else "inc")
        with LetItLoopCheckpointSaver(tmp_path / "journal.db") as saver:
            out = g.compile(checkpointer=saver).invoke(
                {"n": 0}, {"configurable": {"thread_id": "t"}}
            )
        assert out["n"] == 3
        assert calls == [0, 1, 2]

    def test_a_node_resumed_after_interrupt_does_not_repeat_calls_made_before_it(
        self, tmp_path: Path
    ) -> None:
        calls: list[str] = []

        def draft(text: str) -> str:
            calls.append(text)
            return f"draft of {text}"

        @durable_node
        def work(state: Counter) -> dict[str, str]:
            proposal = step("draft", draft, state["text"])
            verdict = interrupt({"approve": proposal})
            return {"out": f"{proposal}: {verdict}"}

        with LetItLoopCheckpointSaver(tmp_path / "journal.db") as saver:
            app = _graph(saver, work)
            config = {"configurable": {"thread_id": "t"}}
            paused = app.invoke({"text": "memo"}, config)
            done = app.invoke(Command(resume="approved"), config)
        assert "__interrupt__" in paused
        assert done["out"] == "draft of memo: approved"
        assert calls == ["memo"]

    def test_the_run_key_names_the_thread_the_node_and_the_superstep(self) -> None:
        config = {
            "configurable": {"thread_id": "t1", "checkpoint_ns": "work:abc"},
            "metadata": {"langgraph_node": "work", "langgraph_step": 1},
        }
        goal, run = node_run_key(config, {"text": "x"})
        _, other_input = node_run_key(config, {"text": "y"})
        assert goal == "langgraph:work"
        assert run.startswith("t1#") and "|work@1|" in run
        assert other_input != run  # the node's input is part of what it is

    def test_a_node_called_outside_a_graph_gets_a_clear_error(self) -> None:
        @durable_node
        def work(state: Counter) -> dict[str, str]:
            return {}

        with pytest.raises(LetItLoopError, match="outside a LangGraph run"):
            work({"text": "x", "out": ""})

    def test_an_async_node_journals_its_awaited_calls_and_replays_them(
        self, tmp_path: Path
    ) -> None:
        echoes: list[str] = []
        calls: list[str] = []

        async def echo(text: str) -> str:
            echoes.append(text)
            return text

        async def model(text: str) -> str:
            calls.append(text)
            if len(calls) == 1:
                raise ConnectionError("first call fails after 'echo' was recorded")
            return text[::-1]

        @durable_node
        async def work(state: Counter) -> dict[str, str]:
            first = await async_step("echo", echo, state["text"])
            return {"out": await async_step("model", model, first)}

        assert inspect.iscoroutinefunction(work)

        async def scenario() -> dict[str, Any]:
            async with LetItLoopCheckpointSaver(tmp_path / "journal.db") as saver:
                app = _graph(saver, work)
                config = {"configurable": {"thread_id": "async-node"}}
                with pytest.raises(ConnectionError):
                    await app.ainvoke({"text": "abc"}, config)
                out: dict[str, Any] = await app.ainvoke(None, config)
                return out

        out = asyncio.run(scenario())
        assert out["out"] == "cba"
        assert echoes == ["abc"]  # recorded before the failure: replayed, not called
        assert calls == ["abc", "abc"]  # the failed call ran again
        conn = sqlite3.connect(tmp_path / "journal.db")
        (table,) = conn.execute(
            "SELECT journal_table FROM goals WHERE goal = 'langgraph:work'"
        ).fetchone()
        keys = conn.execute(f'SELECT key, status FROM "{table}" ORDER BY rowid').fetchall()
        conn.close()
        assert keys == [("echo", "done"), ("model", "done")]

    def test_journal_rows_land_in_the_savers_file(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.chdir(tmp_path)
        monkeypatch.delenv("LETITLOOP_DB", raising=False)
        db = tmp_path / "graph.db"

        @durable_node
        def work(state: Counter) -> dict[str, str]:
            return {"out": step("echo", str, state["text"])}

        with LetItLoopCheckpointSaver(db) as saver:
            _graph(saver, work).invoke({"text": "hi"}, {"configurable": {"thread_id": "t"}})
        assert not (tmp_path / ".letitloop").exists()
        with sqlite3.connect(db) as conn:
            (table,) = conn.execute(
                "SELECT journal_table FROM goals WHERE goal = 'langgraph:work'"
            ).fetchone()
            rows = conn.execute(
                f'SELECT runs.name, j.key, j.result FROM "{table}" AS j '
                "JOIN runs ON runs.id = j.run"
            ).fetchall()
        assert len(rows) == 1 and rows[0][0].startswith("t#") and rows[0][1:] == ("echo", '"hi"')
