"""A budget bounds a whole request: every model call of one invocation, across its runs and kills.

One request of a thread (``invoke``, ``stream``, … with an input: a row of
``langgraph_requests``, requests.py) journals its model calls in several runs,
one per execution of a durable node (``durable_model``'s calls outside a
durable node each open one). ``budget=`` on ``durable_model`` or
``durable_node`` bounds the request: each of those runs is opened with the
request's :class:`~letitloop.primitives.shared_budgets.SharedSpend` for that budget, so a
call reserves against what every run of the request spent and reserved,
including the runs of a process that was killed in it.

- The invocation (invocations.py) says which request runs now:
  :func:`running` sets :data:`current` (LangGraph copies the context into the
  tasks that run its nodes) while the graph runs a request, in a process that
  holds the thread. Answered requests run no node and spend nothing.
- A run records its request (``request``, the seq, in its identity, identity.py)
  when it is created, so a later process finds the request's runs in the file
  (:func:`members`) and counts what they spent and reserved.
- Only runs journaled in the saver's own file take part (the request log is
  there); a durable node given another ``path=``, or a graph compiled with
  another checkpointer, keeps the budget per run (one node execution).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...primitives.budgets import Budget, budget_of
from ...primitives.shared_budgets import SharedSpend
from ...stores.sqlite.store import Store
from . import polled
from .identity import NodeIdentity, thread_prefix

#: What to do when a request's budget is reached, in its error.
ADVICE = (
    "Raise the budget (durable_model(model, budget=...) or durable_node(..., budget=...)) and "
    "invoke the same request again to resume it, or ask it as a new request "
    "(config['configurable']['letitloop_fresh'] = True) to start over"
)


@dataclass
class Request:
    """The request a graph runs now in this context: its thread, its seq, and its budgets."""

    store: Store
    thread: str
    seq: int
    lock: threading.Lock = field(default_factory=threading.Lock)
    spends: dict[Budget, SharedSpend] = field(default_factory=dict)

    def spend(self, budget: Budget) -> SharedSpend:
        """The request's shared spend for ``budget`` (one per budget, made once)."""
        with self.lock:
            found = self.spends.get(budget)
            if found is None:
                found = self.spends[budget] = SharedSpend(
                    budget,
                    lambda: members(self.store, self.thread, self.seq),
                    f"request {self.seq} of thread {self.thread!r} (its model calls in every "
                    f"durable node's run)",
                    ADVICE,
                )
            return found


#: The request the graph runs now in this context (None: no request, or another saver).
current: contextvars.ContextVar[Request | None] = contextvars.ContextVar(
    "letitloop_langgraph_request", default=None
)


@contextlib.contextmanager
def running(store: Store, thread: str, seq: int | None) -> Iterator[None]:
    """While the graph runs request ``seq`` of ``thread`` (None: no request is logged)."""
    token = current.set(None if seq is None else Request(store, thread, seq))
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):  # reset from another context
            current.reset(token)


def tied(identity: NodeIdentity, store: Store | None) -> NodeIdentity:
    """``identity`` with the request the graph runs now, when it runs one of its thread in
    ``store`` (the saver's file, the node's journal's too); else ``identity``."""
    asked = current.get()
    if asked is None or asked.thread != identity.thread or asked.store is not store:
        return identity
    return dataclasses.replace(identity, request=asked.seq)


def budget_for(
    budget: Budget | Mapping[str, Any] | None, identity: NodeIdentity
) -> Budget | Mapping[str, Any] | SharedSpend | None:
    """What a node's journal is opened with: the request's shared spend for ``budget`` when
    the run is tied to the request running now (:func:`tied`), else ``budget``."""
    asked = current.get()
    if budget is None or identity.request is None or asked is None:
        return budget
    return asked.spend(budget_of(budget))


def members(store: Store, thread: str, seq: int) -> list[str]:
    """The ids of the runs recorded for request ``seq`` of ``thread`` (their identity's
    ``request``), every goal's."""
    prefix = thread_prefix(thread)
    rows = polled.query(
        store,
        "SELECT id, input FROM runs WHERE name >= ? AND name < ?",
        (prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)),
    )
    found = []
    for run_id, text in rows:
        try:
            recorded = json.loads(text)["langgraph"] if text else None
        except (ValueError, KeyError, TypeError):
            continue  # not a node's identity (encrypted, or another program's run)
        if isinstance(recorded, dict) and (recorded.get("thread"), recorded.get("request")) == (
            thread,
            seq,
        ):
            found.append(str(run_id))
    return found
