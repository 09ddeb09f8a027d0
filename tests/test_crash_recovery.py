"""Real child processes killed with real SIGKILL, then run again."""

from __future__ import annotations

import os
import random
import signal
import socket
import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from helpers import run_forked, start_forked, wait_until, write_script

from letitloop import Journal
from letitloop.errors import RunHeldError

if TYPE_CHECKING:
    from preloaded import Child

FIFTY_STEPS = """
    import os, sys, time
    from letitloop import durable, step

    db, log, gate = sys.argv[1], sys.argv[2], sys.argv[3]

    def allowed():
        with open(gate) as f:
            return int(f.read())

    def work(i):
        with open(log, "a") as f:
            f.write(f"start {i} {os.getpid()}\\n")
        # The harness's gate: step i may not return before the harness allows it, so
        # the child can never outrun the kill the harness has planned for it.
        while allowed() < i:
            time.sleep(0.0005)
        time.sleep(0.002 + (i % 3) * 0.001)   # stands in for an API call
        with open(log, "a") as f:
            f.write(f"done {i} {os.getpid()}\\n")
        return i * 2

    @durable(goal_id="fifty", run="the-run", path=db)
    def workflow():
        total = 0
        for i in range(50):
            total += step(f"s{i}", work, i)
        return total

    print("result", workflow())
"""


def first_line(child: Child) -> str:
    """The first line ``child`` printed, once it has (it is killed if it never does)."""
    try:
        wait_until(lambda: "\n" in child.printed(), "the child prints a line")
    except BaseException:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        raise
    return child.printed().splitlines(keepends=True)[0]


def _starts(log: Path) -> list[tuple[int, int]]:
    """(step, pid) of every 'start' line, in order."""
    if not log.exists():
        return []
    out = []
    for line in log.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "start":
            out.append((int(parts[1]), int(parts[2])))
    return out


class TestAFiftyStepWorkflowKilledAtRandomPoints:
    def test_every_returned_step_ran_once_and_the_result_is_right(self, tmp_path: Path) -> None:
        rng = random.Random(os.environ.get("LETITLOOP_TEST_SEED", "20261130"))
        script = write_script(tmp_path, "fifty.py", FIFTY_STEPS)
        db, log, gate = tmp_path / "journal.db", tmp_path / "side.log", tmp_path / "gate"
        # Every kill lands on a live child: the gate lets step i return only once the
        # harness allows i, and each attempt is held inside the step after the one it
        # is to be killed in. So the number of kills is the plan's, never
        # the luck of the scheduler (a fast child used to finish before 25 kills).
        kills = 30
        killed_pids: list[int] = []
        for _ in range(kills):
            started = _starts(log)
            progress = max((i for i, _ in started), default=-1)
            new_starts = rng.choice([0, 1, 1, 2, 3])
            target = min(progress + new_starts, 48)
            gate.write_text(str(target))  # step target may return; target + 1 may not
            # A process of its own, forked from an interpreter that imported letitloop.
            child = start_forked(script, str(db), str(log), str(gate))
            deadline = time.monotonic() + 30
            if new_starts == 0:
                time.sleep(rng.uniform(0, 0.15))  # during start-up or replay
            else:
                while not any(i >= target for i, pid in _starts(log) if pid == child.pid):
                    assert child.running(), child.wait()
                    assert time.monotonic() < deadline, "child made no progress"
                    time.sleep(0.0005)
                time.sleep(rng.uniform(0, 0.004))  # mid-step or between steps
            assert child.running(), "the gate should have held the child"
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
            killed_pids.append(child.pid)
        gate.write_text("50")
        done = start_forked(script, str(db), str(log), str(gate)).wait()
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"result {sum(i * 2 for i in range(50))}"
        assert len(killed_pids) == kills

        starts = _starts(log)
        by_pid: dict[int, list[int]] = {}
        for i, pid in starts:
            by_pid.setdefault(pid, []).append(i)
        # A step followed by another in the same attempt had returned: never again.
        seen_returned: set[int] = set()
        for pid in dict.fromkeys(p for _, p in starts):
            steps = by_pid[pid]
            assert not set(steps) & seen_returned, f"a returned step ran again in pid {pid}"
            seen_returned |= set(steps[:-1])
            if pid not in killed_pids:  # the attempt that completed: every step returned
                seen_returned.add(steps[-1])
        # Each kill repeats at most the one step it interrupted.
        interrupted = Counter(by_pid[p][-1] for p in killed_pids if p in by_pid)
        runs = Counter(i for i, _ in starts)
        for i in range(50):
            assert 1 <= runs[i] <= 1 + interrupted[i], f"step s{i} ran {runs[i]} times"
        assert sum(runs.values()) - 50 <= len(killed_pids)

        conn = sqlite3.connect(db)
        assert conn.execute("SELECT status FROM runs").fetchall() == [("completed",)]
        assert conn.execute(
            "SELECT count(*) FROM journal_fifty WHERE status = 'done'"
        ).fetchone() == (50,)


STEP_THEN_WAIT = """
    import sys, time
    from letitloop import Journal
    with Journal("g", run="r", path=sys.argv[1]) as j:
        j.step("charge", lambda: {"charged": 123})
        print("returned", j.run_id, flush=True)
        time.sleep(60)
"""


class TestAStepThatReturnedBeforeTheKill:
    def test_its_row_is_in_the_file_when_read_by_a_fresh_connection(self, tmp_path: Path) -> None:
        script = write_script(tmp_path, "wait.py", STEP_THEN_WAIT)
        db = tmp_path / "journal.db"
        child = start_forked(script, str(db))
        line = first_line(child).split()
        assert line[0] == "returned"
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        conn = sqlite3.connect(db)
        assert conn.execute("SELECT run, key, status, result FROM journal_g").fetchall() == [
            (line[1], "charge", "done", '{"charged":123}')
        ]
        conn.close()

    def test_a_fresh_process_replays_it_without_calling_the_function(self, tmp_path: Path) -> None:
        script = write_script(tmp_path, "wait.py", STEP_THEN_WAIT)
        db = tmp_path / "journal.db"
        child = start_forked(script, str(db))
        run_id = first_line(child).split()[1]
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        done = run_forked(
            write_script(
                tmp_path,
                "replay.py",
                """
                import sys
                from letitloop import Journal
                calls = []
                with Journal("g", run="r", path=sys.argv[1]) as j:
                    got = j.step("charge", lambda: calls.append(1) or {"charged": -1})
                print(j.run_id, j.attempt, got["charged"], len(calls))
                """,
            ),
            str(db),
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == [run_id, "2", "123", "0"]


HOLD = """
    import sys, time
    from letitloop import Journal
    with Journal("g", run="r", path=sys.argv[1]) as j:
        j.step("a", lambda: 1)
        print("held", flush=True)
        time.sleep(60)
"""


class TestARunHeldByAnotherProcess:
    def test_a_second_opener_waits_then_gets_an_error_naming_the_holder(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "journal.db"
        holder = start_forked(write_script(tmp_path, "hold.py", HOLD), str(db))
        try:
            assert first_line(holder) == "held\n"
            t0 = time.monotonic()
            with pytest.raises(RunHeldError) as info:
                Journal("g", run="r", path=db, timeout=0.5).open()
            assert time.monotonic() - t0 >= 0.5
            message = str(info.value)
            assert f"process {holder.pid} on {socket.gethostname()}" in message
            assert info.value.pid == holder.pid
        finally:
            os.kill(holder.pid, signal.SIGKILL)
            holder.wait()

    def test_a_holder_killed_with_sigkill_releases_the_run_at_once(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        holder = start_forked(write_script(tmp_path, "hold.py", HOLD), str(db))
        assert first_line(holder) == "held\n"
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        reopen = write_script(
            tmp_path,
            "reopen.py",
            """
            import os, sys
            from letitloop import Journal
            calls = []
            with Journal("g", run="r", path=sys.argv[1], timeout=5) as j:
                print(os.getpid(), j.attempt, j.step("a", lambda: calls.append(1) or 2), len(calls))
            """,
        )
        done = run_forked(reopen, str(db))
        assert done.returncode == 0, done.stderr
        pid, attempt, value, calls = done.stdout.split()
        assert (attempt, value, calls) == ("2", "1", "0")
        conn = sqlite3.connect(db)
        pids = [p for (p,) in conn.execute("SELECT pid FROM attempts ORDER BY attempt")]
        assert pids == [holder.pid, int(pid)]
