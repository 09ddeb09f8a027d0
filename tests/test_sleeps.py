"""Durable sleep: the wake-up time is in the file; a restart sleeps only what remains."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import lil_forked
from primitives_lab import CLOCK, Lab

from letitloop import Journal, async_sleep, durable, durable_async, sleep
from letitloop.errors import LetItLoopError, StepMismatchError
from letitloop.primitives.clock import utc_iso
from letitloop.testing import SkippingClock


class Clock:
    """A fake clock that moves on by ``tick`` seconds each time it is read."""

    def __init__(self, start: float = 1000.0, tick: float = 1.0) -> None:
        self.now, self.tick, self.reads = start, tick, 0

    def __call__(self) -> float:
        self.reads += 1
        self.now += self.tick
        return self.now


def rows(db: Path, table: str = "journal_g") -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(
            f"SELECT key, kind, status, fn, wake_at, attempt FROM {table} ORDER BY rowid"
        ).fetchall()
    finally:
        conn.close()


class TestADurableSleep:
    def test_it_records_its_wake_up_time_when_it_starts_and_done_when_it_wakes(
        self, db: Path
    ) -> None:
        clock = Clock()
        with Journal("g", path=db, clock=clock) as j:
            before = clock.now
            j.sleep("nap", 30)
            assert clock.now >= before + 30
        ((key, kind, status, fn, wake_at, attempt),) = rows(db)
        assert (key, kind, status, fn, attempt) == ("nap", "sleep", "done", "letitloop:sleep", 1)
        assert wake_at == utc_iso(before + 1 + 30)  # the clock read when the sleep started

    def test_a_sleep_that_woke_replays_at_once(self, db: Path) -> None:
        with Journal("g", run="r", path=db, clock=SkippingClock(start=1000.0)) as j:
            j.sleep("nap", 30)  # skipped to its end, not napped through (the test above naps)
        frozen = Clock(start=0, tick=0)  # long before the wake-up time: only a replay returns
        with Journal("g", run="r", path=db, clock=frozen) as j:
            reads = frozen.reads
            j.sleep("nap", 30)
            assert frozen.reads == reads  # not one look at the clock: nothing to wait for

    def test_sleeps_are_keyed_and_numbered_like_steps(self, db: Path) -> None:
        with Journal("g", path=db, clock=Clock()) as j:
            j.sleep("nap", 1)
            j.sleep("nap", 1)
            j.step("work", str, 1)
        assert [r[:3] for r in rows(db)] == [
            ("nap", "sleep", "done"),
            ("nap#2", "sleep", "done"),
            ("work", "step", "done"),
        ]

    def test_a_step_where_a_sleep_was_recorded_is_a_mismatch(self, db: Path) -> None:
        with Journal("g", run="r", path=db, clock=Clock()) as j:
            j.sleep("nap", 1)
        with (
            pytest.raises(StepMismatchError, match=r"recorded by letitloop:sleep"),
            Journal("g", run="r", path=db) as j,
        ):
            j.step("nap", str, 1)

    @pytest.mark.parametrize("seconds", [-1, float("nan"), float("inf"), "10", None])
    def test_a_duration_that_is_not_seconds_is_refused(self, db: Path, seconds: Any) -> None:
        with (
            pytest.raises(LetItLoopError, match="sleep 'nap': seconds must be"),
            Journal("g", path=db) as j,
        ):
            j.sleep("nap", seconds)
        assert rows(db) == []

    def test_the_free_functions_sleep_in_the_current_journal(self, db: Path) -> None:
        @durable(goal_id="g", path=db)
        def job() -> None:
            sleep("nap", 0)

        @durable_async(goal_id="g", path=db)
        async def ajob() -> None:
            await async_sleep("anap", 0.01)

        job()
        asyncio.run(ajob())
        assert [r[:3] for r in rows(db)] == [("nap", "sleep", "done"), ("anap", "sleep", "done")]


CHILD = (
    """
import asyncio, os, sys
from letitloop import Journal

db, log, clock_file, mode = sys.argv[1:5]
"""
    + CLOCK
    + """
def note(*words):
    with open(log, "a") as f:
        f.write(" ".join(map(str, words)) + "\\n")

if mode == "sync":
    with Journal("s", run="r", path=db, clock=clock) as j:
        note("start", clock(), os.getpid())
        j.sleep("nap", 10)
        note("woke", clock(), os.getpid())
else:
    async def main():
        async with Journal("s", run="r", path=db, clock=clock) as j:
            note("start", clock(), os.getpid())
            await j.async_sleep("nap", 10)
            note("woke", clock(), os.getpid())
    asyncio.run(main())
"""
)


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    made = Lab(tmp_path, CHILD)
    yield made
    made.close()


class TestASleepInterruptedBySigkill:
    @pytest.mark.parametrize("mode", ["sync", "async"])
    def test_the_next_attempt_sleeps_only_what_remains_and_a_done_sleep_replays(
        self, lab: Lab, mode: str
    ) -> None:
        first = lab.spawn(mode)
        sleeping = lab.until(
            "the sleep started",
            lambda: lab.sql("SELECT status, wake_at, attempt FROM journal_s WHERE key = 'nap'"),
            first,
        )
        assert sleeping == [("sleeping", utc_iso(1010), 1)]
        lab.set_clock(1003)
        os.kill(first.pid, signal.SIGKILL)
        first.communicate()

        lab.set_clock(1005)
        second = lab.spawn(mode)
        lab.until("attempt 2", lambda: lab.sql("SELECT 1 FROM attempts WHERE attempt = 2"), second)
        time.sleep(0.3)  # a sleep that forgot its wake-up time would wake now, at t=1005
        assert lab.lines("woke") == []
        lab.set_clock(1010)  # from zero it would sleep until 1015
        woke = lab.until("the sleep woke at its wake-up time", lambda: lab.lines("woke"), second)
        assert woke == [["woke", "1010.0", str(second.pid)]]
        _, err = second.communicate(timeout=30)
        assert second.returncode == 0, err
        assert lab.sql("SELECT status, wake_at, attempt FROM journal_s") == [
            ("done", utc_iso(1010), 2)
        ]

        lab.set_clock(1000)  # before the wake-up time: only a replay gets through
        third = lab.spawn(mode)
        _, err = third.communicate(timeout=30)
        assert third.returncode == 0, err
        assert lab.lines("woke")[-1] == ["woke", "1000.0", str(third.pid)]

    def test_lil_show_and_runs_say_sleeping_until(self, lab: Lab) -> None:
        child = lab.spawn("sync")
        lab.until("sleeping", lambda: lab.sql("SELECT 1 FROM journal_s"), child)
        shown, listed = (
            lil_forked("--db", str(lab.db), *args) for args in (("show", "s"), ("runs",))
        )
        os.kill(child.pid, signal.SIGKILL)
        child.communicate()
        assert shown.returncode == 0 and listed.returncode == 0, shown.stderr + listed.stderr
        assert "sleeping  in 'nap' until 1970-01-01" in shown.stdout
        assert "sleeping in 'nap' until 1970-01-01" in listed.stdout
