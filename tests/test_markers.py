"""atomic_marker: a side effect guarded once, with real threads and real processes.

Each guarded body appends one line to a side file opened with O_APPEND, so
"ran exactly once" is counted outside the journal. Rows are checked with a
second SQLite connection, and crashes are real SIGKILLs of child processes.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import pickle
import signal
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import filelock
import pytest
from helpers import ForkedProcess, spawn_forked

from letitloop import Journal, LetItLoopError, atomic_marker, durable
from letitloop.errors import (
    ForkedJournalError,
    InvalidNameError,
    MarkerHeldError,
    MarkerLostError,
    NoJournalError,
)

#: Generous: the machine is shared, and a slow child must not fail a test.
WAIT_S = 60.0

# A child process: `python child.py MODE JSON-ARGS`. Modes:
#   race  - open run `run` of `goal`, start `threads` threads that all enter the
#           marker once `go` exists; print {"true": n, "false": n, "keys": [...]}.
#   hold  - enter the marker, write its offer to `inside`, then sleep forever.
#   enter - enter the marker once, print its offer; `fail` raises inside the block.
CHILD = r"""
import json, os, sys, threading, time
from pathlib import Path
from letitloop import Journal

mode, a = sys.argv[1], json.loads(sys.argv[2])

def offer(m):
    return {"offered": bool(m), "key": m.idempotency_key, "attempt": m.attempt,
            "crashed_before": m.crashed_before, "pid": os.getpid()}

def append(line):
    fd = os.open(a["side"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)

durability = a.get("durability", "process")
with Journal(a["goal"], run=a.get("run"), path=a["db"], durability=durability) as j:
    if mode == "race":
        go = threading.Event()
        results = []
        def worker():
            go.wait()
            with j.atomic_marker(a["name"], scope=a["scope"], timeout=60) as m:
                if m:
                    append(f"{os.getpid()}:{threading.get_ident()}")
                    time.sleep(0.05)  # the others arrive while it is inside
            results.append(offer(m))
        threads = [threading.Thread(target=worker) for _ in range(a["threads"])]
        for t in threads:
            t.start()
        Path(a["ready"]).write_text("ready")
        while not os.path.exists(a["go"]):
            time.sleep(0.005)
        go.set()
        for t in threads:
            t.join()
        print(json.dumps({"true": sum(r["offered"] for r in results),
                          "false": sum(not r["offered"] for r in results),
                          "keys": sorted({r["key"] for r in results})}))
    elif mode == "hold":
        with j.atomic_marker(a["name"], scope=a["scope"]) as m:
            if m:
                append(f"{os.getpid()}:hold")
            tmp = a["inside"] + ".tmp"
            Path(tmp).write_text(json.dumps(offer(m)))
            os.replace(tmp, a["inside"])
            time.sleep(3600)
    elif mode == "enter":
        with j.atomic_marker(a["name"], scope=a["scope"]) as m:
            if m:
                append(f"{os.getpid()}:enter")
            print(json.dumps(offer(m)), flush=True)
            if a.get("fail"):
                raise RuntimeError("the remote call failed")
"""


@pytest.fixture
def side(tmp_path: Path) -> Path:
    return tmp_path / "side-effects.log"


@pytest.fixture
def child_script(tmp_path: Path) -> Path:
    path = tmp_path / "child.py"
    path.write_text(CHILD)
    return path


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def append(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def rows(db: Path, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    """Rows read by a separate connection: what a SQLite browser would see."""
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(sql, params)]
    finally:
        conn.close()


def marker_row(db: Path, goal: str, name: str, run: str) -> dict[str, Any]:
    found = rows(db, f"SELECT * FROM journal_{goal} WHERE run = ? AND key = ?", (run, name))
    assert len(found) == 1, found
    return found[0]


def spawn(script: Path, mode: str, **args: Any) -> ForkedProcess:
    return spawn_forked(script, mode, json.dumps(args))


def finish(proc: ForkedProcess, expect_rc: int = 0) -> str:
    out, err = proc.communicate(timeout=WAIT_S)
    assert proc.returncode == expect_rc, err
    return out


def run_child(script: Path, mode: str, expect_rc: int = 0, **args: Any) -> dict[str, Any]:
    out = finish(spawn(script, mode, **args), expect_rc)
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def wait_for(path: Path, proc: ForkedProcess | None = None) -> None:
    deadline = time.monotonic() + WAIT_S
    while not path.exists():
        # Looked at again once it ended: it may have made the file, then ended, meanwhile.
        if proc is not None and proc.poll() is not None and not path.exists():
            raise AssertionError(f"child exited early: {proc.communicate()[1]}")
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


@pytest.fixture
def holder(child_script: Path, tmp_path: Path) -> Iterator[Any]:
    """Start a child that holds a marker inside its block; killed at teardown."""
    procs: list[ForkedProcess] = []

    def start(**args: Any) -> tuple[ForkedProcess, dict[str, Any]]:
        inside = tmp_path / f"inside-{len(procs)}.json"
        proc = spawn(child_script, "hold", inside=str(inside), **args)
        procs.append(proc)
        wait_for(inside, proc)
        return proc, json.loads(inside.read_text())

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=WAIT_S)


def hold_in_thread(
    journal: Journal, name: str, scope: str = "run"
) -> tuple[threading.Thread, threading.Event, threading.Event]:
    """A thread that enters the marker and stays inside until released."""
    inside, release = threading.Event(), threading.Event()

    def body() -> None:
        with journal.atomic_marker(name, scope=scope):  # type: ignore[arg-type]
            inside.set()
            release.wait(WAIT_S)

    thread = threading.Thread(target=body, name="holder-thread")
    thread.start()
    assert inside.wait(WAIT_S)
    return thread, inside, release


class TestThreadsRacingOnARunScopedMarker:
    @pytest.mark.parametrize("durability", ["process", "power"])
    def test_exactly_one_of_16_threads_runs_the_body_and_the_others_get_false(
        self, db: Path, side: Path, durability: Any
    ) -> None:
        barrier = threading.Barrier(16)
        offers: list[bool] = []
        keys: set[str] = set()
        with Journal("race", path=db, durability=durability) as j:

            def worker() -> None:
                barrier.wait()
                with j.atomic_marker("notify") as m:
                    if m:
                        append(side, threading.current_thread().name)
                        time.sleep(0.05)  # the others arrive while it is inside
                offers.append(bool(m))
                keys.add(m.idempotency_key)

            threads = [threading.Thread(target=worker) for _ in range(16)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            run_id = j.run_id
        assert len(lines(side)) == 1
        assert sorted(offers) == [False] * 15 + [True]
        assert keys == {f"{run_id}:notify"}
        row = marker_row(db, "race", "notify", run_id)
        assert (row["kind"], row["status"], row["claims"], row["crashes"]) == (
            "marker",
            "done",
            1,
            0,
        )

    def test_a_later_entry_of_a_done_marker_gets_false_without_taking_the_lock(
        self, db: Path
    ) -> None:
        with Journal("race", path=db) as j:
            marker = j.atomic_marker("notify")
            with marker as m:
                assert m
            # Someone else holds the marker's lock file: a done marker must not wait.
            other = filelock.FileLock(marker.lock_file)
            other.acquire(timeout=5)
            try:
                started = time.monotonic()
                with j.atomic_marker("notify", timeout=WAIT_S) as again:
                    assert not again
                assert time.monotonic() - started < WAIT_S / 2
            finally:
                other.release()


class TestProcessesRacingOnAGoalScopedMarker:
    def test_4_processes_of_16_threads_each_run_the_body_exactly_once(
        self, db: Path, side: Path, child_script: Path, tmp_path: Path
    ) -> None:
        go = tmp_path / "go"
        procs, ready = [], []
        for i in range(4):
            ready.append(tmp_path / f"ready-{i}")
            procs.append(
                spawn(
                    child_script,
                    "race",
                    db=str(db),
                    goal="shared",
                    run=f"worker-{i}",
                    scope="goal",
                    name="daily_report",
                    side=str(side),
                    threads=16,
                    ready=str(ready[-1]),
                    go=str(go),
                )
            )
        for path, proc in zip(ready, procs, strict=True):
            wait_for(path, proc)
        go.write_text("go")
        results = [json.loads(finish(p).strip()) for p in procs]

        assert len(lines(side)) == 1
        assert sum(r["true"] for r in results) == 1
        assert sum(r["false"] for r in results) == 63
        assert {k for r in results for k in r["keys"]} == {"shared:daily_report"}
        (row,) = rows(db, "SELECT * FROM journal_shared WHERE kind = 'marker'")
        assert (row["run"], row["key"], row["status"], row["claims"]) == (
            "*",
            "daily_report",
            "done",
            1,
        )
        winner_run = rows(db, "SELECT id FROM runs WHERE id = ?", (row["holder_run"],))
        assert len(winner_run) == 1, "the row names the run that did it"


class TestAHolderKilledInsideTheBlock:
    @pytest.mark.parametrize(
        ("scope", "durability"), [("run", "power"), ("goal", "process"), ("global", "process")]
    )
    def test_the_next_attempt_is_offered_it_with_crashed_before_and_the_same_key(
        self, db: Path, side: Path, child_script: Path, holder: Any, scope: Any, durability: Any
    ) -> None:
        args = dict(db=str(db), goal="billing", run="r1", scope=scope, durability=durability)
        proc, first = holder(side=str(side), name="charge:123", **args)
        assert first["offered"] and first["attempt"] == 1 and not first["crashed_before"]
        table = "markers" if scope == "global" else "journal_billing"
        (pending,) = rows(db, f"SELECT * FROM {table} WHERE key = 'charge:123'")
        assert (pending["status"], pending["holder_pid"]) == ("pending", proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=WAIT_S)

        second = run_child(child_script, "enter", side=str(side), name="charge:123", **args)
        assert second["offered"] is True
        assert second["crashed_before"] is True
        assert second["attempt"] == 2
        assert second["key"] == first["key"]
        (done,) = rows(db, f"SELECT * FROM {table} WHERE key = 'charge:123'")
        assert (done["status"], done["claims"], done["crashes"]) == ("done", 2, 1)
        assert done["holder_pid"] == second["pid"]
        assert done["holder_token"] != pending["holder_token"]

        # A third process (this one) gets false, with the same key.
        with (
            Journal("billing", run="r1", path=db, durability=durability) as j,
            j.atomic_marker("charge:123", scope=scope) as third,
        ):
            assert not third
            assert third.idempotency_key == first["key"]
            assert (third.attempt, third.crashed_before) == (2, True)
        assert len(lines(side)) == 2  # the killed holder's and the takeover's


class TestAnExceptionInsideTheBlock:
    def test_it_propagates_and_leaves_the_marker_not_done(self, db: Path) -> None:
        with Journal("mail", path=db) as j:
            with pytest.raises(ValueError, match="smtp down"), j.atomic_marker("welcome") as m:
                assert m
                raise ValueError("smtp down")
            run_id = j.run_id
            row = marker_row(db, "mail", "welcome", run_id)
            assert row["status"] == "failed"
            assert row["error"] == "ValueError: smtp down"
            assert "smtp down" in row["traceback"]

    def test_the_next_entry_is_offered_it_again_not_as_a_crash(self, db: Path) -> None:
        with Journal("mail", path=db) as j:
            with pytest.raises(ValueError), j.atomic_marker("welcome"):
                raise ValueError("smtp down")
            with j.atomic_marker("welcome") as m:
                assert m
                assert (m.attempt, m.crashed_before) == (2, False)
            with j.atomic_marker("welcome") as m:
                assert not m
            assert marker_row(db, "mail", "welcome", j.run_id)["status"] == "done"

    def test_an_exception_in_a_false_block_propagates_and_changes_nothing(self, db: Path) -> None:
        with Journal("mail", path=db) as j:
            with j.atomic_marker("welcome"):
                pass
            before = marker_row(db, "mail", "welcome", j.run_id)
            with pytest.raises(KeyError), j.atomic_marker("welcome") as m:
                assert not m
                raise KeyError("x")
            assert marker_row(db, "mail", "welcome", j.run_id) == before


class TestABlockThatWasInterruptedOrCancelled:
    """Its holder stopped at an unknown point of the block: the side effect may have happened."""

    def test_a_keyboard_interrupt_tells_the_next_holder_crashed_before(self, db: Path) -> None:
        with Journal("mail", path=db) as j:
            with pytest.raises(KeyboardInterrupt), j.atomic_marker("welcome") as m:
                assert m
                raise KeyboardInterrupt
            assert marker_row(db, "mail", "welcome", j.run_id)["status"] == "failed"
            with j.atomic_marker("welcome") as m:
                assert m and (m.attempt, m.crashed_before) == (2, True)

    def test_a_cancelled_task_tells_the_next_holder_crashed_before(self, db: Path) -> None:
        async def main(j: Journal) -> tuple[int, bool]:
            entered = asyncio.Event()

            async def holder() -> None:
                async with j.atomic_marker("welcome") as m:
                    assert m
                    entered.set()
                    await asyncio.sleep(30)  # the remote call, cancelled half-way

            task = asyncio.create_task(holder())
            await entered.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            async with j.atomic_marker("welcome") as m:
                return m.attempt, m.crashed_before

        with Journal("mail", path=db) as j:
            assert asyncio.run(main(j)) == (2, True)


class TestALostClaim:
    def test_a_holder_whose_claim_was_taken_cannot_commit_done(self, db: Path) -> None:
        with Journal("pay", path=db) as j:
            with pytest.raises(MarkerLostError) as info, j.atomic_marker("charge:1") as m:
                assert m
                conn = sqlite3.connect(db)
                with conn:
                    conn.execute(
                        "UPDATE journal_pay SET holder_token = 'someone-else', "
                        "holder_pid = 4242 WHERE key = 'charge:1'"
                    )
                conn.close()
            row = marker_row(db, "pay", "charge:1", j.run_id)
        assert row["status"] == "pending"
        assert row["holder_token"] == "someone-else"
        message = str(info.value)
        assert "lost its claim" in message and "4242" in message
        assert f"{j.run_id}:charge:1" in message  # the key to reconcile with
        assert info.value.idempotency_key == f"{j.run_id}:charge:1"

    def test_a_holder_whose_row_was_deleted_cannot_commit_done(self, db: Path) -> None:
        with Journal("pay", path=db) as j:
            marker = j.atomic_marker("charge:2")
            with pytest.raises(MarkerLostError, match="row is gone"), marker:
                conn = sqlite3.connect(db)
                with conn:
                    conn.execute("DELETE FROM journal_pay WHERE key = 'charge:2'")
                conn.close()
        assert rows(db, "SELECT * FROM journal_pay WHERE key = 'charge:2'") == []

    def test_the_blocks_own_exception_wins_over_a_lost_claim(self, db: Path) -> None:
        with Journal("pay", path=db) as j:
            with pytest.raises(ZeroDivisionError), j.atomic_marker("charge:3"):
                conn = sqlite3.connect(db)
                with conn:
                    conn.execute("UPDATE journal_pay SET holder_token = 'x'")
                conn.close()
                _ = 1 / 0
            assert marker_row(db, "pay", "charge:3", j.run_id)["status"] == "pending"


class TestScopes:
    def test_the_idempotency_key_follows_the_scope(self, db: Path) -> None:
        with Journal("orders", path=db) as j:
            with j.atomic_marker("charge:9") as run_m:
                assert run_m.idempotency_key == f"{j.run_id}:charge:9"
            with j.atomic_marker("charge:9", scope="goal") as goal_m:
                assert goal_m.idempotency_key == "orders:charge:9"
            with j.atomic_marker("charge:9", scope="global") as global_m:
                assert global_m.idempotency_key == "charge:9"
            # Three scopes, three markers: each was offered.
            assert run_m and goal_m and global_m

    def test_a_goal_scoped_marker_done_in_one_run_is_false_in_every_other_run(
        self, db: Path
    ) -> None:
        with Journal("orders", run="monday", path=db) as j:
            with j.atomic_marker("report", scope="goal") as m:
                assert m
            with j.atomic_marker("report") as run_scoped:
                assert run_scoped, "a run-scoped marker of the same name is another marker"
        with Journal("orders", run="tuesday", path=db) as j:
            with j.atomic_marker("report", scope="goal") as m:
                assert not m
            with j.atomic_marker("report") as run_scoped:
                assert run_scoped

    def test_a_global_marker_done_in_one_goal_is_false_in_every_other_goal(
        self, db: Path, child_script: Path, side: Path
    ) -> None:
        args: dict[str, Any] = dict(db=str(db), scope="global", name="charge:123", side=str(side))
        first = run_child(child_script, "enter", goal="checkout", **args)
        second = run_child(child_script, "enter", goal="retry_payments", **args)
        assert (first["offered"], second["offered"]) == (True, False)
        assert first["key"] == second["key"] == "charge:123"
        (row,) = rows(db, "SELECT * FROM markers")
        assert (row["key"], row["status"], row["holder_goal"]) == (
            "charge:123",
            "done",
            "checkout",
        )
        assert rows(db, "SELECT * FROM journal_checkout WHERE kind = 'marker'") == []

    def test_run_scoped_markers_of_different_runs_never_block_each_other(self, db: Path) -> None:
        with Journal("sync", run="a", path=db) as ja, Journal("sync", run="b", path=db) as jb:
            thread, _, release = hold_in_thread(ja, "notify")
            try:
                with jb.atomic_marker("notify", timeout=0) as m:
                    assert m
            finally:
                release.set()
                thread.join()

    def test_goal_scoped_markers_of_different_goals_never_block_each_other(
        self, db: Path, holder: Any
    ) -> None:
        holder(db=str(db), goal="alpha", run="r", scope="goal", name="notify", side="/dev/null")
        with Journal("beta", path=db) as j, j.atomic_marker("notify", scope="goal", timeout=0) as m:
            assert m

    def test_markers_of_different_names_never_block_each_other(self, db: Path) -> None:
        with Journal("sync", path=db) as j:
            thread, _, release = hold_in_thread(j, "charge:1", scope="global")
            try:
                with j.atomic_marker("charge:2", scope="global", timeout=0) as m:
                    assert m
            finally:
                release.set()
                thread.join()


class TestWaitingForAHolder:
    def test_a_wait_that_times_out_names_the_holder_process(self, db: Path, holder: Any) -> None:
        proc, _ = holder(
            db=str(db), goal="sync", run="r1", scope="goal", name="notify", side="/dev/null"
        )
        with Journal("sync", run="r2", path=db) as j:
            started = time.monotonic()
            with (
                pytest.raises(MarkerHeldError) as info,
                j.atomic_marker("notify", scope="goal", timeout=0.3),
            ):
                pytest.fail("entered a marker held by another process")
            assert time.monotonic() - started >= 0.3
        err = info.value
        assert f"process {proc.pid} on {socket.gethostname()}" in str(err)
        assert "timeout=" in str(err)
        assert err.pid == proc.pid
        # Errors cross process boundaries: the details survive pickling.
        clone = pickle.loads(pickle.dumps(err))
        assert isinstance(clone, MarkerHeldError) and str(clone) == str(err)
        assert (clone.pid, clone.name) == (proc.pid, "notify")

    def test_a_wait_that_times_out_names_the_holder_thread(self, db: Path) -> None:
        with Journal("sync", path=db) as j:
            thread, _, release = hold_in_thread(j, "notify")
            try:
                with (
                    pytest.raises(MarkerHeldError, match="holder-thread"),
                    j.atomic_marker("notify", timeout=0.1),
                ):
                    pytest.fail("entered a marker held by another thread")
            finally:
                release.set()
                thread.join()
            # The holder left cleanly: the marker is done, and free of locks.
            with j.atomic_marker("notify", timeout=0) as m:
                assert not m

    def test_a_waiter_gets_false_once_the_holder_committed(self, db: Path) -> None:
        with Journal("sync", path=db) as j:
            thread, _, release = hold_in_thread(j, "notify")
            timer = threading.Timer(0.2, release.set)
            timer.start()
            with j.atomic_marker("notify", timeout=WAIT_S) as m:
                assert not m
            thread.join()
            timer.join()

    @pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
    @pytest.mark.filterwarnings("ignore::DeprecationWarning")
    def test_a_forked_child_is_refused_and_never_waits_for_its_parents_holder(
        self, db: Path
    ) -> None:
        # The journal is its parent's (tests/test_forked_child.py): the child is
        # refused at once, whatever holds the marker in the parent.
        with Journal("sync", path=db) as j:
            thread, _, release = hold_in_thread(j, "notify", scope="goal")
            try:
                pid = os.fork()
                if pid == 0:  # the child: the parent's holder thread does not exist here
                    code = 1
                    try:
                        with j.atomic_marker("notify", scope="goal", timeout=30):
                            code = 2
                    except ForkedJournalError as exc:
                        code = 0 if f"opened by process {os.getppid()}" in str(exc) else 3
                    finally:
                        os._exit(code)
                _, status = os.waitpid(pid, 0)
                assert os.waitstatus_to_exitcode(status) == 0
            finally:
                release.set()
                thread.join()


class TestIdempotencyKeys:
    def test_they_are_stable_across_real_process_restarts(
        self, db: Path, side: Path, child_script: Path
    ) -> None:
        # An unnamed run: the failed first attempt is resumed by the second process.
        args: dict[str, Any] = dict(db=str(db), goal="notify_users", side=str(side))
        run1 = run_child(child_script, "enter", 1, scope="run", name="mail", fail=True, **args)
        run2 = run_child(child_script, "enter", scope="run", name="mail", **args)
        assert run1["pid"] != run2["pid"]
        assert run1["key"] == run2["key"]
        assert (run2["offered"], run2["attempt"], run2["crashed_before"]) == (True, 2, False)
        # That run completed: the next process starts a new run, with a new run-scoped
        # key, while a goal-scoped key stays the same in every run.
        run3 = run_child(child_script, "enter", scope="run", name="mail", **args)
        assert run3["key"] != run1["key"] and run3["offered"]
        in_child = run_child(child_script, "enter", scope="goal", name="mail", **args)["key"]
        with Journal("notify_users", path=db) as j:  # this process, another new run
            assert j.atomic_marker("mail", scope="goal").idempotency_key == in_child
        assert in_child == "notify_users:mail"


class TestAsyncWith:
    def test_racing_tasks_run_the_body_once_and_the_others_get_false(
        self, db: Path, side: Path
    ) -> None:
        async def main(j: Journal) -> list[bool]:
            async def task() -> bool:
                async with j.atomic_marker("notify", timeout=WAIT_S) as m:
                    if m:
                        append(side, "task")
                        await asyncio.sleep(0.1)
                    return bool(m)

            return await asyncio.gather(*(task() for _ in range(8)))

        with Journal("async_goal", path=db) as j:
            offers = asyncio.run(main(j))
        assert sorted(offers) == [False] * 7 + [True]
        assert len(lines(side)) == 1

    def test_a_cancelled_waiter_leaves_no_lock_behind(self, db: Path) -> None:
        async def main(j: Journal) -> bool:
            holding = asyncio.Event()
            leave = asyncio.Event()

            async def holder() -> None:
                with pytest.raises(RuntimeError):
                    async with j.atomic_marker("notify"):
                        holding.set()
                        await leave.wait()
                        raise RuntimeError("not done")

            async def waiter() -> None:
                async with j.atomic_marker("notify", timeout=WAIT_S):
                    pytest.fail("the cancelled waiter entered")

            h = asyncio.create_task(holder())
            await holding.wait()
            w = asyncio.create_task(waiter())
            await asyncio.sleep(0.2)
            w.cancel()
            with pytest.raises(asyncio.CancelledError):
                await w
            leave.set()
            await h
            await asyncio.sleep(0.2)  # the waiter's thread gets the lock, then lets go
            async with j.atomic_marker("notify", timeout=5) as m:
                return bool(m)

        with Journal("async_goal", path=db) as j:
            assert asyncio.run(main(j)) is True

    def test_a_cancelled_waiter_does_not_keep_the_event_loop_from_closing(self, db: Path) -> None:
        async def main(j: Journal) -> None:
            async def waiter() -> None:
                async with j.atomic_marker("notify", timeout=math.inf):
                    pytest.fail("the cancelled waiter entered")

            w = asyncio.create_task(waiter())
            await asyncio.sleep(0.2)
            w.cancel()
            with pytest.raises(asyncio.CancelledError):
                await w

        with Journal("async_goal", path=db) as j:
            thread, _, release = hold_in_thread(j, "notify")
            backstop = threading.Timer(WAIT_S, release.set)  # far beyond the bound
            backstop.start()
            try:
                started = time.monotonic()
                # asyncio.run waits for its worker threads: the waiter's must stop waiting.
                asyncio.run(main(j))
                assert time.monotonic() - started < WAIT_S / 2
            finally:
                backstop.cancel()
                release.set()
                thread.join()


class TestInsideDurable:
    def test_the_free_function_guards_once_across_attempts_of_the_run(
        self, db: Path, side: Path
    ) -> None:
        calls: list[bool] = []

        @durable(goal_id="welcome", run="user-1", path=db)
        def welcome(fail: bool) -> str:
            with atomic_marker("email") as should_send:
                calls.append(bool(should_send))
                if should_send:
                    append(side, "email")
            if fail:
                raise RuntimeError("crashed after sending")
            return "ok"

        with pytest.raises(RuntimeError):
            welcome(True)
        assert welcome(False) == "ok"
        assert calls == [True, False]
        assert len(lines(side)) == 1

    def test_the_free_function_outside_a_journal_says_what_to_do(self) -> None:
        with pytest.raises(NoJournalError, match=r"atomic_marker\(\) was called"):
            atomic_marker("email")


class TestBadUse:
    def test_an_unknown_scope_is_refused_with_the_three_choices(self, db: Path) -> None:
        with Journal("g", path=db) as j, pytest.raises(LetItLoopError, match="'run', 'goal'"):
            j.atomic_marker("x", scope="process")  # type: ignore[arg-type]

    def test_a_negative_timeout_is_refused(self, db: Path) -> None:
        with Journal("g", path=db) as j, pytest.raises(LetItLoopError, match="timeout"):
            j.atomic_marker("x", timeout=-1)

    @pytest.mark.parametrize("name", ["", "  ", "a\nb", 3])
    def test_an_unusable_name_is_refused(self, db: Path, name: Any) -> None:
        with Journal("g", path=db) as j, pytest.raises(InvalidNameError):
            j.atomic_marker(name)

    def test_a_marker_may_not_take_the_key_of_a_step_of_the_run(self, db: Path) -> None:
        with Journal("g", path=db) as j:
            j.step("notify", len, "abc")
            j.step("notify", len, "abc")
            with pytest.raises(InvalidNameError, match="key of a step"):
                j.atomic_marker("notify")
            with pytest.raises(InvalidNameError, match="key of a step"):
                j.atomic_marker("notify#2")
            with j.atomic_marker("notify#3") as m:
                assert m

    def test_a_step_may_not_take_the_name_of_a_marker_of_the_run_even_after_a_restart(
        self, db: Path
    ) -> None:
        with Journal("g", run="r", path=db) as j, j.atomic_marker("notify"):
            pass
        with Journal("g", run="r", path=db) as j:
            with pytest.raises(InvalidNameError, match=r"name of a\s+marker"):
                j.step("notify", len, "abc")
            assert j.step("other", len, "abc") == 3

    def test_entering_a_marker_inside_its_own_block_is_refused_not_deadlocked(
        self, db: Path
    ) -> None:
        with Journal("g", path=db) as j, j.atomic_marker("x", timeout=WAIT_S) as outer:
            assert outer
            with pytest.raises(LetItLoopError, match="inside its own block"):
                j.atomic_marker("x", timeout=WAIT_S).__enter__()

    def test_one_marker_object_cannot_be_entered_twice(self, db: Path) -> None:
        with Journal("g", path=db) as j:
            marker = j.atomic_marker("x")
            with marker:
                pass
            with pytest.raises(LetItLoopError, match="already entered"), marker:
                pass

    def test_a_closed_journal_says_so(self, db: Path) -> None:
        j = Journal("g", path=db)
        with pytest.raises(LetItLoopError, match="not open"), j.atomic_marker("x"):
            pass


class TestAJournalFromBeforeMarkers:
    def test_its_existing_goal_tables_gain_the_marker_columns(self, db: Path) -> None:
        from sqlite_utils import Database, Migrations

        from letitloop.stores.sqlite.migrate import _migration_fn
        from letitloop.stores.sqlite.migration_files import known_migrations
        from letitloop.stores.sqlite.migration_records import MIGRATION_SET
        from letitloop.stores.sqlite.store import Store

        # A file at schema version 1 with one goal, as letitloop 0.1 wrote it.
        store = Store(db, migrate=False)
        first_name, first_sql = known_migrations()[0]
        migrations = Migrations(MIGRATION_SET)
        migrations(name=first_name)(_migration_fn(first_sql))
        migrations.apply(Database(store.conn))
        with store.write() as conn:
            store.ensure_goal(conn, "old_goal", time.time())
        store.close()
        assert "holder_token" not in {
            r["name"] for r in rows(db, "SELECT name FROM pragma_table_info('journal_old_goal')")
        }

        with Journal("old_goal", path=db) as j, j.atomic_marker("notify") as m:
            assert m
        columns = {
            r["name"] for r in rows(db, "SELECT name FROM pragma_table_info('journal_old_goal')")
        }
        assert {"claims", "crashes", "holder_pid", "holder_host", "holder_run"} <= columns
        assert marker_row(db, "old_goal", "notify", j.run_id)["status"] == "done"
