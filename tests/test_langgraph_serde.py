"""Nothing runs because a row says so: the saver's serde is strict unless widened on purpose.

A forged checkpoint row asks LangGraph's msgpack serializer to call
``os.system``; the default saver must not, and a saver built with LangGraph's
permissive setting does, which shows the row is a real attack.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar, TypedDict, cast

import pytest

pytest.importorskip("langgraph.graph", reason="LangGraph is not installed (letitloop[langgraph])")

import ormsgpack
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.serde.jsonplus import (
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_CONSTRUCTOR_POS_ARGS,
    JsonPlusSerializer,
)
from langgraph.graph import END, START, StateGraph
from preloaded import Preloaded

from letitloop.adapters.langgraph import LetItLoopCheckpointSaver


@dataclasses.dataclass
class Order:
    id: int
    item: str


def _checkpoint(cid: str, values: dict[str, Any]) -> dict[str, Any]:
    return {
        "v": 1,
        "id": cid,
        "ts": "2026-11-30T00:00:00+00:00",
        "channel_values": values,
        "channel_versions": {k: 1 for k in values},
        "versions_seen": {},
        "pending_sends": [],
    }


def _forge(db: Path, canary: Path) -> None:
    """A thread whose checkpoint and pending write, read back, would run ``touch canary``."""
    cid = str(uuid6(clock_seq=-1))
    with LetItLoopCheckpointSaver(db) as saver:
        stored = saver.put(
            {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
            _checkpoint(cid, {"x": 1}),
            {"source": "input", "step": -1},
            {"x": 1},
        )
        saver.put_writes(stored, [("x", 2)], "task-1")
    evil = ormsgpack.Ext(
        EXT_CONSTRUCTOR_POS_ARGS, ormsgpack.packb(["os", "system", [f"touch {canary}"]])
    )
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE langgraph_checkpoints SET checkpoint = ?",
            (ormsgpack.packb(_checkpoint(cid, {"x": evil})),),
        )
        conn.execute("UPDATE langgraph_writes SET value = ?", (ormsgpack.packb(evil),))


class TestAForgedRow:
    def test_the_default_saver_reads_it_without_running_anything(self, tmp_path: Path) -> None:
        db, canary = tmp_path / "journal.db", tmp_path / "pwned"
        _forge(db, canary)
        with LetItLoopCheckpointSaver(db) as saver:
            tup = saver.get_tuple({"configurable": {"thread_id": "t"}})
            listed = list(saver.list(None))
        assert not canary.exists()
        assert tup is not None and len(listed) == 1
        # The blocked call comes back as its recorded arguments, not as a result.
        assert tup.checkpoint["channel_values"]["x"] == [f"touch {canary}"]
        assert tup.pending_writes == [("task-1", "x", [f"touch {canary}"])]

    def test_langgraphs_permissive_setting_would_run_it(self, tmp_path: Path) -> None:
        db, canary = tmp_path / "journal.db", tmp_path / "pwned"
        _forge(db, canary)
        permissive = JsonPlusSerializer(allowed_msgpack_modules=True)
        with LetItLoopCheckpointSaver(db, serde=permissive) as saver:
            saver.get_tuple({"configurable": {"thread_id": "t"}})
        assert canary.exists()


class Money:
    """Not a data class: its constructor is code a row must not run unless allowed."""

    made: ClassVar[list[int]] = []

    def __init__(self, cents: int) -> None:
        Money.made.append(cents)
        self.cents = cents

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Money) and other.cents == self.cents


def _forged_value(db: Path, module: str, name: str, kwargs: dict[str, Any]) -> None:
    """A thread whose checkpoint holds one value encoded as ``module.name(**kwargs)``."""
    cid = str(uuid6(clock_seq=-1))
    with LetItLoopCheckpointSaver(db) as saver:
        saver.put(
            {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
            _checkpoint(cid, {"v": 0}),
            {"source": "input", "step": -1},
            {"v": 1},
        )
    value = ormsgpack.Ext(EXT_CONSTRUCTOR_KW_ARGS, ormsgpack.packb([module, name, kwargs]))
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE langgraph_checkpoints SET checkpoint = ?",
            (ormsgpack.packb(_checkpoint(cid, {"v": value})),),
        )


def _read(db: Path, **kwargs: Any) -> Any:
    with LetItLoopCheckpointSaver(db, **kwargs) as saver:
        tup = saver.get_tuple({"configurable": {"thread_id": "t"}})
    assert tup is not None
    return tup.checkpoint["channel_values"]["v"]


class TestWhatTheDefaultListAdmits:
    def test_a_data_class_of_an_imported_module_comes_back_as_itself(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        _forged_value(db, __name__, "Order", {"id": 7, "item": "tea"})
        assert _read(db) == Order(7, "tea")

    def test_another_class_is_not_constructed_unless_allowed(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        _forged_value(db, __name__, "Money", {"cents": 5})
        Money.made.clear()
        assert _read(db) == {"cents": 5}
        assert Money.made == []
        assert _read(db, allowed_types=[Money]) == Money(5)
        assert _read(db, allowed_types=[(__name__, "Money")]) == Money(5)

    def test_a_module_is_never_imported_because_a_row_names_it(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        assert "this" not in sys.modules  # importing it prints the Zen of Python
        _forged_value(db, "this", "Anything", {"x": 1})
        assert _read(db) == {"x": 1}
        assert "this" not in sys.modules


class TestAGraphsOwnTypes:
    def test_a_graphs_state_schema_types_come_back_as_themselves(self, tmp_path: Path) -> None:
        class State(TypedDict, total=False):
            order: Order

        def ship(state: State) -> dict[str, Order]:
            return {"order": Order(state["order"].id, state["order"].item + " (shipped)")}

        g = StateGraph(State)
        g.add_node("ship", ship)
        g.add_edge(START, "ship")
        g.add_edge("ship", END)
        config = {"configurable": {"thread_id": "t"}}
        with LetItLoopCheckpointSaver(tmp_path / "journal.db") as saver:
            app = g.compile(checkpointer=saver)
            app.invoke({"order": Order(1, "tea")}, config)
            values = app.get_state(config).values
        assert values["order"] == Order(1, "tea (shipped)")

    def test_allowed_types_and_a_serde_of_your_own_are_not_mixed(self, tmp_path: Path) -> None:
        with pytest.raises(ValueError, match="allowed_types= or serde="):
            LetItLoopCheckpointSaver(
                tmp_path / "journal.db", serde=JsonPlusSerializer(), allowed_types=[Order]
            )


#: LangChain classes a "json" row (LangGraph's format before msgpack) can name,
#: with their serialized ids, as LangChain's own dumpd() writes them.
_LANGCHAIN_OFF_LIST = {
    "prompt": (
        ["langchain", "prompts", "prompt", "PromptTemplate"],
        "langchain_core.prompts.prompt",
        {"template": "say {x}", "input_variables": ["x"], "template_format": "f-string"},
    ),
    "passthrough": (
        ["langchain", "schema", "runnable", "RunnablePassthrough"],
        "langchain_core.runnables.passthrough",
        {},
    ),
    "parser": (
        ["langchain", "schema", "output_parser", "StrOutputParser"],
        "langchain_core.output_parsers.string",
        {},
    ),
}


def _json_row(db: Path, values: dict[str, Any]) -> None:
    """A thread whose checkpoint row is stored as ``json`` holding ``values``."""
    cid = str(uuid6(clock_seq=-1))
    with LetItLoopCheckpointSaver(db) as saver:
        saver.put(
            {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
            _checkpoint(cid, {"v": 0}),
            {"source": "input", "step": -1},
            {"v": 1},
        )
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE langgraph_checkpoints SET type = 'json', checkpoint = ?",
            (json.dumps(_checkpoint(cid, values)).encode(),),
        )


#: Run in a process of its own that has read nothing: reads thread "t" with the default
#: saver and prints which of the named modules were loaded before and after, and what
#: came back, as JSON.
_READER = """
import json, sys
from letitloop.adapters.langgraph import LetItLoopCheckpointSaver
modules = sys.argv[2:]
before = [m for m in modules if m in sys.modules]
with LetItLoopCheckpointSaver(sys.argv[1]) as saver:
    tup = saver.get_tuple({"configurable": {"thread_id": "t"}})
after = [m for m in modules if m in sys.modules]
values = tup.checkpoint["channel_values"]
print(json.dumps({
    "before": before,
    "after": after,
    "types": {k: type(v).__module__ + "." + type(v).__qualname__ for k, v in values.items()},
    "values": {k: v if isinstance(v, (dict, list, str)) else None for k, v in values.items()},
}))
"""


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Preloaded, Path]]:
    """``_READER``'s processes, forked from one interpreter that imported only what the
    reader imports first (the adapter) and opened no journal (tests/preloaded.py): each
    is a process that never decoded a row, as a fresh interpreter would be."""
    script = tmp_path_factory.mktemp("reader") / "reader.py"
    script.write_text(_READER, encoding="utf-8")
    with Preloaded("letitloop.adapters.langgraph", with_letitloop=True) as forker:
        yield forker, script


def _read_in_a_fresh_process(
    reader: tuple[Preloaded, Path], db: Path, modules: list[str]
) -> dict[str, Any]:
    forker, script = reader
    done = forker.run(script, str(db), *modules)
    assert done.returncode == 0, done.stderr
    return cast(dict[str, Any], json.loads(done.stdout))


class TestAJsonRow:
    """LangGraph's older ``json`` rows obey the same allow-list as msgpack rows."""

    def test_a_langchain_class_off_the_list_is_neither_built_nor_imported(
        self, tmp_path: Path, reader: tuple[Preloaded, Path]
    ) -> None:
        db = tmp_path / "journal.db"
        values = {
            name: {"lc": 1, "type": "constructor", "id": ids, "kwargs": kwargs}
            for name, (ids, _, kwargs) in _LANGCHAIN_OFF_LIST.items()
        }
        _json_row(db, values)
        modules = [module for _, module, _ in _LANGCHAIN_OFF_LIST.values()]
        got = _read_in_a_fresh_process(reader, db, modules)
        assert got["before"] == []
        assert got["after"] == []
        assert set(got["types"].values()) == {"builtins.dict"}
        assert got["values"]["prompt"] == _LANGCHAIN_OFF_LIST["prompt"][2]

    def test_an_lc2_constructor_off_the_list_is_neither_built_nor_imported(
        self, tmp_path: Path, reader: tuple[Preloaded, Path]
    ) -> None:
        db = tmp_path / "journal.db"
        kwargs = {"template": "say {x}", "input_variables": ["x"]}
        _json_row(
            db,
            {
                "v": {
                    "lc": 2,
                    "type": "constructor",
                    "id": ["langchain_core", "prompts", "prompt", "PromptTemplate"],
                    "kwargs": kwargs,
                }
            },
        )
        got = _read_in_a_fresh_process(reader, db, ["langchain_core.prompts.prompt"])
        assert got["after"] == []
        assert got["types"] == {"v": "builtins.dict"} and got["values"]["v"] == kwargs

    def test_a_message_on_the_list_still_comes_back_as_itself(
        self, tmp_path: Path, reader: tuple[Preloaded, Path]
    ) -> None:
        db = tmp_path / "journal.db"
        _json_row(
            db,
            {
                "v": {
                    "lc": 1,
                    "type": "constructor",
                    "id": ["langchain", "schema", "messages", "AIMessage"],
                    "kwargs": {"content": "hi", "id": "m1"},
                }
            },
        )
        got = _read_in_a_fresh_process(reader, db, [])
        assert got["types"] == {"v": "langchain_core.messages.ai.AIMessage"}

    def test_a_class_you_allowed_is_built_and_another_is_not(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        lc2 = {"lc": 2, "type": "constructor", "id": [*__name__.split("."), "Money"]}
        _json_row(db, {"v": {**lc2, "kwargs": {"cents": 5}}})
        Money.made.clear()
        assert _read(db) == {"cents": 5}
        assert Money.made == []
        assert _read(db, allowed_types=[Money]) == Money(5)
