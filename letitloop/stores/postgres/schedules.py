"""Schedules and their ticks on PostgreSQL: tables ``ll_schedules`` and ``ll_schedule_ticks``.

``PostgresStorage`` includes :class:`PostgresSchedules`, PostgreSQL's side of
``storage_schedules.ScheduleRows`` (its migration 0011). A tick is claimed by
an ``INSERT ... ON CONFLICT DO NOTHING``: the primary key's unique index makes
one claimer's insert win, whichever host it runs on; the others insert
nothing. None of these writes is fenced by a run: a scheduler holds no run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..storage_schedules import TickRow
from .connection import PostgresConnection

_KEEP = (
    "INSERT INTO ll_schedules (name, goal, cron, tz, catch_up, window_s, overlap, cursor, "
    "updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (name) DO UPDATE SET "
    "goal = excluded.goal, cron = excluded.cron, tz = excluded.tz, catch_up = excluded.catch_up, "
    "window_s = excluded.window_s, overlap = excluded.overlap, updated_at = excluded.updated_at "
    "RETURNING cursor"
)
_CLAIM = (
    "INSERT INTO ll_schedule_ticks (schedule, tick, run_name, status, claimed_at, claimed_by) "
    "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (schedule, tick) DO NOTHING"
)
_TICK_COLUMNS = "schedule, tick, run_name, status, claimed_at, claimed_by, finished_at"


class PostgresSchedules(PostgresConnection):
    """``ScheduleRows`` on one journal's PostgreSQL connection."""

    def keep_schedule(self, row: Sequence[Any]) -> str:
        with self._tx(fenced=False) as c:
            found = c.execute(_KEEP, tuple(row)).fetchone()
        return str(found[0])

    def move_cursor(self, name: str, cursor: str) -> str:
        with self._tx(fenced=False) as c:
            c.execute(
                "UPDATE ll_schedules SET cursor = %s WHERE name = %s AND cursor < %s",
                (cursor, name, cursor),
            )
            found = c.execute("SELECT cursor FROM ll_schedules WHERE name = %s", (name,)).fetchone()
        return str(found[0])

    def claim_tick(self, row: Sequence[Any]) -> bool:
        with self._tx(fenced=False) as c:
            return bool(c.execute(_CLAIM, tuple(row)).rowcount == 1)

    def set_tick(self, schedule: str, tick: str, status: str, at: str | None, was: str) -> bool:
        with self._tx(fenced=False) as c:
            changed = c.execute(
                "UPDATE ll_schedule_ticks SET status = %s, finished_at = %s "
                "WHERE schedule = %s AND tick = %s AND status = %s",
                (status, at, schedule, tick, was),
            )
            return bool(changed.rowcount == 1)

    def unfinished_ticks(self, schedule: str) -> list[TickRow]:
        with self._tx(fenced=False) as c:
            rows = c.execute(
                f"SELECT {_TICK_COLUMNS} FROM ll_schedule_ticks WHERE schedule = %s "
                "AND status IN ('started', 'queued') ORDER BY tick",
                (schedule,),
            ).fetchall()
        return [tuple(r) for r in rows]

    def named_run(self, goal: str, name: str) -> tuple[str, str] | None:
        with self._tx(fenced=False) as c:
            found = c.execute(
                "SELECT id, status FROM ll_runs WHERE goal = %s AND name = %s", (goal, name)
            ).fetchone()
        return (str(found[0]), str(found[1])) if found is not None else None
