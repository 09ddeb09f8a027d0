"""``PostgresEvents``: ``lil watch``'s records in a PostgreSQL journal (``postgresql://…``).

What ``recorder.py`` writes to a journal file's ``supervisor_events``, kept in
``ll_supervisor_events`` (migration 0006) with times as ``timestamptz``, and
what it reads back there: the runs that one start of a watched child opened
(``ll_attempts.watch_id`` and ``watch_attempt``, which ``postgres_runs``
records from the environment ``lil watch`` gives its child). One connection,
made at once (a bad URL stops ``lil watch`` before any start) and made again
after a failure (a server restarted while the watcher waits for its child).
"""

from __future__ import annotations

from typing import Any

from ...errors import JournalFileError
from .database import connect, migrate, redact

__all__ = ["PostgresEvents"]


class PostgresEvents:
    """The supervisor's records in one PostgreSQL journal; every failure a JournalFileError."""

    def __init__(self, location: str) -> None:
        #: What the watched child's journals open (its ``LETITLOOP_DB``): this URL.
        self.location = location
        self._conn: Any = None
        self._connection()

    def _connection(self) -> Any:
        if self._conn is None or self._conn.closed:
            conn = connect(self.location)
            try:
                migrate(conn, self.location)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        import psycopg  # connect() has it: the extra is installed

        try:
            cur = self._connection().execute(sql, params)
            return cur.fetchall() if cur.description is not None else []
        except psycopg.Error as exc:
            self.close()  # the next call connects again
            raise JournalFileError(
                f"{redact(self.location)}: expected the PostgreSQL server to answer; found "
                f"{type(exc).__name__}: {str(exc).strip()}",
                path=redact(self.location),
            ) from exc

    def add(self, row: dict[str, Any]) -> None:
        """Record one event (a row of ``ll_supervisor_events``, by its columns' names)."""
        self._rows(
            f"INSERT INTO ll_supervisor_events ({', '.join(row)}) "
            f"VALUES ({', '.join(['%s'] * len(row))})",
            tuple(row.values()),
        )

    def runs_of(self, watch_id: str, attempt: int) -> list[tuple[Any, ...]]:
        """``(id, status, cancel_requested_at)`` of each run that start ``attempt`` opened."""
        return self._rows(
            "SELECT r.id, r.status, r.cancel_requested_at FROM ll_attempts AS a "
            "JOIN ll_runs AS r ON r.id = a.run WHERE a.watch_id = %s AND a.watch_attempt = %s "
            "ORDER BY a.started_at, r.num",
            (watch_id, attempt),
        )

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.closed:
            conn.close()
