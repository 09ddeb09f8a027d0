"""The saver's writes (``polled.commit``): one autocommit statement, or its twin, a transaction.

Up to ``MAX_STATEMENT_ROWS`` rows are written as one multi-row INSERT in
SQLite's autocommit mode; more go through ``BEGIN IMMEDIATE`` … ``COMMIT``.
Both must store the same rows, commit before the call returns, keep all or
nothing, and wait for a lock held elsewhere. Checked from outside the writer:
a plain sqlite3 connection.
"""

from __future__ import annotations

import functools
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.graph", reason="LangGraph is not installed (letitloop[langgraph])")

from langgraph.checkpoint.base.id import uuid6

from letitloop.adapters.langgraph import LetItLoopCheckpointSaver, polled
from letitloop.errors import LetItLoopError
from letitloop.stores.sqlite.store import Store

#: Enough rows for both paths: one statement up to the cap, a transaction past it.
COUNTS = (1, 2, polled.MAX_STATEMENT_ROWS, polled.MAX_STATEMENT_ROWS + 1, 40)


def _config(thread: str = "t") -> dict[str, Any]:
    ids = {"thread_id": thread, "checkpoint_ns": "", "checkpoint_id": str(uuid6())}
    return {"configurable": ids}


def _rows(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as other:  # a second connection: sees only what was committed
        return other.execute(
            "SELECT thread_id, task_id, idx, channel, type, value FROM langgraph_writes "
            "ORDER BY thread_id, task_id, idx"
        ).fetchall()


def _write_all(saver: LetItLoopCheckpointSaver, count: int) -> None:
    """A task's writes, the same task again (first copies kept), then special channels twice."""
    config = _config(f"t{count}")
    saver.put_writes(config, [(f"c{i}", i) for i in range(count)], "task")  # type: ignore[arg-type]
    saver.put_writes(config, [(f"c{i}", -i) for i in range(count)], "task")  # type: ignore[arg-type]
    saver.put_writes(config, [("__error__", "first"), ("__interrupt__", 1)], "task")  # type: ignore[arg-type]
    saver.put_writes(config, [("__error__", "latest"), ("__interrupt__", 2)], "task")  # type: ignore[arg-type]


def _through_transaction(store: Store, sql: str, rows: Any) -> None:
    """The portable twin: every row in one ``BEGIN IMMEDIATE`` transaction."""
    store.commit_rows(sql, rows, functools.partial(polled._begin, store))


class TestATasksWrites:
    @pytest.mark.parametrize("count", COUNTS)
    def test_one_statement_and_a_transaction_store_the_same_rows(
        self, tmp_path: Path, count: int, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        with LetItLoopCheckpointSaver(tmp_path / "fast.db") as saver:
            _write_all(saver, count)
        monkeypatch.setattr(polled, "commit", _through_transaction)
        with LetItLoopCheckpointSaver(tmp_path / "twin.db") as saver:
            _write_all(saver, count)
        fast = _rows(tmp_path / "fast.db")
        assert fast == _rows(tmp_path / "twin.db")
        assert len(fast) == count + 2
        assert [r[2:4] for r in fast[:2]] == [(-3, "__interrupt__"), (-1, "__error__")]

    @pytest.mark.parametrize("count", COUNTS)
    def test_they_are_committed_when_put_writes_returns(self, tmp_path: Path, count: int) -> None:
        with LetItLoopCheckpointSaver(tmp_path / "j.db") as saver:
            saver.put_writes(_config(), [(f"c{i}", i) for i in range(count)], "task")  # type: ignore[arg-type]
            assert len(_rows(tmp_path / "j.db")) == count
            assert not saver.store.conn.in_transaction

    @pytest.mark.parametrize("count", COUNTS)
    def test_a_refused_row_keeps_none_of_them_and_the_next_write_works(
        self, tmp_path: Path, count: int
    ) -> None:
        with LetItLoopCheckpointSaver(tmp_path / "j.db") as saver:
            saver.store.conn.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON langgraph_writes WHEN NEW.channel = 'bad' "
                "BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END"
            )
            writes = [(f"c{i}", i) for i in range(count - 1)] + [("bad", 0)]
            with pytest.raises(LetItLoopError):
                saver.put_writes(_config(), writes, "task")  # type: ignore[arg-type]
            assert _rows(tmp_path / "j.db") == []
            assert not saver.store.conn.in_transaction
            saver.put_writes(_config(), [("good", 1)], "task")  # type: ignore[arg-type]
            assert [r[3] for r in _rows(tmp_path / "j.db")] == ["good"]


class TestAWriteWhileAnotherConnectionHoldsTheLock:
    @pytest.mark.parametrize("count", (1, 3, polled.MAX_STATEMENT_ROWS + 1))
    def test_it_waits_and_commits_once_the_lock_is_free(self, tmp_path: Path, count: int) -> None:
        db = tmp_path / "j.db"
        with LetItLoopCheckpointSaver(db) as saver:
            blocker = sqlite3.connect(db, isolation_level=None)
            blocker.execute("BEGIN IMMEDIATE")
            done = threading.Event()

            def write() -> None:
                saver.put_writes(_config(), [(f"c{i}", i) for i in range(count)], "task")  # type: ignore[arg-type]
                done.set()

            writer = threading.Thread(target=write)
            writer.start()
            time.sleep(0.05)
            assert not done.is_set()  # still polling for the lock
            blocker.execute("COMMIT")
            blocker.close()
            writer.join(5)
            assert done.is_set()
            assert len(_rows(db)) == count
