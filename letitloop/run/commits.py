"""Group commit of step rows written from an asyncio event loop.

Steps that finish in the same pass of the event loop (a ``gather`` whose
calls complete together, a burst of replies) queue their rows; the first
one schedules a flush with ``call_soon``, which runs on the next pass, after
every task ready in this pass has queued its row, and commits them all in
one transaction: one commit (and, with ``durability="power"``, one fsync)
for the whole batch instead of one per step.

The flush commits inline on the loop only when that cannot wait: the
connection is free in this process and SQLite's write lock is free
(``busy_timeout`` is 0 for that attempt), and ``durability="process"``
(no fsync). Otherwise the batch goes to the journal's commit thread, and rows
queued meanwhile form the next batch. So the loop is never held longer than
one small commit of the rows that became ready together.

The commit thread is the journal's own (:class:`CommitThread`), not the
loop's default executor: ``asyncio.to_thread`` work (plain-function steps)
fills that one, and a commit queued behind it waited as long as the slowest
of them. A batch handed to the thread is never withdrawn, and closing waits
for it (:meth:`LoopCommits.settle`): the connection is closed, and the run
marked, only after every row handed over is committed or known to have failed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from ..stores.storage_holding import Holding
    from ..stores.storage_steps import StepRow, StepRows

T = TypeVar("T")

#: Seconds the commit thread waits for more work before it ends. Long enough that
#: the commits of a busy pipeline reuse one thread; short enough that a journal
#: closed without ``async with`` (its thread is stopped by ``__aexit__`` otherwise)
#: leaves no thread behind for long.
IDLE_SECONDS = 1.0

_Job = tuple["concurrent.futures.Future[Any]", Callable[..., Any], tuple[Any, ...]]


class CommitThread:
    """One thread that runs a journal's commits in order, off the event loop.

    Started by the first job, it ends after IDLE_SECONDS without work (the
    next job starts it again) or at :meth:`stop`. A submitted job always runs:
    its future is marked running at once, so cancelling it (asyncio does when
    an awaiting task is cancelled) cannot withdraw the commit.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._cond = threading.Condition(threading.Lock())
        self._jobs: deque[_Job] = deque()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def submit(self, fn: Callable[..., T], *args: Any) -> concurrent.futures.Future[T]:
        """Run ``fn(*args)`` in the thread after the jobs already submitted."""
        fut: concurrent.futures.Future[T] = concurrent.futures.Future()
        fut.set_running_or_notify_cancel()
        with self._cond:
            self._jobs.append((fut, fn, args))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name)
                self._thread.start()
            else:
                self._cond.notify()
        return fut

    def stop(self) -> None:
        """Run the jobs already submitted, then end the thread and wait until it has ended."""
        with self._cond:
            self._stopping = True
            thread = self._thread
            self._cond.notify()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._jobs and not self._stopping:
                    self._cond.wait(IDLE_SECONDS)
                if not self._jobs:
                    self._thread = None
                    return
                fut, fn, args = self._jobs.popleft()
            try:
                result = fn(*args)
            except BaseException as exc:
                fut.set_exception(exc)
            else:
                fut.set_result(result)


class LoopCommits:
    """Rows queued from one event loop and committed in batches; loop thread only."""

    def __init__(
        self,
        store: Holding,
        storage: StepRows,
        inline: bool,
    ) -> None:
        self.loop = asyncio.get_running_loop()
        #: The journal's store (a journal reopened on another store gets a new one).
        self.store = store
        #: What commits the rows (storage.py).
        self.storage = storage
        #: False with durability="power": every commit fsyncs, so never on the loop.
        self.inline = inline
        #: Rows whose commit failed when no task was awaiting it (cancelled while it
        #: waited), with their error: nobody else will hear of them (see settle()).
        self.unreported: list[tuple[StepRow, BaseException]] = []
        #: Set by the journal's close: rows committed after this are refused.
        self.closed = False
        self._pending: list[tuple[StepRow, asyncio.Future[None]]] = []
        # The batch in the commit thread, until its result is back on the loop.
        self._flight: asyncio.Future[None] | None = None
        self._thread: CommitThread | None = None

    def on_this_loop(self) -> bool:
        """Whether the running event loop is the one these rows are committed from."""
        return asyncio.get_running_loop() is self.loop

    def commit(self, row: StepRow) -> asyncio.Future[None] | None:
        """Commit ``row`` now (None) or queue it (a future that resolves once it is committed).

        A row is committed at once, inline, when nothing else can join its
        batch: nothing is queued and no other callback is ready to run in this
        loop pass (a sequential pipeline, one step at a time). Cancelling the
        future does not withdraw the row: it is committed with its batch.
        """
        if (
            self.inline
            and not self._pending
            and self._flight is None
            and not getattr(self.loop, "_ready", True)  # the loop's ready queue (CPython)
            and self.storage.try_write_steps((row,))
        ):
            return None
        fut = self.loop.create_future()
        self._pending.append((row, fut))
        if len(self._pending) == 1 and self._flight is None:
            self.loop.call_soon(self.flush)
        return fut

    def flush(self) -> None:
        if self._flight is not None or not self._pending:
            return
        batch, self._pending = self._pending, []
        rows = [row for row, _ in batch]
        if self.inline:
            try:
                done = self.storage.try_write_steps(rows)
            except Exception as exc:
                self._finish(batch, exc)
                return
            if done:
                self._finish(batch, None)
                return
        self._flight = self.run_in_thread(self.storage.write_steps, rows)
        self._flight.add_done_callback(lambda f: self._after_thread(batch, f))

    def run_in_thread(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """Run ``fn(*args)`` in the commit thread, after the batches handed to it before."""
        if self._thread is None:
            self._thread = CommitThread(f"letitloop-commit {self.store.path.name}")
        return asyncio.wrap_future(self._thread.submit(fn, *args), loop=self.loop)

    async def settle(self) -> bool:
        """Commit every row queued or in the commit thread, waiting for them off the loop.

        Rows queued while this waits are committed too. When it returns,
        every row handed over is committed or its error is known: delivered to
        the task awaiting it, or in :attr:`unreported`. A cancellation of the
        calling task does not cut the wait short (closing the connection under
        a commit would lose it); it is returned (True) for the caller to raise.
        """
        cancelled = False
        while self._pending or self._flight is not None:
            if self._flight is None:
                self.flush()
                continue
            cancelled |= await wait_through_cancel(self._flight)
        return cancelled

    def stop(self) -> None:
        """Stop the commit thread (after its last job); the journal is closing."""
        if self._thread is not None:
            self._thread.stop()

    def _after_thread(
        self, batch: list[tuple[StepRow, asyncio.Future[None]]], f: asyncio.Future[None]
    ) -> None:
        self._flight = None
        self._finish(batch, f.exception() if not f.cancelled() else asyncio.CancelledError())
        if self._pending:
            self.loop.call_soon(self.flush)

    def _finish(
        self, batch: list[tuple[StepRow, asyncio.Future[None]]], exc: BaseException | None
    ) -> None:
        for row, fut in batch:
            if fut.done():  # its task was cancelled while waiting
                if exc is not None:
                    self.unreported.append((row, exc))
                continue
            if exc is None:
                fut.set_result(None)
            else:
                fut.set_exception(exc)


async def wait_through_cancel(fut: asyncio.Future[Any]) -> bool:
    """Wait until ``fut`` is done, even if the calling task is cancelled meanwhile.

    Returns whether it was cancelled (the caller raises CancelledError when
    its own work is over). ``fut`` itself is never cancelled by this wait.
    """
    cancelled = False
    while not fut.done():
        try:
            await asyncio.wait((fut,))
        except asyncio.CancelledError:
            cancelled = True
    return cancelled
