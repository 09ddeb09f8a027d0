"""One execution of a node's journal run at a time in this process: ``Plan`` (which run of
which goal in which file an execution opens) and the gate each run's executions pass
one by one (:func:`one_at_a_time`, :func:`one_at_a_time_async`), as ``Journal`` waits
for another process. Two invocations of one LangGraph thread at once otherwise meet in
the same run; the gates are forgotten in a forked child.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

from ...errors import RunHeldError
from ...primitives import forksafe
from ...stores.sqlite.files import resolve_path
from ...stores.sqlite.pragmas import Durability
from .identity import NodeIdentity


@dataclass(frozen=True)
class Plan:
    goal: str
    name: str
    path: str | os.PathLike[str] | None
    durability: Durability
    identity: NodeIdentity

    @property
    def key(self) -> tuple[str, str, str]:
        return (os.path.realpath(resolve_path(self.path)), self.goal, self.name)


class _Gate:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0


_gates: dict[tuple[str, str, str], _Gate] = {}
_gates_lock = threading.Lock()


def _gate_for(key: tuple[str, str, str]) -> _Gate:
    with _gates_lock:
        gate = _gates.get(key)
        if gate is None:
            gate = _gates[key] = _Gate()
        gate.users += 1
        return gate


def _done_with(key: tuple[str, str, str], gate: _Gate) -> None:
    with _gates_lock:
        gate.users -= 1
        if gate.users == 0 and _gates.get(key) is gate:
            del _gates[key]


def _busy(plan: Plan, timeout: float) -> RunHeldError:
    who = plan.identity
    return RunHeldError(
        f"thread {who.thread!r}: node {who.node!r} (superstep {who.step}) is already running in "
        f"another invocation of this thread in this process (another thread or task), and "
        f"it did not finish within {timeout:g} s. LangGraph runs one invocation of a thread "
        f"at a time; wait for the other invocation, or pass durable_node(timeout=...) "
        f"(journal run {plan.name!r} of goal {plan.goal!r})",
        run_id=None,
        pid=os.getpid(),
        host=None,
    )


def _forget_after_fork() -> None:
    # The parent's threads may hold these locks: a forked child starts with none.
    global _gates_lock
    _gates.clear()
    _gates_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)

# LangGraph's nodes and LangChain's runnables compute attributes on their first use under
# a lock their class shares (Python 3.11's cached_property): a child forked while another
# thread runs a new graph must not inherit it held.
forksafe.free_cached_property_locks("langgraph", "langchain_core")


@contextlib.contextmanager
def one_at_a_time(plan: Plan, timeout: float) -> Iterator[None]:
    gate = _gate_for(plan.key)
    try:
        if not gate.lock.acquire(timeout=timeout):
            raise _busy(plan, timeout)
        try:
            yield
        finally:
            gate.lock.release()
    finally:
        _done_with(plan.key, gate)


@contextlib.asynccontextmanager
async def one_at_a_time_async(plan: Plan, timeout: float) -> AsyncIterator[None]:
    gate = _gate_for(plan.key)
    try:
        if not gate.lock.acquire(blocking=False):
            waiting = asyncio.ensure_future(asyncio.to_thread(gate.lock.acquire, True, timeout))
            try:
                got = await asyncio.shield(waiting)
            except asyncio.CancelledError:
                # The worker may still get the lock after we gave up: give it back then.
                waiting.add_done_callback(
                    lambda f: (
                        gate.lock.release()
                        if not f.cancelled() and f.exception() is None and f.result()
                        else None
                    )
                )
                raise
            if not got:
                raise _busy(plan, timeout)
        try:
            yield
        finally:
            gate.lock.release()
    finally:
        _done_with(plan.key, gate)
