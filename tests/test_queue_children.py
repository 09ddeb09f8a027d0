"""A run enqueued from inside a run (letitloop/queueing/children.py): the child's identity and
its result are steps of the parent. Kills of the parent and of the child's worker, in real
processes, are in tests/test_queue_kill.py (TestAChildRunAndItsParent)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
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

    def test_a_queued_parent_waiting_for_its_child_is_let_go_of_by_a_drain(self, db: Any) -> None:
        calls: list[Any] = []
        q = queue_with_child(db, calls)
        waiting = threading.Event()

        @q.task
        def parent(x: int) -> int:
            h = q.enqueue("child", x)
            waiting.set()
            return int(h.result()) + 1

        h = q.enqueue(parent, 3)
        first = q.worker(threads=1).start()  # its one thread: the parent; the child waits
        assert waiting.wait(20)
        first.stop(timeout=20)
        assert not first.alive and first.counts == {"released": 1}
        assert h.status() == "queued" and calls == []
        second = q.worker(threads=2).start()
        try:
            assert h.result(timeout=20) == 7
        finally:
            second.stop(timeout=20)
        assert calls == [3]
