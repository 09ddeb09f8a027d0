"""PostgreSQL's rough edges (issue 50, item 5): a holder's forked child, the server's
refusals, a password in the URL, a mistyped scheme.

On the tests' throwaway server (tests/pg_server.py), a schema per test; the
program and ``lil`` run as real processes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pg_server
import pytest
from helpers import (
    POSTGRES,
    lil_forked,
    preload_for,
    run_forked,
    start_forked,
    wait_until,
    write_script,
)

from letitloop import Journal
from letitloop.errors import JournalFileError, LetItLoopError


@pytest.fixture
def location() -> str:
    return pg_server.location()


def schema_of(location: str) -> str:
    return location.rsplit("search_path%3D", 1)[1]


def with_role(location: str, role: str, extra: str = "") -> str:
    """``location`` reached as ``role`` (``extra``: more of the query, ``&…``)."""
    return location.replace("postgres@", f"{role}@", 1) + extra


def lil(location: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return lil_forked("--db", location, *args, cwd=cwd, preload=preload_for(location))


def admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(pg_server.server_url(), autocommit=True) as conn:
        conn.execute(sql)


FORKING_HOLDER = """
    import os, sys, time
    from letitloop import Journal

    with Journal("held", run="r", path=sys.argv[1]) as j:
        j.step("a", str, 1)
        with j.atomic_marker("charge") as first:
            pid = os.fork()
            if pid == 0:  # a child that outlives its parent, as a worker or a daemon would
                time.sleep(120)
                os._exit(0)
            print(pid, flush=True)
            time.sleep(120)
"""

EXITING_CHILD = """
    import os, sys
    from letitloop import Journal

    with Journal("kept", run="r", path=sys.argv[1]) as j:
        j.step("a", str, 1)
        pid = os.fork()
        if pid == 0:
            sys.exit(0)  # a normal interpreter exit: its objects are freed
        os.waitpid(pid, 0)
        print(j.step("b", str, 2), flush=True)  # the parent's session still serves it
"""


class TestAKilledHolderWhoseForkedChildLives:
    def test_its_run_and_marker_are_free_at_once(self, location: str, tmp_path: Path) -> None:
        script = write_script(tmp_path, "holder.py", FORKING_HOLDER)
        holder = start_forked(script, location, preload=POSTGRES)
        try:
            wait_until(lambda: "\n" in holder.printed(), "the holder forked its child")
        except BaseException:
            os.kill(holder.pid, signal.SIGKILL)
            holder.wait()
            raise
        child = int(holder.printed())
        try:
            os.kill(holder.pid, signal.SIGKILL)
            holder.wait()
            os.kill(child, 0)  # the child lives on
            started = time.monotonic()
            with Journal("held", run="r", path=location, timeout=10) as j:
                assert j.step("a", str, 1) == "1"  # replayed
                with j.atomic_marker("charge", timeout=10) as first:
                    assert first  # the marker's lock went with its holder
            # Before: the run stayed held by the child's copy of the socket until the
            # timeout (10.1 s) and RunHeldError named the dead pid.
            assert time.monotonic() - started < 5
        finally:
            os.kill(child, signal.SIGKILL)

    def test_a_child_that_exits_leaves_its_parent_s_session_alone(
        self, location: str, tmp_path: Path
    ) -> None:
        # A fresh interpreter: the child its program forks must exit as an interpreter
        # exits, freeing its objects (a program run by helpers.run_forked ends in os._exit).
        done = subprocess.run(
            [sys.executable, str(write_script(tmp_path, "p.py", EXITING_CHILD)), location],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["2"]


class TestAHoldReleased:
    def test_is_free_for_another_session_when_release_returns(self, location: str) -> None:
        # A hold (a run's, a marker's, a queue entry's) freed by closing its connection
        # alone stayed held until the server's session ended, a moment later: 25 of 300
        # checks made at once found it held, and a full run's `reset_run` right after
        # `fork_run` failed with RunHeldError naming its own process.
        from letitloop.stores.postgres.database import connect
        from letitloop.stores.postgres.holding import PostgresHold, is_held

        other = connect(location)
        try:
            still_held = []
            for i in range(100):
                hold = PostgresHold(location, f"released {i}")
                assert hold.acquire(0)
                assert is_held(other, f"released {i}")
                hold.release()
                if is_held(other, f"released {i}"):
                    still_held.append(i)
            assert still_held == []
        finally:
            other.close()


class TestTheServersRefusals:
    def test_a_schema_that_does_not_exist_is_one_journal_file_error(self, location: str) -> None:
        url = location.rsplit("&options=", 1)[0] + "&options=" + quote("-csearch_path=nosuch")
        with pytest.raises(JournalFileError, match=r"InvalidSchemaName.*CREATE SCHEMA"):
            Journal("g", path=url).open()

    def test_a_role_without_rights_is_one_line_of_lil_and_of_journal(self, location: str) -> None:
        with Journal("g", path=location) as j:
            j.step("a", str, 1)
        role = f"weak_{schema_of(location)}"
        admin(f"CREATE ROLE {role} LOGIN")
        admin(f"GRANT USAGE ON SCHEMA {schema_of(location)} TO {role}")
        url = with_role(location, role)
        with pytest.raises(JournalFileError, match=r"InsufficientPrivilege.*GRANT"):
            Journal("g", path=url).open()
        for args in (["runs"], ["show", "g"], ["reset", "g"]):
            done = lil(url, *args)
            # Before: exit 70, "internal error: InsufficientPrivilege … (a bug in lil …)".
            assert done.returncode == 1, (args, done.stderr)
            assert "bug in lil" not in done.stderr
            assert "InsufficientPrivilege" in done.stderr and "GRANT" in done.stderr
            assert len(done.stderr.strip().splitlines()) == 1

    def test_a_server_that_takes_no_writes_is_one_journal_file_error(self, location: str) -> None:
        with Journal("g", path=location) as j:
            j.step("a", str, 1)
        url = (
            location
            + "&options="
            + quote(f"-cdefault_transaction_read_only=on -csearch_path={schema_of(location)}")
        )
        with pytest.raises(JournalFileError, match=r"ReadOnlySqlTransaction.*primary"):
            Journal("g", path=url).open()

    def test_a_session_ended_by_the_server_during_open_is_one_journal_file_error(
        self, location: str, tmp_path: Path
    ) -> None:
        import psycopg

        with (
            Journal("g", run="r", path=location) as held,
            psycopg.connect(location, autocommit=True) as conn,
        ):
            held.step("a", str, 1)
            waiter = start_forked(
                write_script(
                    tmp_path,
                    "waiter.py",
                    """
                    import sys
                    from letitloop import Journal
                    from letitloop.errors import JournalFileError
                    try:
                        Journal("g", run="r", path=sys.argv[1], timeout=60).open()
                    except JournalFileError as exc:
                        print(exc)
                    """,
                ),
                location,
                preload=POSTGRES,
            )
            deadline = time.monotonic() + 30
            ended = 0
            while not ended and time.monotonic() < deadline:  # the waiter's open, waiting
                ended = len(
                    conn.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE wait_event_type = 'Lock' AND query LIKE '%pg_advisory_lock%'"
                    ).fetchall()
                )
                time.sleep(0.05)
            done = waiter.wait()
        assert ended == 1
        # Before: a raw psycopg.errors.AdminShutdown and its traceback.
        assert done.returncode == 0, done.stderr
        assert "AdminShutdown" in done.stdout and "once it is back" in done.stdout


class TestAPasswordInTheUrl:
    @pytest.mark.parametrize("how", ["query", "userinfo"])
    def test_is_never_shown(self, location: str, how: str) -> None:
        role = f"pw_{schema_of(location)}"
        admin(f"CREATE ROLE {role} LOGIN PASSWORD 'sekrit-pw'")
        if how == "query":
            url = with_role(location, role, "&password=sekrit-pw")
        else:
            url = location.replace("postgres@", f"{role}:sekrit-pw@", 1)
        with pytest.raises(LetItLoopError) as caught:
            Journal("g", path=url).open()  # no rights on the schema: an error naming the URL
        assert f"{role}@" in str(caught.value)
        assert "sekrit" not in str(caught.value)
        for args in (["runs"], ["show", "g"], ["runs", "--json"]):
            done = lil(url, *args)
            assert "sekrit" not in done.stdout + done.stderr, args
        with Journal("g", path=location) as j:  # a journal lil lists, its URL on the last line
            j.step("a", str, 1)
        done = lil(location.replace("postgres@", "postgres:sekrit-pw@", 1) + "&password=x", "runs")
        assert done.returncode == 0, done.stderr
        assert "journal: postgresql://postgres@/" in done.stdout
        assert "sekrit" not in done.stdout and "password=x" not in done.stdout


class TestAMistypedScheme:
    @pytest.mark.parametrize(
        "url",
        [
            "postgresql:/app@host/db",
            "postgresql//app@host/db",
            "postgresql:app@host/db",
            "Postgresql://app@host/db",
            "POSTGRES://app@host/db",
        ],
    )
    def test_is_a_malformed_url_and_makes_no_folder(self, url: str, tmp_path: Path) -> None:
        program = write_script(
            tmp_path,
            "p.py",
            """
            import sys
            from letitloop import Journal
            with Journal("g", path=sys.argv[1]) as j:
                j.step("a", str, 1)
            """,
        )
        done = run_forked(program, url, cwd=tmp_path)
        assert done.returncode == 1
        assert "UnknownStoreError" in done.stderr and "malformed" in done.stderr
        assert "Start it" not in done.stderr
        shown = lil(url, "runs", cwd=tmp_path)
        assert shown.returncode != 0 and "malformed" in shown.stderr
        # Before: a folder named postgresql: (or postgresql) with a journal file in it.
        assert sorted(p.name for p in tmp_path.iterdir()) == ["p.py"]
