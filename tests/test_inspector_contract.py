"""The inspection contract: what ``lil`` and the library read and change from outside a run,
run over every store that has an ``Inspector``, with the same assertions.

Each case runs the public functions (``letitloop.inspection``'s ``list_runs``,
``show_run``, ``export_run``; ``letitloop.maintenance``'s ``reset_run``,
``fork_run``, ``gc_runs``; ``letitloop.send`` and ``letitloop.cancel``) on a
journal opened through ``open_inspector`` by its path: a journal file
(SQLite) and ``memory://NAME`` (the in-memory store, in this process). A
store joins by one entry in ``STORES``: its location and how one of its
holders dies (a SIGKILLed process for a file; for the in-memory store, whose
runs die with the process, a journal abandoned as in ``tests/test_contract.py``).
"""

from __future__ import annotations

import json
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pg_server
import pytest
from helpers import spawn_python, write_script

import letitloop
from letitloop import Budget, Journal, reserve, usage
from letitloop.errors import (
    BudgetExceededError,
    EncryptionKeyError,
    JournalFileError,
    LetItLoopError,
    NotWaitingError,
    RunCancelledError,
    RunHeldError,
    UnknownStoreError,
)
from letitloop.identity.versions import source_version
from letitloop.inspection import (
    Inspector,
    RunInfo,
    export_run,
    find_run,
    list_runs,
    open_inspector,
    resumable_run,
    show_run,
)
from letitloop.inspection.verify import chain_of, check_chain, verify_key
from letitloop.maintenance import fork_run, gc_runs, reset_run
from letitloop.primitives.waits import RunWaiting
from letitloop.runtext.words import ending
from letitloop.stores import schemes
from letitloop.stores.memory.storage import abandon, open_memory

#: A holder that opens goal ``crash``, records step ``a``, says so, and is killed.
HOLDER = """
    import sys, time
    from letitloop import Journal
    j = Journal("crash", path=sys.argv[1]).open()
    j.step("a", str, 1)
    print("ready", flush=True)
    time.sleep(60)
"""


@dataclass(frozen=True)
class StoreCase:
    """A store the inspection contract runs over; this one is a journal file."""

    name: str

    def location(self, tmp_path: Path) -> str:
        return str(tmp_path / "journal.db")

    def crash(self, location: str, tmp_path: Path) -> None:
        """Leave run of goal ``crash`` recorded as running, step ``a`` done, its holder dead."""
        child = spawn_python(write_script(tmp_path, "holder.py", HOLDER), location)
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready"
            child.send_signal(signal.SIGKILL)
        finally:
            child.wait(30)


@dataclass(frozen=True)
class MemoryCase(StoreCase):
    """The in-memory store: one process; a holder dies by being abandoned mid-run."""

    def location(self, tmp_path: Path) -> str:
        return f"memory://inspector-contract-{uuid.uuid4().hex}"

    def crash(self, location: str, tmp_path: Path) -> None:
        j = Journal("crash", path=location).open()
        j.step("a", str, 1)
        abandon(j.store)  # its holds released, as a SIGKILLed process's locks
        with pytest.raises(JournalFileError):
            j.close()  # what it tries after its death reaches nothing


@dataclass(frozen=True)
class PostgresCase(StoreCase):
    """A PostgreSQL journal: a schema of its own on the tests' server; a holder SIGKILLed."""

    def location(self, tmp_path: Path) -> str:
        return pg_server.location()


STORES = [StoreCase("sqlite"), MemoryCase("memory"), PostgresCase("postgres")]


@pytest.fixture(params=STORES, ids=lambda s: s.name)
def store(request: pytest.FixtureRequest) -> StoreCase:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def location(store: StoreCase, tmp_path: Path) -> str:
    return store.location(tmp_path)


@pytest.fixture
def inspect(location: str) -> Iterator[Callable[..., Inspector]]:
    """Opens inspectors of the journal by its path (closed at the end)."""
    opened: list[Inspector] = []

    def opener(*, write: bool = False) -> Inspector:
        opened.append(open_inspector(location, write=write))
        return opened[-1]

    yield opener
    for inspector in opened:
        inspector.close()


#: A key of 16 bytes or more: an encryption key and a seal key.
SECRET = "k" * 16 + "-inspector-contract"


def fail(x: int) -> int:
    raise ValueError(f"bad {x}")


def completed(location: str, goal: str = "done", steps: int = 3) -> str:
    with Journal(goal, path=location) as j:
        for i in range(steps):
            j.step(f"s{i}", str, i)
        return j.run_id


def failed(location: str) -> str:
    j = Journal("broken", path=location)
    with pytest.raises(ValueError, match="bad 7"), j:
        j.step("ok", str, 1)
        j.step("bad", fail, 7)
    return j.run_id


def waiting(location: str, goal: str = "approve") -> str:
    j = Journal(goal, path=location)
    with pytest.raises(RunWaiting), j:
        j.step("draft", str, "text")
        j.wait_for("approval", stop_after=0)
    return j.run_id


def one(runs: list[RunInfo], goal: str) -> RunInfo:
    found = [r for r in runs if r.goal == goal]
    assert len(found) == 1, found
    return found[0]


class TestARunThatCompleted:
    def test_is_listed_shown_and_exported_with_its_steps_and_result(
        self, location: str, inspect: Callable[..., Inspector]
    ) -> None:
        run_id = completed(location)
        run = one(list_runs(inspect()), "done")
        assert (run.id, run.state, run.steps_done, run.attempts) == (run_id, "completed", 3, 1)
        detail = show_run(inspect(), run_id)
        assert [r.key for r in detail.rows] == ["s0", "s1", "s2"]
        assert [a.outcome for a in detail.attempts] == ["completed"]
        exported = export_run(inspect(), run_id)
        assert [r["result"] for r in exported["rows"]] == ["0", "1", "2"]
        assert json.dumps(exported)  # JSON-ready

    def test_a_second_run_for_the_same_input_counts_the_previous_ones_steps(
        self, location: str, inspect: Callable[..., Inspector]
    ) -> None:
        completed(location)
        time.sleep(0.002)  # ids of one millisecond sort in no particular order
        second = completed(location, steps=2)
        assert show_run(inspect(), second).previous_steps == 3

    def test_is_found_by_state_name_and_goal_and_not_by_others(
        self, location: str, inspect: Callable[..., Inspector]
    ) -> None:
        completed(location)
        failed(location)
        journal = inspect()
        assert [r.goal for r in list_runs(journal, status="completed")] == ["done"]
        assert [r.goal for r in list_runs(journal, status="failed")] == ["broken"]
        assert [r.goal for r in list_runs(journal, "broken")] == ["broken"]
        assert [r.goal for r in list_runs(journal)] == ["broken", "done"]  # newest first


class TestTheCodeVersionOfEachAttempt:
    def test_is_shown_per_attempt_and_the_latest_one_filters_the_runs(
        self, location: str, inspect: Callable[..., Inspector]
    ) -> None:
        j = Journal("deploy", path=location, version="v1-41c0")
        with pytest.raises(ValueError, match="bad 1"), j:
            j.step("ok", str, 1)
            j.step("bad", fail, 1)
        with Journal("deploy", path=location, version="v2-b7e1") as j:
            j.step("ok", str, 1)
        completed(location)  # made by this file: its source's hash
        journal = inspect()
        run = one(list_runs(journal), "deploy")
        assert run.version == "v2-b7e1"
        assert [a.version for a in show_run(journal, run.id).attempts] == ["v1-41c0", "v2-b7e1"]
        assert [r.id for r in list_runs(journal, version="v2")] == [run.id]
        assert list_runs(journal, version="v1") == []  # its latest attempt ran v2
        mine = source_version(__file__)
        assert mine is not None and len(mine) == 12
        assert one(list_runs(journal), "done").version == mine


class TestRunsFoundBy:
    def test_name_input_prefix_and_page_find_the_same_runs(
        self, location: str, inspect: Callable[..., Inspector]
    ) -> None:
        ids = {}
        for name, city in (("paris-1", "Paris"), ("paris-2", "Paris"), ("rome-1", "Rome")):
            with Journal("trip", run=name, path=location, input={"city": city, "n": 1}) as j:
                j.step("book", str, city)
                ids[name] = j.run_id
            time.sleep(0.002)  # creation order, not ids of one millisecond
        journal = inspect()
        named = [r.name for r in list_runs(journal, name="paris-*")]
        assert named == ["paris-2", "paris-1"]  # newest made first
        assert [r.name for r in list_runs(journal, inputs=[("city", "Rome")])] == ["rome-1"]
        assert [r.name for r in list_runs(journal, inputs=[("n", "1"), ("city", "Paris")])] == [
            "paris-2",
            "paris-1",
        ]
        assert list_runs(journal, inputs=[("n", '"1"')]) == []  # the text "1" is not 1
        assert [r.name for r in list_runs(journal, limit=1, offset=1)] == ["paris-2"]
        assert find_run(journal, "rome-1").id == ids["rome-1"]
        assert find_run(journal, ids["paris-1"][:12].lower()).name == "paris-1"
        assert find_run(journal, "paris-2", goal="trip").id == ids["paris-2"]
        assert journal.goal_names("TR") == ["trip"]
        assert journal.step_keys("rome-1", "bo") == ["book"]
        assert [r.name for r in journal.run_refs("PARIS", 5)] == ["paris-2", "paris-1"]

    def test_a_goal_names_the_run_its_next_unnamed_opener_resumes(
        self, location: str, inspect: Callable[..., Inspector]
    ) -> None:
        completed(location, goal="broken")
        run_id = failed(location)
        found = resumable_run(inspect(), "broken")
        assert found is not None and found.id == run_id
        with Journal("broken", path=location) as j:
            assert j.run_id == run_id


class TestARunThatFailed:
    def test_shows_its_failed_step_and_error(
        self, location: str, inspect: Callable[..., Inspector]
    ) -> None:
        run_id = failed(location)
        run = one(list_runs(inspect()), "broken")
        assert (run.id, run.state, run.steps_done, run.steps_failed) == (run_id, "failed", 1, 1)
        assert run.error is not None and "bad 7" in run.error
        rows = show_run(inspect(), run_id).rows
        assert [(r.key, r.status) for r in rows] == [("ok", "done"), ("bad", "failed")]

    def test_reset_forgets_it_and_the_next_opener_starts_a_new_run(
        self, location: str, inspect: Callable[..., Inspector]
    ) -> None:
        run_id = failed(location)
        forgotten = reset_run(inspect(write=True), "broken")
        assert forgotten.id == run_id
        assert list_runs(inspect(), "broken") == []
        with Journal("broken", path=location) as j:
            assert j.run_id != run_id
            assert j.step("ok", str, 2) == "2"  # nothing replayed: called again


class TestARunThatRetried:
    def test_shows_its_failed_try_and_counts_the_usage_of_every_call_once(
        self, location: str, inspect: Callable[..., Inspector]
    ) -> None:
        calls: list[int] = []

        def flaky(x: int) -> int:
            calls.append(x)
            letitloop.usage(input_tokens=10, output_tokens=5, cost=0.25, model="m")
            if len(calls) == 1:
                raise ValueError("first try")
            return x

        policy = letitloop.RetryPolicy(max_attempts=2, initial_backoff=0.001, jitter=0)
        with Journal("retry", path=location) as j:
            assert j.step("call", flaky, 3, retry=policy) == 3
            run_id = j.run_id
        detail = show_run(inspect(), run_id)
        assert [(t.key, t.number, t.error) for t in detail.tries] == [
            ("call", 1, "ValueError: first try")
        ]
        assert (detail.tries[0].input_tokens, detail.tries[0].model) == (10, "m")
        run = detail.run
        assert (run.input_tokens, run.output_tokens, run.cost) == (20, 10, 0.5)
        assert (detail.usage.input_tokens, detail.usage.steps) == (20, 1)


class TestARunWhoseHolderDied:
    def test_is_crashed_and_the_next_opener_resumes_it(
        self, store: StoreCase, location: str, tmp_path: Path, inspect: Callable[..., Inspector]
    ) -> None:
        store.crash(location, tmp_path)
        run = one(list_runs(inspect()), "crash")
        assert (run.state, run.status, run.steps_done) == ("crashed", "running", 1)
        with Journal("crash", path=location) as j:
            assert j.run_id == run.id
            assert j.step("a", str, 1) == "1"
            j.step("b", str, 2)
        after = one(list_runs(inspect()), "crash")
        assert (after.state, after.attempts) == ("completed", 2)
        detail = show_run(inspect(), run.id)
        assert [(r.key, r.attempt) for r in detail.rows] == [("a", 1), ("b", 2)]  # a replayed
        assert [a.attempt for a in detail.attempts] == [1, 2]


class TestARunThatWaits:
    def test_takes_a_value_sent_once_and_resumes_with_it(
        self, location: str, inspect: Callable[..., Inspector]
    ) -> None:
        run_id = waiting(location)
        run = one(list_runs(inspect()), "approve")
        assert run.state == "waiting"
        assert [(p.key, p.status) for p in run.pauses] == [("approval", "waiting")]
        sent = letitloop.send(run_id, "approval", {"ok": True}, path=location)
        assert (sent.key, sent.live) == ("approval", False)
        with pytest.raises(NotWaitingError, match="already received a value"):
            letitloop.send(run_id, "approval", {"ok": False}, path=location)
        with Journal("approve", path=location) as j:
            assert j.run_id == run_id
            assert j.wait_for("approval") == {"ok": True}
        assert one(list_runs(inspect()), "approve").state == "completed"

    def test_a_live_waiter_in_this_process_wakes_with_the_value_sent(
        self, location: str, inspect: Callable[..., Inspector]
    ) -> None:
        got: list[Any] = []
        ready = threading.Event()

        def waiter() -> None:
            with Journal("live", path=location) as j:
                j.step("draft", str, "text")
                ready.set()
                got.append(j.wait_for("approval", stop_after=20))

        thread = threading.Thread(target=waiter)
        thread.start()
        assert ready.wait(20)
        deadline = time.monotonic() + 20
        while not one(list_runs(inspect()), "live").pauses and time.monotonic() < deadline:
            time.sleep(0.01)
        started = time.monotonic()
        sent = letitloop.send("live", "approval", [1, 2], path=location)
        thread.join(20)
        assert sent.live and got == [[1, 2]]
        assert time.monotonic() - started < 5  # woken by the change, not by stop_after

    def test_each_attempt_that_stopped_to_wait_is_shown_stopped_for_its_wait(
        self, location: str, inspect: Callable[..., Inspector]
    ) -> None:
        def attempt() -> None:
            with Journal("approve", path=location) as j:
                j.step("draft", str, "text")
                j.wait_for("approval", stop_after=0)
                j.wait_for("publish", stop_after=0)

        for answer in ("approval", "publish"):
            for _ in range(2):  # the second run is made before the value came
                with pytest.raises(RunWaiting):
                    attempt()
            letitloop.send("approve", answer, True, path=location)
        attempt()
        detail = show_run(inspect(), one(list_runs(inspect()), "approve").id)
        assert [(a.outcome, a.step) for a in detail.attempts] == [
            ("waiting", "approval"),
            ("waiting", "approval"),  # the same wait
            ("waiting", "publish"),
            ("waiting", "publish"),
            ("completed", None),
        ]
        assert ending(detail.attempts[2]) == "stopped to wait for 'publish'"

    def test_a_goal_names_its_run_waiting_for_the_name(self, location: str) -> None:
        run_id = waiting(location)
        assert letitloop.send("approve", "approval", 1, path=location).run.id == run_id


class TestACancel:
    def test_of_a_run_no_process_holds_marks_it_cancelled_at_once(
        self, location: str, inspect: Callable[..., Inspector]
    ) -> None:
        run_id = waiting(location)
        done = letitloop.cancel(run_id, reason="not needed", path=location)
        assert done.at_once and done.run.state == "cancelled"
        run = one(list_runs(inspect()), "approve")
        assert run.cancel_reason is not None and "not needed" in run.cancel_reason
        with pytest.raises(NotWaitingError, match="cancelled"):
            letitloop.send(run_id, "approval", 1, path=location)

    def test_of_a_held_run_asks_its_holder_which_stops_at_its_next_wait(
        self, location: str, inspect: Callable[..., Inspector]
    ) -> None:
        j = Journal("held", path=location).open()
        try:
            j.step("a", str, 1)
            done = letitloop.cancel(j.run_id, reason="stop", path=location)
            assert not done.at_once
            assert done.run.state == "running" and done.run.cancel_requested_at is not None
            with pytest.raises(RunCancelledError):
                j.wait_for("go", stop_after=10)  # a wait looks at the journal at once
        finally:
            j.close()
        assert one(list_runs(inspect()), "held").state == "cancelled"


class TestAFork:
    def test_keeps_the_rows_before_the_step_and_the_next_opener_runs_the_rest(
        self, location: str, inspect: Callable[..., Inspector]
    ) -> None:
        source = completed(location)
        forked = fork_run(inspect(write=True), source, "s1")
        assert forked.copied == ["s0"]
        assert forked.run.state == "pending" and forked.run.forked_from == source
        assert forked.source.steps_done == 3  # the source is unchanged
        with Journal("done", path=location) as j:
            assert j.run_id == forked.run.id
            assert [j.step(f"s{i}", str, i) for i in range(3)] == ["0", "1", "2"]
        rows = show_run(inspect(), forked.run.id).rows
        assert [(r.key, r.attempt) for r in rows] == [("s0", 0), ("s1", 1), ("s2", 1)]
        runs = list_runs(inspect(), "done")
        assert [(r.id, r.state, r.steps_done) for r in runs] == [
            (forked.run.id, "completed", 3),
            (source, "completed", 3),
        ]

    def test_of_a_run_a_live_process_holds_is_refused(
        self, location: str, inspect: Callable[..., Inspector]
    ) -> None:
        with Journal("held", path=location) as j:
            j.step("a", str, 1)
            with pytest.raises(RunHeldError):
                fork_run(inspect(write=True), j.run_id, "a")

    def test_its_budget_counts_the_sources_spend_and_reservations_before_the_fork_point(
        self, location: str, inspect: Callable[..., Inspector]
    ) -> None:
        # So forking a run that reached its budget cannot spend that budget again.
        budget = Budget(tokens=1000)

        def cut_short() -> None:
            reserve(tokens=200)
            raise KeyboardInterrupt  # as a cancelled call: its reservation stays counted

        with pytest.raises(KeyboardInterrupt), Journal("g", path=location, budget=budget) as j:
            j.step("a", lambda: usage(input_tokens=300))
            j.step("b", cut_short)
        with Journal("g", path=location, budget=budget) as j:
            j.step("b", lambda: usage(input_tokens=100))
            j.step("c", lambda: usage(input_tokens=250))
            j.step("d", lambda: usage(input_tokens=50))
        forked = fork_run(inspect(write=True), find_run(inspect(), "g"), "c")
        assert forked.copied == ["letitloop:budget:tokens=1000", "a", "b"]
        # Carried: a's 300, b's 100 and its call cut short (200): 600; c and d are not.
        with Journal("g", path=location, budget=budget) as j:
            assert j.run_id == forked.run.id
            with pytest.raises(BudgetExceededError) as refused:
                j.step("c", lambda: reserve(tokens=401))
            assert (refused.value.tokens, refused.value.reserved_tokens) == (400, 200)
            assert j.step("e", lambda: getattr(reserve(tokens=400), "tokens", None)) == 400

    def test_of_an_encrypted_run_encrypts_the_copies_again_for_the_fork(
        self, location: str, inspect: Callable[..., Inspector], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        pytest.importorskip("cryptography")
        called: list[str] = []

        def upper(k: str) -> str:
            called.append(k)
            return k.upper()

        with Journal("g", path=location, run="r", encryption_key=SECRET) as j:
            source = j.run_id
            assert [j.step(k, upper, k) for k in "abc"] == ["A", "B", "C"]
        with pytest.raises(EncryptionKeyError, match="copies must be encrypted again"):
            fork_run(inspect(write=True), source, "c")  # no LETITLOOP_ENCRYPTION_KEY
        assert [r.id for r in list_runs(inspect(), "g")] == [source]  # nothing was forked
        monkeypatch.setenv("LETITLOOP_ENCRYPTION_KEY", SECRET)
        forked = fork_run(inspect(write=True), source, "c")
        with Journal("g", path=location, run="r", encryption_key=SECRET) as j:
            assert j.run_id == forked.run.id
            got = [j.step(k, upper, k) for k in "abc"]
        assert got == ["A", "B", "C"] and called == ["a", "b", "c", "c"]  # the copies replay

    def test_with_the_seal_key_seals_the_copies_as_the_new_runs_chain(
        self, location: str, inspect: Callable[..., Inspector], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("LETITLOOP_SEAL_KEY", SECRET)
        with Journal("g", path=location, seal=SECRET) as j:
            for k in "abcd":
                j.step(k, str, k)
        journal = inspect(write=True)
        forked = fork_run(journal, find_run(journal, "g"), "c").run
        found = check_chain(forked.id, "g", *chain_of(inspect(), forked), verify_key())
        assert (found.state, found.entries, found.unsealed) == ("sealed", 2, [])


class TestGc:
    def test_removes_old_runs_and_their_goals_and_leaves_a_held_one(
        self, location: str, inspect: Callable[..., Inspector]
    ) -> None:
        completed(location)
        failed(location)
        later = time.time() + 3600
        with Journal("held", path=location) as j:
            j.step("a", str, 1)
            journal = inspect(write=True)
            dry = gc_runs(journal, timedelta(minutes=1), dry_run=True, now=later)
            assert sorted(r.goal for r in dry.removed) == ["broken", "done"]
            assert list_runs(journal) != [] and len(list_runs(journal)) == 3  # nothing gone
            result = gc_runs(journal, timedelta(minutes=1), now=later)
            assert sorted(r.goal for r in result.removed) == ["broken", "done"]
            assert [r.goal for r in result.skipped_live] == ["held"]
            assert result.rows_deleted == 5  # s0..s2, ok, bad
            assert result.goals_removed == ["broken", "done"]
            assert [r.goal for r in list_runs(journal)] == ["held"]
            assert result.bytes_after <= result.bytes_before


class TestOpeningAnInspector:
    def test_of_a_memory_store_no_journal_of_this_process_opened_is_refused(self) -> None:
        with pytest.raises(JournalFileError, match="no journal of this process opened"):
            open_inspector(f"memory://never-{uuid.uuid4().hex}")

    def test_read_only_refuses_changes_and_changes_nothing(
        self, location: str, inspect: Callable[..., Inspector]
    ) -> None:
        run_id = failed(location)
        with pytest.raises(LetItLoopError, match="opened for reading only"):
            reset_run(inspect(), run_id)
        assert one(list_runs(inspect()), "broken").id == run_id

    def test_of_a_store_registered_without_an_inspector_is_refused(self) -> None:
        def opener(location: str, durability: Any) -> Any:
            return open_memory("memory://" + location.split("://", 1)[1])

        schemes.register("noinspect", opener)
        try:
            with Journal("g", path="noinspect://one") as j:
                j.step("a", str, 1)
            with pytest.raises(UnknownStoreError, match="registered without an inspector"):
                open_inspector("noinspect://one")
        finally:
            schemes.unregister("noinspect")

    def test_of_a_store_registered_with_one_uses_it(self) -> None:
        opened: list[tuple[str, bool]] = []

        def opener(location: str, durability: Any) -> Any:
            return open_memory("memory://" + location.split("://", 1)[1])

        def inspector(location: str, write: bool, live: bool) -> Inspector:
            opened.append((location, write))
            return open_inspector("memory://" + location.split("://", 1)[1], write=write)

        schemes.register("withinspect", opener, inspector=inspector)
        try:
            with Journal("g", path="withinspect://two") as j:
                j.step("a", str, 1)
            assert [r.goal for r in list_runs(open_inspector("withinspect://two"))] == ["g"]
        finally:
            schemes.unregister("withinspect")
        assert opened == [("withinspect://two", False)]


class TestASchedulesTicks:
    def test_are_listed_by_schedule_newest_first_with_their_runs(
        self, location: str, inspect: Callable[..., Inspector]
    ) -> None:
        pytest.importorskip("cronsim")
        from datetime import datetime

        from letitloop import Schedule, durable, step
        from letitloop.scheduling.scheduler import Scheduler

        @durable(goal_id="report")
        def report() -> str:
            return step("build", str, "done")

        now = [datetime.fromisoformat("2026-12-07T08:59:30+00:00").timestamp()]
        scheduler = Scheduler(
            [Schedule("*/15 * * * *", report, name="quarterly")],
            path=location,
            clock=lambda: now[0],
        )
        scheduler.keep()
        for seen in ("2026-12-07T09:00:30+00:00", "2026-12-07T09:15:30+00:00"):
            now[0] = datetime.fromisoformat(seen).timestamp()
            scheduler.step()
            while scheduler.running:
                for thread in list(scheduler.running.values()):
                    thread.join(30)
        scheduler.close()
        schedules, ticks = inspect().schedule_rows()
        assert [(s[0], s[1], s[2], s[3]) for s in schedules] == [
            ("quarterly", "report", "*/15 * * * *", "UTC")
        ]
        assert [(t[0], t[1], t[2], t[3]) for t in ticks] == [
            (
                "quarterly",
                f"2026-12-07T{t}:00+00:00",
                f"quarterly@2026-12-07T{t}:00+00:00",
                "completed",
            )
            for t in ("09:15", "09:00")
        ]
        assert [r.name for r in list_runs(inspect()) if r.goal == "report"] == [
            "quarterly@2026-12-07T09:15:00+00:00",
            "quarterly@2026-12-07T09:00:00+00:00",
        ]
