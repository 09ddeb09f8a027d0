"""The step row's two statements (sqlite_storage.step_writer): the lean one writes the same row.

A step that returned with no usage is written by ``UPSERT_DONE``, whose NULLs
are in its SQL (sqlite3 binds a None slowly); every other row by
``UPSERT_STEP``. Whichever writes it, the row in the file is the same, over a
fresh key and over an earlier row of the key (a failed try, a running row).
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from letitloop import Journal
from letitloop.primitives.clock import utc_us
from letitloop.stores.sqlite.steps import step_writer
from letitloop.stores.sqlite.storage import SqliteStorage
from letitloop.stores.storage_steps import DoneRow, StepRow, step_row_of


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
        s = j._opened.storage
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


def done_of(r: StepRow) -> DoneRow:
    """``r`` as a DoneRow (a returned step's row without its empty columns)."""
    return (*r[:8], r[10], r[15])  # type: ignore[return-value]


class TestAReturnedStepsRowWrittenByWriteDone:
    def test_it_is_the_row_write_step_writes(self, storage: SqliteStorage) -> None:
        done = done_of(ROWS["a step that returned"])
        assert step_row_of(done) == ROWS["a step that returned"]
        storage.write_done((done[0], "done", *done[2:]))
        storage.write_step(ROWS["a step that returned"]._replace(key="step"))
        db = storage.store.path
        assert stored(db, storage.rows, "done") == stored(db, storage.rows, "step")

    def test_over_an_earlier_row_of_its_key_it_leaves_what_write_step_leaves(
        self, storage: SqliteStorage
    ) -> None:
        earlier = row("k", status="failed", result=None, error="E", traceback="T", cost=0.1)
        for key in ("done", "step"):
            storage.write_step(earlier._replace(key=key))
        returned = ROWS["a step that returned"]
        storage.write_done(done_of(returned._replace(key="done")))
        storage.write_step(returned._replace(key="step"))
        db = storage.store.path
        assert stored(db, storage.rows, "done") == stored(db, storage.rows, "step")

    def test_a_fresh_step_of_a_journal_writes_through_it(self, tmp_path: Path) -> None:
        written: list[DoneRow] = []
        with Journal("g", path=tmp_path / "j.db") as j:
            storage = j._opened.storage
            assert isinstance(storage, SqliteStorage)
            lean = storage.write_done

            def seen(done: DoneRow) -> None:
                written.append(done)
                lean(done)

            storage.write_done = seen
            assert j.step("a", str, 1) == "1"
            assert j.step("a", str, 1) == "1"  # a new call: a#2
        assert [d[1] for d in written] == ["a", "a#2"]
        assert step_row_of(written[0]).result == '"1"'


class TestAJournalsStepRows:
    def test_a_step_that_returned_is_written_by_the_lean_statement(self, tmp_path: Path) -> None:
        db = tmp_path / "j.db"
        with Journal("g", path=db) as j:
            j.step("a", str, 1)
            s = j._opened.storage
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


def times(j: Journal, key: str) -> tuple[int, int]:
    """``key``'s started and duration columns, read through a second connection."""
    storage = j._opened.storage
    assert isinstance(storage, SqliteStorage)
    conn = sqlite3.connect(j.path)
    try:
        found = conn.execute(
            f'SELECT started, duration FROM "{storage.rows}" WHERE key = ?', (key,)
        ).fetchone()
    finally:
        conn.close()
    return found[0], found[1]


class TestAStepsTimes:
    def test_with_the_default_clock_they_are_when_it_ran(self, tmp_path: Path) -> None:
        db = tmp_path / "j.db"
        with Journal("g", path=db) as j:
            before = time.time()
            j.step("a", time.sleep, 0.02)
            after = time.time()
            started, duration = times(j, "a")
        assert round(before * 1e6) - 1 <= started <= round(after * 1e6) + 1
        assert 20_000 <= duration <= round((after - before) * 1e6) + 2

    def test_with_a_journals_own_clock_they_are_exactly_its_times(self, tmp_path: Path) -> None:
        # Times whose microseconds a product by 1e6 would round otherwise (the default
        # clock's shortcut): a journal given a clock writes exactly what utc_iso shows.
        first, last = 1780000000.7887235, 1780000000.0283475 + 3
        now = [first]

        def later() -> None:
            now[0] = last

        db = tmp_path / "j.db"
        with Journal("g", path=db, clock=lambda: now[0]) as j:
            j.step("a", later)
            assert times(j, "a") == (utc_us(first), utc_us(last) - utc_us(first))
