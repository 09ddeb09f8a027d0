"""One invocation of a thread at a time, whole, and the same request never run twice.

Importing the adapter wraps LangGraph's ``Pregel.stream`` and ``Pregel.astream``
(``invoke`` and ``ainvoke`` go through them). The wrap acts only on a
top-level invocation of a graph compiled with a ``LetItLoopCheckpointSaver``
and given a ``thread_id`` (no ``checkpoint_id``: time travel is left to
LangGraph); any other graph or call runs exactly as LangGraph runs it.

- **Held whole.** The invocation holds its thread (an OS lock on a file beside
  the journal, ``locks.py``) from before LangGraph reads the thread until
  the graph returned and its checkpoints are written. A second invocation of
  the thread, in this process or another, waits; a holder that dies releases
  at once. A graph invoked with the same thread inside a node of the first
  (in the same task or thread) is not held twice.
- **Which request it is** (``requests.py``): decided while holding the
  thread. A recorded request that finished is answered from the checkpoint
  it left, without running the graph (``_answer``); one that did not finish
  is resumed; a new one is recorded and run.
- **An answer to an interrupt** (``Command(resume=...)``) that names an
  interrupt the thread does not wait for now, or reaches a thread that waits
  for nothing, is refused before anything is written (``answers.check_resume``).
- The process that made each request is recorded with a token whose lock the
  process holds while it lives (``alive``), and each process remembers where
  it left each thread (its cursor): a rerun program is told from a second
  worker of a server.

Forked children start with a token, locks and cursors of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import os
import socket
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

from langgraph.pregel import Pregel
from langgraph.types import Command

from ...codec import default_registry
from ...identity.fingerprint import Fingerprinter
from ...primitives.clock import now
from ...stores.sqlite import locks
from . import answers, request_budgets, requests
from .configs import thread_text
from .identity import CONFIG_KEY_TASK_ID
from .saver import LetItLoopCheckpointSaver

#: ``config["configurable"][FRESH] = True`` runs the invocation as a new
#: request, never answered from an earlier one.
FRESH = "letitloop_fresh"

#: ``config["configurable"][RESUMES] = seq``: the invocation gives request ``seq``
#: its recorded input again (``resume()``), when it is still the newest, unfinished.
RESUMES = "letitloop_resumes"

_ORIGINAL_STREAM = Pregel.stream
_ORIGINAL_ASTREAM = Pregel.astream

#: The checkpoint a new request starts from when the turn it replaces began on
#: an empty thread: no checkpoint has this id, so LangGraph starts from the empty
#: state (its checkpoints name it as their parent).
EMPTY_THREAD = "00000000-0000-0000-0000-000000000000"

#: The threads this task or thread holds now (journal file, thread id).
_held: contextvars.ContextVar[frozenset[tuple[str, str]]] = contextvars.ContextVar(
    "letitloop_langgraph_held", default=frozenset()
)


class _Process:
    """This process's token, its liveness locks (one per journal file) and its cursors."""

    def __init__(self) -> None:
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self.lock = threading.Lock()
        #: Per journal file: the liveness lock, and the open savers that hold it.
        self.alive_locks: dict[str, tuple[locks.Lock, set[int]]] = {}
        self.cursors: dict[tuple[str, str], str | None] = {}

    def announce(self, saver: LetItLoopCheckpointSaver) -> None:
        """Hold this process's liveness lock in ``saver``'s file while a saver of it is open.

        One lock per file (two descriptors of one process would conflict);
        the last saver's ``close`` lets it go and removes its file.
        """
        key = saver.store.real_file
        with self.lock:
            held = self.alive_locks.get(key)
            if held is None:
                lock = locks.new_lock(saver.store.lock_name("langgraph-process", self.token))
                locks.acquire(lock, -1)  # nobody else takes a token's lock: at once
                held = self.alive_locks[key] = (lock, set())
            if id(saver) not in held[1]:
                held[1].add(id(saver))
                saver.when_closed(functools.partial(self.closed, key, id(saver)))

    def closed(self, key: str, saver: int) -> None:
        with self.lock:
            held = self.alive_locks.get(key)
            if held is None:
                return
            held[1].discard(saver)
            if not held[1]:
                del self.alive_locks[key]
                locks.release(held[0])


_me = _Process()


def _forget_after_fork() -> None:
    # The parent's locks are not the child's (locks.py closes them in a child).
    global _me
    _me = _Process()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def alive(saver: LetItLoopCheckpointSaver, process: str) -> bool:
    """Whether the process that recorded ``process`` still runs (its lock is held)."""
    return process == _me.token or locks.is_held(
        saver.store.lock_name("langgraph-process", process)
    )


_fingerprints = Fingerprinter(default_registry)


class Invocation:
    """One top-level invocation of a thread: held, identified, recorded."""

    def __init__(
        self,
        graph: Pregel[Any, Any, Any, Any],
        saver: LetItLoopCheckpointSaver,
        thread: str,
        input: Any,
        fresh: bool,
    ) -> None:
        self.graph = graph
        self.saver = saver
        self.thread = thread
        self.input = input
        self.fresh = fresh
        self.key = (saver.store.real_file, thread)
        self.hold = locks.new_lock(saver.store.lock_name("langgraph-thread", thread))
        self.request: requests.Request | None = None
        #: Where a new request runs from when it replaces an unfinished turn.
        self.start_at: str | None = None
        #: Where the request continued from when it arrived (``requests.arrival``).
        self.arrived: str | None = None
        self.token: contextvars.Token[frozenset[tuple[str, str]]] | None = None
        #: The request ``resume()`` gives again (``RESUMES``), by its seq.
        self.resumes: int | None = None

    # -- holding ---------------------------------------------------------------

    def take(self) -> None:
        self.arrived = requests.arrival(self.saver.store, self.thread)
        locks.acquire(self.hold, -1)

    def entered(self) -> None:
        self.token = _held.set(_held.get() | {self.key})

    def let_go(self) -> None:
        if self.token is not None:
            with contextlib.suppress(ValueError):  # reset from another context
                _held.reset(self.token)
            self.token = None
        locks.release(self.hold)

    # -- deciding --------------------------------------------------------------

    def decide(self) -> tuple[str | None, Any]:
        """``(checkpoint to answer from, None)`` or ``(None, the input to run with)``."""
        store = self.saver.store
        _me.announce(self.saver)
        head = requests.newest_checkpoint(store, self.thread)
        log = requests.recent(store, self.thread)
        if self.input is None:
            # invoke(None): continues the thread's unfinished request, if any.
            if log and not log[-1].done:
                self.request = log[-1]
            return None, None
        if self.resumes is not None and log and log[-1].seq == self.resumes and not log[-1].done:
            self.request = log[-1]  # resume(): that request's recorded input, given again
            return None, self.input
        fp = _fingerprints.whole(self.input)
        match = requests.Match(None)
        if not self.fresh:
            with _me.lock:
                cursor = _me.cursors.get(self.key)
            match = requests.choose(
                log,
                fp,
                head,
                cursor,
                self.arrived,
                _me.token,
                functools.partial(alive, self.saver),
                now(),
                self.saver.reuse,
            )
        found = match.request
        if found is not None and match.answer and found.end is not None:
            if requests.has_checkpoint(store, self.thread, found.end):
                self._left_at(found.end)
                return found.end, None
            found = None
        if found is not None and not match.answer:
            self.request = found
            # Its input checkpoint was saved (the thread moved since it
            # started): resume; else nothing of it was saved, give it again.
            return None, (None if head != found.start else self.input)
        if isinstance(self.input, Command) and self.input.resume is not None:
            answers.check_resume(self.graph, self.thread, self.input.resume)
        kind = "command" if isinstance(self.input, Command) else "input"
        start = head
        if (
            log
            and not log[-1].done
            and head != log[-1].start
            and not isinstance(self.input, Command)
        ):
            # The thread's newest turn never finished and this is another
            # request: it takes that turn's place, from the state the turn
            # started from (its half-made state, tool calls with no answers,
            # is left in the history), as if it had never been asked.
            start = log[-1].start
            self.start_at = EMPTY_THREAD if start is None else start
        typed = requests.typed(self.saver.serde, self.input)
        self.request = requests.start(store, self.thread, fp, kind, start, _me.token, now(), typed)
        return None, self.input

    def run_config(self, config: Any) -> Any:
        """``config``, from the checkpoint a replacing request starts at (``start_at``)."""
        if self.start_at is None:
            return config
        conf = {**(config.get("configurable") or {}), "checkpoint_id": self.start_at}
        return {**config, "configurable": conf}

    def running(self) -> contextlib.AbstractContextManager[None]:
        """While the graph runs the request: its budgets bound it whole (request_budgets.py)."""
        seq = None if self.request is None else self.request.seq
        return request_budgets.running(self.saver.store, self.thread, seq)

    def finished(self) -> None:
        end = requests.newest_checkpoint(self.saver.store, self.thread)
        if self.request is not None:
            requests.finish(self.saver.store, self.request, "done", end, now())
        self._left_at(end)

    def failed(self) -> None:
        if self.request is not None:
            requests.finish(self.saver.store, self.request, "failed", None, now())

    def _left_at(self, checkpoint: str | None) -> None:
        with _me.lock:
            _me.cursors[self.key] = checkpoint


def _ours(graph: Pregel[Any, Any, Any, Any], input: Any, config: Any) -> Invocation | None:
    """An ``Invocation`` when this call is a top-level invocation of a held thread, else None."""
    saver = graph.checkpointer
    if not isinstance(saver, LetItLoopCheckpointSaver) or not isinstance(config, dict):
        return None
    conf = config.get("configurable") or {}
    thread = conf.get("thread_id")
    if (
        thread is None
        or CONFIG_KEY_TASK_ID in conf
        or conf.get("checkpoint_id")
        or conf.get("checkpoint_ns")
    ):
        return None
    got = Invocation(graph, saver, thread_text(thread), input, bool(conf.get(FRESH)))
    got.resumes = conf.get(RESUMES)
    if got.key in _held.get():
        return None  # already held by this task or thread (a graph invoked inside a node)
    return got


def _answer_config(inv: Invocation, checkpoint: str) -> Any:
    return {"configurable": {"thread_id": inv.thread, "checkpoint_id": checkpoint}}


# -- the wrapped entry points -----------------------------------------------------------


def stream(
    self: Pregel[Any, Any, Any, Any], input: Any, config: Any = None, **kwargs: Any
) -> Iterator[Any]:
    """``Pregel.stream``, held per thread and answered from the journal when already asked."""
    inv = _ours(self, input, config)
    if inv is None:
        yield from _ORIGINAL_STREAM(self, input, config, **kwargs)
        return
    inv.take()
    try:
        inv.entered()
        answer, run_with = inv.decide()
        if answer is not None:
            snapshot = self.get_state(_answer_config(inv, answer))
            yield from answers.payloads(
                self,
                snapshot,
                kwargs.get("stream_mode"),
                kwargs.get("output_keys"),
                bool(kwargs.get("subgraphs")),
                kwargs.get("version", "v1"),
            )
            return
        try:
            with inv.running():
                yield from _ORIGINAL_STREAM(self, run_with, inv.run_config(config), **kwargs)
        except Exception:
            inv.failed()
            raise
        inv.finished()
    finally:
        inv.let_go()


async def astream(
    self: Pregel[Any, Any, Any, Any], input: Any, config: Any = None, **kwargs: Any
) -> AsyncIterator[Any]:
    """``Pregel.astream``, held per thread and answered from the journal when already asked.

    The waits and the journal's reads and writes run in worker threads: the
    event loop never waits for another process.
    """
    inv = _ours(self, input, config)
    if inv is None:
        async for chunk in _ORIGINAL_ASTREAM(self, input, config, **kwargs):
            yield chunk
        return
    waiting = asyncio.ensure_future(asyncio.to_thread(inv.take))
    try:
        await asyncio.shield(waiting)
    except asyncio.CancelledError:
        # The worker may still get the hold after we gave up: give it back then.
        waiting.add_done_callback(lambda f: None if f.cancelled() else inv.let_go())
        raise
    try:
        inv.entered()
        answer, run_with = await asyncio.to_thread(inv.decide)
        if answer is not None:
            snapshot = await self.aget_state(_answer_config(inv, answer))
            for chunk in answers.payloads(
                self,
                snapshot,
                kwargs.get("stream_mode"),
                kwargs.get("output_keys"),
                bool(kwargs.get("subgraphs")),
                kwargs.get("version", "v1"),
            ):
                yield chunk
            return
        try:
            with inv.running():
                async for chunk in _ORIGINAL_ASTREAM(
                    self, run_with, inv.run_config(config), **kwargs
                ):
                    yield chunk
        except Exception:
            await asyncio.to_thread(inv.failed)
            raise
        await asyncio.to_thread(inv.finished)
    finally:
        inv.let_go()


def install() -> None:
    """Wrap ``Pregel.stream`` and ``Pregel.astream`` (once; importing the adapter does it)."""
    if Pregel.stream is not stream:
        Pregel.stream = stream  # type: ignore[method-assign]
        Pregel.astream = astream  # type: ignore[method-assign]
