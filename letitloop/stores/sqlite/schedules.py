"""Schedules and their ticks in a journal file: tables ``schedules`` and ``schedule_ticks``.

``SqliteStorage`` includes :class:`SqliteSchedules`, the SQLite side of
``storage_schedules.ScheduleRows`` (migration 0020). A tick is claimed by an
``INSERT ... ON CONFLICT DO NOTHING`` in its own write transaction: the file's
write lock orders the claimers, and the one whose insert changed a row owns it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..storage_schedules import TickRow
from .keys import SqliteKeys

_KEEP = (
    "INSERT INTO schedules (name, goal, cron, tz, catch_up, window_s, overlap, cursor, "
    "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
    "goal = excluded.goal, cron = excluded.cron, tz = excluded.tz, catch_up = excluded.catch_up, "
    "window_s = excluded.window_s, overlap = excluded.overlap, updated_at = excluded.updated_at"
)
_CLAIM = (
    "INSERT INTO schedule_ticks (schedule, tick, run_name, status, claimed_at, claimed_by) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (schedule, tick) DO NOTHING"
)
_TICK_COLUMNS = "schedule, tick, run_name, status, claimed_at, claimed_by, finished_at"


class SqliteSchedules(SqliteKeys):
    """``ScheduleRows`` on one journal file's ``Store``."""

    def keep_schedule(self, row: Sequence[Any]) -> str:
        with self.store.write() as c:
            c.execute(_KEEP, tuple(row))
            found = c.execute("SELECT cursor FROM schedules WHERE name = ?", (row[0],)).fetchone()
        return str(found[0])

    def move_cursor(self, name: str, cursor: str) -> str:
        with self.store.write() as c:
            c.execute(
                "UPDATE schedules SET cursor = ? WHERE name = ? AND cursor < ?",
                (cursor, name, cursor),
            )
            found = c.execute("SELECT cursor FROM schedules WHERE name = ?", (name,)).fetchone()
        return str(found[0])

    def claim_tick(self, row: Sequence[Any]) -> bool:
        with self.store.write() as c:
            return c.execute(_CLAIM, tuple(row)).rowcount == 1

    def set_tick(self, schedule: str, tick: str, status: str, at: str | None, was: str) -> bool:
        with self.store.write() as c:
            changed = c.execute(
                "UPDATE schedule_ticks SET status = ?, finished_at = ? "
                "WHERE schedule = ? AND tick = ? AND status = ?",
                (status, at, schedule, tick, was),
            )
            return changed.rowcount == 1

    def unfinished_ticks(self, schedule: str) -> list[TickRow]:
        rows = self.store.query(
            f"SELECT {_TICK_COLUMNS} FROM schedule_ticks WHERE schedule = ? "
            "AND status IN ('started', 'queued') ORDER BY tick",
            (schedule,),
        )
        return [tuple(r) for r in rows]

    def named_run(self, goal: str, name: str) -> tuple[str, str] | None:
        rows = self.store.query(
            "SELECT id, status FROM runs WHERE goal = ? AND name = ?", (goal, name)
        )
        return (rows[0][0], rows[0][1]) if rows else None
