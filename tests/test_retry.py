"""Step retries: a RetryPolicy, every failed try recorded, a backoff that survives SIGKILL."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import lil_forked, run_forked
from primitives_lab import Lab

from letitloop import Journal, RetryPolicy, durable, step, unchecked
from letitloop.errors import LetItLoopError
from letitloop.primitives.clock import utc_iso

#: No waiting between tries: these tests are about what is tried and recorded.
NOW = RetryPolicy(initial_backoff=0, jitter=0)


def tries(db: Path) -> list[tuple[Any, ...]]:
    """``(key, try, attempt, error, next_at)`` of every failed try, from a second connection."""
    conn = sqlite3.connect(db)
    try:
        return conn.execute(
            "SELECT key, try, attempt, error, next_at FROM step_tries ORDER BY key, try"
        ).fetchall()
    finally:
        conn.close()


def row(db: Path, key: str, table: str = "journal_g") -> tuple[Any, ...]:
    conn = sqlite3.connect(db)
    try:
        found = conn.execute(
            f"SELECT status, attempt, error, wake_at FROM {table} WHERE key = ?", (key,)
        ).fetchone()
        assert found is not None, key
        return tuple(found)
    finally:
        conn.close()


class Ticking:
    """A journal's clock: every look moves it on 0.5 s, and a pause skips to its end (what
    a clock with ``skip_to`` gets, as ``letitloop.testing.SkippingClock`` does): no real
    waiting, and times that differ between two looks."""

    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        self.now += 0.5
        return self.now

    def skip_to(self, when: float) -> None:
        self.now = max(self.now, when)


class Flaky:
    """Raises ``exc`` on its first ``failures`` calls, then returns ``"ok"``."""

    def __init__(self, failures: int, exc: type[BaseException] = TimeoutError) -> None:
        self.failures, self.exc, self.calls = failures, exc, 0

    def __call__(self, *args: Any, **kwargs: Any) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.exc(f"call {self.calls} failed")
        return "ok"


class TestARetryPolicy:
    def test_the_backoff_grows_by_the_multiplier_up_to_the_ceiling(self) -> None:
        p = RetryPolicy(initial_backoff=1, multiplier=3, max_backoff=20, jitter=0)
        assert [p.backoff(n) for n in range(1, 6)] == [1, 3, 9, 20, 20]

    def test_jitter_spreads_each_backoff_by_at_most_its_fraction(self) -> None:
        p = RetryPolicy(initial_backoff=10, jitter=0.2)
        assert p.backoff(1, rng=lambda: 0.0) == pytest.approx(8.0)
        assert p.backoff(1, rng=lambda: 0.999999) == pytest.approx(12.0, rel=1e-5)
        assert p.backoff(1, rng=lambda: 0.5) == pytest.approx(10.0)

    def test_it_retries_what_retry_on_names_but_not_never_retry_or_letitloops_errors(
        self,
    ) -> None:
        p = RetryPolicy(retry_on=OSError, never_retry=PermissionError)
        assert p.retries(TimeoutError()) and p.retries(ConnectionError())
        assert not p.retries(PermissionError()) and not p.retries(ValueError())
        assert not RetryPolicy().retries(LetItLoopError("a journal error is not a fluke"))

    @pytest.mark.parametrize(
        ("kwargs", "says"),
        [
            ({"max_attempts": 0}, "max_attempts"),
            ({"initial_backoff": -1}, "initial_backoff"),
            ({"max_backoff": float("inf")}, "max_backoff"),
            ({"multiplier": 0.5}, "multiplier"),
            ({"jitter": 2}, "jitter"),
            ({"retry_on": ValueError("x")}, "retry_on"),
            ({"never_retry": (int,)}, "never_retry"),
        ],
    )
    def test_a_setting_out_of_range_is_refused_when_made(
        self, kwargs: dict[str, Any], says: str
    ) -> None:
        with pytest.raises(LetItLoopError, match=f"RetryPolicy\\({says}="):
            RetryPolicy(**kwargs)


class TestAStepWithARetryPolicy:
    def test_it_is_tried_again_until_it_returns_and_each_failed_try_is_a_row(
        self, db: Path
    ) -> None:
        fn = Flaky(2)
        with Journal("g", path=db) as j:
            assert j.step("fetch", fn, retry=NOW) == "ok"
            assert j.attempt == 1
        assert fn.calls == 3
        assert tries(db) == [
            ("fetch", 1, 1, "TimeoutError: call 1 failed", tries(db)[0][4]),
            ("fetch", 2, 1, "TimeoutError: call 2 failed", tries(db)[1][4]),
        ]
        assert all(t[4] is not None for t in tries(db))  # each had a next try
        assert row(db, "fetch") == ("done", 1, None, None)

    def test_its_backoffs_are_recorded_as_the_times_of_the_next_tries(self, db: Path) -> None:
        clock = Ticking(1000.0)
        policy = RetryPolicy(initial_backoff=10, multiplier=2, jitter=0)
        conn = sqlite3.connect(db)
        with Journal("g", path=db, clock=clock) as j:
            j.step("fetch", Flaky(2), retry=policy)
        failed = conn.execute("SELECT failed_at, next_at FROM step_tries ORDER BY try").fetchall()
        conn.close()
        gaps = [
            (time_of(nxt) - time_of(at)) for at, nxt in failed
        ]  # 10 s, then 20 s, from each failure
        assert gaps == [10.0, 20.0]

    def test_it_gives_up_after_max_attempts_and_raises_the_last_error(self, db: Path) -> None:
        fn = Flaky(10)
        with pytest.raises(TimeoutError, match="call 3 failed"), Journal("g", path=db) as j:
            j.step("fetch", fn, retry=RetryPolicy(max_attempts=3, initial_backoff=0))
        assert fn.calls == 3
        assert [t[1] for t in tries(db)] == [1, 2, 3]
        assert tries(db)[-1][4] is None  # no next try: the step raised
        assert row(db, "fetch")[:3] == ("failed", 1, "TimeoutError: call 3 failed")

    def test_an_exception_it_does_not_retry_is_raised_at_once(self, db: Path) -> None:
        fn = Flaky(1, exc=ValueError)
        policy = RetryPolicy(retry_on=OSError, initial_backoff=0)
        with pytest.raises(ValueError), Journal("g", path=db) as j:
            j.step("parse", fn, retry=policy)
        assert fn.calls == 1 and [t[1:4] for t in tries(db)] == [
            (1, 1, "ValueError: call 1 failed")
        ]

    def test_a_retry_keyword_that_is_not_a_policy_is_passed_to_the_function(self, db: Path) -> None:
        def get(url: str, retry: int = 0) -> str:
            return f"{url} retry={retry}"

        with Journal("g", path=db) as j:
            assert j.step("get", get, "u", retry=3) == "u retry=3"

    def test_a_journals_policy_applies_to_every_step_that_passes_none(self, db: Path) -> None:
        a, b = Flaky(1), Flaky(1)
        with Journal("g", path=db, retry=NOW) as j:
            assert j.step("a", a) == "ok"
            with pytest.raises(TimeoutError):
                j.step("b", b, retry=RetryPolicy(max_attempts=1))  # its own: no retry
        assert (a.calls, b.calls) == (2, 1)

    def test_durable_carries_a_default_policy(self, db: Path) -> None:
        fn = Flaky(2)

        @durable(goal_id="g", path=db, retry=NOW)
        def job() -> str:
            return step("fetch", fn)

        assert job() == "ok" and fn.calls == 3

    def test_a_step_that_returned_replays_without_any_try(self, db: Path) -> None:
        with Journal("g", run="r", path=db) as j:
            j.step("fetch", Flaky(1), retry=NOW)
        again = Flaky(0)
        with Journal("g", run="r", path=db) as j:
            assert j.step("fetch", again, retry=NOW) == "ok"
        assert again.calls == 0 and len(tries(db)) == 1

    def test_a_step_that_gave_up_gets_a_fresh_budget_on_the_next_attempt(self, db: Path) -> None:
        policy = RetryPolicy(max_attempts=2, initial_backoff=0)
        with pytest.raises(TimeoutError), Journal("g", path=db) as j:
            j.step("fetch", Flaky(5), retry=policy)
        fn = Flaky(1)
        with Journal("g", path=db) as j:
            assert j.attempt == 2 and j.step("fetch", fn, retry=policy) == "ok"
        # Tries are numbered over the step's life: 1, 2 in attempt 1, then 3 in attempt 2.
        assert [(t[1], t[2]) for t in tries(db)] == [(1, 1), (2, 1), (3, 2)]

    def test_letitloops_own_errors_are_never_retried(self, db: Path) -> None:
        fn = Flaky(3, exc=LetItLoopError)
        with pytest.raises(LetItLoopError), Journal("g", path=db) as j:
            j.step("s", fn, retry=NOW)
        assert fn.calls == 1

    @pytest.mark.parametrize("kind", ["coroutine", "plain"])
    def test_an_async_step_is_retried_the_same_way(self, db: Path, kind: str) -> None:
        fn = Flaky(2)

        async def coro() -> str:
            return fn()

        async def main() -> str:
            async with Journal("g", path=db) as j:
                return await j.async_step("fetch", coro if kind == "coroutine" else fn, retry=NOW)

        assert asyncio.run(main()) == "ok"
        assert fn.calls == 3 and [t[1] for t in tries(db)] == [1, 2]
        assert row(db, "fetch")[0] == "done"


class TestAStepWhoseJournalClosesWhileItRuns:
    def test_its_failed_try_is_not_recorded_into_the_run_it_no_longer_holds(self, db: Path) -> None:
        began, closed = threading.Event(), threading.Event()

        def fn() -> str:
            began.set()
            closed.wait(10)
            raise TimeoutError("failed after the journal closed")

        errors: list[BaseException] = []
        j = Journal("g", path=db).open()

        def run() -> None:
            try:
                j.step("fetch", fn, retry=NOW)
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        assert began.wait(10)
        j.close()
        closed.set()
        thread.join(10)
        assert not thread.is_alive()
        assert tries(db) == []  # nothing written for a run this journal let go of
        assert len(errors) == 1 and type(errors[0]) is LetItLoopError
        assert "is not open" in str(errors[0])


class TestAJournalOpenedAgain:
    def test_it_numbers_a_steps_tries_after_those_another_journal_recorded_meanwhile(
        self, db: Path
    ) -> None:
        fn = Flaky(100)
        policy = RetryPolicy(max_attempts=2, initial_backoff=0, jitter=0)
        first = Journal("g", run="r", path=db)
        for journal in (first, Journal("g", run="r", path=db), first):
            with pytest.raises(TimeoutError), journal:
                journal.step("fetch", fn, retry=policy)
        assert [(t[1], t[2]) for t in tries(db)] == [(1, 1), (2, 1), (3, 2), (4, 2), (5, 3), (6, 3)]


def time_of(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso).timestamp()


# -- a backoff interrupted by SIGKILL: time is the parent's, through a clock file ---------

CHILD = """
import asyncio, os, sys
from letitloop import Journal, RetryPolicy

db, log, clock_file, mode = sys.argv[1:5]

def clock():
    with open(clock_file) as f:
        return float(f.read())

def note(*words):
    with open(log, "a") as f:
        f.write(" ".join(map(str, words)) + "\\n")

def flaky():
    n = 1 + sum(1 for line in open(log) if line.startswith("try ")) if os.path.exists(log) else 1
    note("try", n, clock(), os.getpid())
    if n < 3:
        raise TimeoutError(f"try {n} timed out")
    return "ok"

async def flaky_async():
    return flaky()

policy = RetryPolicy(max_attempts=5, initial_backoff=4, multiplier=2, jitter=0)
if mode == "sync":
    with Journal("r", run="the-run", path=db, clock=clock) as j:
        note("result", j.step("flaky", flaky, retry=policy))
else:
    async def main():
        async with Journal("r", run="the-run", path=db, clock=clock) as j:
            note("result", await j.async_step("flaky", flaky_async, retry=policy))
    asyncio.run(main())
"""


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    made = Lab(tmp_path, CHILD)
    yield made
    made.close()


class TestABackoffInterruptedBySigkill:
    @pytest.mark.parametrize("mode", ["sync", "async"])
    def test_the_next_attempt_waits_what_remains_not_from_zero_and_not_skipped(
        self, lab: Lab, mode: str
    ) -> None:
        first = lab.spawn(mode)
        # Try 1 fails at t=1000: the step says 'retrying' until t=1004.
        retrying = lab.until(
            "the step is retrying",
            lambda: lab.sql(
                "SELECT status, wake_at, attempt FROM journal_r WHERE key = 'flaky' "
                "AND status = 'retrying'"
            ),
            first,
        )
        assert retrying == [("retrying", utc_iso(1004), 1)]
        lab.set_clock(1001)  # one second into the backoff
        os.kill(first.pid, signal.SIGKILL)
        first.communicate()

        lab.set_clock(1002)
        second = lab.spawn(mode)
        lab.until(
            "the second attempt opened the run",
            lambda: lab.sql("SELECT 1 FROM attempts WHERE attempt = 2"),
            second,
        )
        time.sleep(0.3)  # a skipped backoff would try now, at t=1002
        assert len(lab.lines("try ")) == 1
        lab.set_clock(1004)  # from zero it would wait until 1006
        try2 = lab.until("try 2 at the recorded time", lambda: lab.lines("try 2 "), second)
        assert float(try2[0][2]) == 1004 and int(try2[0][3]) == second.pid
        lab.until(
            "try 2's failure is recorded",
            lambda: lab.sql("SELECT 1 FROM step_tries WHERE try = 2"),
            second,
        )
        lab.set_clock(1012)  # try 2 failed at 1004: 8 s of backoff
        _, err = second.communicate(timeout=30)
        assert second.returncode == 0, err
        assert lab.lines("result") == [["result", "ok"]]
        assert lab.sql("SELECT try, attempt, next_at FROM step_tries ORDER BY try") == [
            (1, 1, utc_iso(1004)),
            (2, 2, utc_iso(1012)),
        ]
        assert lab.sql("SELECT status, attempt, wake_at FROM journal_r") == [("done", 2, None)]

    def test_lil_show_says_when_the_next_try_is_due(self, lab: Lab) -> None:
        child = lab.spawn("sync")
        lab.until(
            "retrying",
            lambda: lab.sql("SELECT 1 FROM journal_r WHERE status = 'retrying'"),
            child,
        )
        shown = lil_forked("--db", str(lab.db), "show", "r")
        os.kill(child.pid, signal.SIGKILL)
        child.communicate()
        assert shown.returncode == 0, shown.stderr
        assert "retrying  'flaky': a try failed (TimeoutError: try 1 timed out)" in shown.stdout
        assert "failed tries" in shown.stdout
        assert "flaky  try 1  attempt 1" in shown.stdout


PARENT = """
import os, sys
from letitloop import Journal, RetryPolicy, step, usage
from letitloop.testing import SkippingClock

db, log, backoff = sys.argv[1], sys.argv[2], float(sys.argv[3])
# "skip": the backoff left is skipped, not waited (its wait is TestABackoffInterruptedBySigkill's)
clock = SkippingClock() if sys.argv[4:] == ["skip"] else None

def note(what):
    with open(log, "a") as f:  # counted outside the journal
        f.write(what + "\\n")

def child(x):
    note(f"child {x}")
    usage(cost=0.25)
    return x

def flaky_child():
    note("flaky")
    usage(cost=0.5)  # a paid call, whether it fails or not
    if sum(1 for line in open(log) if line == "flaky\\n") == 1:
        raise RuntimeError("child failed once")
    return "ok"

def parent():
    a = step("c", child, 1)
    b = step("d", flaky_child)  # fails in the first try, so the parent does
    note("parent tried")
    return [a, b]

with Journal("g", run="r", path=db, clock=clock) as j:
    print(j.step("p", parent, retry=RetryPolicy(initial_backoff=backoff, jitter=0)), flush=True)
"""


class TestARetriedParentStep:
    """A parent step tried again meets its children as a new attempt would, whether the
    next try comes in the same process or after a SIGKILL between the tries: a child
    that returned replays (never run again for that run), one that failed keeps its key."""

    def keys_and_calls(self, db: Path, log: Path) -> tuple[list[Any], list[str]]:
        conn = sqlite3.connect(db)
        try:
            keys = conn.execute("SELECT key, status FROM journal_g ORDER BY key").fetchall()
            # Every paid call counted once: c once, d twice (it failed, then returned).
            (spent,) = conn.execute(
                "SELECT (SELECT sum(cost) FROM journal_g) + "
                "(SELECT coalesce(sum(cost), 0) FROM step_tries)"
            ).fetchone()
        finally:
            conn.close()
        assert spent == pytest.approx(0.25 + 2 * 0.5)
        return keys, log.read_text().splitlines()

    def test_in_one_process_its_returned_children_replay(self, tmp_path: Path) -> None:
        db, log, script = tmp_path / "journal.db", tmp_path / "calls.log", tmp_path / "p.py"
        script.write_text(PARENT, encoding="utf-8")
        done = run_forked(script, str(db), str(log), "0")
        assert done.returncode == 0, done.stderr
        keys, calls = self.keys_and_calls(db, log)
        # Try 1: c returned, d failed (so p failed). Try 2: c replays, d runs again
        # under its own key, p returns.
        assert keys == [("p", "done"), ("p/c", "done"), ("p/d", "done")]
        assert calls == ["child 1", "flaky", "flaky", "parent tried"]

    def test_after_a_sigkill_between_the_tries_they_replay_the_same_way(
        self, tmp_path: Path
    ) -> None:
        db, log, script = tmp_path / "journal.db", tmp_path / "calls.log", tmp_path / "p.py"
        script.write_text(PARENT, encoding="utf-8")
        first = subprocess.Popen(
            [sys.executable, str(script), str(db), str(log), "3"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 30
            while row_status(db, "p") != "retrying":  # in its 3 s backoff
                assert time.monotonic() < deadline and first.poll() is None
                time.sleep(0.02)
        finally:
            first.send_signal(signal.SIGKILL)
            first.communicate()
        assert first.returncode == -signal.SIGKILL
        # Skips what remains of the backoff (a skipping clock), then tries again.
        done = run_forked(script, str(db), str(log), "3", "skip")
        assert done.returncode == 0, done.stderr
        keys, calls = self.keys_and_calls(db, log)
        assert keys == [("p", "done"), ("p/c", "done"), ("p/d", "done")]
        assert calls == ["child 1", "flaky", "flaky", "parent tried"]


def row_status(db: Path, key: str) -> str | None:
    if not db.exists():
        return None
    conn = sqlite3.connect(db)
    try:
        got = conn.execute("SELECT status FROM journal_g WHERE key = ?", (key,)).fetchall()
    except sqlite3.OperationalError:
        return None
    finally:
        conn.close()
    return got[0][0] if got else None


class TestARetriedAsyncParentStep:
    def test_its_returned_children_replay_in_the_next_try(self, db: Path) -> None:
        calls: list[str] = []

        async def child(x: int) -> int:
            calls.append(f"child {x}")
            return x

        async def parent(j: Journal) -> int:
            got = await j.async_step("c", child, 1)
            calls.append("parent tried")
            if calls.count("parent tried") == 1:
                raise RuntimeError("parent failed once")
            return got

        async def main() -> int:
            async with Journal("g", path=db) as j:
                return await j.async_step("p", parent, unchecked(j), retry=NOW)

        assert asyncio.run(main()) == 1
        assert calls == ["child 1", "parent tried", "parent tried"]
        conn = sqlite3.connect(db)
        try:
            keys = conn.execute("SELECT key FROM journal_g ORDER BY key").fetchall()
        finally:
            conn.close()
        assert keys == [("p",), ("p/c",)]
