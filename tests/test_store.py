"""The store: transactions that keep all or nothing, errors explained in one place."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from letitloop.errors import JournalFileError
from letitloop.stores.sqlite.store import Store


def count(db: Path) -> int:
    """Goals seen by a separate connection: what any other process would see."""
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("SELECT count(*) FROM goals").fetchone()[0])
    finally:
        conn.close()


def insert_goal(conn: sqlite3.Connection, name: str) -> None:
    conn.execute(
        "INSERT INTO goals (goal, journal_table, created_at) VALUES (?, ?, 'now')",
        (name, f"t_{name}"),
    )


class TestAWriteBlock:
    def test_that_raises_keeps_nothing_and_leaves_the_connection_usable(self, db: Path) -> None:
        store = Store(db)
        try:
            with pytest.raises(RuntimeError), store.write() as c:
                insert_goal(c, "a")
                raise RuntimeError("the caller failed half-way")
            assert count(db) == 0
            assert not store.conn.in_transaction
            with store.write() as c:  # the next transaction starts cleanly
                insert_goal(c, "b")
            assert count(db) == 1
        finally:
            store.close()

    def test_whose_statement_fails_rolls_back_and_raises_a_journal_file_error(
        self, db: Path
    ) -> None:
        store = Store(db)
        try:
            with pytest.raises(JournalFileError, match="SQLite error"), store.write() as c:
                insert_goal(c, "a")
                c.execute("INSERT INTO goals (goal) VALUES (NULL)")  # NOT NULL fails
            assert count(db) == 0 and not store.conn.in_transaction
        finally:
            store.close()

    def test_a_single_write_inside_its_threads_open_block_is_refused(self, db: Path) -> None:
        # write1 is one autocommit statement; inside an open write() of the same
        # thread it would join that transaction instead of committing on return.
        store = Store(db)
        try:
            with pytest.raises(JournalFileError), store.write() as c:
                insert_goal(c, "a")
                store.write1(
                    "INSERT INTO goals (goal, journal_table, created_at) VALUES ('b', 't_b', 'now')"
                )
            assert count(db) == 0
            assert not store.conn.in_transaction
            store.write1(
                "INSERT INTO goals (goal, journal_table, created_at) VALUES ('c', 't_c', 'now')"
            )
            assert count(db) == 1  # committed when it returned, seen from outside
        finally:
            store.close()

    def test_a_query_error_is_a_journal_file_error(self, db: Path) -> None:
        store = Store(db)
        try:
            with pytest.raises(JournalFileError, match="schema is damaged"):
                store.query("SELECT no_such_column FROM goals")
        finally:
            store.close()


class TestTimestamps:
    """utc_iso formats each second once; it must agree with datetime to the microsecond."""

    @pytest.mark.slow  # 2,000 generated times, about 2 s of CPU: the full suite runs it
    @settings(max_examples=2000, deadline=None)
    @given(st.floats(min_value=-1e10, max_value=1e11, allow_nan=False))
    def test_utc_iso_is_datetimes_isoformat(self, t: float) -> None:
        from datetime import datetime, timezone

        from letitloop.primitives.clock import utc_iso

        expected = datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="microseconds")
        assert utc_iso(t) == expected
        assert utc_iso(t) == expected  # and again, from the cached second


def page_size(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("PRAGMA page_size").fetchone()[0])


class TestTheFilesPageSize:
    """A new journal file has 1 KiB pages (connect.PAGE_SIZE); a file keeps the size it has."""

    def test_a_new_file_has_pages_of_1_kib(self, tmp_path: Path) -> None:
        from letitloop import Journal

        db = tmp_path / "new.db"
        with Journal("g", path=db) as j:
            j.step("a", str, 1)
        assert page_size(db) == 1024

    def test_a_file_made_with_4_kib_pages_keeps_them_and_its_steps(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from letitloop import Journal
        from letitloop.stores.sqlite import connect

        db = tmp_path / "old.db"
        calls: list[int] = []

        def fetch(x: int) -> int:
            calls.append(x)
            return x * 2

        monkeypatch.setattr(connect, "PAGE_SIZE", 4096)  # as letitloop made files before
        with Journal("g", run="r", path=db) as j:
            j.step("a", fetch, 1)
        monkeypatch.undo()
        with Journal("g", run="r", path=db) as j:
            assert j.step("a", fetch, 1) == 2
            j.step("b", fetch, 2)
        assert calls == [1, 2]  # "a" replayed, not called again
        assert page_size(db) == 4096
