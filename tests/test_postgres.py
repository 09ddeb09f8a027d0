"""The PostgreSQL store's own promises, beyond the contract suite (tests/test_contract.py).

On the tests' throwaway server (tests/pg_server.py), a schema per test.
"""

from __future__ import annotations

import os
from pathlib import Path

import pg_server
import pytest

from letitloop import Journal
from letitloop.errors import JournalFileError, SchemaVersionError


@pytest.fixture
def location() -> str:
    return pg_server.location()


CALLS: list[int] = []


def shout(x: int) -> str:
    CALLS.append(x)
    return str(x)


def tables(location: str) -> list[tuple[str, int]]:
    import psycopg

    with psycopg.connect(location, autocommit=True) as conn:
        return [
            (name, conn.execute(f"SELECT count(*) FROM {name}").fetchone()[0])  # type: ignore[index]
            for (name,) in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                "ORDER BY tablename"
            ).fetchall()
        ]


class TestAPostgresUrl:
    def test_journals_in_the_database_and_makes_no_local_file(
        self, location: str, tmp_path: Path
    ) -> None:
        with Journal("g", run="r", path=location) as j:
            assert j.step("a", shout, 1) == "1"
        assert os.listdir(tmp_path) == []
        assert ("ll_journal", 1) in tables(location)
        with Journal("g", run="r", path=location) as j:  # replayed, not called again
            assert j.step("a", shout, 1) == "1"
        assert CALLS == [1]


class TestASchemaFromANewerLetitloop:
    def test_is_refused_and_left_unchanged(self, location: str) -> None:
        import psycopg

        with Journal("g", run="r", path=location) as j:
            j.step("a", str, 1)
        with psycopg.connect(location, autocommit=True) as conn:
            conn.execute("UPDATE ll_meta SET version = version + 1")
        before = tables(location)
        with pytest.raises(SchemaVersionError, match="newer letitloop"):
            Journal("g", run="r", path=location).open()
        assert tables(location) == before


class TestAServerThatIsNotThere:
    def test_is_a_journal_file_error_naming_the_url_without_its_password(
        self, tmp_path: Path
    ) -> None:
        url = f"postgresql://app:secret@/jobs?host={tmp_path}&port=1"
        with pytest.raises(JournalFileError) as caught:
            Journal("g", path=url).open()
        assert "secret" not in str(caught.value)
        assert "expected a PostgreSQL server" in str(caught.value)
        assert os.listdir(tmp_path) == []
