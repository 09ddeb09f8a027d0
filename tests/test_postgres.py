"""The PostgreSQL store's own promises, beyond the contract suite (tests/test_contract.py).

On the tests' throwaway server (tests/pg_server.py), a schema per test.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pg_server
import pytest
from helpers import spawn_python, write_script

from letitloop import Journal
from letitloop.errors import JournalFileError, RunHeldError, SchemaVersionError


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


HOLDER = """
import sys, time
from letitloop import Journal

j = Journal("cut", run="r", path=sys.argv[1]).open()
j.step("a", str, 1)
print("ready", flush=True)
time.sleep(60)
"""


class TestAConnectionCutWhileHoldingARun:
    def test_the_next_opener_takes_the_run_and_replays_its_steps(
        self, location: str, tmp_path: Path
    ) -> None:
        import psycopg

        child = spawn_python(write_script(tmp_path, "holder.py", HOLDER), location)
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready"
            with pytest.raises(RunHeldError):  # held while its connection lives
                Journal("cut", run="r", path=location, timeout=0.2).open()
            with psycopg.connect(location, autocommit=True) as conn:
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE pid <> pg_backend_pid() AND datname = current_database()"
                )
            calls = len(CALLS)
            with Journal("cut", run="r", path=location, timeout=10) as j:
                assert j.step("a", str, 1) == "1"  # replayed: recorded before the cut
                assert j.step("b", shout, 2) == "2"
            assert CALLS[calls:] == [2]
        finally:
            child.kill()
            child.wait(30)


class TestLil:
    def test_lists_shows_exports_and_resets_a_postgres_run(self, location: str) -> None:
        with Journal("g", run="r", path=location) as j:
            j.step("first", str, 1)
            run_id = j.run_id

        def lil(*args: str) -> str:
            done = subprocess.run(
                [sys.executable, "-m", "letitloop", "--db", location, *args],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, done.stderr
            return done.stdout

        listing = lil("runs")
        assert run_id in listing and "completed" in listing
        assert "first" in lil("show", run_id)
        assert json.loads(lil("export", run_id))["run"]["id"] == run_id
        lil("reset", run_id, "--yes")
        assert run_id not in lil("runs")


class TestAServerStoppedMidRun:
    def test_the_step_fails_clearly_and_the_run_resumes_after_the_restart(
        self, location: str
    ) -> None:
        j = Journal("crash", run="r", path=location).open()
        assert j.step("a", shout, 1) == "1"
        failures: list[BaseException] = []

        def step_while_down() -> None:
            with pytest.raises(JournalFileError, match="PostgreSQL server") as caught:
                j.step("b", shout, 2)
            failures.append(caught.value)

        pg_server.crash_and_restart(step_while_down)
        assert failures
        with contextlib.suppress(Exception):
            j.close()  # its connection died with the server
        calls = len(CALLS)
        with Journal("crash", run="r", path=location, timeout=10) as again:
            assert again.step("a", shout, 1) == "1"  # recorded before the crash: replayed
            assert again.step("b", shout, 2) == "2"
        assert CALLS[calls:] == [2]


class TestAHolderWhoseRunWasTakenOver:
    def test_writes_no_step_of_it(self, location: str) -> None:
        import psycopg

        with Journal("fence", run="r", path=location) as j:
            j.step("a", str, 1)
            with psycopg.connect(location, autocommit=True) as conn:
                # What a new holder's claim does once this one's lock was lost.
                conn.execute("UPDATE ll_runs SET attempts = attempts + 1")
            with pytest.raises(JournalFileError, match="taken by another attempt"):
                j.step("b", str, 2)
            with psycopg.connect(location, autocommit=True) as conn:
                keys = conn.execute("SELECT key FROM ll_journal ORDER BY rowid").fetchall()
            assert keys == [("a",)]
