"""What ``lil`` prints is true to the letter: counts, progress, how an attempt died, usage.

Each test runs the real ``lil`` on a journal made by real runs (crashed ones
SIGKILLed in a child process) and checks the rendered text.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers import lil_forked

from letitloop import Journal, RetryPolicy, durable, step, usage
from letitloop.primitives.waits import RunWaiting


def lil(db: Path | None, *args: str, cwd: Path | None = None) -> str:
    where = ["--db", str(db)] if db is not None else []
    r = lil_forked(*where, *args, cwd=cwd)
    assert r.returncode == 0, r.stderr
    return r.stdout


def killed_in(db: Path, tmp_path: Path, body: str, status: str) -> None:
    """Run ``body`` (inside ``with Journal('job', path=db) as j:``) in a child; SIGKILL it once
    a row of the journal has ``status``."""
    script = tmp_path / "job.py"
    script.write_text(
        "import sys\nfrom letitloop import Journal, RetryPolicy\n"
        "def boom():\n    raise ValueError('flaky')\n"
        f"with Journal('job', path={str(db)!r}) as j:\n" + textwrap.indent(body, "    "),
        encoding="utf-8",
    )
    child = subprocess.Popen([sys.executable, str(script)])
    deadline = time.monotonic() + 60
    while True:
        assert child.poll() is None and time.monotonic() < deadline
        if db.exists():
            with sqlite3.connect(db) as conn:
                try:
                    found = conn.execute(
                        "SELECT 1 FROM journal_job WHERE status = ?", (status,)
                    ).fetchall()
                except sqlite3.OperationalError:  # not made yet
                    found = []
            if found:
                break
        time.sleep(0.02)
    child.kill()
    child.wait()


class TestCounts:
    def test_one_of_a_thing_is_singular(self, tmp_path: Path) -> None:
        db = tmp_path / "j.db"
        with Journal("g", path=db) as j:
            j.step("only", str, 1)
        shown = lil(db, "show", "g")
        assert "progress  1 step done" in shown and "1 steps" not in shown
        forked = lil(db, "fork", j.run_id, "--from-step", "only")
        assert "keeps 0 recorded results" in forked
        gc = lil(db, "gc", "--older-than", "0s", "--yes")
        assert "removed 2 runs (1 step and marker)" in gc, gc
        with Journal("h", path=db) as j:
            j.step("a", str, 1)
        dry = lil(db, "reset", "h", "--run", j.run_id, "--dry-run")
        assert "1 step done, 0 markers" in dry, dry


class TestProgress:
    def test_it_counts_from_the_previous_completed_run_with_the_same_input(
        self, tmp_path: Path
    ) -> None:
        @durable(goal_id="flow", path=tmp_path / "j.db")
        def flow(n: int) -> int:
            for i in range(n):
                step("s", int, i)
            return n

        flow(8)
        flow(2)
        first = lil(tmp_path / "j.db", "show", "flow")
        assert "of 8 steps" not in first  # flow(8) did other work
        assert "progress  2 steps done" in first
        flow(2)
        again = lil(tmp_path / "j.db", "show", "flow")
        assert "progress  2 of 2 steps (the count of the previous completed run with the same " in (
            again
        )


class TestARunThatCrashedInAPause:
    def test_in_a_sleep_it_says_where_and_what_the_next_attempt_does(self, tmp_path: Path) -> None:
        db = tmp_path / "j.db"
        killed_in(db, tmp_path, "j.step('a', str, 1)\nj.sleep('nap', 600)\n", "sleeping")
        runs = lil(db, "runs")
        assert "attempt 1 died in sleep 'nap' (it wakes at " in runs, runs
        assert "the next attempt sleeps only what remains" in runs
        row = next(ln for ln in runs.splitlines() if " job " in ln)
        assert "≥" in row  # TOOK: a lower bound, not the time the process lived
        shown = lil(db, "show", "job")
        assert "died in sleep 'nap'; 1 attempt" in shown
        assert "left)" not in shown  # no countdown for a sleep no process is in

    def test_between_tries_it_gives_no_countdown(self, tmp_path: Path) -> None:
        db = tmp_path / "j.db"
        body = "j.step('b', boom, retry=RetryPolicy(max_attempts=3, initial_backoff=600))\n"
        killed_in(db, tmp_path, body, "retrying")
        runs, shown = lil(db, "runs"), lil(db, "show", "job")
        assert "attempt 1 died between tries of 'b' (next try due at " in runs
        assert "made once the run resumes" in shown and "(its process died)" in shown
        assert "(in " not in shown  # previously: next try at … (in 9m59s)


class TestACancelledRun:
    def test_its_wait_row_says_cancelled_not_waiting(self, tmp_path: Path) -> None:
        db = tmp_path / "j.db"
        with pytest.raises(RunWaiting), Journal("g", path=db) as j:
            j.wait_for("approval", stop_after=0)
        lil(db, "cancel", j.run_id)
        row = next(ln for ln in lil(db, "show", j.run_id).splitlines() if "approval" in ln)
        assert row.split()[1:4] == ["approval", "wait", "cancelled"], row


class TestUsage:
    def test_one_step_with_three_tries_is_reported_by_one_step(self, tmp_path: Path) -> None:
        db, tries = tmp_path / "j.db", []

        def ask() -> str:
            tries.append(1)
            usage(input_tokens=10, output_tokens=1)
            if len(tries) < 3:
                raise ConnectionError("again")
            return "ok"

        with Journal("g", path=db) as j:
            j.step("ask", ask, retry=RetryPolicy(max_attempts=3, initial_backoff=0.001))
        shown = lil(db, "show", "g")
        assert "reported by 1 step\n" in shown, shown


class TestForkingADurableRun:
    def test_it_says_the_call_with_the_same_arguments_resumes_it(self, tmp_path: Path) -> None:
        @durable(goal_id="customer_sync", path=tmp_path / "j.db")
        def sync(user_id: int) -> str:
            step("fetch", str, user_id)
            return step("summarize", str, 2)

        sync(123)
        run_id = json.loads(lil(tmp_path / "j.db", "runs", "--json"))[0]["id"]
        out = lil(tmp_path / "j.db", "fork", run_id, "--from-step", "summarize")
        assert "Next: Journal('customer_sync') resumes the fork." not in out
        assert "the @durable function of goal 'customer_sync' called with the same" in out
        assert '{"user_id":123}' in out


class TestAnAttemptThatStoppedToWait:
    """Each attempt that stopped to wait (exit 75: a durable wait, AutoGen's person, Pydantic
    AI's approval) is shown stopped for its wait, not as one that ended without closing."""

    @pytest.mark.parametrize("store", ["file", "postgres"])
    def test_lil_show_says_what_each_one_waited_for(self, store: str, tmp_path: Path) -> None:
        import letitloop

        if store == "postgres":
            import pg_server

            db = pg_server.location()
        else:
            db = str(tmp_path / "j.db")

        def attempt() -> None:
            with Journal("approve", path=db, run="r") as j:
                j.step("draft", str, "text")
                j.wait_for("approval", stop_after=0)
                j.wait_for("publish", stop_after=0)

        for answer in ("approval", "publish"):
            with pytest.raises(RunWaiting):
                attempt()
            letitloop.send("approve", answer, True, path=db)
        attempt()
        done = lil_forked("--db", db, "show", "r")
        assert done.returncode == 0, done.stderr
        endings = [ln.split(" — ")[-1] for ln in done.stdout.splitlines() if " — " in ln]
        assert endings == [
            "stopped to wait for 'approval'",
            "stopped to wait for 'publish'",
            "completed",
        ], done.stdout


class TestTheDemo:
    def test_its_killed_attempt_is_not_shown_as_ending_not_recorded(self, tmp_path: Path) -> None:
        out = subprocess.run(
            [sys.executable, "-m", "letitloop", "demo", "--keep"],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            env={**os.environ, "TMPDIR": str(tmp_path)},
        ).stdout
        assert "killed mid-step" in out
        (db,) = tmp_path.glob("letitloop-demo-*/journal.db")
        shown = lil(db, "show", "demo")
        first = next(ln for ln in shown.splitlines() if ln.startswith("    1  "))
        assert "ending not recorded" not in first
        assert "ended without closing the run, which the next attempt resumed" in first
