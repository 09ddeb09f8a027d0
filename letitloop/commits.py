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
(no fsync). Otherwise the batch goes to a worker thread, and rows queued
meanwhile form the next batch. So the loop is never held longer than one
small commit of the rows that became ready together.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from .store import Store


class LoopCommits:
    """Rows queued from one event loop and committed in batches; loop thread only."""

    def __init__(
        self,
        store: Store,
        sql: str,
        inline: bool,
        on_committed: Callable[[Sequence[Any]], None],
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.store = store
        self.sql = sql
        #: False with durability="power": every commit fsyncs, so never on the loop.
        self.inline = inline
        self.on_committed = on_committed
        self._pending: list[tuple[Sequence[Any], asyncio.Future[None]]] = []
        self._in_thread = False

    def on_this_loop(self) -> bool:
        """Whether the running event loop is the one these rows are committed from."""
        return asyncio.get_running_loop() is self.loop

    def commit(self, row: Sequence[Any]) -> asyncio.Future[None] | None:
        """Commit ``row`` now (None) or queue it (a future that resolves once it is committed).

        A row is committed at once, inline, when nothing else can join its
        batch: nothing is queued and no other callback is ready to run in this
        loop pass (a sequential pipeline, one step at a time). Cancelling the
        future does not withdraw the row: it is committed with its batch.
        """
        if (
            self.inline
            and not self._pending
            and not self._in_thread
            and not getattr(self.loop, "_ready", True)  # the loop's ready queue (CPython)
            and self.store.try_write_many(self.sql, (row,))
        ):
            self.on_committed(row)
            return None
        fut = self.loop.create_future()
        self._pending.append((row, fut))
        if len(self._pending) == 1 and not self._in_thread:
            self.loop.call_soon(self.flush)
        return fut

    def flush(self) -> None:
        if self._in_thread or not self._pending:
            return
        batch, self._pending = self._pending, []
        rows = [row for row, _ in batch]
        if self.inline:
            try:
                done = self.store.try_write_many(self.sql, rows)
            except Exception as exc:
                self._finish(batch, exc)
                return
            if done:
                self._finish(batch, None)
                return
        self._in_thread = True
        written = self.loop.run_in_executor(None, self.store.write_many, self.sql, rows)
        written.add_done_callback(lambda f: self._after_thread(batch, f))

    def drain(self) -> None:
        """Commit whatever is queued now, waiting if need be (the journal is closing)."""
        batch, self._pending = self._pending, []
        if not batch:
            return
        try:
            self.store.write_many(self.sql, [row for row, _ in batch])
        except Exception as exc:
            self._finish(batch, exc)
        else:
            self._finish(batch, None)

    def _after_thread(
        self, batch: list[tuple[Sequence[Any], asyncio.Future[None]]], f: asyncio.Future[None]
    ) -> None:
        self._in_thread = False
        self._finish(batch, f.exception() if not f.cancelled() else asyncio.CancelledError())
        if self._pending:
            self.loop.call_soon(self.flush)

    def _finish(
        self, batch: list[tuple[Sequence[Any], asyncio.Future[None]]], exc: BaseException | None
    ) -> None:
        for row, fut in batch:
            if exc is None:
                self.on_committed(row)
            if fut.done():  # its task was cancelled while waiting
                continue
            if exc is None:
                fut.set_result(None)
            else:
                fut.set_exception(exc)
