"""``lil`` on a PostgreSQL journal, and runs of processes on different hosts.

Every command runs in a process of its own (``python -m letitloop --db postgresql://…``,
forked by helpers.lil_forked; one ``lil watch`` in a fresh interpreter), against
programs running in other processes, on the tests' throwaway server
(tests/pg_server.py, a schema per test). ``runs``, ``show``, ``export`` and
``reset`` are in tests/test_postgres.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pg_server
import pytest
from helpers import (
    LIL_ENTRY,
    POSTGRES,
    lil_forked,
    preload_for,
    run_forked,
    start_forked,
    wait_until,
    write_script,
)

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


#: Run "r" of goal "paid" under a budget of 1,000 tokens: steps a, b, c report 300 each,
#: step d reserves 200 first (over budget in the source); each call made is written to SIDE.
PAID = """
    import sys
    from letitloop import Budget, BudgetExceededError, Journal, reserve, usage

    location, side = sys.argv[1:3]

    def call(key, tokens, reserved=0):
        if reserved:
            reserve(tokens=reserved)  # refused: the call is not made
        with open(side, "a") as f:
            f.write(key + "\\n")
        usage(input_tokens=tokens)
        return key

    try:
        with Journal("paid", run="r", path=location, budget=Budget(tokens=1000)) as j:
            for key in "abc":
                j.step(key, call, key, 300)
            j.step("d", call, "d", 100, 200)
    except BudgetExceededError as exc:
        print("refused", exc.key, exc.tokens)
        sys.exit(3)
"""


class TestLilForkOfARunThatReachedItsBudget:
    """``lil fork`` as a subprocess on PostgreSQL, as on a journal file: the same lines, and
    the fork resumed by a fresh process replays every step before the fork point and counts
    what the source spent there, so it cannot spend the budget again."""

    def fork_and_resume(self, location: str, tmp_path: Path) -> tuple[str, list[str], str]:
        script = write_script(tmp_path, "paid.py", PAID)
        side = tmp_path / f"side-{len(list(tmp_path.iterdir()))}"
        first = run_forked(script, location, str(side), preload=preload_for(location))
        assert (first.returncode, first.stdout) == (3, "refused d 900\n"), first.stderr
        (source,) = [r["id"] for r in json.loads(lil(location, "runs", "paid", "--json"))]
        out = lil(location, "fork", source, "--from-step", "c")
        side.write_text("")
        # A fresh process: the fork.
        again = run_forked(script, location, str(side), preload=preload_for(location))
        assert again.returncode == 3, again.stderr
        shown = out.replace(source, "SOURCE")
        shown = re.sub(r"new run \w+", "new run NEW", shown)
        return shown, side.read_text().split(), again.stdout

    def test_its_fork_replays_the_steps_before_and_counts_their_spend(
        self, location: str, tmp_path: Path
    ) -> None:
        shown, calls, refused = self.fork_and_resume(location, tmp_path)
        assert calls == ["c"]  # a and b replayed: 0 calls before the fork point
        # a's and b's 600 carried, c's 300 paid again: d's 200 does not fit, as in the source.
        assert refused == "refused d 900\n"
        assert "keeps 3 recorded results (letitloop:budget:tokens=1000, a, b)" in shown
        # The same lines as lil fork of the same run in a journal file.
        assert shown == self.fork_and_resume(str(tmp_path / "j.db"), tmp_path)[0]


class TestLilOnAUrlWhoseSchemaDoesNotExist:
    """As a journal file that is not there: one line saying so, and a non-zero exit."""

    @pytest.mark.parametrize("command", [["runs"], ["show", "nightly"], ["export", "nightly"]])
    def test_it_says_the_schema_was_not_found_and_exits_1(
        self, command: list[str], tmp_path: Path
    ) -> None:
        url = pg_server.server_url() + "&options=-csearch_path%3Dno_such_schema"
        done = lil_forked("--db", url, *command, preload=POSTGRES)
        missing = lil_forked("--db", str(tmp_path / "missing.db"), *command)
        assert done.returncode == missing.returncode == 1, done.stdout
        assert done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
        for words in ("no schema 'no_such_schema'", "so no journal here", "check the URL",
                      "CREATE SCHEMA"):  # fmt: skip
            assert words in done.stderr, done.stderr


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
        script = write_script(tmp_path, "waiter.py", WAITER)
        child = start_forked(script, location, preload=POSTGRES)
        try:
            wait_for_row(location, "SELECT 1 FROM ll_journal WHERE status = 'waiting'")
            lil(location, "send", "w", "answer", '{"approved": true}')
            sent = time.monotonic()
        except BaseException:
            os.kill(child.pid, signal.SIGKILL)
            raise
        finally:
            done = child.wait()
        woke = time.monotonic() - sent
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "{'approved': True}"
        # Not asserted (no timing in tests): printed for a reader of -s output.
        print(f"waiter woke {woke * 1000:.0f} ms after lil send returned")
        assert query(location, "SELECT status FROM ll_runs") == [("completed",)]


class TestLilCancel:
    def test_stops_a_run_sleeping_in_another_process(self, location: str, tmp_path: Path) -> None:
        script = write_script(tmp_path, "sleeper.py", SLEEPER)
        child = start_forked(script, location, preload=POSTGRES)
        try:
            wait_for_row(location, "SELECT 1 FROM ll_journal WHERE kind = 'sleep'")
            lil(location, "cancel", "s", "--reason", "wrong input")
        except BaseException:
            os.kill(child.pid, signal.SIGKILL)
            raise
        finally:
            done = child.wait()
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "cancelled"
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


#: A child of lil watch: its journal is LETITLOOP_DB's (the watcher's --db); killed by
#: SIGKILL after step 'a' the first time, it finishes the second. Each step's call is a
#: line in the side file.
WATCHED = """
import os, signal, sys
from letitloop import Journal

side = sys.argv[1]

def mark(name):
    with open(side, "a") as f:
        f.write(name + "\\n")
    return name

with Journal("watched", run="w") as j:
    j.step("a", mark, "a")
    if os.environ["LETITLOOP_ATTEMPT"] == "1":
        os.kill(os.getpid(), signal.SIGKILL)
    j.step("b", mark, "b")
"""


#: lil watch's restarts at once, for tests.
BACKOFF_0 = ("--backoff", "0", "--jitter", "0")


def watch(location: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``lil --db location watch ARGS`` (a forked watcher; its children are fresh processes,
    as the watcher starts them; test_records_in_the_database_letitloop_db_names runs the
    real entry point)."""
    return lil_forked("--db", location, "watch", *BACKOFF_0, *args, preload=POSTGRES)


def watched_run(location: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``lil watch`` of WATCHED on ``location``: one SIGKILL, one restart, done."""
    side = tmp_path / "calls.txt"
    script = write_script(tmp_path, "watched.py", WATCHED)
    done = watch(location, str(script), str(side))
    assert done.returncode == 0, done.stderr
    assert side.read_text().split() == ["a", "b"]  # 'a' replayed after the SIGKILL
    return done


#: A child whose cancelled run ends it with RunCancelledError (exit 1), as a program
#: that does not catch it does.
CANCELLED_SLEEPER = """
import sys
from letitloop import Journal

with Journal("s", run="r") as j:
    j.sleep("nap", 120)
"""


class TestLilWatch:
    def test_restarts_a_killed_child_which_resumes_its_run_in_the_database(
        self, location: str, tmp_path: Path
    ) -> None:
        watched_run(location, tmp_path)
        assert query(location, "SELECT name, status, attempts FROM ll_runs") == [
            ("w", "completed", 2)
        ]
        events = query(
            location,
            "SELECT event, attempt, exit_code, signal FROM ll_supervisor_events ORDER BY id",
        )
        assert events == [
            ("start", 1, None, None),
            ("exit", 1, 137, "SIGKILL"),
            ("restart", 1, None, None),
            ("start", 2, None, None),
            ("exit", 2, 0, None),
            ("stop", 2, None, None),
        ]
        # Each attempt of the run knows the watcher's session and start that made it.
        attempts = query(
            location,
            "SELECT a.attempt, a.watch_attempt, a.watch_id = e.watch_id FROM ll_attempts AS a "
            "JOIN (SELECT DISTINCT watch_id FROM ll_supervisor_events) AS e ON true "
            "ORDER BY a.attempt",
        )
        assert attempts == [(1, 1, True), (2, 2, True)]

    def test_records_in_the_database_letitloop_db_names(
        self, location: str, tmp_path: Path
    ) -> None:
        side = tmp_path / "calls.txt"
        script = write_script(tmp_path, "watched.py", WATCHED)
        done = subprocess.run(
            [sys.executable, "-m", "letitloop", "watch", *BACKOFF_0, str(script), str(side)],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "LETITLOOP_DB": location},
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr
        assert side.read_text().split() == ["a", "b"]
        events = query(location, "SELECT event FROM ll_supervisor_events ORDER BY id")
        assert [e for (e,) in events] == ["start", "exit", "restart", "start", "exit", "stop"]
        assert not (tmp_path / ".letitloop").exists()  # nothing journaled in a local file

    def test_does_not_restart_a_child_whose_run_was_cancelled(
        self, location: str, tmp_path: Path
    ) -> None:
        script = write_script(tmp_path, "sleeper.py", CANCELLED_SLEEPER)
        argv = ("--db", location, "watch", *BACKOFF_0, str(script))
        watcher = start_forked(LIL_ENTRY, *argv, preload=POSTGRES)
        try:
            wait_for_row(location, "SELECT 1 FROM ll_journal WHERE kind = 'sleep'")
            lil(location, "cancel", "s", "--reason", "wrong input")
        except BaseException:
            os.kill(watcher.pid, signal.SIGKILL)
            raise
        finally:
            done = watcher.wait()
        err = done.stderr
        [(run,)] = query(location, "SELECT id FROM ll_runs")
        assert done.returncode == 1, err
        assert f"not restarting: run {run} was cancelled; exit 1" in err
        events = query(location, "SELECT event FROM ll_supervisor_events ORDER BY id")
        assert events == [("start",), ("exit",), ("stop",)], err


class TestLilUi:
    def test_serves_the_runs_page_and_a_run_page_with_its_restarts(
        self, location: str, tmp_path: Path
    ) -> None:
        import re
        import urllib.request

        watched_run(location, tmp_path)
        [(run,)] = query(location, "SELECT id FROM ll_runs")
        server = start_forked(LIL_ENTRY, "--db", location, "ui", "--port", "0", preload=POSTGRES)
        try:
            wait_until(lambda: "\n" in server.printed(), "lil ui prints its address")
            line = server.printed().splitlines()[0]
            found = re.search(r"http://127\.0\.0\.1:\d+/", line)
            assert found is not None, line
            with urllib.request.urlopen(found.group(0), timeout=30) as answer:
                runs = answer.read().decode()
            with urllib.request.urlopen(f"{found.group(0)}runs/{run}", timeout=30) as answer:
                page = answer.read().decode()
        finally:
            os.kill(server.pid, signal.SIGTERM)
            server.wait()
        assert f"/runs/{run}" in runs and "watched" in runs
        assert "completed" in runs
        restarts = page[page.index("<h2>supervisor restarts</h2>") :]
        exits = [
            c for c in re.findall(r"<tr>(.*?)</tr>", restarts, re.DOTALL) if "<td>exit</td>" in c
        ]
        assert len(exits) == 2, restarts
        assert "exit 137" in exits[0] and "SIGKILL" in exits[0]
        assert "lil watch saw exit 137 (SIGKILL)" in page
