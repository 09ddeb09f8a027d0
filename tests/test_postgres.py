"""The PostgreSQL store's own promises, beyond the contract suite (tests/test_contract.py).

On the tests' throwaway server (tests/pg_server.py), a schema per test.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path
from typing import Any, ClassVar

import pg_server
import pytest
from helpers import POSTGRES, lil_forked, start_forked, wait_until, write_script

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
        calls = len(CALLS)
        with Journal("g", run="r", path=location) as j:
            assert j.step("a", shout, 1) == "1"
        assert os.listdir(tmp_path) == []
        assert ("ll_journal", 1) in tables(location)
        with Journal("g", run="r", path=location) as j:  # replayed, not called again
            assert j.step("a", shout, 1) == "1"
        assert CALLS[calls:] == [1]


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

        holder = write_script(tmp_path, "holder.py", HOLDER)
        child = start_forked(holder, location, preload=POSTGRES)
        try:
            wait_until(lambda: child.printed() == "ready\n", "the holder holds the run")
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
            os.kill(child.pid, signal.SIGKILL)
            child.wait()


class TestLil:
    def test_lists_shows_exports_and_resets_a_postgres_run(self, location: str) -> None:
        with Journal("g", run="r", path=location) as j:
            j.step("first", str, 1)
            run_id = j.run_id

        def lil(*args: str) -> str:
            return pg_server.lil(location, *args)

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


def cut_the_run_holds(location: str) -> int:
    """Terminate the sessions holding advisory locks (the runs' holds), as a network cut
    would end them; the journals' own connections live on. How many were cut."""
    import psycopg

    with psycopg.connect(location, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
            "AND granted AND pid <> pg_backend_pid()"
        ).fetchall()
    return len(rows)


def journal_rows(location: str) -> list[tuple[str, str, str]]:
    import psycopg

    with psycopg.connect(location, autocommit=True) as conn:
        rows = conn.execute("SELECT key, kind, status FROM ll_journal ORDER BY rowid").fetchall()
    return [(k, kind, status) for k, kind, status in rows]


#: What a holder that lost its run may try, each a write of a different row.
WRITES = {
    "step": lambda j: j.step("b", str, 2),
    "marker": lambda j: j.atomic_marker("m").__enter__(),
    "sleep": lambda j: j.sleep("nap", 0.01),
    "wait": lambda j: j.wait_for("answer", timeout=5),
    "end of the run": lambda j: j.close(),
}


class TestAHolderWhoseRunWasTakenOver:
    """Its lock's connection cut (``pg_terminate_backend``), its run resumed by another
    opener: whatever it writes afterwards is refused, and nothing of it is written."""

    @pytest.mark.parametrize("write", list(WRITES))
    def test_writes_nothing_of_it_afterwards(self, location: str, write: str) -> None:
        old = Journal("fence", run="r", path=location).open()
        old.step("a", str, 1)
        assert cut_the_run_holds(location) == 1
        new = Journal("fence", run="r", path=location, timeout=10).open()
        try:
            assert new.step("a", str, 1) == "1"  # replayed: the run is the new holder's
            before = journal_rows(location)
            with pytest.raises(JournalFileError, match="taken by another attempt"):
                WRITES[write](old)
            assert journal_rows(location) == before
        finally:
            with contextlib.suppress(JournalFileError):
                old.close()
            new.close()
        with psycopg_connect(location) as conn:
            status = conn.execute("SELECT status, attempts FROM ll_runs").fetchall()
        assert status == [("completed", 2)]  # ended by the new holder alone


def psycopg_connect(location: str) -> Any:
    import psycopg

    return psycopg.connect(location, autocommit=True)


#: A database as letitloop 0.x with schema version 1 left it: times as text, no checksums.
OLD_TIME = "2026-11-30T08:12:03.123456+00:00"


def version_1_database(location: str) -> None:
    from letitloop.stores.postgres.database import migrations

    number, _, sql = migrations()[0]
    assert number == 1
    with psycopg_connect(location) as conn:
        conn.execute(sql)
        conn.execute("INSERT INTO ll_meta VALUES (1)")
        conn.execute("INSERT INTO ll_goals VALUES ('old')")
        conn.execute(
            "INSERT INTO ll_runs (id, goal, name, status, attempts, started_at, updated_at, "
            "finished_at) VALUES ('01OLD', 'old', 'r', 'completed', 1, %s, %s, %s)",
            (OLD_TIME, OLD_TIME, OLD_TIME),
        )
        conn.execute(
            "INSERT INTO ll_journal (goal, run, key, status, kind, fn, result, started_at, "
            "finished_at, duration_ms, attempt, args_fp) VALUES "
            "('old', '01OLD', 'a', 'done', 'step', 'builtins.str', '\"1\"', %s, %s, 1.0, 1, 'x')",
            (OLD_TIME, OLD_TIME),
        )


WORKER = """
import os, sys, time
from letitloop import Journal

location, name, go = sys.argv[1:]
while not os.path.exists(go):  # start together
    time.sleep(0.001)
with Journal("g", run=name, path=location) as j:
    print(j.step("a", str, name))
"""


class TestADatabaseOfAnOlderSchema:
    def test_twenty_workers_starting_at_once_migrate_it_once(
        self, location: str, tmp_path: Path
    ) -> None:
        from letitloop.stores.postgres.database import migrations, schema_version

        version_1_database(location)
        script, go = write_script(tmp_path, "worker.py", WORKER), tmp_path / "go"
        # Processes of their own, forked (helpers.start_forked): twenty fresh interpreters
        # would cost about 4 s of CPU importing letitloop and psycopg.
        workers = [
            start_forked(script, location, f"w{i}", str(go), preload=POSTGRES) for i in range(20)
        ]
        go.touch()
        outs = [w.wait() for w in workers]
        assert [o.returncode for o in outs] == [0] * 20, [o.stderr for o in outs if o.stderr]
        assert sorted(o.stdout.strip() for o in outs) == sorted(f"w{i}" for i in range(20))
        with psycopg_connect(location) as conn:
            applied = conn.execute(
                "SELECT version, name FROM ll_migrations ORDER BY version"
            ).fetchall()
            (appliers,) = conn.execute(
                "SELECT count(DISTINCT applied_by) FROM ll_migrations"
            ).fetchone()
            meta = conn.execute("SELECT version FROM ll_meta").fetchall()
        assert applied == [(n, name) for n, name, _ in migrations()[1:]]
        assert appliers == 1  # one worker applied them all, in one transaction
        assert meta == [(schema_version(),)]

    def test_its_rows_are_kept_with_their_times_as_timestamptz(self, location: str) -> None:
        version_1_database(location)
        with Journal("g", run="new", path=location) as j:  # migrates
            j.step("a", str, 1)
        with psycopg_connect(location) as conn:
            old = conn.execute(
                "SELECT pg_typeof(started_at)::text, started_at = %s::timestamptz, result, "
                "checksum FROM ll_journal WHERE run = '01OLD'",
                (OLD_TIME,),
            ).fetchone()
        assert old == ("timestamp with time zone", True, '"1"', None)  # replays unchecked
        done = lil_forked("--db", location, "show", "01OLD", preload=POSTGRES)
        assert done.returncode == 0, done.stderr
        assert "2026-11-30" in done.stdout

    def test_a_reader_refuses_it_and_changes_nothing(self, location: str) -> None:
        version_1_database(location)
        before = tables(location)
        done = lil_forked("--db", location, "runs", preload=POSTGRES)
        assert done.returncode != 0
        assert "older letitloop" in done.stderr and "Traceback" not in done.stderr
        assert tables(location) == before


class TestARowChangedOutsideLetitloop:
    def test_a_step_whose_result_was_edited_is_refused_on_replay(self, location: str) -> None:
        from letitloop.errors import DamagedRowError

        with Journal("g", run="r", path=location) as j:
            j.step("a", str, 1)
        with psycopg_connect(location) as conn:
            conn.execute("UPDATE ll_journal SET result = '\"2\"' WHERE key = 'a'")
        with pytest.raises(DamagedRowError), Journal("g", run="r", path=location) as j:
            j.step("a", str, 1)

    def test_a_marker_whose_status_was_edited_is_refused(self, location: str) -> None:
        from letitloop.errors import DamagedRowError

        with Journal("g", run="r", path=location) as j:
            with j.atomic_marker("m") as should:
                assert should
            j.step("a", str, 1)
        with psycopg_connect(location) as conn:
            conn.execute("UPDATE ll_journal SET status = 'failed' WHERE key = 'm'")
            conn.execute("UPDATE ll_runs SET status = 'failed'")
        with Journal("g", run="r", path=location) as j, pytest.raises(DamagedRowError):
            j.atomic_marker("m").__enter__()

    def test_rows_carry_times_as_timestamptz_and_a_checksum(self, location: str) -> None:
        with Journal("g", run="r", path=location) as j:
            j.step("a", str, 1)
        with psycopg_connect(location) as conn:
            row = conn.execute(
                "SELECT pg_typeof(started_at)::text, checksum IS NOT NULL FROM ll_journal"
            ).fetchone()
        assert row == ("timestamp with time zone", True)


class TestTheCostOfAStep:
    def test_a_fresh_step_is_one_round_trip(self, location: str) -> None:
        with Journal("g", run="r", path=location) as j:
            for i in range(10):  # past psycopg's preparing of the statement
                j.step(f"s{i}", str, i)
            store: Any = j.store
            assert pg_server.round_trips(store.conn, lambda: j.step("one", str, 1)) == 1

    def test_a_run_of_two_hundred_steps_replays_with_no_round_trip_after_its_open(
        self, location: str
    ) -> None:
        with Journal("g", run="r", path=location) as j:
            for i in range(200):
                j.step(f"s{i}", shout, i)
        with Journal("g", run="r", path=location) as j:
            store: Any = j.store

            def replay() -> None:
                for i in range(200):
                    assert j.step(f"s{i}", shout, i) == str(i)

            calls = len(CALLS)
            assert pg_server.round_trips(store.conn, replay) == 0  # the results came with the open
            assert CALLS[calls:] == []

    def test_a_run_of_a_thousand_steps_replays_with_no_round_trip_after_its_open(
        self, location: str
    ) -> None:
        with Journal("g", run="r", path=location) as j:
            for i in range(1000):
                j.step(f"s{i}", shout, i)
        with Journal("g", run="r", path=location) as j:
            store: Any = j.store

            def replay() -> None:
                for i in range(1000):
                    assert j.step(f"s{i}", shout, i) == str(i)

            calls = len(CALLS)
            assert pg_server.round_trips(store.conn, replay) == 0  # the results came with the open
            assert CALLS[calls:] == []


class TestARunWhoseResultsDoNotFitInOneRead:
    def test_replays_every_result_reading_the_rest_as_it_goes(
        self, location: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from letitloop.stores.postgres import steps as postgres_steps

        with Journal("g", run="r", path=location) as j:
            for i in range(600):
                j.step(f"s{i}", shout, i)
        # 600 results of 3-5 bytes; the open reads about 100 of them.
        monkeypatch.setattr(postgres_steps, "PREFETCH_BYTES", 400)
        with Journal("g", run="r", path=location) as j:
            store: Any = j.store
            assert 80 <= len(store._prefetched) <= 134

            def replay() -> None:
                for i in range(600):
                    assert j.step(f"s{i}", shout, i) == str(i)

            calls = len(CALLS)
            # The rest as replay asks for them, by chunks of replay.RESULT_CHUNK rows from
            # the first row the open did not read: rows ~100-355, then ~356-599.
            assert pg_server.round_trips(store.conn, replay) == 2
            assert CALLS[calls:] == []

    def test_reads_the_rest_a_bounded_number_of_bytes_at_a_time(
        self, location: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from letitloop.stores.postgres import steps as postgres_steps

        with Journal("g", run="r", path=location) as j:
            for i in range(600):
                j.step(f"s{i}", shout, i)
        monkeypatch.setattr(postgres_steps, "PREFETCH_BYTES", 400)
        monkeypatch.setattr(postgres_steps, "RESULT_BYTES", 400)
        with Journal("g", run="r", path=location) as j:
            store: Any = j.store
            reads: list[int] = []
            results = store.results

            def counted(handles: Any) -> dict[int, str | None]:
                got: dict[int, str | None] = results(handles)
                reads.append(sum(len(t or "") for t in got.values()))
                return got

            monkeypatch.setattr(store, "results", counted)
            calls = len(CALLS)
            for i in range(600):
                assert j.step(f"s{i}", shout, i) == str(i)
            assert CALLS[calls:] == []
        # 600 results of 3-5 bytes, about 400 bytes a read (before: 256 rows a read).
        assert len(reads) >= 6 and max(reads) <= 400 + 5, reads


class TestAStepsStatement:
    """``step_statement`` binds a usual step's values straight from its row: the same
    values ``row_rules.step_values`` gives (the memory store's), column for column."""

    @staticmethod
    def row(**changes: Any) -> Any:
        from letitloop.stores.storage_steps import RunKey, StepRow

        values = dict(
            run=RunKey(7),
            key="fetch#2",
            status="done",
            fn="module.fetch",
            result='{"a": 1}',
            started=1_764_000_000_123_456,
            duration=1_234_567,
            attempt=3,
            error=None,
            traceback=None,
            args_fp="fp",
            input_tokens=None,
            output_tokens=None,
            cost=None,
            model=None,
            checksum=-12345,
        )
        values.update(changes)
        return StepRow(**values)  # type: ignore[arg-type]

    def test_a_usual_step_binds_the_values_of_row_rules_without_the_empty_ones(self) -> None:
        from letitloop.stores.postgres.steps import PLAIN_COLUMNS, step_statement
        from letitloop.stores.row_rules import step_values

        row = self.row()
        sql, params = step_statement("g", "01RUN", row)
        values = step_values(row, "01RUN")
        assert params == ("g", *(values[c] for c in PLAIN_COLUMNS), 7, 3)
        assert "error" not in sql.split("SELECT")[0] and "cost" not in sql.split("SELECT")[0]

    @pytest.mark.parametrize(
        "changes",
        [
            {"error": "boom"},
            {"traceback": "tb"},
            {"input_tokens": 1},
            {"cost": 0.5},
            {"model": "m"},
        ],
    )
    def test_a_step_with_an_error_or_usage_binds_every_column(
        self, changes: dict[str, Any]
    ) -> None:
        from letitloop.stores.postgres.steps import step_statement
        from letitloop.stores.row_rules import step_values

        row = self.row(**changes)
        _, params = step_statement("g", "01RUN", row)
        assert params == ("g", *step_values(row, "01RUN").values(), 7, 3)


class TestAUsualStepSentThroughLibpq:
    """``postgres_steps.StepWriter`` (libpq's exec_prepared) and its twin, psycopg's cursor,
    write the same row for the same step."""

    VALUES: ClassVar[list[Any]] = [
        "plain",
        "quotes ' \" and \\ backslashes",
        "unicode: é 中 🙂",
        -(2**63),
        2**63 - 1,
        0.1,
        1e-300,
        None,
        {"nested": [1, 2.5, "x"]},
    ]

    def rows(self, location: str, run: str) -> list[tuple[Any, ...]]:
        """The rows of run ``run`` but what differs from run to run (ids, times, checksum)."""
        with psycopg_connect(location) as conn:
            rows: list[tuple[Any, ...]] = conn.execute(
                "SELECT j.key, j.status, j.fn, j.result, j.attempt, j.args_fp, j.error, "
                "j.cost, j.kind, j.checksum IS NOT NULL FROM ll_journal AS j JOIN ll_runs "
                "AS r ON r.id = j.run WHERE r.name = %s ORDER BY j.rowid",
                (run,),
            ).fetchall()
        return rows

    def test_both_write_the_same_rows(self, location: str, monkeypatch: pytest.MonkeyPatch) -> None:
        from letitloop.stores.postgres.steps import StepWriter

        def steps(run: str, call: Any) -> list[Any]:
            with Journal("g", run=run, path=location) as j:
                return [
                    j.step(f"s{i}: {value!r}"[:40], call, value)
                    for i, value in enumerate(self.VALUES)
                ]

        called: list[Any] = []

        def same(value: Any) -> Any:
            called.append(value)
            return value

        steps("libpq", same)
        with monkeypatch.context() as m:
            m.setattr(StepWriter, "write", lambda self, params: None)
            steps("cursor", same)
        assert self.rows(location, "libpq") == self.rows(location, "cursor")
        assert len(self.rows(location, "libpq")) == len(self.VALUES)
        # Replayed (each row's checksum checked), never called again: the same values.
        assert called == self.VALUES * 2
        for run in ("libpq", "cursor"):
            assert steps(run, same) == self.VALUES
        assert called == self.VALUES * 2

    def test_a_value_holding_nul_is_left_to_the_cursor(self) -> None:
        from letitloop.stores.postgres.steps import StepWriter

        # libpq would cut a text parameter at its NUL; the cursor refuses it.
        writer = StepWriter(None, "SELECT %s", lambda pid, payload: None)
        assert writer.write(["a\x00b"]) is None
        assert writer.write(["\ud800"]) is None  # a lone surrogate, as psycopg has it

    def test_a_statement_dropped_by_deallocate_all_is_prepared_again(self, location: str) -> None:
        with Journal("g", run="r", path=location) as j:
            j.step("a", str, 1)
            store: Any = j.store
            store.conn.execute("DEALLOCATE ALL")  # as psycopg does after a ROLLBACK
            assert j.step("b", shout, 2) == "2"
        assert [r[0] for r in self.rows(location, "r")] == ["a", "b"]

    def test_a_notice_that_came_with_the_answer_is_counted(self, location: str) -> None:
        with Journal("g", run="r", path=location) as j:
            j.step("a", str, 1)
            store: Any = j.store
            before = store.changes()
            with psycopg_connect(location) as other:
                other.execute("SELECT pg_notify('letitloop', current_schema())")
            j.step("b", str, 2)  # the notice waits on the socket: it comes with this answer
            assert store.changes() == before + 1


class FailsOnce:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls == 1:
            raise TimeoutError("once")
        return "ok"


class TestAnInspectorAskedAboutOneRun:
    """``lil show`` and ``lil ui``'s run page: what a run's questions read is a snapshot of
    that run alone, and the answers are those of the whole database's snapshot."""

    def test_reads_that_run_alone_and_answers_as_over_the_whole_database(
        self, location: str
    ) -> None:
        from letitloop import RetryPolicy
        from letitloop.inspection.memory_inspector import MemoryInspector
        from letitloop.inspection.postgres_inspector import PostgresInspector
        from letitloop.inspection.postgres_snapshots import load

        for name in ("a", "b"):
            with Journal("g", run=name, path=location) as j:
                j.step("one", str, 1)
                j.step("flaky", FailsOnce(), retry=RetryPolicy(initial_backoff=0, jitter=0))
                with j.atomic_marker("notify") as go:
                    assert go
            with Journal("g", run=name, path=location) as j:
                j.step("one", str, 1)  # replayed: a replay recorded
        inspector = PostgresInspector(location)
        try:
            whole = MemoryInspector(load(inspector.conn, location))
            for name in ("a", "b"):
                [info] = inspector.runs_named(name)
                assert inspector.rows(info) == whole.rows(info) != []
                assert {r["run"] for r in inspector.db.by_rowid.values()} == {info.id}
                assert inspector.tries(info.id) == whole.tries(info.id) != []
                assert inspector.attempts(info.id) == whole.attempts(info.id) != []
                assert inspector.replays(info.id) == whole.replays(info.id) != []
                assert inspector.attempt_replays(info.id) == whole.attempt_replays(info.id)
                assert inspector.result_json(info.id) == whole.result_json(info.id)
        finally:
            inspector.close()
