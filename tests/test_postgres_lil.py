"""``lil`` on a PostgreSQL journal, and runs of processes on different hosts.

Every command runs as a subprocess (``python -m letitloop --db postgresql://…``),
against programs running in other processes, on the tests' throwaway server
(tests/pg_server.py, a schema per test). ``runs``, ``show``, ``export`` and
``reset`` are in tests/test_postgres.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pg_server
import pytest
from helpers import spawn_python, write_script

from letitloop import Journal

lil = pg_server.lil


@pytest.fixture
def location() -> str:
    return pg_server.location()


def query(location: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(location, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()


def wait_for_row(location: str, sql: str, within: float = 60) -> None:
    """Until ``sql`` finds a row (what a child process wrote)."""
    deadline = time.monotonic() + within
    exists = "SELECT to_regclass('ll_journal') IS NOT NULL"
    while query(location, exists) != [(True,)] or not query(location, sql):
        assert time.monotonic() < deadline, f"nothing found by {sql!r}"
        time.sleep(0.02)


CALLS: list[str] = []


def called(x: str) -> str:
    CALLS.append(x)
    return x


class TestLilFork:
    def test_the_next_opener_of_the_fork_keeps_the_steps_before_and_runs_the_rest(
        self, location: str
    ) -> None:
        with Journal("g", run="r", path=location) as j:
            j.step("a", called, "a")
            j.step("b", called, "b")
            run_id = j.run_id
        out = json.loads(lil(location, "fork", run_id, "--from-step", "b", "--json"))
        assert out["source_renamed_to"] == f"r@{run_id}"
        before = len(CALLS)
        with Journal("g", run="r", path=location) as j:
            assert j.run_id != run_id  # the fork took over the name
            assert j.step("a", called, "a") == "a"  # kept
            assert j.step("b", called, "b") == "b"  # run again
        assert CALLS[before:] == ["b"]


class TestLilGc:
    def test_deletes_the_runs_idle_longer_than_asked_and_keeps_the_others(
        self, location: str
    ) -> None:
        for name in ("old", "new"):
            with Journal("g", run=name, path=location) as j:
                j.step("a", str, 1)
        query(
            location,
            "UPDATE ll_runs SET updated_at = now() - interval '3 days', "
            "finished_at = now() - interval '3 days' WHERE name = 'old' RETURNING id",
        )
        lil(location, "gc", "--older-than", "1d", "--yes")
        assert query(location, "SELECT name FROM ll_runs") == [("new",)]
        assert query(location, "SELECT DISTINCT run FROM ll_journal") == query(
            location, "SELECT id FROM ll_runs"
        )


WAITER = """
import sys
from letitloop import Journal

with Journal("w", run="r", path=sys.argv[1]) as j:
    print(j.wait_for("answer", timeout=120), flush=True)
"""

SLEEPER = """
import sys
from letitloop import Journal
from letitloop.errors import RunCancelledError

try:
    with Journal("s", run="r", path=sys.argv[1]) as j:
        j.sleep("nap", 120)
except RunCancelledError:
    print("cancelled", flush=True)
"""


class TestLilSend:
    def test_wakes_a_run_waiting_in_another_process_with_the_value(
        self, location: str, tmp_path: Path
    ) -> None:
        child = spawn_python(write_script(tmp_path, "waiter.py", WAITER), location)
        try:
            wait_for_row(location, "SELECT 1 FROM ll_journal WHERE status = 'waiting'")
            lil(location, "send", "w", "answer", '{"approved": true}')
            sent = time.monotonic()
            out, err = child.communicate(timeout=60)
            woke = time.monotonic() - sent
        finally:
            child.kill()
        assert child.returncode == 0, err
        assert out.strip() == "{'approved': True}"
        # Not asserted (no timing in tests): printed for a reader of -s output.
        print(f"waiter woke {woke * 1000:.0f} ms after lil send returned")
        assert query(location, "SELECT status FROM ll_runs") == [("completed",)]


class TestLilCancel:
    def test_stops_a_run_sleeping_in_another_process(self, location: str, tmp_path: Path) -> None:
        child = spawn_python(write_script(tmp_path, "sleeper.py", SLEEPER), location)
        try:
            wait_for_row(location, "SELECT 1 FROM ll_journal WHERE kind = 'sleep'")
            lil(location, "cancel", "s", "--reason", "wrong input")
            out, err = child.communicate(timeout=60)
        finally:
            child.kill()
        assert child.returncode == 0, err
        assert out.strip() == "cancelled"
        [(status, reason)] = query(location, "SELECT status, cancel_reason FROM ll_runs")
        assert status == "cancelled" and reason.endswith(": wrong input")
        assert "cancelled" in lil(location, "runs")


ON_A_HOST = """
import os, sys, time
from letitloop import durable, step

location, shard, folder = sys.argv[1:]

@durable(goal_id="sync", path=location, timeout=0)
def sync(shard):
    step("fetch", str, shard)
    open(os.path.join(folder, shard), "w").close()
    # Holds its run until every host holds one: runs shared would never get here.
    while len(os.listdir(folder)) < 4:
        time.sleep(0.01)
    return os.uname().nodename

print(sync(shard), flush=True)
"""


def on_host(host: str, script: Path, *args: str) -> subprocess.Popen[str]:
    """``script`` in a process whose host name is ``host`` (a UTS namespace of its own)."""
    quoted = " ".join(f"'{a}'" for a in (sys.executable, "-u", str(script), *args))
    return subprocess.Popen(
        ["unshare", "--uts", "sh", "-c", f"hostname {host} && exec {quoted}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def can_name_hosts() -> bool:
    """Whether this process may give a child a host name of its own (root, unshare)."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    done = subprocess.run(["unshare", "--uts", "true"], capture_output=True, timeout=30)
    return done.returncode == 0


class TestProcessesOnDifferentHosts:
    @pytest.mark.skipif(
        not can_name_hosts(),
        reason="needs root and unshare --uts to give processes host names of their own",
    )
    def test_each_gets_a_run_of_its_own_held_and_recorded_under_its_host(
        self, location: str, tmp_path: Path
    ) -> None:
        script, folder = write_script(tmp_path, "host.py", ON_A_HOST), tmp_path / "holding"
        folder.mkdir()
        hosts = [f"worker-{i}" for i in range(4)]
        children = [on_host(h, script, location, str(i), str(folder)) for i, h in enumerate(hosts)]
        outs = [c.communicate(timeout=120) for c in children]
        assert [c.returncode for c in children] == [0] * 4, [e for _, e in outs]
        assert [o.strip() for o, _ in outs] == hosts
        runs = query(location, "SELECT input, holder_host, attempts FROM ll_runs ORDER BY input")
        assert len(runs) == 4 and {h for _, h, _ in runs} == set(hosts)
        assert all(attempts == 1 for _, _, attempts in runs)
        attempts = query(location, "SELECT run, host FROM ll_attempts")
        assert sorted(h for _, h in attempts) == hosts
