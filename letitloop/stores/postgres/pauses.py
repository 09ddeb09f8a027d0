"""Sleeps' and waits' rows in PostgreSQL (``PostgresPauseRows``: ``PauseRows``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import row_rules
from .connection import PostgresConnection
from .seals import seal_row

__all__ = ["PostgresPauseRows"]


class PostgresPauseRows(PostgresConnection):
    """A sleep's or a wait's row: started, read, done."""

    def _row(self, run_id: str, key: str) -> dict[str, Any] | None:
        with self._tx(fenced=False) as c:
            return self._get(c, self.goal, run_id, key)

    def pause(self, run_id: str, key: str) -> tuple[str, str, str | None, str | None] | None:
        r = self._row(run_id, key)
        return None if r is None else (r["kind"], r["status"], r["started_at"], r["wake_at"])

    def start_pause(self, row: Sequence[Any]) -> None:
        with self._tx() as c:
            self._put(c, self.goal, row[0], row[1], row_rules.pause_values(row))

    def finish_sleep(
        self, run_id: str, key: str, finished_at: str, duration_ms: float, attempt: int
    ) -> None:
        with self._tx() as c:
            c.execute(
                "UPDATE ll_journal SET status = 'done', finished_at = %s, duration_ms = %s, "
                "attempt = %s WHERE goal = %s AND run = %s AND key = %s",
                (finished_at, duration_ms, attempt, self.goal, run_id, key),
            )
            if self.sealing:
                seal_row(c, self.sealing, self.goal, run_id, key, "done")

    def wait_ending(self, run_id: str, key: str) -> tuple[str, str | None, str | None] | None:
        r = self._row(run_id, key)
        return None if r is None else (r["status"], r["result"], r["error"])

    def time_out_wait(
        self, run_id: str, key: str, error: str, finished_at: str, duration_ms: float
    ) -> None:
        with self._tx() as c:
            c.execute(
                "UPDATE ll_journal SET status = 'done', error = %s, finished_at = %s, "
                "duration_ms = %s WHERE goal = %s AND run = %s AND key = %s "
                "AND status = 'waiting'",
                (error, finished_at, duration_ms, self.goal, run_id, key),
            )
            if self.sealing:
                seal_row(c, self.sealing, self.goal, run_id, key, "done")

    def recorded_wait(self, handle: int) -> tuple[str | None, str | None] | None:
        rows = self._run("SELECT result, error FROM ll_journal WHERE rowid = %s", (handle,))
        return None if not rows else (rows[0][0], rows[0][1])
