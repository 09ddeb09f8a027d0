"""A run enqueued from inside a run (letitloop/queueing/children.py): the child's identity and
its result are steps of the parent. Kills of the parent and of the child's worker, in real
processes, are in tests/test_queue_kill.py (TestAChildRunAndItsParent)."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from letitloop import Journal, Queue, step
from letitloop.errors import QueueError
from letitloop.inspection import find_run, open_inspector


@pytest.fixture(params=["file", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "postgres":
        import pg_server

        return pg_server.location()
    return tmp_path / "journal.db"


class Boom(Exception):
    pass


def queue_with_child(db: Any, calls: list[Any]) -> Queue:
    q = Queue("q", path=db)

    def work(x: int) -> int:
        calls.append(x)
        return x * 2

    @q.task
    def child(x: int) -> int:
        return int(step("work", work, x))

    return q


class TestGcAndAChildRun:
    def test_gc_keeps_a_child_whose_parent_has_not_ended_then_removes_it(self, db: Any) -> None:
        from letitloop.maintenance.gc import gc_runs

        calls: list[Any] = []
        q = queue_with_child(db, calls)
        later = time.time() + 3600  # every run older than the cutoff
        worker = q.worker(threads=2).start()
        try:
            with Journal("parent", run="p1", path=db):
                named = q.enqueue("child", 4)  # its run named after the parent
                mine = q.enqueue("child", 5, run="mine")  # named here: linked by the entry
                for h in (named, mine):
                    until_ended = time.monotonic() + 20
                    while not h.done() and time.monotonic() < until_ended:
                        time.sleep(0.01)
                got = gc_runs(open_inspector(db, write=True), timedelta(0), now=later, vacuum=False)
                runs = {named.run_id, mine.run_id}
                assert None not in runs and runs <= {r.id for r in got.skipped_queued}
                assert not got.removed
                assert [h.result(timeout=5) for h in (named, mine)] == [8, 10]  # still there
        finally:
            worker.stop(timeout=20)
        got = gc_runs(open_inspector(db, write=True), timedelta(0), now=later, vacuum=False)
        assert runs <= {r.id for r in got.removed}  # the parent ended: they go
        assert {named.id, mine.id} <= set(got.queue_entries_removed)


class TestAChildEnqueuedInsideARun:
    def test_a_rerun_of_the_parent_gets_the_same_child_and_enqueues_no_second(
        self, db: Any
    ) -> None:
        calls: list[Any] = []
        q = queue_with_child(db, calls)
        with pytest.raises(Boom), Journal("parent", run="p1", path=db):
            first = q.enqueue("child", 4, delay=60)
            raise Boom
        with Journal("parent", run="p1", path=db) as j:
            again = q.enqueue("child", 4, delay=59.5)  # computed at run time: not its identity
            other = q.enqueue("child", 5)  # a second call of the step: a second child
            assert (again.id, again.run) == (first.id, first.run)
            assert first.run == f"{j.run_id}:enqueue:child" and other.id != first.id
        assert q.enqueue("child", 4).id not in (first.id, other.id)  # outside a run: a new one

    def test_its_result_is_recorded_in_the_parent_and_replayed_without_the_queue(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "journal.db"
        calls: list[Any] = []
        q = queue_with_child(db, calls)
        worker = q.worker().start()
        try:
            with pytest.raises(Boom), Journal("parent", run="p1", path=db) as j:
                h = q.enqueue("child", 4)
                assert h.result(timeout=20) == 8
                raise Boom
        finally:
            worker.stop(timeout=20)
        with sqlite3.connect(db) as c:  # the child's entry gone: only a replay can answer
            c.execute("DELETE FROM queue_entries WHERE id = ?", (h.id,))
        with pytest.raises(QueueError, match="is gone"):
            h.result(timeout=1)  # outside the run: read from the queue
        with Journal("parent", run="p1", path=db):
            again = q.enqueue("child", 4)
            assert again.result(timeout=1) == 8
        rows = open_inspector(db).rows(find_run(open_inspector(db), j.run_id))
        assert [(r.key, r.fn) for r in rows] == [
            ("enqueue:child", "letitloop:queue.enqueue"),
            (f"result:{h.id}", "letitloop:queue.result"),
        ]
        assert calls == [4]

    def test_an_async_parent_awaits_it_as_an_async_step(self, db: Any) -> None:
        from letitloop import durable_async

        calls: list[Any] = []
        q = queue_with_child(db, calls)

        @durable_async(goal_id="aparent", path=db)
        async def parent(x: int) -> int:
            return int(await q.enqueue("child", x)) + 1

        worker = q.worker().start()
        try:
            assert asyncio.run(parent(20)) == 41
            assert asyncio.run(parent(21)) == 43
        finally:
            worker.stop(timeout=20)
        assert calls == [20, 21]

    def test_a_parent_and_its_child_share_one_slot_the_parent_suspended_while_it_waits(
        self, db: Any
    ) -> None:
        calls: list[Any] = []
        q = queue_with_child(db, calls)
        q.limits = q.limits._replace(concurrency=1)  # one slot, one thread: both runs in it

        def before(x: int) -> int:
            calls.append(("before", x))
            return x

        @q.task
        def parent(x: int) -> int:
            h = q.enqueue("child", step("before", before, x))
            return int(h.result()) + 1

        h = q.enqueue(parent, 3)
        worker = q.worker(threads=1).start()
        try:
            assert h.result(timeout=20) == 7
        finally:
            worker.stop(timeout=20)
        # The parent was let go of while its child ran in the one slot, then resumed once
        # the child ended: its step replayed, the child's result read.
        assert calls == [("before", 3), 3]
        assert worker.counts["waiting"] >= 1 and worker.counts["completed"] == 2
        state = q.store.state(h.id)
        assert state is not None and state.error is None and state.attempt >= 2
        run = find_run(open_inspector(db), h.run_id or "")
        assert run.status == "completed"

    def test_a_parent_that_catches_its_wait_is_suspended_all_the_same(self, db: Any) -> None:
        calls: list[Any] = []
        q = queue_with_child(db, calls)
        q.limits = q.limits._replace(concurrency=1)

        @q.task
        def parent(x: int) -> int:
            h = q.enqueue("child", x)
            try:
                return int(h.result()) + 1
            except Exception:  # a broad handler: the suspension is not the task's to keep
                return -1

        h = q.enqueue(parent, 3)
        worker = q.worker(threads=1).start()
        try:
            assert h.result(timeout=20) == 7  # never -1: the run was let go of, resumed
        finally:
            worker.stop(timeout=20)
        assert worker.counts["waiting"] >= 1 and calls == [3]

    def test_a_suspended_parent_says_it_waits_for_its_child(self, db: Any) -> None:
        calls: list[Any] = []
        q = queue_with_child(db, calls)

        @q.task
        def parent(x: int) -> int:
            return int(q.enqueue("child", x, delay=60).result()) + 1  # the child not due

        h = q.enqueue(parent, 3)
        worker = q.worker(threads=1).start()
        try:
            deadline = time.monotonic() + 20
            while h.status() != "delayed" and time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            worker.stop(timeout=20)
        assert h.status() == "delayed" and calls == []
        assert "waiting for its child entry" in (h.reason() or "")
