"""Reading a run's stream from outside it: from any offset, while it runs and after.

Readers never write: they go through a read-only ``Inspector``
(``inspection.open_inspector``), as ``lil`` does, on any store. A stream's
offsets are its chunks' ``seq`` (0, 1, 2, …): :func:`follow` from offset ``k``
hands out chunk ``k`` and every later one, each once, in order, as they are
journaled, across the kill of the process that streams and its next
attempt, until the stream's ``end`` chunk. A ``reset`` chunk says the call
restarted: what came before it in the stream is no longer the answer.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import MisuseError
from .chunks import Chunk

if TYPE_CHECKING:
    from ..inspection import Inspector
    from ..inspection.inspector_detail import StreamReads

__all__ = ["afollow", "follow", "read", "stream_keys"]

#: Seconds between two reads of a stream that has nothing new: a reader's lag, on top of
#: the writer's batching (stepping.FLUSH_AFTER).
POLL = 0.05
#: Seconds between two looks at the run's state while nothing new comes: a run that
#: finished (completed, failed, cancelled) with its stream not ended ends the following.
STATE_EVERY = 1.0


Where = str | Path | None


@contextmanager
def _opened(path: Where, live: bool) -> Iterator[Inspector]:
    # The inspector's ~40 modules load on a first read, not with the room: a program that
    # only streams (LangGraph's durable_model) does not pay them at its start (~20 ms).
    from ..inspection import open_inspector

    inspector = open_inspector(path, live=live)
    try:
        yield inspector
    finally:
        inspector.close()


def _run_id(inspector: Inspector, run: str) -> str:
    """The id of ``run`` (an id, name or goal, as ``lil show`` takes it)."""
    from ..inspection import find_run

    return find_run(inspector, run).id


def stream_keys(run: str, *, path: Where = None) -> list[str]:
    """The keys of the streamed steps of ``run`` (a run id, name or goal, as ``lil show``
    takes it) in the journal at ``path`` (default: as for ``Journal``)."""
    with _opened(path, live=False) as inspector:
        return inspector.stream_keys(_run_id(inspector, run))


def _key(inspector: StreamReads, run_id: str, key: str | None) -> str | None:
    """The stream to read: ``key``, or the run's one stream (None while it has none)."""
    if key is not None:
        return key
    keys = inspector.stream_keys(run_id)
    if len(keys) > 1:
        raise MisuseError(
            f"run {run_id} has {len(keys)} streams ({', '.join(keys)}); pass key= to "
            f"choose the one to read"
        )
    return keys[0] if keys else None


def read(run: str, key: str | None = None, *, offset: int = 0, path: Where = None) -> list[Chunk]:
    """The chunks of ``run``'s stream ``key`` journaled so far, from ``offset`` on.

    ``run``: a run id, name or goal (its newest run); ``key``: the streamed step's
    key (default: the run's one stream). Raises RunNotFoundError for no such run,
    MisuseError when the run has several streams and no key was given.
    """
    with _opened(path, live=False) as inspector:
        run_id = _run_id(inspector, run)
        found = _key(inspector, run_id, key)
        if found is None:
            return []
        return [Chunk.of_row(r) for r in inspector.stream_chunks(run_id, found, offset - 1)]


class _Follower:
    """One reader's place in one stream, and what it reads next."""

    def __init__(
        self, inspector: Inspector, run: str, key: str | None, offset: int, timeout: float | None
    ) -> None:
        self.inspector = inspector
        self.run_id = _run_id(inspector, run)
        self.key = key
        self.after = offset - 1
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.looked = time.monotonic()
        self.ended = False

    def next_chunks(self) -> list[Chunk] | None:
        """The chunks journaled since the last call; None once the following is over."""
        if self.ended:
            return None
        if self.key is None:
            self.key = _key(self.inspector, self.run_id, None)
        rows = (
            []
            if self.key is None
            else self.inspector.stream_chunks(self.run_id, self.key, self.after)
        )
        if rows:
            chunks = [Chunk.of_row(r) for r in rows]
            self.after = chunks[-1].seq
            self.ended = chunks[-1].kind == "end"
            return chunks
        now = time.monotonic()
        if self.deadline is not None and now >= self.deadline:
            raise TimeoutError(
                f"stream {self.key!r} of run {self.run_id}: nothing new after offset "
                f"{self.after} before the timeout; follow it again from offset {self.after + 1}"
            )
        if now - self.looked >= STATE_EVERY:
            self.looked = now
            found = self.inspector.run(self.run_id)
            if found is None or found.status in ("completed", "failed", "cancelled"):
                # One more read: the last batch may have come with the end.
                self.ended = True
                return [Chunk.of_row(r) for r in self._rows()]
        return []

    def _rows(self) -> list[tuple[Any, ...]]:
        if self.key is None:
            return []
        return list(self.inspector.stream_chunks(self.run_id, self.key, self.after))


def follow(
    run: str,
    key: str | None = None,
    *,
    offset: int = 0,
    path: Where = None,
    timeout: float | None = None,
) -> Iterator[Chunk]:
    """Every chunk of ``run``'s stream from ``offset`` on, as it is journaled, until its end.

    Follows the stream across the kill of the process that writes it and its
    next attempt: each chunk once, in order (a ``reset`` chunk included). Ends
    after the ``end`` chunk, or when the run finished (completed, failed,
    cancelled) without one. ``timeout``: seconds without a new chunk after which
    TimeoutError is raised (default: wait as long as the run lasts). Raises
    RunNotFoundError for no such run.
    """
    with _opened(path, live=True) as inspector:
        follower = _Follower(inspector, run, key, offset, timeout)
        while True:
            chunks = follower.next_chunks()
            if chunks is None:
                return
            yield from chunks
            if not chunks:
                time.sleep(POLL)


async def afollow(
    run: str,
    key: str | None = None,
    *,
    offset: int = 0,
    path: Where = None,
    timeout: float | None = None,
) -> AsyncIterator[Chunk]:
    """:func:`follow` for asyncio (a web route's server-sent events): it sleeps with
    ``asyncio.sleep`` between reads; each read is one short query."""
    import asyncio

    with _opened(path, live=True) as inspector:
        follower = _Follower(inspector, run, key, offset, timeout)
        while True:
            chunks = follower.next_chunks()
            if chunks is None:
                return
            for chunk in chunks:
                yield chunk
            if not chunks:
                await asyncio.sleep(POLL)
