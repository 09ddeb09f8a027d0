"""Work queues (letitloop/queueing/, stores/sqlite/queue.py): what enqueue, claims,
limits, cancel and drain promise on a journal file. Kills of real worker processes are in
tests/test_queue_kill.py."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import lil_forked, wait_until

from letitloop import Journal, Queue, RunCancelledError, Worker, step
from letitloop.errors import QueueError, UnknownStoreError
from letitloop.inspection import find_run, open_inspector
from letitloop.queueing.queue_records import Claimed, Limits

NO_LIMITS = Limits(None, None)


@pytest.fixture(params=["file", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """The journal: a file, or a fresh schema on the tests' PostgreSQL server (skipped
    where there is none)."""
    if request.param == "postgres":
        import pg_server

        return pg_server.location()
    return tmp_path / "journal.db"


def counted(calls: list[Any]) -> Any:
    def fn(x: Any) -> Any:
        calls.append(x)
        return x

    return fn


def claim(q: Queue, now: float | None = None, limits: Limits | None = None) -> Claimed | float:
    return q.store.claim(q.name, limits or q.limits, time.time() if now is None else now)


def claimed_into(found: list[Any], q: Queue) -> bool:
    """Claim once, keeping what came back; whether it was an entry."""
    found.append(claim(q))
    return isinstance(found[-1], Claimed)


class TestAQueuedRun:
    def test_it_runs_as_an_ordinary_run_whose_steps_are_journaled(self, db: Any) -> None:
        q = Queue("emails", path=db)
        calls: list[Any] = []

        @q.task
        def send(to: str, *, n: int = 1) -> str:
            return str(step("render", counted(calls), f"hi {to}")) * n

        h = q.enqueue(send, "a@b.c", n=2)
        assert h.status() == "queued" and h.run_id is None
        worker = q.worker(threads=2).start()
        try:
            assert h.result(timeout=20) == "hi a@b.chi a@b.c"
        finally:
            worker.stop(timeout=20)
        assert h.status() == "completed" and calls == ["hi a@b.c"]
        run = find_run(open_inspector(db), h.run_id or "")
        assert (run.goal, run.name, run.status) == ("send", h.id, "completed")

    def test_a_named_run_that_completed_replays_its_result_without_a_call(self, db: Any) -> None:
        q = Queue("emails", path=db)
        calls: list[Any] = []
        q.task(lambda x: step("s", counted(calls), x), name="once")
        first = q.enqueue("once", 5, run="order-5")
        again = q.enqueue("once", 5, run="order-5")
        worker = q.worker().start()
        try:
            assert first.result(timeout=20) == 5 and again.result(timeout=20) == 5
        finally:
            worker.stop(timeout=20)
        assert calls == [5]
        assert first.run_id == again.run_id

    def test_await_gives_the_result(self, db: Any) -> None:
        import asyncio

        q = Queue("emails", path=db)
        q.task(lambda x: x * 2, name="double")
        h = q.enqueue("double", 21)
        worker = q.worker().start()
        try:
            assert asyncio.run(asyncio.wait_for(_awaited(h), 20)) == 42
        finally:
            worker.stop(timeout=20)

    def test_a_failed_run_fails_its_handle_with_the_runs_error(self, db: Any) -> None:
        q = Queue("emails", path=db)

        @q.task
        def boom() -> None:
            raise ValueError("no such user")

        h = q.enqueue(boom)
        worker = q.worker().start()
        try:
            with pytest.raises(QueueError, match="ValueError: no such user"):
                h.result(timeout=20)
        finally:
            worker.stop(timeout=20)
        assert h.status() == "failed"


async def _awaited(h: Any) -> Any:
    return await h


class TestWhatAnEntryRecords:
    def test_the_task_is_recorded_by_its_registered_name_never_its_module(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "journal.db"
        q = Queue("emails", path=db)
        q.task(counted([]), name="stable-name")
        h = q.enqueue("stable-name", 1)
        with sqlite3.connect(db) as c:
            row = c.execute("SELECT task, args FROM queue_entries WHERE id = ?", (h.id,)).fetchone()
        assert row[0] == "stable-name" and __name__ not in row[1] and "counted" not in row[1]

    def test_a_function_not_registered_is_refused_with_what_to_do(self, db: Any) -> None:
        q = Queue("emails", path=db)
        with pytest.raises(QueueError, match=r"not a task of this queue.*@queue\.task"):
            q.enqueue(print, 1)

    def test_bad_limits_are_refused_with_an_example(self, db: Any) -> None:
        with pytest.raises(QueueError, match="concurrency must be"):
            Queue("q", concurrency=0, path=db)
        with pytest.raises(QueueError, match=r"rate_limit must be .*\(100, '1m'\)"):
            Queue("q", rate_limit=(10, "1 fortnight"), path=db)
        assert Queue("q", rate_limit=(100, "1m"), path=db).limits.rate == (100, 60.0)

    def test_a_malformed_url_is_refused_as_a_journal_refuses_it(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # As Journal(path=...): not a folder named "postgresql:" with a file in it.
        monkeypatch.chdir(tmp_path)
        where = "postgresql:/app@db/jobs"
        with pytest.raises(UnknownStoreError) as queue_refusal:
            Queue("q", path=where)
        with pytest.raises(UnknownStoreError) as journal_refusal, Journal("q", path=where):
            pass
        assert str(queue_refusal.value) == str(journal_refusal.value)
        assert not Path("postgresql:").exists()


class TestClaims:
    def test_higher_priority_is_claimed_first_then_the_oldest(self, db: Any) -> None:
        q = Queue("q", path=db)
        q.task(counted([]), name="t")
        low, high, high2 = (q.enqueue("t", i, priority=p) for i, p in ((1, 0), (2, 5), (3, 5)))
        got = [claim(q) for _ in range(3)]
        assert [c.id for c in got if isinstance(c, Claimed)] == [high.id, high2.id, low.id]

    def test_a_delayed_entry_is_not_claimed_before_its_time(self, db: Any) -> None:
        q = Queue("q", path=db)
        q.task(counted([]), name="t")
        now = time.time()
        h = q.enqueue("t", 1, delay=30)
        assert isinstance(claim(q, now + 1), float)
        got = claim(q, now + 31)
        assert isinstance(got, Claimed) and got.id == h.id

    def test_a_dedup_key_admits_one_active_entry(self, db: Any) -> None:
        q = Queue("q", path=db)
        q.task(counted([]), name="t")
        a = q.enqueue("t", 1, dedup_key="user-7")
        b = q.enqueue("t", 2, dedup_key="user-7")
        assert a.id == b.id
        got = claim(q)
        assert isinstance(got, Claimed)
        assert q.enqueue("t", 3, dedup_key="user-7").id == a.id  # claimed: still active
        q.store.finish(got, "completed", "1", None, time.time())
        assert q.enqueue("t", 4, dedup_key="user-7").id != a.id  # ended: a new one

    def test_concurrency_is_never_exceeded_while_the_holders_live(self, db: Any) -> None:
        q = Queue("q", concurrency=2, path=db)
        q.task(counted([]), name="t")
        for i in range(4):
            q.enqueue("t", i)
        first, second, third = claim(q), claim(q), claim(q)
        assert isinstance(first, Claimed) and isinstance(second, Claimed)
        assert isinstance(third, float)
        q.store.finish(first, "completed", "0", None, time.time())
        assert isinstance(claim(q), Claimed)

    def test_the_rate_limit_holds_in_every_window(self, db: Any) -> None:
        q = Queue("q", rate_limit=(2, 60), path=db)
        q.task(counted([]), name="t")
        for i in range(4):
            q.enqueue("t", i)
        t = time.time()
        assert isinstance(claim(q, t), Claimed) and isinstance(claim(q, t + 30), Claimed)
        wait = claim(q, t + 59)
        assert isinstance(wait, float) and 0 < wait <= 1.01  # the first claim leaves at t+60
        assert isinstance(claim(q, t + 60.5), Claimed)
        assert isinstance(claim(q, t + 61), float)  # t+30 and t+60.5 in the window

    def test_a_claim_in_another_process_counts_against_the_concurrency(self, db: Any) -> None:
        q = Queue("q", concurrency=1, path=db)
        q.task(counted([]), name="t")
        q.enqueue("t", 1)
        q.enqueue("t", 2)
        r, w = os.pipe()

        def child() -> int:
            got = claim(q)
            os.write(w, b"1" if isinstance(got, Claimed) else b"0")
            time.sleep(60)  # holds its claim until killed
            return 0

        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = child()
            finally:
                os._exit(code)
        try:
            assert os.read(r, 1) == b"1"
            assert isinstance(claim(q), float)  # the child holds the one slot
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            # Its holder died: taken over at a worker's next look, the slot free again.
            tries: list[Any] = []
            wait_until(lambda: claimed_into(tries, q), "a take-over")
            got = tries[-1]
            assert isinstance(got, Claimed) and got.attempt == 2
        finally:
            os.close(r)
            os.close(w)


class TestATakenOverHolder:
    def test_writes_nothing_on_its_entry_any_more(self, db: Any) -> None:
        q = Queue("q", path=db)
        q.task(counted([]), name="t")
        h = q.enqueue("t", 1)
        old = claim(q)
        assert isinstance(old, Claimed)
        old.hold.release()  # as its process's death would (the lock file left behind)
        # (PostgreSQL drops a closed session's locks a moment after the close: a worker
        # takes the entry over at one of its next looks.)
        got: list[Any] = []
        wait_until(lambda: claimed_into(got, q), "a take-over")
        new = got[-1]
        assert isinstance(new, Claimed) and (new.id, new.attempt) == (h.id, 2)
        assert q.store.finish(old, "failed", None, "stale", time.time()) is False
        assert q.store.release(old) is False
        assert h.status() == "running"
        assert q.store.finish(new, "completed", "1", None, time.time()) is True
        assert h.result(timeout=1) == 1


class TestCancel:
    def test_a_queued_run_never_starts(self, db: Any) -> None:
        q = Queue("q", path=db)
        calls: list[Any] = []
        q.task(counted(calls), name="t")
        h = q.enqueue("t", 1)
        assert h.cancel() == "cancelled"
        worker = q.worker().start()
        try:
            with pytest.raises(RunCancelledError):
                h.result(timeout=5)
            time.sleep(0.3)  # a worker's few looks
        finally:
            worker.stop(timeout=20)
        assert calls == [] and h.status() == "cancelled"

    def test_a_running_run_stops_at_its_next_step(self, db: Any) -> None:
        q = Queue("q", path=db)
        go = threading.Event()
        calls: list[str] = []

        @q.task
        def two() -> None:
            step("one", counted(calls), "one")
            go.wait(20)
            step("two", counted(calls), "two")

        h = q.enqueue(two)
        worker = q.worker().start()
        try:
            wait_until(lambda: calls == ["one"], "the first step ran")
            assert h.cancel("not needed") == "requested"
            # Its holder notices between steps, at its in-flight watcher's next look
            # (every inflight.SCAN_SECONDS).
            from letitloop.run.inflight import SCAN_SECONDS

            time.sleep(2.5 * SCAN_SECONDS)
            go.set()
            with pytest.raises(RunCancelledError):
                h.result(timeout=20)
        finally:
            worker.stop(timeout=20)
        assert calls == ["one"]
        run = find_run(open_inspector(db), h.run_id or "")
        assert run.status == "cancelled"


class TestADrainingWorker:
    def test_finishes_the_step_in_flight_and_gives_the_run_back_unmarked(self, db: Any) -> None:
        q = Queue("q", path=db)
        inside, go = threading.Event(), threading.Event()
        calls: list[str] = []

        def slow(name: str) -> str:
            calls.append(name)
            if name == "one" and not go.is_set():
                inside.set()
                go.wait(20)
            return name

        @q.task
        def two() -> str:
            return step("one", slow, "one") + step("two", slow, "two")

        h = q.enqueue(two)
        first = q.worker().start()
        assert inside.wait(20)
        stopping = threading.Thread(target=first.stop, kwargs={"timeout": 20})
        stopping.start()
        wait_until(lambda: first._stopping.is_set(), "the worker drains")
        go.set()
        stopping.join(20)
        assert first.counts == {"released": 1}
        assert h.status() == "queued" and calls == ["one"]
        run = find_run(open_inspector(db), h.run_id or "")
        assert run.status not in ("failed", "cancelled")
        second = q.worker().start()
        try:
            assert h.result(timeout=20) == "onetwo"
        finally:
            second.stop(timeout=20)
        assert calls == ["one", "two"]  # the finished step replayed, not run again


class TestTheWorkerCommand:
    @pytest.mark.slow  # lil worker and its 2 worker processes, fresh interpreters
    def test_lil_worker_runs_a_modules_queue_and_drains_on_sigterm(self, tmp_path: Path) -> None:
        import subprocess
        import sys

        app = Path(__file__).parent.parent / "benchmarks" / "queue_app.py"
        env = {
            **os.environ,
            "QUEUE_DB": str(tmp_path / "j.db"),
            "QUEUE_LEDGER": str(tmp_path / "ledger"),
        }
        q = _app_queue(env)
        handles = [q.enqueue("three", i) for i in range(6)]
        lil = [sys.executable, "-m", "letitloop", "worker", str(app), "--queue", "work"]
        proc = subprocess.Popen([*lil, "--processes", "2"], env=env, stderr=subprocess.PIPE)
        try:
            assert [h.result(timeout=60) for h in handles] == [3] * 6
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err

    def test_an_unknown_queue_is_one_line_naming_the_declared_ones(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        app = Path(__file__).parent.parent / "benchmarks" / "queue_app.py"
        monkeypatch.setenv("QUEUE_DB", str(tmp_path / "j.db"))
        done = lil_forked("worker", str(app), "--queue", "nope")
        assert done.returncode == 1
        assert "declares no queue named 'nope' (declared: " in done.stderr
        assert "Traceback" not in done.stderr


def _app_queue(env: dict[str, str]) -> Queue:
    q = Queue("work", path=env["QUEUE_DB"])
    q.task(lambda i: 0, name="three")
    return q


class TestAWorker:
    def test_refuses_a_bad_count(self, db: Any) -> None:
        with pytest.raises(Exception, match="threads must be"):
            Worker(Queue("q", path=db), threads=0)

    def test_keeps_its_journal_state_apart_from_a_journal_of_the_program(self, db: Any) -> None:
        q = Queue("q", path=db)
        q.task(lambda: step("s", lambda: 1), name="t")
        h = q.enqueue("t")
        with Journal("main", path=db) as j:
            j.step("own", lambda: 2)
        worker = q.worker().start()
        try:
            assert h.result(timeout=20) == 1
        finally:
            worker.stop(timeout=20)


class TestTheQueuesPage:
    @pytest.mark.slow  # lil worker and the program, fresh interpreters
    def test_its_program_runs_as_printed_with_lil_worker(self, tmp_path: Path) -> None:
        import re
        import subprocess
        import sys

        page = (Path(__file__).parent.parent / "docs" / "queues.md").read_text(encoding="utf-8")
        tasks, program = re.findall(r"```python\n(.*?)```", page, re.S)[:2]
        command = re.search(r"```\n(lil worker .*?)\n```", page).group(1)  # type: ignore[union-attr]
        (tmp_path / "tasks.py").write_text(tasks, encoding="utf-8")
        (tmp_path / "program.py").write_text(program, encoding="utf-8")
        lil = [sys.executable, "-m", "letitloop", *command.split()[1:]]
        worker = subprocess.Popen(lil, cwd=tmp_path, stderr=subprocess.PIPE, text=True)
        try:
            done = subprocess.run(
                [sys.executable, "program.py"],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=60,
            )
        finally:
            worker.send_signal(signal.SIGTERM)
            _, err = worker.communicate(timeout=30)
        assert done.returncode == 0, done.stderr
        first, second = done.stdout.splitlines()
        assert first.endswith(" queued")
        expected = re.search(r"# (\{.*\})", program).group(1)  # type: ignore[union-attr]
        assert second == expected
        assert worker.returncode == 0, err


class TestAHostThatVanished:
    """PostgreSQL: a worker whose host vanished keeps its sessions (and so its advisory
    locks) until the server's keepalives give up; its lease runs out first."""

    def test_its_run_is_taken_over_when_its_lease_runs_out_and_its_sessions_are_ended(
        self, tmp_path: Path
    ) -> None:
        import pg_server

        location = pg_server.location()
        q = Queue("q", path=location, lease=1.0)
        flag = tmp_path / "in-step"

        def hang() -> int:
            flag.touch()
            time.sleep(60)
            return 1

        q.task(lambda: step("hang", hang), name="t")
        h = q.enqueue("t")
        pid = os.fork()
        if pid == 0:  # a worker, frozen below as a host that lost its network would be
            code = 1
            try:
                q.worker().start()
                time.sleep(60)
            finally:
                os._exit(code)
        try:
            wait_until(lambda: flag.exists(), "the worker's run in its step")
            os.kill(pid, signal.SIGSTOP)  # its sessions live on; it renews nothing more
            frozen = time.monotonic()
            got: list[Any] = []
            wait_until(lambda: claimed_into(got, q), "a take-over", timeout=10)
            waited = time.monotonic() - frozen
            claimed = got[-1]
            assert isinstance(claimed, Claimed) and claimed.attempt == 2
            assert 0.9 <= waited <= 3.0, waited  # the lease, plus a look
            # Its sessions were ended: the run's lock is free for the new holder.
            with Journal("t", run=claimed.run_name, path=location, timeout=5) as j:
                assert j.attempt == 2
                q.store.finish(claimed, "completed", "1", None, time.time())
        finally:
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        assert h.result(timeout=5) == 1 and q.store.state(h.id).attempt == 2  # type: ignore[union-attr]


class TestAnAsyncTask:
    def test_runs_on_a_loop_of_its_own_with_its_async_steps_journaled(self, db: Any) -> None:
        from letitloop import async_step

        q = Queue("q", path=db)
        calls: list[Any] = []

        async def fetch(x: int) -> int:
            calls.append(x)
            return x + 1

        @q.task
        async def pipeline(x: int) -> int:
            return int(await async_step("fetch", fetch, x)) * 2

        h = q.enqueue(pipeline, 20)
        again = q.enqueue(pipeline, 20, run=h.run)  # the same run: replayed
        worker = q.worker().start()
        try:
            assert h.result(timeout=20) == 42 and again.result(timeout=20) == 42
        finally:
            worker.stop(timeout=20)
        assert calls == [20]


class TestARunThatCannotBeOpened:
    def test_goes_back_to_the_queue_instead_of_failing(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        q = Queue("q", path=db, timeout=0.2)
        q.task(lambda: step("s", lambda: 7), name="t")
        h = q.enqueue("t", run="busy")
        with Journal("t", run="busy", path=db):  # held by this program meanwhile
            worker = q.worker().start()
            try:
                wait_until(lambda: worker.counts.get("released", 0) >= 2, "tried it twice")
                assert h.status() in ("queued", "running") and "failed" not in worker.counts
            finally:
                worker.stop(timeout=20)
        worker = q.worker().start()
        try:
            assert h.result(timeout=20) is None  # the block above completed the run empty
        finally:
            worker.stop(timeout=20)


class TestAnIdleWorker:
    """Woken by an entry added instead of its next poll: the polls are made 30 s apart here,
    so a run that starts within the result's timeout was started by a wake-up."""

    @pytest.fixture
    def slow_polls(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import letitloop.queueing.queue_worker as worker_module
        import letitloop.stores.sqlite.queue as sqlite_queue

        monkeypatch.setattr(worker_module, "MAX_NAP", 30.0)
        monkeypatch.setattr(sqlite_queue, "POLL_SECONDS", 30.0)
        try:
            import letitloop.stores.postgres.queue as postgres_queue
        except ImportError:  # no psycopg: the PostgreSQL case is skipped
            return
        monkeypatch.setattr(postgres_queue, "POLL_SECONDS", 30.0)

    def test_on_postgresql_wakes_at_the_notify_of_another_processs_enqueue(
        self, slow_polls: None
    ) -> None:
        import pg_server

        q = Queue("q", path=pg_server.location())
        q.task(lambda x: step("s", lambda: x + 1), name="t")
        worker = q.worker().start()
        try:
            listener = worker._listener
            assert listener is not None and listener.listening.wait(20)
            time.sleep(0.2)  # the worker's first look made: idle, waiting for a wake-up
            pid = os.fork()
            if pid == 0:  # another process, whose enqueue only a NOTIFY can tell the worker
                code = 1
                try:
                    code = 0 if q.enqueue("t", 41, run="from-child").run == "from-child" else 1
                finally:
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
            assert status == 0
            entry = q.store.named("q", "from-child")
            assert entry is not None and q.handle(entry).result(timeout=20) == 42
        finally:
            worker.stop(timeout=40)
        assert not worker.alive and not listener._thread.is_alive()

    def test_on_a_file_wakes_at_an_enqueue_of_its_own_process(
        self, slow_polls: None, tmp_path: Path
    ) -> None:
        q = Queue("q", path=tmp_path / "journal.db")
        q.task(lambda x: step("s", lambda: x + 1), name="t")
        worker = q.worker().start()
        try:
            time.sleep(0.2)  # the worker's first look made: idle, waiting for a wake-up
            assert worker._listener is None  # a file: nothing to listen to
            assert q.enqueue("t", 1).result(timeout=20) == 2
        finally:
            worker.stop(timeout=40)
        assert not worker.alive  # a drain wakes the idle threads too
