"""The part of the storage protocol that keeps streamed steps' chunks (``letitloop.streams``).

``Storage`` (``storage.py``) includes it; each store implements it in a module
of its own: SQLite's table ``stream_chunks`` (migration 0022,
``sqlite/streams.py``), PostgreSQL's ``ll_stream_chunks`` (its 0013,
``postgres/streams.py``), the memory store's ``chunks`` (``memory/streams.py``).

A chunk row is small (one delta of text, or of a tool call's arguments) and
never rewritten: a stream grows by inserts, a batch of them per transaction.
``seq`` is the chunk's offset in its stream, across every attempt of the run:
rows of one stream are read back in ``seq`` order. Times are ISO-8601 UTC text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

#: What a chunk is: a text delta, a tool call's delta (JSON), the provider's handle to
#: re-attach (JSON), a ``reset`` (the call restarted: readers drop what they have of the
#: stream), the ``end`` (JSON: the usage). migrations/0022_stream_chunks.sql checks it.
CHUNK_KINDS = ("text", "tool", "state", "reset", "end")

#: A chunk's row as the stores take and hand it out: (seq, attempt, kind, data, mark, at).
ChunkRow = tuple[int, int, str, str, "str | None", str]


class StreamRows(Protocol):
    """Streamed steps' chunks, appended in batches and read back from an offset."""

    def write_chunks(self, run_id: str, key: str, rows: Sequence[Sequence[Any]]) -> None:
        """Append ``rows`` (each a ``ChunkRow``) to the stream of the run's step ``key``, in
        one transaction. Raises JournalFileError when the journal cannot be written (on
        PostgreSQL: also when the run is no longer this journal's attempt)."""
        ...

    def read_chunks(self, run_id: str, key: str, after: int = -1) -> list[ChunkRow]:
        """The stream's chunks whose ``seq`` is greater than ``after``, in order (all of
        them by default; an empty list for a step that streamed nothing)."""
        ...
