"""Streamed steps' chunks in a ``MemoryDatabase`` (``storage_streams.StreamRows``).

``MemoryStorage`` includes :class:`MemoryStreamRows`: each stream is a list of
``ChunkRow`` under ``(run, key)`` in the database's ``chunks``, appended under
the database's lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..storage_streams import ChunkRow
from .database import MemoryConnection


class MemoryStreamRows(MemoryConnection):
    """``StreamRows`` on the in-memory store."""

    def write_chunks(self, run_id: str, key: str, rows: Sequence[Sequence[Any]]) -> None:
        with self._write() as db:
            db.chunks.setdefault((run_id, key), []).extend(tuple(r) for r in rows)

    def read_chunks(self, run_id: str, key: str, after: int = -1) -> list[ChunkRow]:
        with self._read():
            rows = list(self.db.chunks.get((run_id, key), ()))
        return [r for r in rows if r[0] > after]
