"""Streamed steps' chunks on PostgreSQL: table ``ll_stream_chunks`` (its migration 0013).

``PostgresStorage`` includes :class:`PostgresStreamRows`, PostgreSQL's side of
``storage_streams.StreamRows``. A batch is one fenced transaction: written only
while the run's attempt is still this journal's, so a holder taken over writes
no chunk into its successor's stream.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..storage_streams import ChunkRow
from .connection import PostgresConnection

_INSERT = (
    "INSERT INTO ll_stream_chunks (run, key, seq, attempt, kind, data, mark, at) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)
_READ = (
    "SELECT seq, attempt, kind, data, mark, at FROM ll_stream_chunks "
    "WHERE run = %s AND key = %s AND seq > %s ORDER BY seq"
)


class PostgresStreamRows(PostgresConnection):
    """``StreamRows`` on one journal's PostgreSQL connection."""

    def write_chunks(self, run_id: str, key: str, rows: Sequence[Sequence[Any]]) -> None:
        with self._tx() as c, c.cursor() as cur:
            cur.executemany(_INSERT, [(run_id, key, *row) for row in rows])

    def read_chunks(self, run_id: str, key: str, after: int = -1) -> list[ChunkRow]:
        with self._tx(fenced=False) as c:
            rows = c.execute(_READ, (run_id, key, after)).fetchall()
        return [(int(r[0]), *r[1:]) for r in rows]
