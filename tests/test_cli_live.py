"""What is happening now: a step in flight, how each attempt ended, following a run.

Real child interpreters run a pipeline whose slow step waits on a file (so a
test decides when it ends) and logs what really ran outside the journal; the
real ``lil`` reads the journal from outside, piped and on a pseudo-terminal.
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import select
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    LIL_ENTRY,
    ForkedProcess,
    left_on_terminal,
    lil_forked,
    spawn_forked,
    sqlite_store,
)

from letitloop import Journal
from letitloop.primitives.clock import utc_us
from letitloop.stores.sqlite.calls import RUNNING_UPSERT

PIPELINE = """
import os, sys, time
from letitloop import Journal

db, gate, steps = sys.argv[1], sys.argv[2], sys.argv[3].split(",")

def work(key):
    print("start", key, flush=True)
    if key.startswith("slow"):
        while not os.path.exists(gate):  # until the test opens the gate (or kills us)
            time.sleep(0.02)
    if key == os.environ.get("FAIL_AT"):
        raise RuntimeError(key + " failed on purpose")
    return "result of " + key

with Journal(os.environ.get("GOAL", "live"), path=db) as j:
    for key in steps:
        j.step(key, work, key)
print("finished", flush=True)
"""


class Live:
    """A journal file, the pipeline script and the gate its slow steps wait for."""

    def __init__(self, folder: Path) -> None:
        self.db = folder / "journal.db"
        self.gate = folder / "gate"
        self.script = folder / "pipeline.py"
        self.script.write_text(textwrap.dedent(PIPELINE), encoding="utf-8")

    def spawn(self, steps: str, **env: str) -> ForkedProcess:
        return spawn_forked(self.script, str(self.db), str(self.gate), steps, env=env)

    def lil(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return lil_forked(*args, "--db", str(self.db), env={**os.environ, **(env or {})})

    def ok(self, *args: str) -> str:
        r = self.lil(*args)
        assert r.returncode == 0, r.stderr
        return r.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--json"))

    def rows(self, goal: str = "live") -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(self.db)
        try:
            (table,) = conn.execute("SELECT journal_table FROM goals WHERE goal = ?", (goal,))
            return conn.execute(
                f'SELECT key, status, attempt, duration_ms FROM "{table[0]}" ORDER BY rowid'
            ).fetchall()
        finally:
            conn.close()

    def wait_until_running(self, key: str, proc: ForkedProcess) -> dict[str, Any]:
        """Wait until another process (lil) sees ``key`` in flight; return ``lil runs``'s run.

        The file is read here (sqlite3) until a row says ``key`` is running, and only then
        is ``lil runs`` asked, until it agrees: each ``lil`` is a fresh interpreter (about
        0.13 s of CPU), and asking it every 0.1 s from the start cost about ten a wait.
        """
        deadline = time.monotonic() + 30
        while not self.shows_running(key):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, f"{key} never showed as in flight"
            time.sleep(0.02)
        while True:
            assert proc.poll() is None, proc.communicate()
            if self.db.exists():
                r = self.lil("runs", "--json")
                if r.returncode == 0:
                    for run in json.loads(r.stdout):
                        if any(f["key"] == key and f["live"] for f in run["in_flight"]):
                            return dict(run)
            assert time.monotonic() < deadline, f"{key} never showed as in flight"
            time.sleep(0.1)

    def shows_running(self, key: str) -> bool:
        """Whether a row of any goal in the file says ``key`` is running (read-only)."""
        if not self.db.exists():
            return False
        try:
            conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
        except sqlite3.Error:
            return False
        try:
            tables = [t for (t,) in conn.execute("SELECT journal_table FROM goals")]
            return any(
                conn.execute(
                    f'SELECT 1 FROM "{table}" WHERE key = ? AND status = ?', (key, "running")
                ).fetchone()
                for table in tables
            )
        except sqlite3.Error:  # not made yet, or busy: look again
            return False
        finally:
            conn.close()


def ended(
    proc: ForkedProcess | subprocess.Popen[Any], timeout: float, after: str
) -> tuple[Any, Any]:
    """``proc``'s output once it has ended, within ``timeout`` seconds of ``after``.

    One still running then is SIGKILLed and reaped (the session's check of leftover
    children would fail too, and say less), and the test fails saying whether it had
    SIGINT ignored or blocked: a child that inherited either ignores a Ctrl-C.
    """
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        how = sigint_state(proc.pid)
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"pid {proc.pid} still ran {timeout} s after {after} ({how}): {out!r} {err!r}")


def sigint_state(pid: int) -> str:
    """Whether process ``pid`` has SIGINT ignored or blocked (either: a Ctrl-C does nothing)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return "its state unknown"
    masks = dict(ln.split(":\t", 1) for ln in status.splitlines() if ln.startswith("Sig"))
    bit = 1 << (signal.SIGINT - 1)
    kinds = (("ignored", "SigIgn"), ("blocked", "SigBlk"))
    found = [w for w, k in kinds if int(masks[k], 16) & bit]
    return "SIGINT " + (" and ".join(found) or "neither ignored nor blocked")


def read_line(proc: ForkedProcess) -> str:
    assert proc.stdout is not None
    return proc.stdout.readline().strip()


class TestAStepInFlightForMoreThanASecond:
    def test_other_processes_see_its_key_start_and_attempt(self, tmp_path: Path) -> None:
        live = Live(tmp_path)
        child = live.spawn("fetch,slow")
        try:
            run = live.wait_until_running("slow", child)
            (flight,) = run["in_flight"]
            assert flight["live"] is True and flight["attempt"] == 1
            assert flight["started_at"].endswith("+00:00")
            assert run["state"] == "running" and run["steps_done"] == 1
            runs = live.ok("runs")
            assert "  └ in step 'slow' for " in runs
            shown = live.ok("show", "live")
            assert "now       in step 'slow' for " in shown and "(attempt 1)" in shown
            assert "running   for " in shown
            row = next(ln.split() for ln in shown.splitlines() if ln.startswith("2 "))
            assert row[1:4] == ["slow", "step", "running"] and row[5].endswith("…")
            step = live.ok("show", "live", "--step", "slow")
            assert "status    running, attempt 1" in step and "not yet: running for" in step
        finally:
            live.gate.touch()
            _, err = ended(child, 30, "its gate opened")
            assert child.returncode == 0, err
        assert [r[:3] for r in live.rows()] == [("fetch", "done", 1), ("slow", "done", 1)]

    def test_a_run_that_is_followed_shows_the_step_once_it_is_visible(self, tmp_path: Path) -> None:
        live = Live(tmp_path)
        child = live.spawn("fetch,slow,after")
        try:
            live.wait_until_running("slow", child)
            argv = ["show", "live", "--follow", "--interval", "0.1", "--db", str(live.db)]
            follow = spawn_forked(LIL_ENTRY, *argv)
            first = read_line(follow)
            assert "running" in first and "now: slow (since " in first
        finally:
            live.gate.touch()
        out, err = ended(follow, 60, "the gate opened")
        ended(child, 30, "the gate opened")
        assert child.returncode == 0
        assert follow.returncode == 0, err
        last = out.strip().splitlines()[-1]
        assert "completed" in last and "now:" not in last and "last: after" in last

    def test_a_fast_step_adds_no_commit(self, db: Path) -> None:
        with Journal("fast", path=db) as j:
            j.step("warm", int, "1")
            before = sqlite_store(j).conn.total_changes
            for i in range(200):
                j.step("n", int, str(i))
            # one row written per step: no 'running' row, no second write
            assert sqlite_store(j).conn.total_changes - before == 200

    def test_one_thread_watches_every_journal_and_ends_when_none_is_open(self, db: Path) -> None:
        def watchers() -> list[threading.Thread]:
            return [t for t in threading.enumerate() if t.name.startswith("letitloop-inflight")]

        for run in range(20):  # many short runs: still one thread for the process
            with Journal("idle", run=f"r{run}", path=db) as j:
                j.step("one", time.sleep, 0)
            assert len(watchers()) == 1
        deadline = time.monotonic() + 10
        while watchers() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert watchers() == []  # no journal open: it ended by itself
        with Journal("idle", run="again", path=db) as j:
            j.step("two", time.sleep, 0)
            assert len(watchers()) == 1  # the next step started a new one

    def test_an_async_step_is_visible_too(self, db: Path) -> None:
        def running() -> list[Any]:
            conn = sqlite3.connect(db)
            try:
                return conn.execute(
                    "SELECT key, status, attempt FROM journal_a WHERE status = 'running'"
                ).fetchall()
            finally:
                conn.close()

        async def slow() -> list[Any]:
            # The loop is free: the watch thread, not it, writes the row once the step has
            # been in flight for a second (inflight.VISIBLE_AFTER); waited for, not slept.
            deadline = time.monotonic() + 30
            while not running() and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            return running()

        async def main() -> list[Any]:
            async with Journal("a", path=db) as j:
                return await j.async_step("slow", slow)

        assert asyncio.run(main()) == [("slow", "running", 1)]
        assert running() == []  # its done row replaced it

    def test_a_step_that_fails_after_being_visible_keeps_its_failed_row(
        self, tmp_path: Path
    ) -> None:
        live = Live(tmp_path)
        child = live.spawn("slow", FAIL_AT="slow")
        live.wait_until_running("slow", child)
        live.gate.touch()
        ended(child, 30, "its gate opened")
        (row,) = live.rows()
        assert row[:3] == ("slow", "failed", 1)
        assert "failed" in live.ok("show", "live")


class TestTheRunningRowNeverHidesAFinishedOne:
    """The one statement the watch thread writes, tried against each row it may meet."""

    # The statement writes the goal's compact table (since 0011): run R is run key 99,
    # times are integer microseconds.
    def _table(self, db: Path) -> str:
        with Journal("g", path=db) as j:
            j.step("done", int, "1")
            return f"_{j.table}"

    def _upsert(self, db: Path, table: str, key: str, attempt: int, started: float) -> None:
        conn = sqlite3.connect(db)
        try:
            conn.execute(
                RUNNING_UPSERT.format(table=table),
                (99, key, "m.f", utc_us(started), 1_500_000, attempt, "fp"),
            )
            conn.commit()
        finally:
            conn.close()

    def _insert(self, db: Path, table: str, key: str, status: str, attempt: int, t: float) -> None:
        conn = sqlite3.connect(db)
        try:
            conn.execute(
                f'INSERT INTO "{table}" (run, key, kind, status, started, attempt) '
                f"VALUES (99, ?, 'step', ?, ?, ?)",
                (key, status, utc_us(t), attempt),
            )
            conn.commit()
        finally:
            conn.close()

    def _status(self, db: Path, table: str, key: str) -> tuple[str, int]:
        conn = sqlite3.connect(db)
        try:
            row = conn.execute(
                f'SELECT status, attempt FROM "{table}" WHERE run = 99 AND key = ?', (key,)
            ).fetchone()
            return (str(row[0]), int(row[1]))
        finally:
            conn.close()

    def test_a_done_row_stays_done(self, db: Path) -> None:
        table, t = self._table(db), time.time()
        self._insert(db, table, "k", "done", 2, t)
        self._upsert(db, table, "k", 2, t)  # the watcher, just after the step's own commit
        self._upsert(db, table, "k", 3, t + 5)  # even from a later attempt
        assert self._status(db, table, "k") == ("done", 2)

    def test_the_same_calls_failed_row_stays_failed(self, db: Path) -> None:
        table, t = self._table(db), time.time()
        self._insert(db, table, "k", "failed", 2, t)
        self._upsert(db, table, "k", 2, t)
        assert self._status(db, table, "k") == ("failed", 2)

    def test_an_earlier_attempts_failed_row_is_replaced_by_the_retry_in_flight(
        self, db: Path
    ) -> None:
        table, t = self._table(db), time.time()
        self._insert(db, table, "k", "failed", 1, t)
        self._upsert(db, table, "k", 2, t + 5)
        assert self._status(db, table, "k") == ("running", 2)
        self._upsert(db, table, "k", 2, t + 5)  # the heartbeat rewrites its own row
        assert self._status(db, table, "k") == ("running", 2)


class TestARunThatCrashed:
    def test_it_says_in_which_step_it_died_and_for_how_long_at_least(self, tmp_path: Path) -> None:
        live = Live(tmp_path)
        child = live.spawn("fetch,slow,after")
        live.wait_until_running("slow", child)
        os.kill(child.pid, signal.SIGKILL)
        child.communicate()
        (run,) = live.json("runs")
        assert run["state"] == "crashed"
        assert run["in_flight"][0]["key"] == "slow" and run["in_flight"][0]["live"] is False
        assert run["duration_s"] >= 1.0  # not the few ms its open took: its last sign of life
        runs = live.ok("runs")
        assert "  └ attempt 1 died in step 'slow' after at least " in runs
        shown = live.ok("show", "live")
        assert "died in step 'slow' after at least" in shown.splitlines()[2]
        row = next(ln.split() for ln in shown.splitlines() if ln.startswith("2 "))
        assert row[1:4] == ["slow", "step", "interrupted"] and row[5].startswith("≥")
        assert "    1  " in shown and "— died in step 'slow' after at least" in shown
        # the next attempt runs it again and its row replaces the interrupted one
        live.gate.touch()
        again = live.spawn("fetch,slow,after")
        ended(again, 30, "it started with the gate open")
        assert again.returncode == 0
        assert [r[:3] for r in live.rows()] == [
            ("fetch", "done", 1),
            ("slow", "done", 2),
            ("after", "done", 2),
        ]
        shown = live.ok("show", "live")
        # attempt 1 left no row of its own (the retry replaced it), and the file keeps
        # no ending per attempt: it says what is known rather than guess
        assert "— ended without closing the run, which the next attempt resumed" in shown
        assert "    2  " in shown and "— completed" in shown

    def test_an_earlier_attempts_error_is_not_shown_as_the_cause(self, tmp_path: Path) -> None:
        live = Live(tmp_path)
        first = live.spawn("fetch,slow")
        live.wait_until_running("slow", first)
        first.send_signal(signal.SIGINT)  # KeyboardInterrupt: attempt 1 fails with it
        ended(first, 30, "SIGINT")
        second = live.spawn("fetch,slow")
        live.wait_until_running("slow", second)
        os.kill(second.pid, signal.SIGKILL)  # attempt 2 dies
        second.communicate()
        (run,) = live.json("runs")
        assert run["state"] == "crashed" and run["error"].startswith("KeyboardInterrupt")
        assert run["error_is_earlier"] is True
        note = next(ln for ln in live.ok("runs").splitlines() if "└" in ln)
        assert note.startswith("  └ attempt 2 died in step 'slow' after at least ")
        assert "; an earlier attempt failed: KeyboardInterrupt" in note
        shown = live.ok("show", "live")
        assert "error     (an earlier attempt) KeyboardInterrupt" in shown
        assert "— failed: KeyboardInterrupt" in shown  # attempt 1's own ending
        assert "— died in step 'slow' after at least" in shown  # attempt 2's


class TestFollowingARunNobodyResumes:
    def test_it_says_so_and_exits_instead_of_waiting_forever(self, tmp_path: Path) -> None:
        live = Live(tmp_path)
        child = live.spawn("fetch,slow")
        live.wait_until_running("slow", child)
        os.kill(child.pid, signal.SIGKILL)
        child.communicate()
        r = live.lil("show", "live", "--follow", "--interval", "0.1")
        assert r.returncode == 1, r.stderr
        last = r.stdout.strip().splitlines()[-1]
        assert "crashed (attempt 1 died in step 'slow'" in last
        assert "nothing is resuming it" in last and "lil show " in last
        records = [
            json.loads(ln)
            for ln in live.lil("show", "live", "--follow", "--json").stdout.splitlines()
        ]
        assert records[-1]["state"] == "crashed" and records[-1]["waiting_for"] is None

    def test_a_pending_fork_is_said_to_be_unopened(self, tmp_path: Path) -> None:
        live = Live(tmp_path)
        live.gate.touch()
        assert live.spawn("a,b").wait(timeout=30) == 0
        (run,) = live.json("runs")
        fork = json.loads(live.ok("fork", run["id"], "--from-step", "b", "--json"))
        r = live.lil("show", fork["run"]["id"], "--follow")
        assert r.returncode == 1
        assert "is a fork that no process has opened" in r.stdout

    def test_a_failed_run_ends_the_follow_with_status_1_and_its_error(self, tmp_path: Path) -> None:
        live = Live(tmp_path)
        live.gate.touch()
        assert live.spawn("a,b", FAIL_AT="b").wait(timeout=30) == 1
        r = live.lil("show", "live", "--follow")
        assert r.returncode == 1
        assert "failed: RuntimeError: b failed on purpose" in r.stdout


def on_a_terminal_for(argv: list[str], seconds: float) -> str:
    """What ``lil ARGV`` writes to a pseudo-terminal until ``seconds`` after it first wrote
    (then Ctrl-C; after 60 s if it writes nothing), as text. Counted from its first
    output, not its start: a loaded machine may take seconds to start it. One that does
    not stop at the Ctrl-C fails the test (killed if it runs on 30 s after it)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "letitloop", *argv],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env={**os.environ, "COLUMNS": "160"},
    )
    os.close(follower)
    chunks: list[bytes] = []
    stop_at, ctrl_c = time.monotonic() + 60, ""  # once sent: how it took SIGINT then
    try:
        while True:
            if not ctrl_c and time.monotonic() > stop_at:
                ctrl_c = sigint_state(proc.pid)
                proc.send_signal(signal.SIGINT)
            elif ctrl_c and time.monotonic() > stop_at + 30:
                proc.kill()
                break
            ready, _, _ = select.select([leader], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # EIO: every writer closed the terminal
                    break
                if not chunk:
                    break
                if not chunks:
                    stop_at = min(stop_at, time.monotonic() + seconds)
                chunks.append(chunk)
            elif proc.poll() is not None:
                chunks += left_on_terminal(leader)
                break
    finally:
        os.close(leader)
        ended(proc, 60, "its terminal closed")
    text = b"".join(chunks).decode("utf-8")
    # Sent a Ctrl-C, it ends by it (130, or click's 1): not killed, nor run on to its own end.
    stopped = not ctrl_c or proc.returncode not in (0, -signal.SIGKILL)
    assert stopped, f"lil {argv[0]} did not stop at Ctrl-C ({ctrl_c}): {text!r}"
    return text


class TestOnATerminal:
    def test_a_step_in_flight_shows_with_its_colour_and_key(self, tmp_path: Path) -> None:
        live = Live(tmp_path)
        child = live.spawn("fetch,slow")
        try:
            live.wait_until_running("slow", child)
            out = on_a_terminal_for(["show", "live", "--db", str(live.db)], 30)
            assert "\x1b[34mrunning" in out  # blue, as a running run
            assert "now       in step 'slow' for " in out
            runs = on_a_terminal_for(["runs", "--db", str(live.db)], 30)
            assert "└ in step 'slow' for " in runs
        finally:
            live.gate.touch()
            ended(child, 30, "its gate opened")
        assert child.returncode == 0

    def test_follow_redraws_only_when_what_it_shows_changed(self, tmp_path: Path) -> None:
        # A crashed run whose watcher waits 30 s to restart it: nothing moves meanwhile.
        db, flag = tmp_path / "journal.db", tmp_path / "flag"
        script = tmp_path / "job.py"
        script.write_text(
            textwrap.dedent(
                """
                import os, signal, sys
                from letitloop import Journal
                with Journal("job", path=sys.argv[1]) as j:
                    j.step("a", int, "1")
                    if not os.path.exists(sys.argv[2]):
                        open(sys.argv[2], "w").close()
                        os.kill(os.getpid(), signal.SIGKILL)
                """
            ),
            encoding="utf-8",
        )
        watch = spawn_forked(
            LIL_ENTRY, "watch", "--db", str(db), "--backoff", "30", str(script), str(db), str(flag)
        )
        try:
            deadline = time.monotonic() + 30
            while "restart" not in _events(db):
                assert time.monotonic() < deadline and watch.poll() is None
                time.sleep(0.05)
            out = on_a_terminal_for(
                ["show", "job", "--follow", "--interval", "0.1", "--db", str(db)], 1.5
            )
        finally:
            watch.send_signal(signal.SIGTERM)
            ended(watch, 60, "SIGTERM")
        assert out.count("\x1b[2J") == 1  # about 15 refreshes, one drawing
        assert "crashed" in out and "waiting for lil watch " in out


def _events(db: Path) -> str:
    if not db.exists():
        return ""
    conn = sqlite3.connect(db)
    try:
        return " ".join(e for (e,) in conn.execute("SELECT event FROM supervisor_events"))
    except sqlite3.Error:
        return ""
    finally:
        conn.close()
