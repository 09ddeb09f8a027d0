"""Streamed steps' chunks in a journal file: table ``stream_chunks`` (migration 0022).

``SqliteStorage`` includes :class:`SqliteStreamRows`, the SQLite side of
``storage_streams.StreamRows``. A batch of chunks is one ``executemany`` in one
write transaction; the table is ``WITHOUT ROWID``, clustered on
``(run, key, seq)``, so a stream's rows sit together and read back in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..storage_streams import ChunkRow
from .keys import SqliteKeys

_INSERT = (
    "INSERT INTO stream_chunks (run, key, seq, attempt, kind, data, mark, at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_READ = (
    "SELECT seq, attempt, kind, data, mark, at FROM stream_chunks "
    "WHERE run = ? AND key = ? AND seq > ? ORDER BY seq"
)


class SqliteStreamRows(SqliteKeys):
    """``StreamRows`` on one journal file's ``Store``."""

    def write_chunks(self, run_id: str, key: str, rows: Sequence[Sequence[Any]]) -> None:
        self.store.write_many(_INSERT, [(run_id, key, *row) for row in rows])

    def read_chunks(self, run_id: str, key: str, after: int = -1) -> list[ChunkRow]:
        return [tuple(r) for r in self.store.query(_READ, (run_id, key, after))]
