"""Async pipelines: ``async with Journal``, ``async_step``, ``@durable_async``.

Everything runs on real journal files; crash tests SIGKILL real child
interpreters. Async code is driven with ``asyncio.run`` (no plugin needed).
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest
from helpers import sqlite_store, write_script

from letitloop import Journal, async_step, durable_async, step, unchecked
from letitloop.errors import (
    ConcurrentStepError,
    JournalFileError,
    LetItLoopError,
    NoJournalError,
    RunHeldError,
    StepMismatchError,
)
from letitloop.run.opening import open_journals

T = TypeVar("T")


def rows(db: Path, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    """Read through a separate connection: what any other process would see."""
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def steps_of(db: Path, goal: str) -> dict[str, tuple[str, str | None]]:
    """key -> (status, result JSON) of every step of ``goal``, read from outside."""
    table = rows(db, "SELECT journal_table FROM goals WHERE goal = ?", (goal,))[0][0]
    got = rows(db, f"SELECT key, status, result FROM \"{table}\" WHERE kind = 'step'")
    return {key: (status, result) for key, status, result in got}


def run(coro_fn: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        return await coro_fn()

    return asyncio.run(main())


class Calls:
    """Records each call (per name), so a test can tell a replay from a call."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def count(self, name: str) -> int:
        return self.names.count(name)


class Ticker:
    """A task that wakes every ``interval`` s and records when; the largest gap is the stall."""

    def __init__(self, interval: float = 0.001) -> None:
        self.interval = interval
        self.ticks: list[float] = []
        self._stop = False
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while not self._stop:
            self.ticks.append(time.perf_counter())
            await asyncio.sleep(self.interval)

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        self._stop = True
        assert self._task is not None
        await self._task

    def ticks_between(self, start: float, end: float) -> int:
        return sum(1 for t in self.ticks if start < t < end)

    def largest_gap(self) -> float:
        return max((b - a for a, b in zip(self.ticks, self.ticks[1:], strict=False)), default=0.0)


# --------------------------------------------------------------------------


GATHER_CHILD = """
    import asyncio, json, os, random, sys
    from letitloop import async_step, durable_async

    db, side, seed, out = sys.argv[1:5]
    rng = random.Random(int(seed))
    delays = [rng.uniform(0.05, 1.5) for _ in range(50)]

    def log(event, i):
        with open(side, "a", encoding="utf-8") as f:
            f.write(f"{event} {i} {os.getpid()}\\n")

    async def work(i):
        log("start", i)
        await asyncio.sleep(delays[i])
        return {"i": i, "square": i * i}

    @durable_async(goal_id="fanout", run="the-run", path=db)
    async def main():
        return await asyncio.gather(*(async_step(f"work:{i}", work, i) for i in range(50)))

    result = asyncio.run(main())
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f)
"""


def _done_count(db: Path) -> int:
    try:
        return int(rows(db, "SELECT count(*) FROM journal_fanout WHERE status = 'done'")[0][0])
    except sqlite3.OperationalError:  # the file or the goal's table does not exist yet
        return 0


class TestGatheredStepsAfterSIGKILL:
    def test_completed_steps_run_once_and_results_keep_their_positions(
        self, tmp_path: Path, db: Path
    ) -> None:
        seed = random.randrange(1_000_000)
        rng = random.Random(seed)
        kill_after = rng.randint(5, 35)
        script = write_script(tmp_path, "fanout.py", GATHER_CHILD)
        side, out = tmp_path / "side.log", tmp_path / "out.json"
        argv = [sys.executable, str(script), str(db), str(side)]

        child = subprocess.Popen([*argv, str(seed), str(out)], stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while _done_count(db) < kill_after:
            assert child.poll() is None, child.stderr.read() if child.stderr else ""
            assert time.monotonic() < deadline, "the child never completed enough steps"
            time.sleep(0.005)
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert child.returncode == -signal.SIGKILL
        # Seen from outside the dead writer: what had committed when it died.
        completed = {k for k, (status, _) in steps_of(db, "fanout").items() if status == "done"}
        assert kill_after <= len(completed) < 50, f"seed {seed}"
        assert not out.exists()

        second = subprocess.run(
            [*argv, str(seed + 1), str(out)], capture_output=True, text=True, timeout=60
        )
        assert second.returncode == 0, second.stderr
        assert json.loads(out.read_text()) == [{"i": i, "square": i * i} for i in range(50)]

        starts: dict[int, list[int]] = {i: [] for i in range(50)}
        for line in side.read_text().splitlines():
            _start, index, pid = line.split()
            starts[int(index)].append(int(pid))
        for i in range(50):
            if f"work:{i}" in completed:
                assert starts[i] == [child.pid], f"work:{i} (seed {seed})"
            else:
                # In flight or not started when killed: it runs once more, in the rerun.
                assert starts[i][-1] != child.pid and len(starts[i]) in (1, 2), f"seed {seed}"
                assert all(pid == child.pid for pid in starts[i][:-1])
        recorded = steps_of(db, "fanout")
        assert sorted(recorded) == sorted(f"work:{i}" for i in range(50))
        assert all(status == "done" for status, _ in recorded.values())
        assert rows(db, "SELECT status, attempts FROM runs") == [("completed", 2)]


class TestConcurrentStepsWithDistinctNames:
    def test_each_gets_its_own_result_back_whatever_order_they_finish_in(self, db: Path) -> None:
        calls = Calls()

        async def fetch(topic: str, delay: float) -> dict[str, str]:
            await asyncio.sleep(delay)
            calls.names.append(topic)
            return {"page": topic.upper()}

        topics = [f"t{i}" for i in range(12)]

        async def attempt(delays: list[float]) -> list[Any]:
            async with Journal("g", run="r", path=db) as j:
                return await asyncio.gather(
                    *(
                        # The delay differs between attempts: left out of the call's identity.
                        j.async_step(f"fetch:{t}", fetch, t, unchecked(d))
                        for t, d in zip(topics, delays, strict=True)
                    )
                )

        first = run(lambda: attempt([0.001 * i for i in range(12)]))
        order_first = list(calls.names)
        calls.names.clear()
        second = run(lambda: attempt([0.001 * (12 - i) for i in range(12)]))
        assert first == second == [{"page": t.upper()} for t in topics]
        assert order_first == topics  # they did finish in delay order the first time
        assert calls.names == []  # and replayed without being called

    def test_a_result_recorded_by_another_function_is_refused_on_replay(self, db: Path) -> None:
        async def fa() -> int:
            return 1

        async def fb() -> int:
            return 2

        async def attempt(fn: Callable[[], Awaitable[int]]) -> int:
            async with Journal("g", run="r", path=db) as j:
                return await j.async_step("s", fn)

        assert run(lambda: attempt(fa)) == 1
        with pytest.raises(StepMismatchError, match=r"recorded by .*fa, now called with .*fb"):
            run(lambda: attempt(fb))


class TestOneNameUsedByTwoTasks:
    def test_two_running_at_once_are_refused(self, db: Path) -> None:
        async def slow(x: int) -> int:
            await asyncio.sleep(0.05)
            return x

        async def attempt() -> None:
            async with Journal("g", run="r", path=db) as j:
                await asyncio.gather(j.async_step("x", slow, 1), j.async_step("x", slow, 2))

        with pytest.raises(ConcurrentStepError, match=r"'x'.*distinct names"):
            run(attempt)
        assert set(steps_of(db, "g")) <= {"x"}  # never an 'x#2' that depended on timing

    def test_they_are_refused_even_when_the_first_finished_before_the_second_began(
        self, db: Path
    ) -> None:
        # Sibling tasks: which one numbers its call first is timing, so never allowed.
        async def value(x: int) -> int:
            return x

        async def late(j: Journal) -> int:
            await asyncio.sleep(0.05)
            return await j.async_step("x", value, 2)

        async def attempt() -> None:
            async with Journal("g", run="r", path=db) as j:
                await asyncio.gather(j.async_step("x", value, 1), late(j))

        with pytest.raises(ConcurrentStepError, match="another asyncio task"):
            run(attempt)
        assert steps_of(db, "g") == {"x": ("done", "1")}

    def test_a_wait_for_around_a_repeated_name_is_explained_before_python_3_12(
        self, db: Path
    ) -> None:
        async def value(x: int) -> int:
            return x

        async def attempt() -> list[int]:
            async with Journal("g", run="r", path=db) as j:
                return [await asyncio.wait_for(j.async_step("x", value, i), 5) for i in range(2)]

        if sys.version_info >= (3, 12):  # wait_for awaits in the calling task
            assert run(attempt) == [0, 1]
        else:
            with pytest.raises(ConcurrentStepError, match="timeout inside the step's function"):
                run(attempt)

    def test_one_task_repeating_a_name_gets_numbered_keys_in_call_order(self, db: Path) -> None:
        async def value(x: int) -> int:
            return x

        async def attempt() -> list[int]:
            async with Journal("g", run="r", path=db) as j:
                return [await j.async_step("x", value, i) for i in range(3)]

        assert run(attempt) == [0, 1, 2]
        assert steps_of(db, "g") == {"x": ("done", "0"), "x#2": ("done", "1"), "x#3": ("done", "2")}
        assert run(attempt) == [0, 1, 2]


class TestOneNameUsedByEventLoopsOneAfterTheOther:
    def test_each_loop_gets_its_own_key_and_the_run_replays_them(self, db: Path) -> None:
        calls: list[str] = []

        async def fetch(url: str) -> str:
            calls.append(url)
            return url.upper()

        urls = ["a", "b", "c"]
        for _ in range(2):
            with Journal("g", run="r", path=db) as j:
                got = [asyncio.run(j.async_step("fetch", fetch, u)) for u in urls]
            assert got == ["A", "B", "C"]
        assert calls == urls  # the second pass replayed all three
        assert steps_of(db, "g") == {
            "fetch": ("done", '"A"'),
            "fetch#2": ("done", '"B"'),
            "fetch#3": ("done", '"C"'),
        }

    def test_a_thread_may_use_the_name_once_the_loop_has_ended(self, db: Path) -> None:
        def value(x: int) -> int:
            return x

        async def first(j: Journal) -> int:
            return await j.async_step("x", value, 1)

        with Journal("g", run="r", path=db) as j:
            assert asyncio.run(first(j)) == 1
            assert j.step("x", value, 2) == 2
        assert set(steps_of(db, "g")) == {"x", "x#2"}

    def test_a_loop_still_running_in_another_thread_keeps_the_name(self, db: Path) -> None:
        started, stop = threading.Event(), threading.Event()

        async def value(x: int) -> int:
            return x

        async def holder(j: Journal) -> None:
            await j.async_step("x", value, 1)
            started.set()
            while not stop.is_set():  # the loop keeps running
                await asyncio.sleep(0.01)

        with Journal("g", run="r", path=db) as j:
            t = threading.Thread(target=asyncio.run, args=(holder(j),))
            t.start()
            try:
                assert started.wait(10)
                with pytest.raises(ConcurrentStepError, match="another asyncio task"):
                    asyncio.run(j.async_step("x", value, 2))
            finally:
                stop.set()
                t.join()
        assert steps_of(db, "g") == {"x": ("done", "1")}


class TestMixedSyncAndAsyncSteps:
    def test_plain_functions_run_in_a_worker_thread_and_both_kinds_replay(self, db: Path) -> None:
        calls = Calls()
        loop_thread: list[int] = []
        threads: list[int] = []

        def sync_work(i: int) -> int:
            threads.append(threading.get_ident())
            calls.names.append(f"sync:{i}")
            return i * 10

        async def async_work(i: int) -> int:
            await asyncio.sleep(0)
            calls.names.append(f"async:{i}")
            return i + 1

        async def attempt() -> list[Any]:
            loop_thread.append(threading.get_ident())
            async with Journal("g", run="r", path=db) as j:
                gathered = await asyncio.gather(
                    *(j.async_step(f"sync:{i}", sync_work, i) for i in range(5)),
                    *(j.async_step(f"async:{i}", async_work, i) for i in range(5)),
                )
                return [*gathered, j.step("plain", sync_work, 7)]

        expected = [0, 10, 20, 30, 40, 1, 2, 3, 4, 5, 70]
        assert run(attempt) == expected
        assert len(calls.names) == 11
        assert loop_thread[0] not in threads[:5]  # the async_step ones ran off the loop
        assert run(attempt) == expected
        assert len(calls.names) == 11  # nothing called again

    def test_a_slow_plain_function_does_not_stall_the_loop(self, db: Path) -> None:
        def blocking() -> str:
            time.sleep(0.3)
            return "ok"

        async def attempt() -> tuple[str, int]:
            ticker = Ticker(0.005)
            ticker.start()
            async with Journal("g", path=db) as j:
                t0 = time.perf_counter()
                value = await j.async_step("blocking", blocking)
                t1 = time.perf_counter()
            await ticker.stop()
            return value, ticker.ticks_between(t0, t1)

        value, ticks = run(attempt)
        assert value == "ok"
        assert ticks >= 5  # ~60 expected; the loop kept running during the 0.3 s call

    def test_the_free_functions_find_the_journal_in_gathered_tasks_and_worker_threads(
        self, db: Path
    ) -> None:
        def inner(x: int) -> int:
            return x * 2

        def sync_outer(x: int) -> int:
            # Runs in a worker thread: the free step() still finds the journal.
            return step(f"inner:{x}", inner, x) + 1

        @durable_async(goal_id="g", run="r", path=db)
        async def pipeline(n: int) -> list[int]:
            return list(
                await asyncio.gather(*(async_step(f"outer:{i}", sync_outer, i) for i in range(n)))
            )

        assert asyncio.run(pipeline(4)) == [1, 3, 5, 7]
        # A step called inside another is keyed under it.
        assert set(steps_of(db, "g")) == {f"outer:{i}" for i in range(4)} | {
            f"outer:{i}/inner:{i}" for i in range(4)
        }


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.TaskGroup is Python 3.11+")
class TestStepsInATaskGroup:
    def test_they_resume_in_a_different_order_with_their_own_results(self, db: Path) -> None:
        calls = Calls()

        async def work(i: int, delay: float) -> dict[str, int]:
            await asyncio.sleep(delay)
            calls.names.append(f"w:{i}")
            return {"i": i}

        async def attempt(delays: list[float], fail_at: int | None) -> list[Any]:
            async with Journal("g", run="r", path=db) as j:
                async with asyncio.TaskGroup() as tg:  # type: ignore[attr-defined,unused-ignore]
                    tasks = [
                        tg.create_task(j.async_step(f"w:{i}", work, i, unchecked(d)))
                        for i, d in enumerate(delays)
                    ]
                    if fail_at is not None:
                        await asyncio.sleep(fail_at * 0.01 + 0.005)
                        raise RuntimeError("boom")
                return [t.result() for t in tasks]

        # First attempt: the group fails after 5 steps finished; the rest are cancelled.
        with pytest.raises(BaseException) as info:
            run(lambda: attempt([0.01 * i for i in range(10)], fail_at=4))
        assert "boom" in repr(info.value)
        first = list(calls.names)
        recorded = {k for k, (s, _) in steps_of(db, "g").items() if s == "done"}
        assert recorded == {f"w:{i}" for i in range(len(first))} and 0 < len(first) < 10
        calls.names.clear()
        result = run(lambda: attempt([0.01 * (10 - i) for i in range(10)], fail_at=None))
        assert result == [{"i": i} for i in range(10)]
        # Only the cancelled ones ran again, in their new (reversed) order.
        assert calls.names == [f"w:{i}" for i in reversed(range(len(first), 10))]


class TestACancelledStep:
    def test_it_is_not_recorded_and_the_cancellation_propagates(self, db: Path) -> None:
        saw: list[str] = []

        async def slow() -> str:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                saw.append("cancelled")
                raise
            return "finished"

        async def attempt() -> None:
            async with Journal("g", run="r", path=db) as j:
                task = asyncio.ensure_future(j.async_step("slow", slow))
                await asyncio.sleep(0.05)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                assert task.cancelled()
                with pytest.raises((asyncio.TimeoutError, TimeoutError)):
                    await asyncio.wait_for(j.async_step("slow2", slow), 0.05)

        run(attempt)
        assert saw == ["cancelled", "cancelled"]
        assert steps_of(db, "g") == {}  # neither done nor failed

    def test_it_runs_again_on_the_next_attempt(self, db: Path) -> None:
        calls = Calls()

        async def slow(delay: float) -> str:
            calls.names.append("slow")
            await asyncio.sleep(delay)
            return "finished"

        async def attempt(timeout: float) -> str:
            async with Journal("g", run="r", path=db) as j:
                return await asyncio.wait_for(j.async_step("slow", slow, 0.2), timeout)

        with pytest.raises((asyncio.TimeoutError, TimeoutError)):
            run(lambda: attempt(0.02))
        assert run(lambda: attempt(10)) == "finished"
        assert run(lambda: attempt(10)) == "finished"
        assert calls.count("slow") == 2
        assert steps_of(db, "g") == {"slow": ("done", '"finished"')}


class TestAnExceptionInOneGatheredStep:
    def test_the_steps_that_completed_stay_recorded_and_only_it_runs_again(self, db: Path) -> None:
        calls = Calls()
        broken = [True]

        async def work(i: int) -> int:
            calls.names.append(f"w:{i}")
            await asyncio.sleep(0.001 * i)
            if i == 3 and broken[0]:
                raise ValueError("upstream said no")
            return i * i

        async def attempt() -> list[Any]:
            async with Journal("g", run="r", path=db) as j:
                return await asyncio.gather(
                    *(j.async_step(f"w:{i}", work, i) for i in range(6)), return_exceptions=True
                )

        first = run(attempt)
        assert isinstance(first[3], ValueError)
        assert [v for i, v in enumerate(first) if i != 3] == [0, 1, 4, 16, 25]
        seen = steps_of(db, "g")
        assert seen["w:3"] == ("failed", None)
        assert {k for k, (s, _) in seen.items() if s == "done"} == {
            f"w:{i}" for i in (0, 1, 2, 4, 5)
        }
        error = rows(db, "SELECT error FROM journal_g WHERE key = 'w:3'")[0][0]
        assert error == "ValueError: upstream said no"

        broken[0] = False
        calls.names.clear()
        assert run(attempt) == [0, 1, 4, 9, 16, 25]
        assert calls.names == ["w:3"]

    def test_a_step_finishing_after_the_journal_closed_is_not_recorded(self, db: Path) -> None:
        # Plain gather propagates the first error and leaves its siblings running.
        async def fail() -> None:
            raise ValueError("first")

        async def late() -> int:
            await asyncio.sleep(0.05)
            return 1

        errors: list[BaseException] = []

        async def attempt() -> None:
            orphan: asyncio.Future[Any] | None = None
            with pytest.raises(ValueError, match="first"):
                async with Journal("g", run="r", path=db) as j:
                    orphan = asyncio.ensure_future(j.async_step("late", late))
                    await asyncio.gather(j.async_step("fail", fail), orphan)
            assert orphan is not None
            try:
                await orphan
            except LetItLoopError as exc:
                errors.append(exc)

        run(attempt)
        assert len(errors) == 1 and "after its journal was closed" in str(errors[0])
        assert "late" not in steps_of(db, "g")
        assert rows(db, "SELECT status FROM runs") == [("failed",)]


class TestTheLoopStaysResponsive:
    def test_while_1000_gathered_steps_commit(self, db: Path) -> None:
        async def work(i: int, delay: float) -> dict[str, int]:
            await asyncio.sleep(delay)  # completions spread out, as real I/O is
            return {"i": i}

        rng = random.Random(5)
        delays = [rng.uniform(0, 0.5) for _ in range(1000)]

        async def attempt() -> tuple[list[Any], int, float]:
            ticker = Ticker(0.001)
            ticker.start()
            async with Journal("g", run="r", path=db) as j:
                t0 = time.perf_counter()
                result = await asyncio.gather(
                    *(j.async_step(f"w:{i}", work, i, d) for i, d in enumerate(delays))
                )
                t1 = time.perf_counter()
            await ticker.stop()
            return list(result), ticker.ticks_between(t0, t1), ticker.largest_gap()

        result, ticks, stall = run(attempt)
        assert result == [{"i": i} for i in range(1000)]
        assert len(steps_of(db, "g")) == 1000
        # The ticker kept running among the commits (~500 ticks expected in 0.5 s on an
        # idle machine, 48 seen on a loaded one; a loop blocked by the commits gets 0-2).
        # The stall itself is a figure for benchmarks/bench_async.py, not a test bound.
        assert ticks >= 10, f"ticks={ticks} largest stall={stall * 1000:.1f} ms"


HOLDER = """
    import sys, time
    from letitloop import Journal
    with Journal("g", run="r", path=sys.argv[1]):
        print("held", flush=True)
        time.sleep(float(sys.argv[2]))
"""


class TestOpeningARunHeldByAnotherProcess:
    def test_the_wait_happens_off_the_loop_and_ends_in_run_held_error(
        self, tmp_path: Path, db: Path
    ) -> None:
        script = write_script(tmp_path, "holder.py", HOLDER)
        holder = subprocess.Popen(
            [sys.executable, str(script), str(db), "5"], stdout=subprocess.PIPE, text=True
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "held\n"

            async def attempt() -> int:
                ticker = Ticker(0.01)
                ticker.start()
                t0 = time.perf_counter()
                with pytest.raises(RunHeldError, match=f"held by process {holder.pid}"):
                    async with Journal("g", run="r", path=db, timeout=0.5):
                        pass
                t1 = time.perf_counter()
                await ticker.stop()
                return ticker.ticks_between(t0, t1)

            assert run(attempt) >= 10  # ~50 expected during the 0.5 s wait
        finally:
            holder.kill()
            holder.wait()

    def test_a_cancelled_opener_releases_the_run_once_its_worker_gets_it(
        self, tmp_path: Path, db: Path
    ) -> None:
        script = write_script(tmp_path, "holder.py", HOLDER)
        holder = subprocess.Popen(
            [sys.executable, str(script), str(db), "60"], stdout=subprocess.PIPE, text=True
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "held\n"

            async def opener() -> None:
                async with Journal("g", run="r", path=db, timeout=20):
                    raise AssertionError("the body must not run")

            async def attempt() -> None:
                task = asyncio.ensure_future(opener())
                await asyncio.sleep(0.1)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                holder.kill()  # the worker, still waiting, now gets the run ...
                deadline = time.monotonic() + 20
                while (
                    holder.poll() is None
                    or open_journals()
                    or not rows(db, "SELECT 1 FROM runs WHERE status = 'failed'")
                ):  # ... and closes it at once
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.02)

            run(attempt)
            assert rows(db, "SELECT status, attempts, error FROM runs") == [
                ("failed", 2, "CancelledError: ")
            ]
            with Journal("g", run="r", path=db, timeout=2) as j:
                assert j.attempt == 3  # the killed holder, the cancelled opener, this one
        finally:
            holder.kill()
            holder.wait()


class TestDurableAsync:
    def test_it_records_the_result_and_a_completed_named_run_returns_it_without_running(
        self, db: Path
    ) -> None:
        calls = Calls()

        async def fetch(u: int) -> dict[str, int]:
            calls.names.append("fetch")
            return {"user": u}

        @durable_async(goal_id="users", run=lambda u: f"user-{u}", path=db)
        async def sync_user(u: int) -> dict[str, Any]:
            calls.names.append("body")
            return {"got": await async_step("fetch", fetch, u)}

        assert asyncio.run(sync_user(1)) == {"got": {"user": 1}}
        assert asyncio.run(sync_user(1)) == {"got": {"user": 1}}
        assert asyncio.run(sync_user(2)) == {"got": {"user": 2}}
        assert calls.names == ["body", "fetch", "body", "fetch"]
        assert rows(db, "SELECT name, status, result FROM runs ORDER BY name") == [
            ("user-1", "completed", '{"got":{"user":1}}'),
            ("user-2", "completed", '{"got":{"user":2}}'),
        ]

    def test_a_failed_run_resumes_from_the_failed_step(self, db: Path) -> None:
        calls = Calls()
        broken = [True]

        async def first() -> int:
            calls.names.append("first")
            return 1

        async def second() -> int:
            calls.names.append("second")
            if broken[0]:
                raise RuntimeError("flaky")
            return 2

        @durable_async(goal_id="g", path=db)
        async def pipeline() -> int:
            return await async_step("first", first) + await async_step("second", second)

        with pytest.raises(RuntimeError, match="flaky"):
            asyncio.run(pipeline())
        assert rows(db, "SELECT status, error FROM runs") == [("failed", "RuntimeError: flaky")]
        broken[0] = False
        assert asyncio.run(pipeline()) == 3
        assert calls.names == ["first", "second", "second"]

    def test_a_plain_function_is_refused_with_the_way_out(self, db: Path) -> None:
        def plain() -> None:
            return None

        with pytest.raises(LetItLoopError, match=r"expects an 'async def'.*@durable\("):
            durable_async(goal_id="g", path=db)(plain)  # type: ignore[arg-type]

    def test_async_step_outside_any_journal_says_where_to_call_it(self) -> None:
        async def value() -> int:
            return 1

        with pytest.raises(NoJournalError, match=r"async_step\(\) was called with no open journal"):
            run(lambda: async_step("s", value))


class TestImportingLetitloop:
    @pytest.mark.skipif(
        sys.version_info < (3, 11),
        reason="Python 3.10's newest filelock (4.1) imports asyncio itself",
    )
    def test_it_does_not_load_asyncio_for_programs_that_never_use_it(self) -> None:
        # asyncio takes tens of milliseconds to import; sync programs must not pay for it.
        code = "import sys, letitloop; print('asyncio' in sys.modules)"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert out.stdout.strip() == "False", out.stderr


WRITE_LOCKER = """
    import sqlite3, sys, time
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")  # SQLite's write lock, held by another process
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
    conn.execute("COMMIT")
"""


class TestCommitsFromTheEventLoop:
    @pytest.mark.parametrize("durability", ["process", "power"])
    def test_many_steps_finishing_together_are_all_recorded(
        self, db: Path, durability: Any
    ) -> None:
        calls = Calls()

        async def work(i: int) -> dict[str, int]:
            calls.names.append(f"w:{i}")
            await asyncio.sleep(0)
            return {"i": i}

        async def attempt() -> list[Any]:
            async with Journal("g", run="r", path=db, durability=durability) as j:
                return list(
                    await asyncio.gather(*(j.async_step(f"w:{i}", work, i) for i in range(300)))
                )

        assert run(attempt) == [{"i": i} for i in range(300)]
        seen = steps_of(db, "g")
        assert len(seen) == 300 and {s for s, _ in seen.values()} == {"done"}
        assert run(attempt) == [{"i": i} for i in range(300)]
        assert len(calls.names) == 300

    def test_a_write_lock_held_by_another_process_is_waited_for_off_the_loop(
        self, tmp_path: Path, db: Path
    ) -> None:
        script = write_script(tmp_path, "locker.py", WRITE_LOCKER)

        async def value(i: int) -> int:
            return i

        async def attempt() -> tuple[list[int], int]:
            async with Journal("g", run="r", path=db) as j:
                locker = subprocess.Popen(
                    [sys.executable, str(script), str(db), "0.5"], stdout=subprocess.PIPE, text=True
                )
                try:
                    assert locker.stdout is not None and locker.stdout.readline() == "locked\n"
                    ticker = Ticker(0.01)
                    ticker.start()
                    t0 = time.perf_counter()
                    got = await asyncio.gather(
                        *(j.async_step(f"v:{i}", value, i) for i in range(5))
                    )
                    got.append(await j.async_step("after", value, 5))
                    t1 = time.perf_counter()
                    await ticker.stop()
                finally:
                    locker.wait()
                return list(got), ticker.ticks_between(t0, t1)

        got, ticks = run(attempt)
        assert got == [0, 1, 2, 3, 4, 5]
        assert ticks >= 10  # ~40 expected: the loop ran while the commits waited ~0.4 s
        assert len(steps_of(db, "g")) == 6

    def test_a_task_cancelled_while_its_result_commits_keeps_the_step_recorded(
        self, tmp_path: Path, db: Path
    ) -> None:
        script = write_script(tmp_path, "locker.py", WRITE_LOCKER)
        calls = Calls()

        async def value() -> str:
            calls.names.append("v")
            return "v"

        async def first() -> None:
            async with Journal("g", run="r", path=db) as j:
                locker = subprocess.Popen(
                    [sys.executable, str(script), str(db), "0.5"], stdout=subprocess.PIPE, text=True
                )
                try:
                    assert locker.stdout is not None and locker.stdout.readline() == "locked\n"
                    task = asyncio.ensure_future(j.async_step("v", value))
                    await asyncio.sleep(0.1)  # the function returned; its commit waits
                    assert calls.names == ["v"] and not task.done()
                    task.cancel()
                    with pytest.raises(asyncio.CancelledError):
                        await task
                finally:
                    locker.wait()

        async def second() -> str:
            async with Journal("g", run="r", path=db) as j:
                return await j.async_step("v", value)

        run(first)
        assert steps_of(db, "g") == {"v": ("done", '"v"')}
        assert run(second) == "v"
        assert calls.names == ["v"]  # it had returned once: it never runs again


def _refuse_key(db: Path, key: str) -> None:
    """Make every commit of step ``key`` fail inside SQLite, as a full or failing disk would.

    A trigger on the real journal table (the compact ``_journal_g`` behind the
    view since 0011), added from a second connection: the journal's own write
    path runs unchanged and gets a real SQLite error back.
    """
    conn = sqlite3.connect(db)
    try:
        conn.execute(
            f"CREATE TRIGGER refuse_{key} BEFORE INSERT ON _journal_g WHEN NEW.key = '{key}' "
            f"BEGIN SELECT RAISE(ABORT, 'injected failure: the disk refused this write'); END"
        )
        conn.commit()
    finally:
        conn.close()


class TestAStepThatReturnedJustBeforeTheJournalCloses:
    """A coroutine step returns, its task is cancelled while its row waits, the block exits."""

    @pytest.mark.parametrize("durability", ["process", "power"])
    def test_its_queued_row_is_committed_before_the_run_is_marked_completed(
        self, db: Path, durability: Any
    ) -> None:
        calls = Calls()

        async def value() -> str:
            calls.names.append("v")
            return "v"

        async def first() -> None:
            async with Journal("g", run="r", path=db, durability=durability) as j:
                task = asyncio.ensure_future(j.async_step("v", value))
                await asyncio.sleep(0)  # the function returns; its row is queued
                assert calls.names == ["v"] and not task.done()
                task.cancel()
                # The block exits in this same loop pass: the row is still queued.
            with pytest.raises(asyncio.CancelledError):
                await task

        async def second() -> str:
            async with Journal("g", run="r", path=db, durability=durability) as j:
                return await j.async_step("v", value)

        run(first)
        assert steps_of(db, "g") == {"v": ("done", '"v"')}
        assert rows(db, "SELECT status FROM runs") == [("completed",)]
        assert run(second) == "v"
        assert calls.names == ["v"]  # it had returned once: it never runs again

    def test_its_row_in_the_commit_thread_is_committed_before_the_run_is_marked_completed(
        self, db: Path
    ) -> None:
        # The loop's default executor is busy with user work (asyncio.to_thread) until
        # after the block has exited; the commit must neither wait for it nor be lost.
        calls = Calls()
        release = threading.Event()

        async def value() -> str:
            calls.names.append("v")
            return "v"

        async def first() -> None:
            loop = asyncio.get_running_loop()
            loop.set_default_executor(ThreadPoolExecutor(max_workers=2))
            busy: list[asyncio.Future[bool]] = []
            try:
                async with Journal("g", run="r", path=db, durability="power") as j:
                    busy = [loop.run_in_executor(None, release.wait, 10) for _ in range(2)]
                    task = asyncio.ensure_future(j.async_step("v", value))
                    await asyncio.sleep(0)  # the function returns; its row is queued
                    assert calls.names == ["v"] and not task.done()
                    task.cancel()
                    await asyncio.sleep(0)  # the row is handed over to be committed
                with pytest.raises(asyncio.CancelledError):
                    await task
            finally:
                release.set()
                await asyncio.gather(*busy)

        run(first)
        # Seen from a second connection: the row, then the run's completion.
        assert steps_of(db, "g") == {"v": ("done", '"v"')}
        assert rows(db, "SELECT status FROM runs") == [("completed",)]
        with Journal("g", run="r", path=db) as j:
            assert j.step("v", value) is not None  # a coroutine function: replayed, not called
        assert calls.names == ["v"]

    @pytest.mark.parametrize("where", ["queued", "committing"])
    def test_a_failed_commit_marks_the_run_failed_and_is_raised_at_the_exit(
        self, db: Path, where: str
    ) -> None:
        async def value() -> str:
            return "v"

        async def attempt() -> None:
            async with Journal("g", run="r", path=db, durability="power") as j:
                _refuse_key(db, "v")
                task = asyncio.ensure_future(j.async_step("v", value))
                await asyncio.sleep(0)  # the function returns; its row is queued
                task.cancel()  # nobody is left to be told that its commit failed
                if where == "committing":
                    await asyncio.sleep(0)  # the row is handed over to be committed
            with pytest.raises(asyncio.CancelledError):
                await task

        with pytest.raises(JournalFileError, match=r"step 'v'.*injected failure") as info:
            run(attempt)
        assert "not marked completed" in str(info.value)
        assert steps_of(db, "g") == {}
        assert rows(db, "SELECT status, error FROM runs")[0][0] == "failed"
        assert "injected failure" in rows(db, "SELECT error FROM runs")[0][0]

    def test_a_cancellation_during_the_close_waits_for_the_commit_then_propagates(
        self, tmp_path: Path, db: Path
    ) -> None:
        # Another process holds SQLite's write lock, so the step's commit waits in the
        # commit thread while the block exits; the task is cancelled during that wait.
        script = write_script(tmp_path, "locker.py", WRITE_LOCKER)
        lockers: list[subprocess.Popen[str]] = []
        exiting = asyncio.Event()

        async def value() -> str:
            return "v"

        async def block() -> None:
            async with Journal("g", run="r", path=db, durability="power") as j:
                locker = subprocess.Popen(
                    [sys.executable, str(script), str(db), "0.5"], stdout=subprocess.PIPE, text=True
                )
                lockers.append(locker)
                assert locker.stdout is not None and locker.stdout.readline() == "locked\n"
                task = asyncio.ensure_future(j.async_step("v", value))
                await asyncio.sleep(0)  # the function returns; its row is queued
                task.cancel()
                exiting.set()

        async def attempt() -> None:
            closing = asyncio.ensure_future(block())
            await exiting.wait()
            await asyncio.sleep(0.1)  # inside __aexit__, waiting for the commit
            assert not closing.done() and open_journals()
            closing.cancel()
            with pytest.raises(asyncio.CancelledError):
                await closing
            assert not open_journals()  # the cancellation came out only after the close

        try:
            run(attempt)
        finally:
            for locker in lockers:
                locker.wait()
        assert steps_of(db, "g") == {"v": ("done", '"v"')}
        assert rows(db, "SELECT status FROM runs") == [("completed",)]

    def test_a_step_returning_while_the_run_is_being_marked_is_refused_clearly(
        self, tmp_path: Path, db: Path
    ) -> None:
        # With durability="power" the run is marked in the commit thread; another process
        # holds SQLite's write lock, so that takes a while. A step returning meanwhile
        # came too late to be part of the run: it is refused, not lost in silence.
        script = write_script(tmp_path, "locker.py", WRITE_LOCKER)
        lockers: list[subprocess.Popen[str]] = []
        go, marking = asyncio.Event(), asyncio.Event()

        async def late() -> str:
            await go.wait()
            return "late"

        async def block() -> asyncio.Future[str]:
            async with Journal("g", run="r", path=db, durability="power") as j:
                orphan = asyncio.ensure_future(j.async_step("late", late))
                locker = subprocess.Popen(
                    [sys.executable, str(script), str(db), "0.5"], stdout=subprocess.PIPE, text=True
                )
                lockers.append(locker)
                assert locker.stdout is not None and locker.stdout.readline() == "locked\n"
                marking.set()
            return orphan

        async def attempt() -> str:
            closing = asyncio.ensure_future(block())
            await marking.wait()
            await asyncio.sleep(0.1)  # the run's closing commit waits in the commit thread
            assert not closing.done()
            go.set()
            orphan = await closing
            with pytest.raises(LetItLoopError, match="returned while its journal was closing"):
                await orphan
            return "refused"

        try:
            assert run(attempt) == "refused"
        finally:
            for locker in lockers:
                locker.wait()
        assert steps_of(db, "g") == {}
        assert rows(db, "SELECT status FROM runs") == [("completed",)]


class TestCommitsOffTheEventLoop:
    def test_with_power_durability_no_commit_runs_on_the_loop_thread(self, db: Path) -> None:
        # Which thread runs each COMMIT of the journal's own connection (a real file):
        # with durability="power" every commit fsyncs, so none may run on the loop.
        commits: list[int] = []

        def trace(statement: str) -> None:
            if statement == "COMMIT":
                commits.append(threading.get_ident())

        async def value(i: int) -> int:
            return i

        async def attempt() -> int:
            async with Journal("g", run="r", path=db, durability="power") as j:
                sqlite_store(j).conn.set_trace_callback(trace)
                for i in range(5):  # one at a time
                    await j.async_step(f"seq:{i}", value, i)
                await asyncio.gather(*(j.async_step(f"g:{i}", value, i) for i in range(20)))
                task = asyncio.ensure_future(j.async_step("last", value, 0))
                await asyncio.sleep(0)  # queued when the block exits (committed by the close)
            await task
            return threading.get_ident()

        loop_thread = run(attempt)
        assert len(steps_of(db, "g")) == 26
        assert rows(db, "SELECT status FROM runs") == [("completed",)]
        assert len(commits) >= 3  # the steps' commits and the run's completion were traced
        assert loop_thread not in commits

    def test_a_coroutine_steps_commit_does_not_wait_for_plain_functions_in_worker_threads(
        self, db: Path
    ) -> None:
        # Plain-function steps hold every thread of the loop's default executor until
        # the coroutine step has returned; its commit must not need one of those threads.
        release = threading.Event()
        released: list[bool] = []

        def blocking() -> str:
            released.append(release.wait(5))
            return "done"

        async def quick() -> str:
            return "quick"

        async def attempt() -> list[str]:
            asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=2))
            async with Journal("g", run="r", path=db, durability="power") as j:
                blocked = [
                    asyncio.ensure_future(j.async_step(f"b:{i}", blocking)) for i in range(2)
                ]
                await asyncio.sleep(0.05)  # both hold a thread of the default executor
                got = await j.async_step("quick", quick)
                release.set()
                return [got, *await asyncio.gather(*blocked)]

        assert run(attempt) == ["quick", "done", "done"]
        assert released == [True, True]  # "quick" returned while both were still blocked
        assert len(steps_of(db, "g")) == 3


class TestTheCommitThread:
    def test_it_ends_with_the_journals_async_with_block(self, db: Path) -> None:
        async def value(i: int) -> int:
            return i

        # Only this journal's thread: another test's journal closed without ``async with``
        # leaves its own idling for commits.IDLE_SECONDS, under the same name.
        earlier = set(threading.enumerate())

        async def attempt() -> list[str]:
            async with Journal("g", path=db, durability="power") as j:
                await asyncio.gather(*(j.async_step(f"s:{i}", value, i) for i in range(10)))
                during = [
                    t
                    for t in threading.enumerate()
                    if t not in earlier and t.name.startswith("letitloop-commit")
                ]
            assert during
            return [t.name for t in during if t.is_alive()]

        assert run(attempt) == []

    def test_it_ends_by_itself_when_the_journal_was_closed_without_async_with(
        self, db: Path
    ) -> None:
        async def value(i: int) -> int:
            return i

        async def steps(j: Journal) -> None:
            await asyncio.gather(*(j.async_step(f"s:{i}", value, i) for i in range(10)))

        with Journal("g", path=db, durability="power") as j:
            asyncio.run(steps(j))
        assert len(steps_of(db, "g")) == 10
        deadline = time.monotonic() + 30  # it idles for commits.IDLE_SECONDS, then ends
        while any(t.name.startswith("letitloop-commit") for t in threading.enumerate()):
            assert time.monotonic() < deadline, "the commit thread never ended"
            time.sleep(0.05)
