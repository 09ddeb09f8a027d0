"""The step row's two statements (sqlite_storage.step_writer): the lean one writes the same row.

A step that returned with no usage is written by ``UPSERT_DONE``, whose NULLs
are in its SQL (sqlite3 binds a None slowly); every other row by
``UPSERT_STEP``. Whichever writes it, the row in the file is the same, over a
fresh key and over an earlier row of the key (a failed try, a running row).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from letitloop import Journal
from letitloop.sqlite_storage import SqliteStorage, step_writer
from letitloop.storage import StepRow


def row(key: str, **fields: Any) -> StepRow:
    base: dict[str, Any] = {
        "run": 1,
        "key": key,
        "status": "done",
        "fn": 1,
        "result": '{"id":1}',
        "started": 1_780_000_000_123_456,
        "duration": 37,
        "attempt": 2,
        "error": None,
        "traceback": None,
        "args_fp": "3f9a1c22b0d4",
        "input_tokens": None,
        "output_tokens": None,
        "cost": None,
        "model": None,
        "checksum": 123_456_789,
    }
    base.update(fields)
    return StepRow(**base)


def stored(db: Path, table: str, key: str) -> tuple[Any, ...]:
    conn = sqlite3.connect(db)
    try:
        cursor = conn.execute(f'SELECT * FROM "{table}" WHERE key = ?', (key,))
        found = cursor.fetchone()
        names = [d[0] for d in cursor.description]
    finally:
        conn.close()
    assert found is not None, key
    return tuple(v for n, v in zip(names, found, strict=True) if n != "key")


@pytest.fixture
def storage(tmp_path: Path) -> Any:
    with Journal("statements", path=tmp_path / "j.db") as j:
        s = j._storage
        assert isinstance(s, SqliteStorage)
        yield s


ROWS = {
    "a step that returned": row("k"),
    "a step that returned None": row("k", result="null"),
    "a step that failed": row(
        "k", status="failed", result=None, error="ValueError: no", traceback="Traceback ..."
    ),
    "a step that reported usage": row(
        "k", input_tokens=12, output_tokens=34, cost=0.5, model="m-1"
    ),
    "a step that reported part of a usage": row("k", cost=0.25),
}


class TestAStepRowWrittenByEitherStatement:
    @pytest.mark.parametrize("case", list(ROWS))
    def test_it_is_the_same_row_as_the_whole_statement_writes(
        self, storage: SqliteStorage, case: str
    ) -> None:
        write = step_writer(storage.store.write1, storage.upsert_sql, storage.done_sql)
        write(ROWS[case]._replace(key="lean"))
        storage.store.write1(storage.upsert_sql, ROWS[case]._replace(key="whole"))
        db = storage.store.path
        assert stored(db, storage.rows, "lean") == stored(db, storage.rows, "whole")

    @pytest.mark.parametrize("case", list(ROWS))
    def test_over_an_earlier_row_of_its_key_it_leaves_what_the_whole_statement_leaves(
        self, storage: SqliteStorage, case: str
    ) -> None:
        earlier = row(
            "k",
            status="failed",
            result=None,
            error="TimeoutError: slow",
            traceback="Traceback ...",
            input_tokens=1,
            output_tokens=2,
            cost=0.1,
            model="m-0",
            attempt=1,
        )
        for key in ("lean", "whole"):
            storage.store.write1(storage.upsert_sql, earlier._replace(key=key))
            storage.store.write1(
                f"UPDATE \"{storage.rows}\" SET wake_at = 'soon', claims = 3 WHERE key = ?",
                (key,),
            )
        write = step_writer(storage.store.write1, storage.upsert_sql, storage.done_sql)
        write(ROWS[case]._replace(key="lean"))
        storage.store.write1(storage.upsert_sql, ROWS[case]._replace(key="whole"))
        db = storage.store.path
        lean = stored(db, storage.rows, "lean")
        assert lean == stored(db, storage.rows, "whole")
        assert lean[-2] is None  # wake_at: cleared by both


class TestAJournalsStepRows:
    def test_a_step_that_returned_is_written_by_the_lean_statement(self, tmp_path: Path) -> None:
        db = tmp_path / "j.db"
        with Journal("g", path=db) as j:
            j.step("a", str, 1)
            s = j._storage
            assert isinstance(s, SqliteStorage)
            table = s.rows
        conn = sqlite3.connect(db)
        try:
            got = conn.execute(
                f'SELECT result, error, traceback, input_tokens, cost, checksum FROM "{table}" '
                "WHERE key = 'a'"
            ).fetchone()
        finally:
            conn.close()
        assert got[:5] == ('"1"', None, None, None, None)
        assert isinstance(got[5], int)
