"""``SqlitePauseRows``: sleeps' and waits' rows in a SQLite journal file (``PauseRows``).

A pause's row in the goal's compact table (kind ``sleep`` or ``wait``): started
over the key's earlier row, read while it waits, done (with its checksum,
``checksums.pause_sum``) or, for a wait, timed out unless a value came first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...integrity.checksums import pause_sum
from ...primitives.clock import iso_us
from ..storage_steps import RowHandle
from .goals import iso_sql
from .keys import SqliteKeys

#: The row of a sleep or a wait that starts, over the key's earlier row. ``{table}``
#: is the goal's compact table: ``run`` its run's key, times integer microseconds.
_START_PAUSE = (
    'INSERT INTO "{table}" (run, key, kind, status, fn, result, started, duration, '
    "attempt, error, traceback, args_fp, wake_at) "
    "VALUES (?, ?, ?, ?, ?, NULL, ?, NULL, ?, NULL, NULL, '', ?) "
    "ON CONFLICT (run, key) DO UPDATE SET kind = excluded.kind, status = excluded.status, "
    "fn = excluded.fn, result = NULL, started = excluded.started, duration = NULL, "
    "attempt = excluded.attempt, error = NULL, traceback = NULL, "
    "args_fp = '', wake_at = excluded.wake_at, checksum = NULL"
)


class SqlitePauseRows(SqliteKeys):
    """A sleep's or a wait's row: started, read, done."""

    def pause(self, run_id: str, key: str) -> tuple[str, str, str | None, str | None] | None:
        rows = self.store.query(
            f'SELECT kind, status, {iso_sql("started")}, wake_at FROM "{self.rows}" '
            f"WHERE run = ? AND key = ?",
            (self.key_of_run(run_id), key),
        )
        return (rows[0][0], rows[0][1], rows[0][2], rows[0][3]) if rows else None

    def start_pause(self, row: Sequence[Any]) -> None:
        run, key, kind, status, fn, started, attempt, wake_at = row
        self.store.write1(
            _START_PAUSE.format(table=self.rows),
            (
                self.key_of_run(run),
                key,
                kind,
                status,
                None if fn is None else self.function_key(fn),
                iso_us(started),
                attempt,
                wake_at,
            ),
        )

    def finish_sleep(
        self, run_id: str, key: str, finished_at: str, duration_ms: float, attempt: int
    ) -> None:
        self.store.write1(
            f"UPDATE \"{self.rows}\" SET status = 'done', duration = ? - started, "
            f"attempt = ?, checksum = ? WHERE run = ? AND key = ?",
            (
                iso_us(finished_at),
                attempt,
                pause_sum(run_id, key, "sleep", None, None),
                self.key_of_run(run_id),
                key,
            ),
        )

    def wait_ending(self, run_id: str, key: str) -> tuple[str, str | None, str | None] | None:
        rows = self.store.query(
            f'SELECT status, result, error FROM "{self.rows}" WHERE run = ? AND key = ?',
            (self.key_of_run(run_id), key),
        )
        return (rows[0][0], rows[0][1], rows[0][2]) if rows else None

    def time_out_wait(
        self, run_id: str, key: str, error: str, finished_at: str, duration_ms: float
    ) -> None:
        with self.store.write() as c:
            c.execute(
                f"UPDATE \"{self.rows}\" SET status = 'done', error = ?, checksum = ?, "
                f"duration = ? - started WHERE run = ? AND key = ? AND status = 'waiting'",
                (
                    error,
                    pause_sum(run_id, key, "wait", None, error),
                    iso_us(finished_at),
                    self.key_of_run(run_id),
                    key,
                ),
            )

    def recorded_wait(self, handle: RowHandle) -> tuple[str | None, str | None] | None:
        rows = self.store.query(
            f'SELECT result, error FROM "{self.rows}" WHERE rowid = ?', (handle,)
        )
        return (rows[0][0], rows[0][1]) if rows else None
