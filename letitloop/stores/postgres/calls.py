"""A PostgreSQL journal's calls in flight and their tries (``PostgresCallRows``: ``CallRows``).

Each one transaction of a ``PostgresConnection``, fenced; what each write sets
is ``row_rules.py``'s, shared with the in-memory store. ``keep_left_usage_in``
is also a new attempt's claim's (``postgres_runs.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...primitives.clock import utc_iso
from .. import row_rules
from ..row_rules import USAGE
from .connection import COLUMNS, PostgresConnection

__all__ = ["PostgresCallRows", "keep_left_usage_in"]


def keep_left_usage_in(
    conn: PostgresConnection, c: Any, run_id: str, stamp: str, prefix: str | None
) -> None:
    """Inside transaction ``c`` of ``conn``: usage left on ``running``/``failed`` rows of the
    run (keys starting with ``prefix``; None: all) moves to a try."""
    found = c.execute(
        f"SELECT rowid, key, {', '.join(COLUMNS)} FROM ll_journal WHERE goal = %s "
        "AND run = %s AND status IN ('running', 'failed') AND starts_with(key, %s) "
        "ORDER BY rowid FOR UPDATE",
        (conn.goal, run_id, prefix or ""),
    ).fetchall()
    for rowid, key, *values in found:
        row = dict(zip(COLUMNS, values, strict=True), run=run_id, key=key)
        if not row_rules.left_usage(row, run_id, prefix):
            continue
        (n,) = c.execute(
            "SELECT coalesce(max(try), 0) + 1 FROM ll_tries WHERE run = %s AND key = %s",
            (run_id, key),
        ).fetchone()
        conn._put_try(c, (run_id, key, n), row_rules.left_usage_try(row, stamp))
        c.execute(
            f"UPDATE ll_journal SET {', '.join(f'{u} = NULL' for u in USAGE)} WHERE rowid = %s",
            (rowid,),
        )


class PostgresCallRows(PostgresConnection):
    """Calls in flight (their ``running`` rows, the usage they report), and their tries."""

    def write_running(self, rows: Sequence[Sequence[Any]]) -> None:
        with self._tx() as c:
            for entry in rows:
                run, key = entry[0], entry[1]
                values = row_rules.running_values(self._get(c, self.goal, run, key), entry)
                if values is not None:
                    self._put(c, self.goal, run, key, values)

    def record_usage(self, row: Sequence[Any]) -> None:
        with self._tx() as c:
            values = row_rules.usage_values(self._get(c, self.goal, row[0], row[1]), row)
            if values is not None:
                self._put(c, self.goal, row[0], row[1], values)

    def step_tries(self, run_id: str) -> list[tuple[str, int, str | None, str]]:
        rows = self._run(
            "SELECT key, try, next_at, ended FROM ll_tries WHERE run = %s ORDER BY key, try",
            (run_id,),
        )
        return [(k, n, t, e) for k, n, t, e in rows]

    def record_try(self, try_row: Sequence[Any], retrying_row: Sequence[Any] | None) -> None:
        with self._tx() as c:
            self._put_try(c, *row_rules.try_values(try_row))
            if retrying_row is not None:
                run, key = retrying_row[0], retrying_row[1]
                self._put(c, self.goal, run, key, row_rules.retrying_values(retrying_row))

    def keep_left_usage(self, run_id: str, now: float, prefix: str) -> None:
        with self._tx() as c:
            keep_left_usage_in(self, c, run_id, utc_iso(now), prefix)
