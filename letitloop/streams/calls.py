"""One attempt at a streamed step: what earlier attempts journaled, the batch, the recovery.

``StreamCall`` is what the streamed step's function (``stepping.py``) does on
each attempt: it reads the stream's journaled chunks (``storage_streams``),
sums them (``chunks.Resume``), journals each new piece as a chunk in batches,
and ends the stream. ``Recovery`` is what a provider's hook returns to go on
from a kill. Batching: chunks are written every :data:`FLUSH_EVERY` chunks, or
:data:`FLUSH_AFTER` seconds after the last write (at the next chunk, or by the
flusher when the stream stalls), and at the end; a ``state`` piece (the handle
to re-attach) and a ``reset`` are written at once.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass
from types import FunctionType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..errors import LetItLoopError, MisuseError
from ..identity.step_names import Named
from ..primitives.clock import utc_iso
from ..run.durable import current, usage
from .chunks import Chunk, Resume, StreamResult, piece_of, since_reset

if TYPE_CHECKING:
    from ..stores.storage_streams import StreamRows

__all__ = ["Recovery", "StreamAbandonedError", "StreamCall", "StreamingRun"]

T = TypeVar("T")


class StreamingAttempt(Protocol):
    """What a stream reads of its journal's attempt (``run/attempt.py``): its storage."""

    @property
    def storage(self) -> StreamRows | None: ...


class StreamingRun(Protocol):
    """What a stream reads and calls of the journal it is a step of (``Journal`` is one):
    the run and attempt, its clock, its attempt's storage (the chunks), and ``step`` or
    ``async_step`` (the stream's own row)."""

    @property
    def run_id(self) -> str: ...

    @property
    def attempt(self) -> int: ...

    @property
    def clock(self) -> Callable[[], float]: ...

    @property
    def _opened(self) -> StreamingAttempt: ...

    def step(self, name: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T: ...

    async def async_step(
        self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> Any: ...


#: Chunks per write: at 50 chunks a second, the time below decides first.
FLUSH_EVERY = 64
#: Seconds after the last write at which the next chunk writes its batch: what a kill
#: may cost the journal (and a reader's lag behind the stream), and a commit per
#: 0.2 s at most, whatever the chunk rate.
FLUSH_AFTER = 0.2
#: Chunks the step reads ahead of a caller's loop that is slower than the stream: few, so
#: that the journal holds about what the loop has seen (the provider's side, and the
#: connection's buffers, hold the rest), and memory stays bounded.
QUEUE_SIZE = 8


@dataclass(frozen=True)
class Recovery:
    """What a ``recover`` hook returns to go on with a stream cut by a kill.

    ``how``: ``"reattach"`` (the same generation, re-attached after the last
    journaled position: nothing paid twice) or ``"continue"`` (a new call that
    generates the rest of the journaled prefix). ``pieces``: its source, already
    opened (the request made), so a refusal shows before anything is handed out.
    """

    how: str
    pieces: Iterable[Any] | AsyncIterator[Any]

    def __post_init__(self) -> None:
        if self.how not in ("reattach", "continue"):
            raise MisuseError(
                f"Recovery(how={self.how!r}): expected 'reattach' or 'continue'; return None "
                f"from the recover hook to restart the call"
            )


class StreamAbandonedError(LetItLoopError):
    """The caller's loop stopped reading a stream before its end (a ``break``): the step
    fails, and the next attempt recovers it from what was journaled."""


class StreamCall:
    """One attempt at one streamed step: what earlier attempts journaled, the batch being
    written, the sums. Used by the step's thread (or task) alone, but for the batch, which
    the flusher (:func:`flushing`) also writes, under ``lock``."""

    def __init__(self, journal: StreamingRun, key: str) -> None:
        storage = journal._opened.storage
        if storage is None:
            raise LetItLoopError(f"stream {key!r}: the journal was closed while it started")
        self.storage = storage
        self.journal = journal
        self.run_id = journal.run_id
        self.key = key
        self.attempt = journal.attempt
        self.chunks = [Chunk.of_row(r) for r in storage.read_chunks(self.run_id, key)]
        self.resume = Resume.of(self.chunks)
        self.next_seq = self.chunks[-1].seq + 1 if self.chunks else 0
        self.batch: list[tuple[Any, ...]] = []
        self.written = time.monotonic()
        #: The batch is written by the step's thread, or by the flusher when the stream
        #: stalls (``stale``): one at a time. ``over``: the flusher stops.
        self.lock = threading.Lock()
        self.over = False

    def earlier(self) -> list[Chunk]:
        """The journaled chunks the caller's loop gets first (those since the last reset)."""
        return [c for c in since_reset(self.chunks) if c.kind in HANDED_OUT]

    def add(self, kind: str, data: str, mark: str | None = None, now: bool = False) -> Chunk:
        """Journal one chunk (in the batch; the batch written when due, or ``now``)."""
        chunk = Chunk(self.next_seq, kind, data, mark, self.attempt, utc_iso(self.journal.clock()))
        self.next_seq += 1
        with self.lock:
            self.batch.append((chunk.seq, chunk.attempt, kind, data, mark, chunk.at))
            if (
                now
                or len(self.batch) >= FLUSH_EVERY
                or time.monotonic() - self.written >= FLUSH_AFTER
            ):
                self._write()
        self.resume.add(chunk)
        return chunk

    def flush(self) -> None:
        """Write the batch (one transaction)."""
        with self.lock:
            self._write()

    def _write(self) -> None:
        if self.batch:
            self.storage.write_chunks(self.run_id, self.key, self.batch)
            self.batch = []
        self.written = time.monotonic()

    def stale(self) -> bool:
        """The flusher's turn: write a batch that has waited :data:`FLUSH_AFTER` for its
        next chunk (a stream that stalls: readers see its tail, a kill keeps it). False
        once the call is over, or the journal refused the write (the step's next write
        reports it)."""
        with self.lock:
            if self.over:
                return False
            if self.batch and time.monotonic() - self.written >= FLUSH_AFTER:
                try:
                    self._write()
                except LetItLoopError:
                    return False
            return True

    def close(self) -> None:
        """No flush after this (the step's own end, or its failure)."""
        with self.lock:
            self.over = True

    def take(self, item: object) -> Chunk | None:
        """Journal one item of the source; the chunk made (None for usage, recorded)."""
        piece = piece_of(item)
        if piece.kind == "text":
            if not piece.data:
                return None
            return self.add("text", piece.data, piece.mark)
        if piece.kind == "usage":
            usage(**piece.data)
            return None
        data = json.dumps(piece.data, separators=(",", ":"))
        return self.add(piece.kind, data, piece.mark, now=piece.kind == "state")

    def restart(self) -> None:
        """Journal a ``reset``: the call starts again (readers drop what they had)."""
        why = {"attempt": self.attempt, "dropped": self.resume.chunks}
        self.add("reset", json.dumps(why, separators=(",", ":")), now=True)
        self.chunks = []

    def recovered(self, how: str) -> Chunk:
        """Journal how this attempt goes on (a ``state`` chunk: ``{"recovery": how}``)."""
        return self.add("state", json.dumps({"recovery": how}), now=True)

    def end(self) -> dict[str, Any]:
        """Journal the end, write the last batch; the step's result as recorded."""
        if not self.resume.ended:
            self.add("end", "{}", now=True)
        else:
            self.flush()
        return self.result().recorded() | {"key": self.key}

    def result(self) -> StreamResult:
        """What the chunks journaled add up to."""
        r = self.resume.settle()
        return StreamResult(
            text=r.text,
            tool_calls=tuple(r.tool_calls[i] for i in sorted(r.tool_calls)),
            recoveries=tuple(r.recoveries),
            state=dict(r.state),
            chunks=self.next_seq,
        )


@contextlib.contextmanager
def flushing(call: StreamCall) -> Iterator[None]:
    """A sync stream's flusher, for as long as the block runs: a thread that writes the
    batch of a stream that stalled (``StreamCall.stale``) every :data:`FLUSH_AFTER`."""
    over = threading.Event()

    def flush() -> None:
        while not over.wait(FLUSH_AFTER) and call.stale():
            pass

    flusher = threading.Thread(target=flush, name=f"stream flusher {call.key}", daemon=True)
    flusher.start()
    try:
        yield
    finally:
        call.close()
        over.set()


async def aflushing(call: StreamCall) -> None:
    """An async stream's flusher (a task, cancelled at the stream's end): as :func:`flushing`."""
    import asyncio

    while True:
        await asyncio.sleep(FLUSH_AFTER)
        if not call.stale():
            return


def step_function(call: Callable[..., Any], body: Callable[..., Any]) -> Callable[..., Any]:
    """``body`` as the step's function, recorded under ``call``'s name: a ``Named``'s name,
    else ``call``'s ``module.qualname`` (the code identity a replay checks)."""
    if type(call) is Named:
        return Named(call.name, body)
    fn: Any = call
    while hasattr(fn, "func"):  # functools.partial
        fn = fn.func
    fn = getattr(fn, "__func__", fn)
    if type(body) is FunctionType:
        body.__module__ = getattr(fn, "__module__", None) or type(fn).__module__
        body.__qualname__ = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return body


def opened(journal: StreamingRun | None, call: object) -> StreamingRun:
    """``journal``, else the current one (NoJournalError when there is none); MisuseError
    when ``call`` is not the function that starts the call (a call made already)."""
    if not callable(call):
        raise MisuseError(
            f"stream(): expected the function that starts the call (it returns the model's "
            f"stream), got {type(call).__name__} {call!r:.80}; pass the function and its "
            f"arguments: stream('answer', ask, prompt), not stream('answer', ask(prompt))"
        )
    return journal if journal is not None else current("stream()")


#: The chunks a program's own loop gets: the answer's (its text and tool calls). Readers
#: (reading.py) get every chunk, ``state``, ``reset`` and ``end`` too.
HANDED_OUT = ("text", "tool")


def recorded_chunks(journal: StreamingRun, key: str) -> list[Chunk]:
    """A recorded stream's chunks since its last reset (what a replay hands out again)."""
    storage = journal._opened.storage
    if storage is None:
        return []
    rows = storage.read_chunks(journal.run_id, key)
    return [c for c in since_reset([Chunk.of_row(r) for r in rows]) if c.kind in HANDED_OUT]
