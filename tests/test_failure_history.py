"""A failure that was later fixed stays in the history (issue 50, item 3).

A step raises (no retry policy), the program exits non-zero or runs over its
budget; the user fixes it, and the next attempt finishes the run. The run's row
then says ``completed``, the step's row ``done``: what stays is each attempt's
outcome and error as it recorded them when it closed the run (``attempts``,
migration 0019), and each failed call of a step as a try with its error and
traceback (``step_tries``). Real processes (forked from one interpreter,
tests/preloaded.py), a real SIGKILL, ``lil`` as a process; on a journal file,
on PostgreSQL (tests/pg_server.py), and in memory:// (one process: read through
its inspector).
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import lil_forked
from preloaded import Preloaded

from letitloop import Budget, Journal, usage
from letitloop.errors import BudgetExceededError
from letitloop.inspection import export_run, open_inspector

#: The user's program: ``DB MODE``. ``raise``: step b raises; ``exit``: the program exits
#: 3 after step paid; ``budget``: a budget of 40 tokens that step paid (50) passes, so step
#: b is refused; ``kill``: SIGKILLed in step b; ``fixed``: all three return.
PROGRAM = """
import os, signal, sys
from letitloop import Budget, Journal, usage

db, mode = sys.argv[1], sys.argv[2]


def a():
    return 1


def paid():
    usage(input_tokens=50)
    return "paid"


def b():
    if mode == "raise":
        raise ValueError("bad input 42")
    if mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    return 2


with Journal("g", path=db, run="r", budget=Budget(tokens=40 if mode == "budget" else 1000)) as j:
    j.step("a", a)
    j.step("paid", paid)
    if mode == "exit":
        raise SystemExit(3)
    j.step("b", b)
"""


@pytest.fixture(scope="module")
def preloaded() -> Iterator[Preloaded]:
    with Preloaded("letitloop", with_letitloop=True) as forker:
        yield forker


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("program") / "pipeline.py"
    path.write_text(PROGRAM, encoding="utf-8")
    return path


def run(preloaded: Preloaded, program: Path, db: str, mode: str) -> int:
    return preloaded.run(program, db, mode).returncode


def lil(db: str, *args: str) -> subprocess.CompletedProcess[str]:
    return lil_forked("--db", db, *args)


def exported(db: str) -> dict[str, Any]:
    done = lil(db, "export", "g")
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


#: (mode, its exit status, attempt 1's recorded error, the step it failed in)
FAILURES = [
    ("raise", 1, "ValueError: bad input 42", "b"),
    ("exit", 3, "SystemExit: 3", None),
    ("budget", 1, "BudgetExceededError: ", None),
]


def check_history(history: dict[str, Any], error: str, step: str | None) -> None:
    """Attempt 1 failed with ``error`` (in ``step``) and attempt 2 completed, as recorded."""
    first, second = history["attempts"]
    assert (first["outcome"], first["recorded"]) == ("failed", True)
    assert first["error"].startswith(error)
    assert first["step"] == step
    assert first["ended_at"] is not None
    assert (second["outcome"], second["recorded"]) == ("completed", True)
    assert second["error"] is None
    assert history["run"]["status"] == "completed" and history["run"]["error"] is None
    if step is not None:  # the step's failed call, with its traceback
        (tried,) = [t for t in history["tries"] if t["key"] == step]
        assert (tried["attempt"], tried["error"], tried["next_at"]) == (1, error, None)
        assert 'raise ValueError("bad input 42")' in tried["traceback"]
        assert [r["status"] for r in history["rows"] if r["key"] == step] == ["done"]


class TestAFailureFixedByTheNextAttempt:
    @pytest.mark.parametrize(("mode", "status", "error", "step"), FAILURES)
    def test_lil_export_keeps_attempt_1s_outcome_and_error(
        self,
        preloaded: Preloaded,
        program: Path,
        tmp_path: Path,
        mode: str,
        status: int,
        error: str,
        step: str | None,
    ) -> None:
        db = str(tmp_path / "journal.db")
        assert run(preloaded, program, db, mode) == status
        assert run(preloaded, program, db, "fixed") == 0
        check_history(exported(db), error, step)

    def test_lil_show_says_attempt_1_failed_in_the_step_with_its_error(
        self, preloaded: Preloaded, program: Path, tmp_path: Path
    ) -> None:
        db = str(tmp_path / "journal.db")
        assert run(preloaded, program, db, "raise") == 1
        assert run(preloaded, program, db, "fixed") == 0
        shown = lil(db, "show", "g")
        assert shown.returncode == 0, shown.stderr
        lines = [line for line in shown.stdout.splitlines() if "pid" in line]
        assert "failed in step 'b': ValueError: bad input 42" in lines[0]
        assert "completed" in lines[1]
        assert "ended without closing the run" not in shown.stdout
        assert "try 1  attempt 1" in shown.stdout  # the failed call, among the tries

    def test_the_record_is_in_the_file_for_any_sqlite_reader(
        self, preloaded: Preloaded, program: Path, tmp_path: Path
    ) -> None:
        db = str(tmp_path / "journal.db")
        assert run(preloaded, program, db, "raise") == 1
        assert run(preloaded, program, db, "fixed") == 0
        with sqlite3.connect(db) as conn:
            attempts = conn.execute(
                "SELECT attempt, outcome, error FROM attempts ORDER BY attempt"
            ).fetchall()
            tries = conn.execute("SELECT key, try, attempt, error, traceback FROM step_tries")
            ((key, n, attempt, err, tb),) = tries.fetchall()
        assert attempts == [(1, "failed", "ValueError: bad input 42"), (2, "completed", None)]
        assert (key, n, attempt, err) == ("b", 1, 1, "ValueError: bad input 42")
        assert tb.startswith("Traceback (most recent call last):")

    def test_lil_ui_s_run_page_says_attempt_1_failed_not_crashed(
        self, preloaded: Preloaded, program: Path, tmp_path: Path
    ) -> None:
        pytest.importorskip("starlette")
        from starlette.testclient import TestClient

        from letitloop.web import create_app

        db = tmp_path / "journal.db"
        assert run(preloaded, program, str(db), "raise") == 1
        assert run(preloaded, program, str(db), "fixed") == 0
        page = TestClient(create_app(db), base_url="http://127.0.0.1").get("/runs/g")
        assert page.status_code == 200
        html = page.text
        first = html[html.index('data-attempt="1"') : html.index('data-attempt="2"')]
        assert "failed in step &#39;b&#39;: ValueError: bad input 42" in first
        assert "crashed, then resumed" not in first


class TestAnAttemptThatWasKilled:
    def test_records_no_outcome_and_still_reads_as_resumed(
        self, preloaded: Preloaded, program: Path, tmp_path: Path
    ) -> None:
        db = str(tmp_path / "journal.db")
        assert run(preloaded, program, db, "kill") == -signal.SIGKILL
        assert run(preloaded, program, db, "fixed") == 0
        first, second = exported(db)["attempts"]
        assert (first["outcome"], first["recorded"], first["ended_at"]) == ("resumed", False, None)
        assert second["outcome"] == "completed"


class TestAFileFromBeforeTheRecord:
    def test_opens_resumes_and_is_read_as_before(
        self, preloaded: Preloaded, program: Path, tmp_path: Path
    ) -> None:
        from letitloop.stores.sqlite import migrate
        from letitloop.stores.sqlite.store import Store

        db = tmp_path / "journal.db"
        store = Store(db, migrate=False)
        migrate.migrate(store, until="0018_reservations")
        store.close()
        conn = sqlite3.connect(db)
        columns = {r[1] for r in conn.execute("PRAGMA table_info(attempts)")}
        conn.close()
        assert "outcome" not in columns  # as 0.x before this change left it
        assert run(preloaded, program, str(db), "raise") == 1  # migrated by the first open
        assert run(preloaded, program, str(db), "fixed") == 0
        check_history(exported(str(db)), "ValueError: bad input 42", "b")


def broke() -> None:
    raise ValueError("bad input 42")


def spend() -> str:
    usage(input_tokens=50)
    return "paid"


class TestInMemory:
    @pytest.mark.parametrize("mode", ["raise", "budget"])
    def test_the_attempts_outcome_and_the_failed_try_are_kept(self, mode: str) -> None:
        where = f"memory://failure-history-{mode}"
        small = Budget(tokens=40 if mode == "budget" else 1000)
        failure = ValueError if mode == "raise" else BudgetExceededError
        with pytest.raises(failure), Journal("g", path=where, run="r", budget=small) as j:
            j.step("paid", spend)
            j.step("b", broke)
        with Journal("g", path=where, run="r", budget=Budget(tokens=1000)) as j:
            j.step("paid", spend)
            j.step("b", lambda: 2)
            run_id = j.run_id
        history = export_run(open_inspector(where), run_id)
        if mode == "raise":
            check_history(history, "ValueError: bad input 42", "b")
        else:
            check_history(history, "BudgetExceededError: ", None)
            assert history["tries"] == []


class TestOnPostgres:
    def test_lil_export_keeps_attempt_1s_outcome_and_the_failed_call(
        self, preloaded: Preloaded, program: Path
    ) -> None:
        import pg_server

        location = pg_server.location()
        assert run(preloaded, program, location, "raise") == 1
        assert run(preloaded, program, location, "fixed") == 0
        check_history(exported(location), "ValueError: bad input 42", "b")

    def test_a_budget_run_over_then_raised_is_recorded_too(
        self, preloaded: Preloaded, program: Path
    ) -> None:
        import pg_server

        location = pg_server.location()
        assert run(preloaded, program, location, "budget") == 1
        assert run(preloaded, program, location, "fixed") == 0
        check_history(exported(location), "BudgetExceededError: ", None)


class TestEveryFailedCallIsOneTry:
    def test_an_async_steps_failure_is_kept_with_its_traceback(self, tmp_path: Path) -> None:
        import asyncio

        db = tmp_path / "journal.db"

        async def fails() -> int:
            raise ValueError("async bad")

        async def first() -> None:
            async with Journal("g", path=db, run="r") as j:
                await j.async_step("b", fails)

        with pytest.raises(ValueError):
            asyncio.run(first())
        with Journal("g", path=db, run="r") as j:
            assert j.step("b", lambda: 2) == 2
        with sqlite3.connect(db) as conn:
            ((n, attempt, error, tb),) = conn.execute(
                "SELECT try, attempt, error, traceback FROM step_tries"
            ).fetchall()
        assert (n, attempt, error) == (1, 1, "ValueError: async bad")
        assert 'raise ValueError("async bad")' in tb

    def test_a_retry_policys_tries_are_not_kept_twice_and_keep_their_tracebacks(
        self, tmp_path: Path
    ) -> None:
        from letitloop import RetryPolicy

        db = tmp_path / "journal.db"
        policy = RetryPolicy(max_attempts=2, initial_backoff=0, jitter=0)
        with pytest.raises(ValueError), Journal("g", path=db, run="r") as j:
            j.step("b", broke, retry=policy)
        for _ in range(2):  # two more attempts claim the run: nothing is added
            with pytest.raises(ValueError), Journal("g", path=db, run="r") as j:
                raise ValueError("outside the step")
        with Journal("g", path=db, run="r") as j:
            assert j.step("b", lambda: 2, retry=policy) == 2
        with sqlite3.connect(db) as conn:
            tries = conn.execute(
                "SELECT try, attempt, next_at IS NULL, error, traceback IS NOT NULL "
                "FROM step_tries ORDER BY try"
            ).fetchall()
        assert tries == [
            (1, 1, False, "ValueError: bad input 42", True),
            (2, 1, True, "ValueError: bad input 42", True),
        ]
