"""Schedules in one process: the ticks each policy starts, overlaps, daylight saving, bad input.

The schedulers here are ``letitloop.scheduling.scheduler.Scheduler`` objects stepped by
hand on a clock the test moves, over real journal files (and ``memory://``);
tests/test_schedule_processes.py runs them as ``lil schedules run`` processes.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim
from helpers import lil_in_process

from letitloop import Schedule, async_step, durable, durable_async, schedule, step
from letitloop.errors import MisuseError
from letitloop.scheduling.scheduler import Scheduler

UTC = timezone.utc


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


class Clock:
    """The time a test sets: seconds since the epoch, frozen between moves."""

    def __init__(self, when: str) -> None:
        self.t = at(when).timestamp()

    def __call__(self) -> float:
        return self.t

    def to(self, when: str | datetime) -> None:
        self.t = (at(when) if isinstance(when, str) else when).timestamp()


def settle(scheduler: Scheduler) -> None:
    """Wait for every run the scheduler started to end."""
    while True:
        with scheduler.lock:
            threads = list(scheduler.running.values())
        if not threads:
            return
        for thread in threads:
            thread.join(30)


def report_job(calls: list[str], gate: threading.Event | None = None) -> Callable[..., Any]:
    """A durable report whose step records each call (and waits for ``gate``, if given)."""

    def build(tick: str) -> str:
        calls.append(tick)
        if gate is not None:
            assert gate.wait(30)
        return f"report of {tick}"

    @durable(goal_id="report")
    def report(tick: datetime) -> str:
        return step("build", build, tick.isoformat())

    return report


def ticks_of(db: Path) -> list[tuple[str, str]]:
    """(tick, status) of every tick row, read from outside the scheduler."""
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT tick, status FROM schedule_ticks ORDER BY tick").fetchall()


def runs_of(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [n for (n,) in conn.execute("SELECT name FROM runs ORDER BY name")]


class TestTheTicksAMissedScheduleStarts:
    """``Schedule.due``: a scheduler that last decided at 08:00:30 looks again at 11:05:30."""

    def schedule(self, **kw: Any) -> Schedule:
        return Schedule("*/15 * * * *", report_job([]), **kw)

    def test_latest_starts_only_the_most_recent(self) -> None:
        due = self.schedule().due(at("2026-12-07T08:00:30+00:00"), at("2026-12-07T11:05:30+00:00"))
        assert due == [at("2026-12-07T11:00:00+00:00")]

    def test_all_starts_each_tick_later_than_the_window_before_now(self) -> None:
        s = self.schedule(catch_up="all", window=timedelta(hours=1))
        due = s.due(at("2026-12-07T08:00:30+00:00"), at("2026-12-07T11:05:30+00:00"))
        assert due == [at(f"2026-12-07T{t}:00+00:00") for t in ("10:15", "10:30", "10:45", "11:00")]

    def test_skip_starts_none(self) -> None:
        s = self.schedule(catch_up="skip")
        assert s.due(at("2026-12-07T08:00:30+00:00"), at("2026-12-07T11:05:30+00:00")) == []

    @pytest.mark.parametrize("catch_up", ["skip", "latest", "all"])
    def test_a_tick_seen_within_grace_is_on_time_whatever_the_policy(self, catch_up: Any) -> None:
        s = self.schedule(catch_up=catch_up, window=3600)
        due = s.due(at("2026-12-07T08:59:00+00:00"), at("2026-12-07T09:00:40+00:00"))
        assert due == [at("2026-12-07T09:00:00+00:00")]

    def test_nothing_is_due_at_or_before_the_cursor(self) -> None:
        s = self.schedule()
        assert s.due(at("2026-12-07T09:00:00+00:00"), at("2026-12-07T09:00:00+00:00")) == []
        assert s.due(at("2026-12-07T09:00:00+00:00"), at("2026-12-07T09:14:59+00:00")) == []

    def test_a_ticks_run_is_named_by_the_schedule_and_the_tick_in_utc(self) -> None:
        s = Schedule("0 9 * * *", report_job([]), tz="Europe/Paris", name="morning")
        tick = s.next_tick(at("2026-12-07T00:00:00+00:00"))
        assert tick == datetime(2026, 12, 7, 9, 0, tzinfo=ZoneInfo("Europe/Paris"))
        assert s.run_name(tick) == "morning@2026-12-07T08:00:00+00:00"


class TestOneSchedulerOnAFile:
    def test_each_tick_starts_its_run_once_and_the_function_gets_the_tick(
        self, tmp_path: Path
    ) -> None:
        db, calls = tmp_path / "j.db", list[str]()
        clock = Clock("2026-12-07T08:59:30+00:00")
        job = Schedule("*/15 * * * *", report_job(calls), tz="Europe/Paris")
        scheduler = Scheduler([job], path=db, clock=clock)
        scheduler.keep()  # started at 08:59:30
        for t in ["09:00:01", "09:00:30", "09:15:00", "09:15:20", "09:29:59", "09:30:05"]:
            clock.to(f"2026-12-07T{t}+00:00")
            scheduler.step()
            settle(scheduler)
        scheduler.close()
        ticks = [f"2026-12-07T{t}:00+00:00" for t in ("09:00", "09:15", "09:30")]
        assert ticks_of(db) == [(t, "completed") for t in ticks]
        assert runs_of(db) == [f"report@{t}" for t in ticks]
        # Called with the tick in the schedule's zone.
        assert calls == [f"2026-12-07T{h}+01:00" for h in ("10:00:00", "10:15:00", "10:30:00")]

    def test_a_new_schedule_starts_from_now_not_from_the_past(self, tmp_path: Path) -> None:
        db, calls = tmp_path / "j.db", list[str]()
        clock = Clock("2026-12-07T09:07:00+00:00")
        scheduler = Scheduler([Schedule("*/15 * * * *", report_job(calls))], path=db, clock=clock)
        scheduler.step()
        scheduler.close()
        assert ticks_of(db) == [] and calls == []


class TestWhatATicksRunIs:
    def test_an_async_durable_function_runs_as_its_tick(self, tmp_path: Path) -> None:
        db, calls = tmp_path / "j.db", list[str]()

        async def build(tick: str) -> str:
            calls.append(tick)
            return tick

        @durable_async(goal_id="report")
        async def report() -> str:
            return await async_step("build", build, "now")

        clock = Clock("2026-12-07T08:59:30+00:00")
        scheduler = Scheduler([Schedule("*/15 * * * *", report)], path=db, clock=clock)
        scheduler.keep()
        clock.to("2026-12-07T09:00:01+00:00")
        scheduler.step()
        settle(scheduler)
        scheduler.close()
        assert ticks_of(db) == [("2026-12-07T09:00:00+00:00", "completed")]
        assert calls == ["now"] and runs_of(db) == ["report@2026-12-07T09:00:00+00:00"]

    def test_a_run_that_raises_marks_its_tick_failed_and_is_not_started_again(
        self, tmp_path: Path
    ) -> None:
        db, tries = tmp_path / "j.db", list[str]()

        def flaky() -> str:
            tries.append("try")
            raise ValueError("the warehouse is closed")

        @durable(goal_id="report")
        def report() -> str:
            return step("build", flaky)

        lines: list[str] = []
        clock = Clock("2026-12-07T08:59:30+00:00")
        job = Schedule("*/15 * * * *", report)
        scheduler = Scheduler([job], path=db, clock=clock, report=lines.append)
        scheduler.keep()
        for t in ["09:00:01", "09:00:30", "09:01:00"]:
            clock.to(f"2026-12-07T{t}+00:00")
            scheduler.step()
            settle(scheduler)
        scheduler.close()
        assert ticks_of(db) == [("2026-12-07T09:00:00+00:00", "failed")]
        assert tries == ["try"]
        assert any("failed: ValueError: the warehouse is closed" in line for line in lines)


class TestOverlap:
    """Tick 09:00's run is still going when 09:15 and 09:30 come."""

    def run(self, tmp_path: Path, overlap: Any) -> tuple[Path, list[str]]:
        db, calls, gate = tmp_path / "j.db", list[str](), threading.Event()
        clock = Clock("2026-12-07T08:59:30+00:00")
        job = Schedule("*/15 * * * *", report_job(calls, gate), overlap=overlap)
        scheduler = Scheduler([job], path=db, clock=clock)
        try:
            scheduler.keep()
            for t in ["09:00:01", "09:15:01", "09:30:01"]:
                clock.to(f"2026-12-07T{t}+00:00")
                scheduler.step()
            gate.set()
            for _ in range(3):  # the queued tick starts once the going run has ended
                settle(scheduler)
                scheduler.step()
        finally:
            gate.set()
            scheduler.close()
        return db, calls

    def test_skip_records_the_later_ticks_skipped(self, tmp_path: Path) -> None:
        db, calls = self.run(tmp_path, "skip")
        assert [s for _, s in ticks_of(db)] == ["completed", "skipped", "skipped"]
        assert len(calls) == 1

    def test_queue_starts_one_tick_after_the_run_ends_and_skips_the_rest(
        self, tmp_path: Path
    ) -> None:
        db, calls = self.run(tmp_path, "queue")
        assert [s for _, s in ticks_of(db)] == ["completed", "completed", "skipped"]
        assert calls == ["2026-12-07T09:00:00+00:00", "2026-12-07T09:15:00+00:00"]

    def test_allow_starts_every_tick_beside_the_going_run(self, tmp_path: Path) -> None:
        db, calls = self.run(tmp_path, "allow")
        assert [s for _, s in ticks_of(db)] == ["completed"] * 3
        assert sorted(calls) == [f"2026-12-07T09:{m}:00+00:00" for m in ("00", "15", "30")]


class TestDaylightSaving:
    """A scheduler whose clock walks minute by minute through a night of change in Paris
    starts exactly the ticks cronsim lists for it, each once."""

    @pytest.mark.parametrize(
        ("cron", "start"),
        [
            ("30 2 * * *", "2026-03-28T22:00:00+01:00"),  # 02:30 does not exist on the 29th
            ("30 2 * * *", "2026-10-24T22:00:00+02:00"),  # 02:30 happens twice on the 25th
            ("*/30 * * * *", "2026-03-28T23:00:00+01:00"),
            ("*/30 * * * *", "2026-10-24T23:00:00+02:00"),
        ],
    )
    def test_it_starts_the_ticks_cronsim_gives(self, tmp_path: Path, cron: str, start: str) -> None:
        db, calls = tmp_path / "j.db", list[str]()
        clock = Clock(start)
        end = at(start) + timedelta(hours=30)
        scheduler = Scheduler(
            [Schedule(cron, report_job(calls), tz="Europe/Paris")], path=db, clock=clock
        )
        scheduler.keep()
        while clock.t < end.timestamp():
            clock.t += 60
            scheduler.step()
            settle(scheduler)
        scheduler.close()
        expected = []
        for tick in CronSim(cron, at(start).astimezone(ZoneInfo("Europe/Paris"))):
            if tick > end:
                break
            expected.append(tick.astimezone(UTC).isoformat())
        assert [t for t, _ in ticks_of(db)] == expected
        assert sorted(at(c).astimezone(UTC).isoformat() for c in calls) == expected
        if cron == "30 2 * * *" and start.startswith("2026-03"):
            assert expected[0] == "2026-03-29T01:00:00+00:00"  # 03:00 CEST, the first minute after
        if cron == "30 2 * * *" and start.startswith("2026-10"):
            assert expected[0] == "2026-10-25T00:30:00+00:00"  # once: 02:30 CEST, not again at CET
            assert expected[1] == "2026-10-26T01:30:00+00:00"


class TestManySchedulersInOneProcess:
    @pytest.mark.parametrize("where", ["file", "memory"])
    def test_three_schedulers_start_each_of_30_ticks_once(self, tmp_path: Path, where: str) -> None:
        location = str(tmp_path / "j.db") if where == "file" else f"memory://sched-{tmp_path.name}"
        calls: list[str] = []
        job = Schedule("* * * * *", report_job(calls))
        clock = Clock("2026-12-07T08:59:30+00:00")
        schedulers = [Scheduler([job], path=location, clock=clock) for _ in range(3)]
        for s in schedulers:
            s.keep()
        for minute in range(30):
            clock.to(at("2026-12-07T09:00:01+00:00") + timedelta(minutes=minute))
            stepping = [threading.Thread(target=s.step) for s in schedulers]
            for t in stepping:
                t.start()
            for t in stepping:
                t.join()
            for s in schedulers:
                settle(s)
        from letitloop.inspection import open_inspector

        reader = open_inspector(location)
        try:
            _, ticks = reader.schedule_rows()
        finally:
            reader.close()
        for s in schedulers:
            s.close()
        assert sorted(calls) == sorted(set(calls)) and len(calls) == 30
        assert len(ticks) == 30 and {t[3] for t in ticks} == {"completed"}


class TestBadScheduleArguments:
    @pytest.mark.parametrize(
        ("kwargs", "words"),
        [
            ({"cron": "*/15 * * *"}, "five fields"),
            ({"tz": "Mars/Olympus"}, "IANA time zone"),
            ({"catch_up": "every"}, "catch_up= expects one of skip, latest, all"),
            ({"catch_up": "all"}, "needs window="),
            ({"overlap": "never"}, "overlap= expects one of skip, queue, allow"),
            ({"window": -5}, "positive number of seconds"),
        ],
    )
    def test_each_is_refused_at_decoration_with_what_to_pass(
        self, kwargs: dict[str, Any], words: str
    ) -> None:
        cron = kwargs.pop("cron", "*/15 * * * *")
        with pytest.raises(MisuseError, match=words.replace("(", r"\(").replace("=", "=")):
            schedule(cron, **kwargs)(report_job([]))

    def test_a_function_that_is_not_durable_is_refused(self) -> None:
        with pytest.raises(MisuseError, match="@durable"):
            schedule("* * * * *")(lambda: None)

    def test_a_function_with_two_required_parameters_is_refused(self) -> None:
        @durable(goal_id="two")
        def two(a: int, b: int) -> int:
            return a + b

        with pytest.raises(MisuseError, match="no argument or with its tick"):
            schedule("* * * * *")(two)


class TestLilSchedules:
    def test_it_lists_each_schedule_its_last_and_next_tick_and_its_runs(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "j.db"
        clock = Clock("2026-12-07T08:59:30+00:00")
        job = Schedule("*/15 * * * *", report_job([]), tz="Europe/Paris", overlap="queue")
        scheduler = Scheduler([job], path=db, clock=clock)
        scheduler.keep()
        for t in ["09:00:01", "09:15:01"]:
            clock.to(f"2026-12-07T{t}+00:00")
            scheduler.step()
            settle(scheduler)
        scheduler.close()
        shown = lil_in_process("--db", str(db), "schedules")
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.splitlines()
        assert lines[0].startswith("report  goal report  '*/15 * * * *' Europe/Paris")
        assert "overlap=queue" in lines[0]
        assert lines[1].startswith("  last tick 2026-12-07T09:15:00+00:00  next tick ")
        assert "completed  report@2026-12-07T09:15:00+00:00" in lines[2]
        assert "completed  report@2026-12-07T09:00:00+00:00" in lines[3]
        records = json.loads(lil_in_process("--db", str(db), "schedules", "--json").stdout)
        assert [t["run"] for t in records[0]["ticks"]] == [
            "report@2026-12-07T09:15:00+00:00",
            "report@2026-12-07T09:00:00+00:00",
        ]

    def test_run_refuses_a_module_without_schedules_in_one_line(self, tmp_path: Path) -> None:
        module = tmp_path / "plain.py"
        module.write_text("X = 1\n")
        shown = lil_in_process("--db", str(tmp_path / "j.db"), "schedules", "run", str(module))
        assert shown.returncode == 1
        assert shown.stderr.startswith("Error: ") and len(shown.stderr.splitlines()) == 1
        assert "holds no schedule" in shown.stderr and "@schedule(" in shown.stderr

    def test_a_journal_without_schedules_says_so(self, tmp_path: Path) -> None:
        db = tmp_path / "j.db"
        with sqlite3.connect(db):
            pass
        from letitloop import Journal

        with Journal("other", path=db) as j:
            j.step("a", str, 1)
        shown = lil_in_process("--db", str(db), "schedules")
        assert shown.returncode == 0 and "no schedules in this journal" in shown.stdout
