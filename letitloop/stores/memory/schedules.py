"""Schedules and their ticks in a ``MemoryDatabase`` (``storage_schedules.ScheduleRows``).

``MemoryStorage`` includes :class:`MemorySchedules`. The database's lock
makes each claim atomic: of the journals (threads) of one process that
claim a tick, one inserts it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..storage_schedules import TickRow
from .database import MemoryConnection


class MemorySchedules(MemoryConnection):
    """``ScheduleRows`` on the in-memory store."""

    def keep_schedule(self, row: Sequence[Any]) -> str:
        with self._write() as db:
            known = db.schedules.get(row[0])
            cursor = row[7] if known is None else known[7]
            db.schedules[row[0]] = (*row[:7], cursor, row[8])
            return str(cursor)

    def move_cursor(self, name: str, cursor: str) -> str:
        with self._write() as db:
            known = db.schedules[name]
            if known[7] < cursor:
                known = db.schedules[name] = (*known[:7], cursor, known[8])
            return str(known[7])

    def claim_tick(self, row: Sequence[Any]) -> bool:
        with self._write() as db:
            if (row[0], row[1]) in db.ticks:
                return False
            db.ticks[(row[0], row[1])] = [*row, None]
            return True

    def set_tick(self, schedule: str, tick: str, status: str, at: str | None, was: str) -> bool:
        with self._write() as db:
            found = db.ticks.get((schedule, tick))
            if found is None or found[3] != was:
                return False
            found[3], found[6] = status, at
            return True

    def unfinished_ticks(self, schedule: str) -> list[TickRow]:
        with self._read():
            rows = [
                tuple(r)
                for (name, _), r in self.db.ticks.items()
                if name == schedule and r[3] in ("started", "queued")
            ]
        return sorted(rows, key=lambda r: r[1])

    def named_run(self, goal: str, name: str) -> tuple[str, str] | None:
        with self._read():
            for run_id, run in self.db.runs.items():
                if run.get("goal") == goal and run.get("name") == name:
                    return run_id, str(run["status"])
        return None
