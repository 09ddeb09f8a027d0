"""Cancel: lil cancel / letitloop.cancel stop a run at its next step; nothing resumes it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import LIL_ENTRY, ForkedProcess, lil_forked, spawn_forked, write_script

import letitloop
from letitloop import Journal, RunCancelledError
from letitloop.errors import LetItLoopError, RunNotFoundError

CHILD = """
import asyncio, os, sys, time
from letitloop import Journal

db, log, mode = sys.argv[1:4]
name = sys.argv[4] if len(sys.argv) > 4 else None

def note(*words):
    with open(log, "a") as f:
        f.write(" ".join(map(str, words)) + "\\n")

def work(i):
    note("start", i, os.getpid())
    time.sleep(0.05)
    return i

async def long():
    note("start", "long", os.getpid())
    await asyncio.sleep(60)
    return "never"

if mode == "steps":
    with Journal("c", run=name, path=db) as j:
        note("open", j.run_id, os.getpid())
        for i in range(2000):
            j.step(f"s{i}", work, i)
elif mode == "sleep":
    with Journal("c", run=name, path=db) as j:
        note("open", j.run_id, os.getpid())
        j.sleep("nap", 3600)
elif mode == "wait":
    with Journal("c", run=name, path=db) as j:
        note("open", j.run_id, os.getpid())
        j.wait_for("approval")
elif mode == "park":
    with Journal("c", run=name, path=db) as j:
        note("open", j.run_id, os.getpid())
        j.wait_for("approval", stop_after=0)
else:
    async def main():
        async with Journal("c", run=name, path=db) as j:
            note("open", j.run_id, os.getpid())
            if mode == "async-step":
                await j.async_step("long", long)
            else:
                await j.async_sleep("nap", 3600)
    asyncio.run(main())
"""


class Lab:
    def __init__(self, folder: Path) -> None:
        self.db, self.log = folder / "j.db", folder / "log"
        self.script = write_script(folder, "child.py", CHILD)
        self.children: list[ForkedProcess] = []

    def spawn(self, mode: str, name: str | None = None) -> ForkedProcess:
        child = spawn_forked(
            self.script, str(self.db), str(self.log), mode, *([name] if name else [])
        )
        self.children.append(child)
        return child

    def close(self) -> None:
        for child in self.children:
            if child.poll() is None:
                child.kill()
            child.communicate()

    def lines(self, word: str) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [ln.split() for ln in self.log.read_text().splitlines() if ln.startswith(word)]

    def opened(self, child: ForkedProcess) -> str:
        """The run id ``child`` opened, once it has run a step (or begun to sleep or wait)."""
        deadline = time.monotonic() + 30
        while not any(int(ln[2]) == child.pid for ln in self.lines("open")):
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "the child never opened its run"
            time.sleep(0.02)
        time.sleep(0.1)  # into its first step, sleep or wait
        return next(ln[1] for ln in self.lines("open") if int(ln[2]) == child.pid)

    def started(self, child: ForkedProcess, step: int) -> None:
        """Wait until ``child`` has begun step ``s{step}`` (so every step before it is recorded:
        a step's row is committed before the step returns)."""
        deadline = time.monotonic() + 30
        while not any(ln[1:] == [str(step), str(child.pid)] for ln in self.lines("start")):
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, f"the child never began step s{step}"
            time.sleep(0.01)

    def run_row(self, run_id: str) -> tuple[Any, ...]:
        conn = sqlite3.connect(self.db)
        try:
            row = conn.execute(
                "SELECT status, error, cancel_requested_at, cancel_reason FROM runs WHERE id = ?",
                (run_id,),
            ).fetchone()
            return tuple(row)
        finally:
            conn.close()

    def lil(self, *args: str) -> subprocess.CompletedProcess[str]:
        return lil_forked("--db", str(self.db), *args)


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    made = Lab(tmp_path)
    yield made
    made.close()


class TestARunALiveProcessHolds:
    @pytest.mark.parametrize("mode", ["steps", "sleep", "wait", "async-step", "async-sleep"])
    def test_its_holder_gets_run_cancelled_error_and_the_run_is_cancelled(
        self, lab: Lab, mode: str
    ) -> None:
        child = lab.spawn(mode)
        run = lab.opened(child)
        cancelled = lab.lil("cancel", run, "--reason", "wrong input file")
        assert cancelled.returncode == 0, cancelled.stderr
        assert "is asked to stop" in cancelled.stdout
        _, err = child.communicate(timeout=30)
        assert child.returncode == 1
        assert (
            err.strip()
            .splitlines()[-1]
            .startswith(f"letitloop.errors.RunCancelledError: run {run}")
        )
        status, error, asked, reason = lab.run_row(run)
        assert status == "cancelled" and error.startswith("RunCancelledError: ")
        assert asked is not None and reason.endswith(": wrong input file")
        if mode == "steps":  # the step in flight returned; the next one never started
            started = [int(ln[1]) for ln in lab.lines("start")]
            conn = sqlite3.connect(lab.db)
            done = conn.execute("SELECT count(*) FROM journal_c WHERE status = 'done'").fetchone()
            conn.close()
            assert done[0] == len(started) == started[-1] + 1

    def test_wait_makes_lil_cancel_wait_for_the_holder_to_stop(self, lab: Lab) -> None:
        child = lab.spawn("sleep")
        run = lab.opened(child)
        out = lab.lil("cancel", run, "--wait", "30")
        child.communicate(timeout=30)
        assert out.returncode == 0, out.stderr
        assert f"run {run} is cancelled now" in out.stdout

    def test_a_cancel_from_another_thread_stops_a_wait_in_this_process(self, db: Path) -> None:
        with Journal("g", path=db) as j:
            t = threading.Thread(target=letitloop.cancel, args=(j.run_id,), kwargs={"path": db})
            t.start()
            with pytest.raises(RunCancelledError, match="was cancelled"):
                j.wait_for("approval")
            t.join()
            with pytest.raises(RunCancelledError):  # and every later step
                j.step("after", str, 1)
        conn = sqlite3.connect(db)
        assert conn.execute("SELECT status FROM runs").fetchone() == ("cancelled",)
        conn.close()

    def test_a_program_that_catches_it_and_exits_cleanly_still_ends_cancelled(
        self, db: Path
    ) -> None:
        with Journal("g", path=db) as j:
            letitloop.cancel(j.run_id, path=db)  # no process but this one: a request
            with pytest.raises(RunCancelledError):
                j.sleep("nap", 3600)
        conn = sqlite3.connect(db)
        assert conn.execute("SELECT status FROM runs").fetchone() == ("cancelled",)
        conn.close()


class TestARunNoProcessHolds:
    @pytest.fixture
    def crashed(self, lab: Lab) -> str:
        child = lab.spawn("steps", "nightly")
        run = lab.opened(child)
        lab.started(child, 2)  # s0 and s1 recorded, whatever the machine's load
        os.kill(child.pid, signal.SIGKILL)
        child.communicate()
        return run

    def test_it_is_cancelled_at_once(self, lab: Lab, crashed: str) -> None:
        out = lab.lil("cancel", crashed)
        assert out.returncode == 0 and "no process held it" in out.stdout, out.stderr
        assert lab.run_row(crashed)[0] == "cancelled"
        listed = json.loads(lab.lil("runs", "--json").stdout)
        assert [r["state"] for r in listed] == ["cancelled"]

    def test_no_opener_resumes_it_and_lil_fork_restarts_it(self, lab: Lab, crashed: str) -> None:
        assert lab.lil("cancel", crashed).returncode == 0
        with pytest.raises(RunCancelledError, match="lil fork"):
            Journal("c", run="nightly", path=lab.db).open()
        with Journal("c", path=lab.db) as j:  # an unnamed opener: a run of its own
            assert j.run_id != crashed and j.attempt == 1
        forked = lab.lil("fork", crashed, "--from-step", "s1", "--json")
        assert forked.returncode == 0, forked.stderr
        fork = json.loads(forked.stdout)
        assert fork["copied"] == ["s0"]  # kept from the cancelled run
        with Journal("c", run="nightly", path=lab.db) as j:  # the fork took over the name
            assert j.run_id == fork["run"]["id"] != crashed

    def test_cancelling_it_again_or_a_completed_run_is_refused(
        self, lab: Lab, crashed: str
    ) -> None:
        assert lab.lil("cancel", crashed).returncode == 0
        again = lab.lil("cancel", crashed)
        assert again.returncode == 1 and "was cancelled already" in again.stderr
        with Journal("done", path=lab.db) as j:
            j.step("s", str, 1)
        finished = lab.lil("cancel", "done")
        assert finished.returncode == 1 and "nothing left to cancel" in finished.stderr
        unknown = lab.lil("cancel", "nope")
        assert unknown.returncode == 1 and "Traceback" not in unknown.stderr
        assert unknown.stderr.strip().splitlines() == [
            ln for ln in unknown.stderr.strip().splitlines() if ln.startswith("Error: no run")
        ]

    def test_the_library_call_says_what_it_did(self, lab: Lab, crashed: str) -> None:
        done = letitloop.cancel(crashed, reason="bad data", path=lab.db)
        assert done.at_once and done.run.state == "cancelled"
        assert done.run.cancel_reason is not None and done.run.cancel_reason.endswith("bad data")
        with pytest.raises(LetItLoopError, match="cancelled already"):
            letitloop.cancel(crashed, path=lab.db)
        with pytest.raises(RunNotFoundError):
            letitloop.cancel("01NOSUCHRUN", path=lab.db)


class TestAHolderKilledDuringACancel:
    def test_the_run_stays_cancelled_and_no_opener_resumes_it(self, lab: Lab) -> None:
        child = lab.spawn("steps")
        run = lab.opened(child)
        asked = letitloop.cancel(run, path=lab.db)
        os.kill(child.pid, signal.SIGKILL)  # before it could notice
        child.communicate()
        assert not asked.at_once
        status, _, requested, _ = lab.run_row(run)
        assert requested is not None
        listed = json.loads(lab.lil("runs", "--json").stdout)
        assert [(r["id"], r["state"]) for r in listed] == [(run, "cancelled")]
        with Journal("c", path=lab.db) as j:
            assert j.run_id != run  # not resumed
        finished = letitloop.cancel(run, path=lab.db)  # now nobody holds it: marked at once
        assert finished.at_once and lab.run_row(run)[0] == "cancelled"
        assert status in ("running", "cancelled")


WATCHED = """
import sys
from letitloop import Journal
import time

db, mode = sys.argv[1], sys.argv[2]
with Journal("w", path=db) as j:
    print("opened", j.run_id, flush=True)
    if mode == "park":
        j.wait_for("approval", stop_after=0)
    for i in range(2000):
        j.step(f"s{i}", time.sleep, 0.05)
"""


class TestLilWatch:
    def test_it_does_not_restart_a_child_whose_run_was_cancelled(self, tmp_path: Path) -> None:
        db = tmp_path / "j.db"
        script = write_script(tmp_path, "watched.py", WATCHED)
        watcher = spawn_forked(
            LIL_ENTRY, "watch", "--db", str(db), "--backoff", "0.01", str(script), str(db), "steps"
        )
        try:
            assert watcher.stdout is not None
            run = watcher.stdout.readline().split()[1]
            time.sleep(0.2)
            letitloop.cancel(run, path=db)
            out, err = watcher.communicate(timeout=60)
        finally:
            if watcher.poll() is None:
                watcher.kill()
                watcher.communicate()
        assert watcher.returncode == 1, err
        assert f"not restarting: run {run} was cancelled; exit 1" in err
        assert out.count("opened") == 0  # the one start, read above; no second one
        conn = sqlite3.connect(db)
        events = [e for (e,) in conn.execute("SELECT event FROM supervisor_events ORDER BY id")]
        conn.close()
        assert events == ["start", "exit", "stop"]

    def test_it_does_not_restart_a_child_that_stopped_to_wait(self, tmp_path: Path) -> None:
        db = tmp_path / "j.db"
        script = write_script(tmp_path, "watched.py", WATCHED)
        done = lil_forked(
            "watch", "--db", str(db), "--backoff", "0.01", str(script), str(db), "park"
        )
        assert done.returncode == 75, done.stderr
        assert "stopped to wait for outside input" in done.stderr
        assert done.stdout.count("opened") == 1


def test_async_cancel_message_is_ours_only(db: Path) -> None:
    """A task cancelled by someone else stays a CancelledError, not a RunCancelledError."""

    async def main() -> None:
        async with Journal("g", path=db) as j:
            task = asyncio.ensure_future(j.async_step("long", asyncio.sleep, 60))
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(main())
