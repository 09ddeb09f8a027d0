"""A streamed call as one step: its chunks journaled as they arrive, its answer its result.

:func:`stream` (and :func:`astream`) make a step (``Journal.step``, keyed and
replayed as any step) whose function consumes a source of pieces (the
model's stream), journals each one as a chunk (``stream_chunks``) and hands
it to the caller's loop. The step's result is the whole answer
(``StreamResult``). What happens on each attempt:

- **Fresh**: ``call(*args, **kwargs)`` is the source.
- **After a kill mid-stream** (chunks journaled, no end): ``recover(resume,
  *args, **kwargs)`` is asked to go on from what was journaled (a
  ``chunks.Resume``): it returns ``Recovery("reattach", pieces)`` (the same
  generation, from the position after the last journaled chunk),
  ``Recovery("continue", pieces)`` (a new call that generates the rest), or
  None; with None (or no ``recover``) the call restarts: a ``reset`` chunk is
  journaled first, so that readers drop what they had.
- **Journaled to its end** but not recorded (a kill between the two): no call;
  the answer is the chunks'.
- **Recorded**: a replay; the caller's loop gets the journaled chunks again.

Batching is ``calls.py``'s (``FLUSH_EVERY`` chunks, ``FLUSH_AFTER`` seconds).
The caller's loop gets each chunk as it arrives, before it is journaled: a kill
loses at most the chunks of one batch from the journal (a recovery asks for
them again), never one a reader has seen. Memory: one batch, plus a bounded
queue of ``QUEUE_SIZE`` chunks between the step and the caller's loop.

Thread rules: the sync step runs in a thread of its own (its context copied:
it is keyed under the caller's step, if any), the async one in a task; each
``StreamCall`` is used by that thread or task alone.
"""

from __future__ import annotations

import contextlib
import contextvars
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ..errors import MisuseError
from ..run.steps import parent_step
from .calls import (
    HANDED_OUT,
    QUEUE_SIZE,
    Recovery,
    StreamAbandonedError,
    StreamCall,
    aflushing,
    flushing,
    opened,
    recorded_chunks,
    step_function,
)
from .chunks import Chunk, StreamResult

if TYPE_CHECKING:
    from .calls import StreamingRun

__all__ = ["AsyncStream", "Stream", "astream", "stream"]

# -- sync ------------------------------------------------------------------------------


class Stream:
    """A streamed step, iterated once: ``for chunk in s`` gets every chunk of the answer
    (``chunk.text``), journaled as it arrives; then ``s.result`` is the whole answer.

    The step runs while the loop iterates; ``s.result`` (or ``s.text``) without a loop
    runs it to its end. A ``break`` out of the loop stops the call: the step fails
    (StreamAbandonedError, recorded), and the next attempt recovers it.
    """

    def __init__(
        self,
        journal: StreamingRun,
        name: str,
        call: Callable[..., Iterable[Any]],
        recover: Callable[..., Recovery | None] | None,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> None:
        self.journal, self.name = journal, name
        self._call, self._recover = call, recover
        self._args, self._kwargs = args, kwargs
        self._result: StreamResult | None = None
        self._started = False

    def __iter__(self) -> Iterator[Chunk]:
        if self._started:
            raise MisuseError(
                f"stream {self.name!r} was iterated already; read .result for its answer, or "
                f"letitloop.streams.read() for its chunks"
            )
        self._started = True
        chunks: queue.Queue[tuple[str, Any]] = queue.Queue(QUEUE_SIZE)
        stop = threading.Event()
        call, recover = self._call, self._recover
        ran: list[bool] = []  # the body ran (else the step was replayed)

        def body(*args: Any, **kwargs: Any) -> dict[str, Any]:
            journal, key = parent_step.get()  # type: ignore[misc]
            ran.append(True)
            s = StreamCall(journal, key)
            source: Iterable[Any] = ()
            if not s.resume.ended:
                if s.resume.empty:
                    source = call(*args, **kwargs)
                else:
                    r = recover(s.resume, *args, **kwargs) if recover is not None else None
                    if r is None:
                        s.restart()
                        source = call(*args, **kwargs)
                    else:
                        s.recovered(r.how)
                        source = r.pieces  # type: ignore[assignment]
            for chunk in s.earlier():
                chunks.put(("chunk", chunk))
            with flushing(s):
                for item in source:
                    if stop.is_set():
                        s.flush()
                        raise StreamAbandonedError(
                            f"stream {key!r}: its reader stopped before the end; the next "
                            f"attempt goes on from the {s.next_seq} chunks journaled"
                        )
                    got = s.take(item)
                    if got is not None and got.kind in HANDED_OUT:
                        chunks.put(("chunk", got))
                return s.end()

        fn = step_function(call, body)

        def work() -> None:
            try:
                value = self.journal.step(self.name, fn, *self._args, **self._kwargs)
            except BaseException as exc:  # handed to the loop, raised there
                chunks.put(("error", exc))
            else:
                chunks.put(("done", value))

        worker = threading.Thread(
            target=contextvars.copy_context().run, args=(work,), name=f"stream {self.name}"
        )
        worker.start()
        try:
            while True:
                what, value = chunks.get()
                if what == "chunk":
                    yield value
                elif what == "error":
                    raise value
                else:
                    self._result = StreamResult.from_recorded(value)
                    if not ran:  # replayed: the journaled chunks again
                        yield from recorded_chunks(self.journal, value["key"])
                    return
        finally:
            stop.set()
            while worker.is_alive():  # let the step end: drain what it still hands out
                with contextlib.suppress(queue.Empty):
                    chunks.get(timeout=0.05)
            worker.join()

    @property
    def result(self) -> StreamResult:
        """The whole answer (the stream run to its end if it was not read yet)."""
        if self._result is None:
            for _ in self:
                pass
        assert self._result is not None
        return self._result

    @property
    def text(self) -> str:
        """The whole answer's text."""
        return self.result.text


def stream(
    name: str,
    call: Callable[..., Iterable[Any]],
    /,
    *args: Any,
    recover: Callable[..., Recovery | None] | None = None,
    journal: StreamingRun | None = None,
    **kwargs: Any,
) -> Stream:
    """A streamed call as a step named ``name`` of ``journal`` (default: the current one).

    ``call(*args, **kwargs)`` starts the call and returns its source: an iterable of
    text (``str``) and ``Piece``s. ``recover(resume, *args, **kwargs)``, if given, is
    asked after a kill mid-stream to go on from ``resume`` (a ``Resume``: the text, tool
    calls and provider state journaled); it returns a ``Recovery`` or None (restart).
    The step's identity is ``name`` and the arguments, as for ``j.step``; ``call``'s
    ``module.qualname`` is its code identity. Iterate the ``Stream`` for the chunks;
    its ``result`` is the answer. Raises NoJournalError with no journal to use.
    """
    return Stream(opened(journal, call), name, call, recover, args, kwargs)


# -- async -----------------------------------------------------------------------------


class AsyncStream:
    """:class:`Stream` for asyncio: ``async for chunk in s``, then ``await s.answer()``."""

    def __init__(
        self,
        journal: StreamingRun,
        name: str,
        call: Callable[..., Any],
        recover: Callable[..., Any] | None,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> None:
        self.journal, self.name = journal, name
        self._call, self._recover = call, recover
        self._args, self._kwargs = args, kwargs
        self._result: StreamResult | None = None
        self._started = False

    async def __aiter__(self) -> AsyncIterator[Chunk]:
        import asyncio
        import inspect

        if self._started:
            raise MisuseError(
                f"stream {self.name!r} was iterated already; await .answer() for its answer"
            )
        self._started = True
        chunks: asyncio.Queue[tuple[str, Any]] = asyncio.Queue(QUEUE_SIZE)
        call, recover = self._call, self._recover

        async def resolved(value: Any) -> Any:
            return await value if inspect.isawaitable(value) else value

        ran: list[bool] = []  # the body ran (else the step was replayed)

        async def body(*args: Any, **kwargs: Any) -> dict[str, Any]:
            journal, key = parent_step.get()  # type: ignore[misc]
            ran.append(True)
            s = StreamCall(journal, key)
            source: Any = ()
            if not s.resume.ended:
                if s.resume.empty:
                    source = await resolved(call(*args, **kwargs))
                else:
                    r = None
                    if recover is not None:
                        r = await resolved(recover(s.resume, *args, **kwargs))
                    if r is None:
                        s.restart()
                        source = await resolved(call(*args, **kwargs))
                    else:
                        s.recovered(r.how)
                        source = r.pieces
            for chunk in s.earlier():
                await chunks.put(("chunk", chunk))
            flusher = asyncio.ensure_future(aflushing(s))
            try:
                if hasattr(source, "__aiter__"):
                    async for item in source:
                        got = s.take(item)
                        if got is not None and got.kind in HANDED_OUT:
                            await chunks.put(("chunk", got))
                else:
                    for item in source:
                        got = s.take(item)
                        if got is not None and got.kind in HANDED_OUT:
                            await chunks.put(("chunk", got))
                return s.end()
            finally:
                s.close()
                flusher.cancel()

        fn = step_function(call, body)

        async def work() -> None:
            try:
                value = await self.journal.async_step(self.name, fn, *self._args, **self._kwargs)
            except asyncio.CancelledError:
                raise
            except BaseException as exc:
                await chunks.put(("error", exc))
            else:
                await chunks.put(("done", value))

        task = asyncio.ensure_future(work())
        try:
            while True:
                what, value = await chunks.get()
                if what == "chunk":
                    yield value
                elif what == "error":
                    raise value
                else:
                    self._result = StreamResult.from_recorded(value)
                    if not ran:  # replayed: the journaled chunks again
                        for chunk in recorded_chunks(self.journal, value["key"]):
                            yield chunk
                    return
        finally:
            if not task.done():  # a break: the call stops, the step fails (recorded)
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    async def answer(self) -> StreamResult:
        """The whole answer (the stream run to its end if it was not read yet)."""
        if self._result is None:
            async for _ in self:
                pass
        assert self._result is not None
        return self._result


def astream(
    name: str,
    call: Callable[..., Any],
    /,
    *args: Any,
    recover: Callable[..., Any] | None = None,
    journal: StreamingRun | None = None,
    **kwargs: Any,
) -> AsyncStream:
    """:func:`stream` for asyncio: ``call`` (and ``recover``) may be async and return an
    async iterable; the step is ``Journal.async_step``'s."""
    return AsyncStream(opened(journal, call), name, call, recover, args, kwargs)
