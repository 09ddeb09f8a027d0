"""Schedules run by ``lil schedules run`` processes on a clock the test moves.

Every scheduler here is a real process running ``lil schedules run``
(``python -m letitloop``), a child forked by tests/preloaded.py from one
interpreter that imported letitloop, click and PostgreSQL's driver once: the
six that race on one journal (a file, or a PostgreSQL database), the ones
killed with SIGKILL and those suspended with SIGSTOP. They read the time
from a file the test rewrites (``LETITLOOP_TEST_CLOCK``,
``letitloop.testing.FileClock``). What they did is read from outside them:
the tick rows, the runs, and the lines each step function appends to a side
file when it is called (tests/schedule_jobs.py).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from helpers import LIL_ENTRY, wait_until
from preloaded import Child, Preloaded

from letitloop.testing import FileClock

JOBS = Path(__file__).with_name("schedule_jobs.py")
UTC = timezone.utc
#: Seconds between a scheduler's looks at the clock: short, the test's clock jumps.
POLL = "0.05"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


class Journal:
    """What the schedulers wrote, read from outside them (a file read-only, or PostgreSQL)."""

    def __init__(self, location: str) -> None:
        self.location = location
        self.pg = location.startswith("postgresql://")
        self.prefix = "ll_" if self.pg else ""

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        sql = sql.replace("{p}", self.prefix)
        if self.pg:
            import psycopg

            with psycopg.connect(self.location) as conn:
                try:
                    return [tuple(r) for r in conn.execute(sql).fetchall()]
                except psycopg.errors.UndefinedTable:
                    return []
        if not Path(self.location).exists():
            return []
        reader = sqlite3.connect(f"file:{self.location}?mode=ro", uri=True)
        try:
            return reader.execute(sql).fetchall()
        except sqlite3.OperationalError:  # no such table yet
            return []
        finally:
            reader.close()

    def ticks(self) -> dict[str, str]:
        return dict(self.query("SELECT tick, status FROM {p}schedule_ticks ORDER BY tick"))

    def cursor(self) -> str:
        rows = self.query("SELECT cursor FROM {p}schedules")
        return str(rows[0][0]) if rows else ""

    def runs(self) -> list[tuple[str, str, int]]:
        return self.query("SELECT name, status, attempts FROM {p}runs ORDER BY name")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The clock file, the side file and the environment of the schedulers."""
    clock = tmp_path / "clock"
    side = tmp_path / "side.txt"
    side.touch()
    env = dict(os.environ, LETITLOOP_TEST_CLOCK=str(clock), JOBS_SIDE=str(side))
    env.pop("LETITLOOP_DB", None)
    yield {"clock": clock, "side": side, "env": env, "tmp": tmp_path}


def set_clock(world: dict[str, Any], when: datetime | str) -> None:
    moment = at(when) if isinstance(when, str) else when
    FileClock.set(str(world["clock"]), moment.timestamp())


def calls(world: dict[str, Any]) -> Counter[str]:
    return Counter(world["side"].read_text().splitlines())


def completed(journal: Journal, tick: str) -> bool:
    return journal.ticks().get(tick) == "completed"


class TestSixSchedulersOnOneJournal:
    """Six ``lil schedules run`` processes, a tick every minute for 100 minutes."""

    @pytest.mark.parametrize("store", ["file", "postgresql"])
    def test_each_tick_starts_its_run_once(
        self, forker: Preloaded, world: dict[str, Any], store: str
    ) -> None:
        location = location_of(store, world)
        journal = Journal(location)
        start = at("2026-12-07T00:00:30+00:00")
        set_clock(world, start)
        procs = [scheduler(forker, world, location) for _ in range(6)]
        try:
            wait_until(
                lambda: all("scheduling goal report" in stderr_of(p) for p in procs),
                "six schedulers started",
                60,
            )
            for minute in range(1, 101):
                tick = start.replace(second=0) + timedelta(minutes=minute)
                set_clock(world, tick + timedelta(seconds=1))
                wait_until(partial(completed, journal, tick.isoformat()), f"tick {tick}", 30)
        finally:
            for p in procs:
                os.kill(p.pid, signal.SIGTERM)
            ended = [p.wait() for p in procs]
        assert [e.returncode for e in ended] == [0] * 6, [e.stderr[-500:] for e in ended]
        ticks = journal.ticks()
        assert len(ticks) == 100 and set(ticks.values()) == {"completed"}
        runs = journal.runs()
        assert [r[0] for r in runs] == [f"report@{t}" for t in sorted(ticks)]
        assert {(r[1], r[2]) for r in runs} == {("completed", 1)}
        done = calls(world)
        assert len(done) == 200 and set(done.values()) == {1}, done.most_common(3)
        started = [line for e in ended for line in e.stderr.splitlines() if "started run" in line]
        assert len(started) == 100
        listed = forker.run(
            LIL_ENTRY, "--db", location, "schedules", "--all", "--json", env=world["env"]
        )
        assert listed.returncode == 0, listed.stderr
        (record,) = json.loads(listed.stdout)
        assert record["last_tick"] == "2026-12-07T01:40:00+00:00"
        assert [t["run"] for t in record["ticks"]] == [f"report@{t}" for t in sorted(ticks)][::-1]


@pytest.fixture(scope="module")
def forker() -> Iterator[Preloaded]:
    """One forking interpreter for the file's schedulers (half of the six's on PostgreSQL)."""
    with Preloaded(
        "click", "psycopg", "letitloop.stores.postgres.storage", with_letitloop=True
    ) as p:
        yield p


def scheduler(forker: Preloaded, world: dict[str, Any], db: Path | str, **env: str) -> Child:
    return forker.start(
        LIL_ENTRY,
        "--db",
        str(db),
        "schedules",
        "run",
        str(JOBS),
        "--poll",
        POLL,
        env={**world["env"], **env},
        cwd=world["tmp"],
    )


def stderr_of(child: Child) -> str:
    return Path(child.err.name).read_text(errors="replace")


def stop(child: Child) -> subprocess.CompletedProcess[str]:
    os.kill(child.pid, signal.SIGTERM)
    return child.wait()


def location_of(store: str, world: dict[str, Any]) -> str:
    if store == "file":
        return str(world["tmp"] / "journal.db")
    from pg_server import location

    return location()


class TestASchedulerKilledMidTick:
    @pytest.mark.parametrize("store", ["file", "postgresql"])
    def test_the_restarted_scheduler_resumes_the_ticks_run_repeating_no_step(
        self, forker: Preloaded, world: dict[str, Any], store: str
    ) -> None:
        db = location_of(store, world)
        journal = Journal(db)
        gate = world["tmp"] / "gate"
        set_clock(world, "2026-12-07T09:00:30+00:00")
        first = scheduler(forker, world, db, JOBS_GATE=str(gate))
        wait_until(lambda: "scheduling goal report" in stderr_of(first), "the scheduler started")
        set_clock(world, "2026-12-07T09:01:01+00:00")
        tick = "2026-12-07T09:01:00+00:00"
        wait_until(lambda: calls(world)[f"build {tick}"] == 1, "the run in its second step")
        os.kill(first.pid, signal.SIGKILL)
        assert first.wait().returncode == -signal.SIGKILL
        assert journal.ticks() == {tick: "started"}

        gate.touch()
        second = scheduler(forker, world, db)
        wait_until(lambda: journal.ticks() == {tick: "completed"}, "the tick's run resumed")
        ended = stop(second)
        assert ended.returncode == 0
        assert f"tick {tick} resumed run report@{tick}" in ended.stderr
        assert calls(world) == Counter({f"fetch {tick}": 1, f"build {tick}": 2})
        assert journal.runs() == [(f"report@{tick}", "completed", 2)]


class TestAMachineSuspendedForThreeHours:
    """A scheduler started at 08:00:30 on '*/15 * * * *' is stopped (SIGSTOP) while the clock
    jumps to 11:05:30, then continued: twelve ticks (08:15 … 11:00) were missed."""

    @pytest.mark.parametrize(
        ("catch_up", "started"),
        [
            ("latest", ["11:00"]),
            ("all", ["10:15", "10:30", "10:45", "11:00"]),
            ("skip", []),
        ],
    )
    def test_the_catch_up_policy_decides_which_missed_ticks_run(
        self, forker: Preloaded, world: dict[str, Any], catch_up: str, started: list[str]
    ) -> None:
        db = world["tmp"] / "journal.db"
        journal = Journal(str(db))
        set_clock(world, "2026-12-07T08:00:30+00:00")
        child = scheduler(
            forker,
            world,
            db,
            JOBS_CRON="*/15 * * * *",
            JOBS_CATCH_UP=catch_up,
            JOBS_WINDOW_S="3600",
        )
        try:
            wait_until(lambda: "scheduling goal report" in stderr_of(child), "started")
            os.kill(child.pid, signal.SIGSTOP)
            set_clock(world, "2026-12-07T11:05:30+00:00")
            time.sleep(0.2)  # stopped across several of its polls
            os.kill(child.pid, signal.SIGCONT)
            wait_until(lambda: journal.cursor() >= "2026-12-07T11:00", "the missed ticks decided")
            wait_until(lambda: "started" not in journal.ticks().values(), "the started runs ended")
            expected = {f"2026-12-07T{t}:00+00:00": "completed" for t in started}
            assert journal.ticks() == expected

            # The next tick on time runs whatever the policy.
            set_clock(world, "2026-12-07T11:15:01+00:00")
            wait_until(
                lambda: journal.ticks().get("2026-12-07T11:15:00+00:00") == "completed",
                "the 11:15 tick ran",
            )
        finally:
            assert stop(child).returncode == 0
        assert len(journal.runs()) == len(started) + 1
        assert sum(calls(world).values()) == 2 * (len(started) + 1)
