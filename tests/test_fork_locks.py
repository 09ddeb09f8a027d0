"""A program forks while another of its threads holds one of letitloop's locks: the child
goes on (primitives/forksafe.py).

Only the forking thread goes on in a child; a lock another thread held at the fork stayed
held there for good. CI once hung for 120 s on it: a queue's worker thread held its
PostgreSQL store's lock (its first claim, connecting) when the program forked, and the
child's first ``enqueue`` waited forever. Here every lock letitloop made for the objects
a child goes on using is held by another thread at the fork, as a busy worker would hold
one of them; the child must use each of those objects and end.
"""

from __future__ import annotations

import ast
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from letitloop import Journal, Queue, step
from letitloop.primitives import forksafe


def journal_at(kind: str, tmp_path: Path) -> str:
    """A journal on the store ``kind`` (PostgreSQL skipped with one line where it is absent)."""
    if kind == "postgres":
        import pg_server

        return pg_server.location()
    if kind == "memory":
        return f"memory://fork-locks-{os.getpid()}-{tmp_path.name}"
    return str(tmp_path / "journal.db")


@pytest.fixture(params=["file", "postgres"])
def queue_location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a queue lives: a journal file or PostgreSQL."""
    return journal_at(request.param, tmp_path)


@pytest.fixture(params=["file", "memory", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A journal on each store."""
    return journal_at(request.param, tmp_path)


def forked_while_held(child: Callable[[], bool]) -> int:
    """``child()`` run in a child forked while another thread holds every lock that
    ``forksafe`` made (20 s to end, then SIGALRM kills it); its exit status."""
    held = list(forksafe._made)
    assert held, "nothing made a fork-safe lock: the objects below did not take theirs"
    taken, done = threading.Event(), threading.Event()

    def hold() -> None:
        for each in held:
            each.acquire()
        taken.set()
        done.wait()
        for each in reversed(held):
            each.release()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert taken.wait(20)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                signal.alarm(20)  # a hung child dies instead of hanging the suite
                code = 0 if child() else 3
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        return status
    finally:
        done.set()
        holder.join()


answered: list[int] = []


def answer() -> int:
    answered.append(42)
    return 42


class TestAChildForkedWhileAnotherThreadHeldALock:
    def test_enqueues_and_runs_a_run_of_the_parents_queue(self, queue_location: str) -> None:
        q = Queue("q", path=queue_location)
        q.task(lambda x: step("s", lambda: x + 1), name="t")
        assert q.enqueue("t", 1, run="in-parent").run == "in-parent"  # the store connected

        def child() -> bool:
            added = q.enqueue("t", 41, run="in-child")
            worker = q.worker().start()
            try:
                return bool(added.result(timeout=15) == 42)
            finally:
                worker.stop(timeout=15)

        status = forked_while_held(child)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
        # from this process: the child's run is recorded, done, in the parent's store
        entry = q.store.named("q", "in-child")
        assert entry is not None and q.handle(entry).result(timeout=20) == 42

    def test_runs_a_journal_of_its_own(self, location: str) -> None:
        with Journal("fork", run="in-parent", path=location) as j:
            j.step("a", lambda: 1)

        def child() -> bool:
            with Journal("fork", run="in-child", path=location) as j:
                return bool(j.step("a", answer) == 42)

        status = forked_while_held(child)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
        if location.startswith("memory://"):
            return  # the child wrote in its own copy of the process's memory
        with Journal("fork", run="in-child", path=location) as j:
            assert j.step("a", answer) == 42
        assert answered == []  # replayed: the child's step is recorded in the parent's store


def test_every_lock_a_child_may_need_is_free_in_it() -> None:
    """The mechanism itself, for each kind of lock it makes: held by another thread at the
    fork, free in the child."""
    made: list[Any] = [forksafe.lock(), forksafe.rlock(), forksafe.condition()]

    def child() -> bool:
        return all(each.acquire(timeout=5) for each in made)

    status = forked_while_held(child)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


def test_no_module_makes_a_process_wide_lock_a_child_could_find_held() -> None:
    """Every lock made at a module's top level (one per process) is a ``forksafe`` one, or
    its module frees it in its own at-fork hook (``os.register_at_fork``)."""
    package = Path(__file__).resolve().parent.parent / "letitloop"
    found = []
    for path in sorted(package.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        if "os.register_at_fork" in source:
            continue
        for node in ast.parse(source).body:
            call = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and isinstance(call.func.value, ast.Name)
                and call.func.value.id == "threading"
                and call.func.attr in ("Lock", "RLock", "Condition", "Semaphore")
            ):
                found.append(f"{path.relative_to(package.parent)}:{node.lineno}")
    assert not found, f"use letitloop.primitives.forksafe at {', '.join(found)}"
