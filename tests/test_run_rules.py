"""Run-level rules that no other test pinned: each of these fails under a deliberate
mutation of the code that once survived the suite (issue 27, item 11).

Real journal files; the scenarios with a crash SIGKILL real child interpreters and
count side effects outside the journal.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import write_script

from letitloop import Journal, codec
from letitloop.errors import RunCancelledError, StepMismatchError
from letitloop.inspection import open_journal_file
from letitloop.maintenance import fork_run
from letitloop.run.replay import RESULT_CHUNK


def query(db: Path, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def answer() -> str:
    return "the step's result"


class TestASleepOrWaitWhereAStepWasRecorded:
    """Mutation: a sleep's or wait's claim that skips the recorded function check."""

    def test_a_sleep_at_a_no_argument_steps_key_is_refused(self, db: Path) -> None:
        with Journal("g", run="r", path=db) as j:
            j.step("pause", answer)
        with pytest.raises(StepMismatchError, match="pause"), Journal("g", run="r", path=db) as j:
            j.sleep("pause", 0)
        assert query(db, "SELECT kind, status, result FROM journal_g") == [
            ("step", "done", '"the step\'s result"')
        ]

    def test_a_wait_at_a_no_argument_steps_key_is_refused_not_handed_its_result(
        self, db: Path
    ) -> None:
        with Journal("g", run="r", path=db) as j:
            j.step("approval", answer)
        with (
            pytest.raises(StepMismatchError, match="approval"),
            Journal("g", run="r", path=db) as j,
        ):
            j.wait_for("approval", timeout=0.01)


class TestWhichUnfinishedRunAnOpenerResumes:
    """Mutation: the opener's query ordered oldest first."""

    def test_it_is_the_newest_so_a_fork_of_a_failed_run_is_resumed(self, db: Path) -> None:
        calls: list[str] = []

        def work(key: str) -> str:
            calls.append(key)
            return key

        with pytest.raises(RuntimeError), Journal("g", path=db) as j:
            j.step("a", work, "a")
            j.step("b", work, "b")
            failed = j.run_id
            raise RuntimeError("b's caller failed")
        store = open_journal_file(db, write=True)
        try:
            fork = fork_run(store, failed, "b").run.id
        finally:
            store.close()
        calls.clear()
        with Journal("g", path=db) as j:
            assert j.run_id == fork
            assert [j.step("a", work, "a"), j.step("b", work, "b")] == ["a", "b"]
        assert calls == ["b"]  # 'a' replayed from the fork's copy


class TestACancelLeftByAHolderThatDied:
    """Mutation: the opener's decision that ignores ``cancel_requested_at``."""

    def test_the_next_open_raises_run_cancelled_and_runs_nothing(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        ran = tmp_path / "ran.log"
        script = write_script(
            tmp_path,
            "holder.py",
            """
            import sys, time
            from letitloop import Journal
            with Journal("g", run="nightly", path=sys.argv[1]) as j:
                j.step("first", print, "holding", flush=True)
                time.sleep(60)  # SIGKILLed here, before its next step notices the cancel
            """,
        )
        holder = subprocess.Popen(
            [sys.executable, "-u", str(script), str(db)], stdout=subprocess.PIPE, text=True
        )
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        from letitloop import cancel

        assert not cancel("nightly", path=db, reason="stop it").at_once  # a request: it is held
        holder.send_signal(signal.SIGKILL)
        holder.wait(30)
        assert query(db, "SELECT status FROM runs") == [("running",)]

        def second() -> None:
            with ran.open("a") as f:
                f.write("second\n")

        with (
            pytest.raises(RunCancelledError, match="stop it"),
            Journal("g", run="nightly", path=db) as j,
        ):
            j.step("second", second)
        assert not ran.exists()
        assert query(db, "SELECT status FROM runs") == [("cancelled",)]


class TestHowARunEnds:
    """Mutations: ``SystemExit(None)`` taken as a failure; a nested journal's RunWaiting
    taken as the outer run's."""

    def test_sys_exit_with_no_code_completes_the_run(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        script = write_script(
            tmp_path,
            "done.py",
            """
            import sys
            from letitloop import Journal
            with Journal("g", path=sys.argv[1]) as j:
                j.step("s", int, 1)
                sys.exit()
            """,
        )
        done = subprocess.run([sys.executable, str(script), str(db)], timeout=60)
        assert done.returncode == 0
        assert query(db, "SELECT status, error FROM runs") == [("completed", None)]

    def test_a_nested_journals_run_waiting_leaves_the_outer_run_failed_not_waiting(
        self, db: Path
    ) -> None:
        from letitloop import RunWaiting

        with Journal("outer", path=db) as outer:
            outer.step("a", int, 1)
            outer_id = outer.run_id
            with pytest.raises(RunWaiting), Journal("inner", path=db) as inner:
                inner_id = inner.run_id
                inner.wait_for("approval", stop_after=0)
            # The program lets it through the outer block, as a SystemExit would go.
            with pytest.raises(RunWaiting), Journal("outer2", path=db) as outer2:
                outer2_id = outer2.run_id
                with Journal("inner2", path=db) as inner2:
                    inner2.wait_for("approval", stop_after=0)
        statuses = dict(query(db, "SELECT id, status FROM runs"))
        assert statuses[inner_id] == "waiting"
        assert statuses[outer_id] == "completed"
        assert statuses[outer2_id] == "failed"  # it did not wait: its inner run did


class TestAResumedRun:
    """Mutation: the claim of a new attempt that leaves ``runs.status`` as it was."""

    def test_it_reads_running_while_it_is_open(self, db: Path) -> None:
        with pytest.raises(RuntimeError), Journal("g", path=db):
            raise RuntimeError("first attempt failed")
        assert query(db, "SELECT status FROM runs") == [("failed",)]
        with Journal("g", path=db) as j:
            assert j.attempt == 2
            assert query(db, "SELECT status, attempts FROM runs") == [("running", 2)]


class TestReplayingManySteps:
    """Mutation: a read of every result text left at the first replay, not one chunk."""

    def test_no_more_than_one_chunk_of_result_texts_is_held(self, db: Path) -> None:
        n = RESULT_CHUNK * 3 + 5
        with Journal("g", run="r", path=db) as j:
            for i in range(n):
                j.step(f"s{i}", str, i)
        most = 0
        with Journal("g", run="r", path=db) as j:
            results = j._opened.results
            assert results is not None
            for i in range(n):
                assert j.step(f"s{i}", str, i) == str(i)
                most = max(most, len(results.cache))
        assert 0 < most <= RESULT_CHUNK


class TestATypedDocumentOfTagLikeDicts:
    """Mutation: the long-list shortcut that stores one-key dicts unescaped."""

    @pytest.mark.parametrize("n", [24, 25, 100])
    def test_a_list_of_one_key_dicts_whose_keys_start_with_a_bang_round_trips(
        self, db: Path, n: int
    ) -> None:
        records = [{f"!k{i}": i} for i in range(n)]
        value = (records, {"!tuple": [1, 2]})  # a tuple: a typed document
        assert codec.decode(codec.encode(value)) == value
        with Journal("g", run="r", path=db) as j:
            j.step("s", lambda: value)
        with Journal("g", run="r", path=db) as j:
            assert j.step("s", lambda: None) == value
