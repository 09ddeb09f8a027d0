"""Waiting for outside input: wait_for, answered by lil send / letitloop.send."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import lil_forked
from primitives_lab import CLOCK, Lab

import letitloop
from letitloop import (
    Journal,
    RunWaiting,
    WaitTimeoutError,
    async_wait_for,
    durable,
    durable_async,
    wait_for,
)
from letitloop.errors import JournalFileError, NotWaitingError, RunNotFoundError
from letitloop.inspection import open_journal_file
from letitloop.supervision.control import send_text


def wait_rows(db: Path, table: str = "journal_g") -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(
            f"SELECT key, kind, status, result, error, attempt FROM {table} "
            f"WHERE kind = 'wait' ORDER BY rowid"
        ).fetchall()
    finally:
        conn.close()


def run_status(db: Path) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        return [s for (s,) in conn.execute("SELECT status FROM runs ORDER BY rowid")]
    finally:
        conn.close()


def send_when_waiting(db: Path, name: str, value: Any) -> threading.Thread:
    """Send ``value`` from another thread (its own connection) once the run waits for it."""

    def sender() -> None:
        while True:
            try:
                letitloop.send("g", name, value, path=db)
                return
            except (NotWaitingError, RunNotFoundError, JournalFileError):
                pass  # no journal, no run, or not waiting yet
            threading.Event().wait(0.01)

    t = threading.Thread(target=sender)
    t.start()
    return t


class TestAValueSentToAWait:
    def test_it_comes_back_from_wait_for_with_its_type_and_is_journaled(self, db: Path) -> None:
        when = dt.datetime(2026, 11, 30, 8, tzinfo=dt.timezone.utc)
        sender = send_when_waiting(db, "approval", {"ok": True, "at": when})
        with Journal("g", path=db) as j:
            assert j.wait_for("approval") == {"ok": True, "at": when}
        sender.join()
        ((key, kind, status, result, error, attempt),) = wait_rows(db)
        assert (key, kind, status, error, attempt) == ("approval", "wait", "done", None, 1)
        assert '"ok":true' in result  # the value as JSON text, like a step's result

    def test_a_resumed_run_replays_it_without_waiting(self, db: Path) -> None:
        sender = send_when_waiting(db, "approval", "yes")
        with Journal("g", run="r", path=db) as j:
            j.wait_for("approval")
        sender.join()
        with Journal("g", run="r", path=db) as j:  # nobody sends again: only a replay returns
            assert j.wait_for("approval") == "yes"

    def test_a_second_value_gets_a_clear_answer(self, db: Path) -> None:
        sender = send_when_waiting(db, "approval", "yes")
        with Journal("g", path=db) as j:
            j.wait_for("approval")
        sender.join()
        with pytest.raises(NotWaitingError, match="already received a value for 'approval'"):
            letitloop.send("g", "approval", "again", path=db)
        assert json.loads(wait_rows(db)[0][3]) == "yes"

    def test_a_value_for_a_name_the_run_does_not_wait_for_gets_a_clear_answer(
        self, db: Path
    ) -> None:
        with Journal("g", path=db) as j:
            j.step("s", str, 1)
            with pytest.raises(NotWaitingError, match=r"not waiting for 'approval'.*anything"):
                letitloop.send(j.run_id, "approval", True, path=db)
        with pytest.raises(NotWaitingError, match="is completed: it waits for nothing"):
            letitloop.send("g", "approval", True, path=db)
        with pytest.raises(RunNotFoundError, match="no run or goal 'nope'"):
            letitloop.send("nope", "approval", True, path=db)

    def test_repeated_waits_are_numbered_and_each_takes_its_own_value(self, db: Path) -> None:
        got = []
        with Journal("g", path=db) as j:
            for value in ("first", "second"):
                sender = send_when_waiting(db, "review", value)
                got.append(j.wait_for("review"))
                sender.join()
        assert got == ["first", "second"]
        assert [r[0] for r in wait_rows(db)] == ["review", "review#2"]

    def test_the_free_functions_wait_in_the_current_journal(self, db: Path) -> None:
        @durable(goal_id="g", path=db)
        def job() -> Any:
            return wait_for("a")

        @durable_async(goal_id="g", path=db)
        async def ajob() -> Any:
            return await async_wait_for("b")

        sender = send_when_waiting(db, "a", 1)
        assert job() == 1
        sender.join()
        sender = send_when_waiting(db, "b", 2)
        assert asyncio.run(ajob()) == 2
        sender.join()

    def test_an_async_wait_lets_the_loop_run_meanwhile(self, db: Path) -> None:
        ticks: list[int] = []

        async def ticker() -> None:
            for i in range(5):
                ticks.append(i)
                await asyncio.sleep(0.01)

        async def main() -> Any:
            async with Journal("g", path=db) as j:
                sender = send_when_waiting(db, "go", "now")
                value, _ = await asyncio.gather(j.async_wait_for("go"), ticker())
                await asyncio.to_thread(sender.join)
                return value

        assert asyncio.run(main()) == "now"
        assert ticks == [0, 1, 2, 3, 4]


class TestAWaitWithATimeout:
    def test_it_raises_when_no_value_came_and_the_timeout_is_recorded_and_replayed(
        self, db: Path
    ) -> None:
        now = [1000.0]

        def clock() -> float:
            now[0] += 1
            return now[0]

        with Journal("g", run="r", path=db, clock=clock) as j:
            with pytest.raises(WaitTimeoutError, match="no value was sent for 'approval'"):
                j.wait_for("approval", timeout=5)
            j.step("after", str, 1)  # the run goes on, having decided what a timeout means
        ((_, _, status, result, error, _),) = wait_rows(db)
        assert (status, result) == ("done", None) and error.startswith("WaitTimeoutError")
        with Journal("g", run="r", path=db) as j, pytest.raises(TimeoutError):
            j.wait_for("approval", timeout=5)  # at once: the timeout is part of the run
        with pytest.raises(NotWaitingError, match="timed out"):
            letitloop.send("g", "approval", "late", path=db)


class TestAProcessThatStopsWaiting:
    def test_stop_after_leaves_the_run_waiting_and_the_next_open_resumes_it(self, db: Path) -> None:
        with pytest.raises(RunWaiting) as stopped, Journal("g", path=db) as j:
            j.step("plan", str, 1)
            j.wait_for("approval", stop_after=0)
        assert stopped.value.code == 75 and isinstance(stopped.value, SystemExit)
        assert run_status(db) == ["waiting"]
        assert wait_rows(db)[0][2] == "waiting"
        letitloop.send("g", "approval", {"approved": True}, path=db)
        with Journal("g", path=db) as j:  # an unnamed opener resumes a waiting run
            assert j.attempt == 2
            assert j.wait_for("approval", stop_after=0) == {"approved": True}
        assert run_status(db) == ["completed"]


CHILD = (
    """
import asyncio, os, sys
from letitloop import Journal

db, log, clock_file, mode = sys.argv[1:5]
stop_after = float(sys.argv[5]) if len(sys.argv) > 5 else None
"""
    + CLOCK
    + """
def note(*words):
    with open(log, "a") as f:
        f.write(" ".join(map(str, words)) + "\\n")

if mode == "sync":
    with Journal("w", run="r", path=db, clock=clock) as j:
        note("waiting", os.getpid())
        note("got", repr(j.wait_for("approval", stop_after=stop_after)), os.getpid())
else:
    async def main():
        async with Journal("w", run="r", path=db, clock=clock) as j:
            note("waiting", os.getpid())
            value = await j.async_wait_for("approval", stop_after=stop_after)
            note("got", repr(value), os.getpid())
    asyncio.run(main())
"""
)


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    made = Lab(tmp_path, CHILD)
    yield made
    made.close()


def lil(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``lil --db DB ARGS`` as a process of its own, forked (helpers.lil_forked): what it
    prints and writes is what these tests check, not the entry point's start."""
    return lil_forked("--db", str(db), *args)


def error_line(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("Error: ")
    return line


class TestAWaitingProcessKilled:
    @pytest.mark.parametrize("mode", ["sync", "async"])
    @pytest.mark.parametrize("when", ["before the value came", "right after it came"])
    def test_the_next_attempt_gets_the_value_sent_without_waiting(
        self, lab: Lab, mode: str, when: str
    ) -> None:
        first = lab.spawn(mode)
        lab.until(
            "waiting",
            lambda: lab.sql("SELECT status FROM journal_w WHERE key = 'approval'"),
            first,
        )
        if when == "before the value came":
            os.kill(first.pid, signal.SIGKILL)
            first.communicate()
            letitloop.send("w", "approval", [1, "two"], path=lab.db)
        else:
            letitloop.send("w", "approval", [1, "two"], path=lab.db)
            os.kill(first.pid, signal.SIGKILL)
            first.communicate()
        assert lab.sql("SELECT status, result FROM journal_w") == [("done", '[1,"two"]')]
        second = lab.spawn(mode, "0")  # stop_after=0: only a replay gets the value
        _, err = second.communicate(timeout=30)
        assert second.returncode == 0, err
        assert lab.lines("got")[-1] == ["got", "[1,", "'two']", str(second.pid)]
        assert lab.sql("SELECT status FROM runs") == [("completed",)]

    @pytest.mark.parametrize("mode", ["sync", "async"])
    def test_a_run_stopped_to_wait_is_listed_waiting_and_resumes_after_lil_send(
        self, lab: Lab, mode: str
    ) -> None:
        first = lab.spawn(mode, "0")
        _, err = first.communicate(timeout=30)
        assert first.returncode == 75, err
        assert "stopped to wait for 'approval'; send it with: lil send" in err
        assert "Traceback" not in err
        listed = json.loads(lil(lab.db, "runs", "--json").stdout)
        assert [(r["state"], r["pauses"][0]["key"]) for r in listed] == [("waiting", "approval")]
        sent = lil(lab.db, "send", "w", "approval", '{"approved": true}')
        assert sent.returncode == 0, sent.stderr
        assert "no process holds the run: run its program again" in sent.stdout
        second = lab.spawn(mode, "0")
        _, err = second.communicate(timeout=30)
        assert second.returncode == 0, err
        assert lab.lines("got")[-1][1:3] == ["{'approved':", "True}"]
        assert lab.sql("SELECT status, attempts FROM runs") == [("completed", 2)]


class TestLilSend:
    @pytest.fixture
    def waiting(self, tmp_path: Path) -> Path:
        """A journal with run 'r' of goal 'g' stopped to wait for 'approval'."""
        db = tmp_path / "journal.db"
        with pytest.raises(RunWaiting), Journal("g", run="r", path=db) as j:
            j.wait_for("approval", stop_after=0)
        return db

    def test_it_takes_the_value_from_a_file_or_stdin(self, waiting: Path, tmp_path: Path) -> None:
        (tmp_path / "v.json").write_text('{"n": 1}')
        assert (
            lil(waiting, "send", "r", "approval", "--file", str(tmp_path / "v.json")).returncode
            == 0
        )
        with Journal("g", run="r", path=waiting) as j:
            assert j.wait_for("approval") == {"n": 1}

    def test_json_output_names_the_run_and_key(self, waiting: Path) -> None:
        out = lil(waiting, "send", "g", "approval", "1", "--json")
        assert json.loads(out.stdout) == {
            "run": json.loads(lil(waiting, "runs", "--json").stdout)[0]["id"],
            "goal": "g",
            "key": "approval",
            "live": False,
        }

    @pytest.mark.parametrize(
        ("args", "says"),
        [
            (("nope", "approval", "1"), "no run or goal 'nope'"),
            (("g", "review", "1"), "is not waiting for 'review': it waits for 'approval'"),
            (("g", "approval", "yes"), "expected the value as JSON"),
            (("g", "approval", "{"), "expected the value as JSON"),
            (("g", "approval"), "expected a VALUE or --file PATH"),
        ],
    )
    def test_bad_input_is_one_line_and_sends_nothing(
        self, waiting: Path, args: tuple[str, ...], says: str
    ) -> None:
        r = lil(waiting, "send", *args)
        if "VALUE or --file" in says:  # a usage error: click prints the usage first
            assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr
        else:
            assert says in error_line(r)
        assert wait_rows(waiting)[0][2] == "waiting"

    def test_a_value_sent_twice_is_refused_the_second_time(self, waiting: Path) -> None:
        assert lil(waiting, "send", "r", "approval", "true").returncode == 0
        line = error_line(lil(waiting, "send", "r", "approval", "false"))
        assert "already received a value for 'approval'" in line
        assert json.loads(wait_rows(waiting)[0][3]) is True

    def test_lil_show_says_how_to_send_it(self, waiting: Path) -> None:
        out = lil(waiting, "show", "g").stdout
        assert "waiting   for 'approval' since" in out
        assert "send it: lil send " in out and " approval VALUE" in out


class TestADeadlineThatPassed:
    """A wait's deadline (``timeout=``) is enforced by ``lil send`` too, under the write lock;
    a value and a timeout that meet at the deadline never both win, and none is lost."""

    @pytest.fixture
    def past(self, tmp_path: Path) -> Path:
        """Run 'r' of goal 'g' stopped to wait for 'approval', whose deadline passed long ago."""
        db = tmp_path / "journal.db"
        with (
            pytest.raises(RunWaiting),
            Journal("g", run="r", path=db, clock=lambda: 1_000_000_000.0) as j,
        ):
            j.wait_for("approval", timeout=60, stop_after=0)  # deadline 2001-09-09T01:47:40Z
        return db

    def test_lil_send_after_the_deadline_is_refused_and_writes_nothing(self, past: Path) -> None:
        line = error_line(lil(past, "send", "r", "approval", "true"))
        assert "is not waiting for 'approval': its wait 'approval' timed out at " in line
        assert "2001-09-09T01:47:40" in line and "WaitTimeoutError" in line
        assert wait_rows(past)[0][2:5] == ("waiting", None, None)

    def test_the_resumed_run_then_raises_wait_timeout_error(self, past: Path) -> None:
        assert lil(past, "send", "r", "approval", "true").returncode == 1
        with Journal("g", run="r", path=past) as j, pytest.raises(WaitTimeoutError):
            j.wait_for("approval", timeout=60, stop_after=0)
        ((_, _, status, result, error, _),) = wait_rows(past)
        assert (status, result) == ("done", None) and "no value was sent" in error

    def test_a_value_sent_before_the_deadline_is_taken(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        with pytest.raises(RunWaiting), Journal("g", run="r", path=db) as j:
            j.wait_for("approval", timeout=3600, stop_after=0)
        assert lil(db, "send", "r", "approval", "true").returncode == 0
        with Journal("g", run="r", path=db) as j:
            assert j.wait_for("approval", timeout=3600, stop_after=0) is True

    def test_lil_runs_and_show_say_it_timed_out_not_that_it_times_out(self, past: Path) -> None:
        for args in (("runs",), ("show", "r"), ("show", "r", "--step", "approval")):
            out = lil(past, *args).stdout
            assert "times out at" not in out, (args, out)
            assert "timed out" in out, (args, out)
        assert "send it:" not in lil(past, "runs").stdout

    def test_lil_show_follow_says_it_timed_out(self, past: Path) -> None:
        from letitloop.inspection import find_run, show_run
        from letitloop.runtext.follow import follow_line

        store = open_journal_file(past)
        try:
            line = follow_line(show_run(store, find_run(store, "r")))
        finally:
            store.close()
        assert "waiting: approval (timed out at " in line and "until" not in line, line

    def test_lil_show_follow_shows_no_deadline_for_a_wait_without_one(self, db: Path) -> None:
        from letitloop.inspection import find_run, show_run
        from letitloop.runtext.follow import follow_line

        with pytest.raises(RunWaiting), Journal("g", run="r", path=db) as j:
            j.wait_for("approval", stop_after=0)
        store = open_journal_file(db)
        try:
            line = follow_line(show_run(store, find_run(store, "r")))
        finally:
            store.close()
        assert line.endswith("waiting: approval"), line

    @pytest.mark.parametrize("mode", ["sync", "async"])
    def test_a_value_that_lands_between_the_last_look_and_the_deadline_is_returned(
        self, db: Path, mode: str
    ) -> None:
        """The waiter looked (nothing), a value was sent just before the deadline, then the
        waiter saw the deadline pass: its timeout must not overwrite the value, and it must
        read the row again and return the value."""
        start, sent = 1000.0, list[object]()

        def clock() -> float:
            if sys._getframe(1).f_code.co_name == "_left" and not sent:  # pause's deadline check
                store = open_journal_file(db, write=True)
                try:  # another connection, as lil send; its clock: just before the deadline
                    sent.append(
                        send_text(store, "r", "approval", '"yes"', clock=lambda: start + 9.5)
                    )
                finally:
                    store.close()
                return start + 11.0
            return start + 11.0 if sent else start

        with Journal("g", run="r", path=db, clock=clock) as j:
            if mode == "sync":
                got = j.wait_for("approval", timeout=10)
            else:
                got = asyncio.run(j.async_wait_for("approval", timeout=10))
        assert sent and got == "yes"
        ((_, _, status, result, error, _),) = wait_rows(db)
        assert (status, result, error) == ("done", '"yes"', None)
