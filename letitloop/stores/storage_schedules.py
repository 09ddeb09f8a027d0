"""The part of the storage protocol that keeps schedules and their ticks (``schedules.py``).

``Storage`` (``storage.py``) includes it; each store implements it in a
module of its own (``sqlite_schedules.py``, ``postgres_schedules.py``,
``memory_schedules.py``): SQLite's tables ``schedules`` and ``schedule_ticks``
(migration 0020), PostgreSQL's ``ll_schedules`` and ``ll_schedule_ticks``
(its 0011), the memory store's ``schedules`` and ``ticks``.

A tick is claimed by inserting its row, ``(schedule, tick)`` unique: of any
number of schedulers (threads, processes, hosts on one PostgreSQL) that
claim one tick, exactly one inserts it, and only that one starts its run.
Times are ISO-8601 UTC text as ``clock.utc_iso`` writes it, so that text
order is time order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

#: What became of a tick: its run ``started`` (claimed; the run may have died since and is
#: then resumed), ``queued`` behind a run still going (overlap="queue"), ``skipped``
#: (overlap="skip", or a queue already full), or its run ``completed`` or ``failed``.
TICK_STATUSES = ("started", "queued", "skipped", "completed", "failed")

#: A tick's row as the stores hand it out: (schedule, tick, run name, status, claimed at,
#: claimed by ("host:pid"), finished at or None).
TickRow = tuple[str, str, str, str, str, str, "str | None"]

#: A schedule's row: (name, goal, cron, tz, catch_up, window in seconds or None, overlap,
#: cursor, updated at).
ScheduleRow = tuple[str, str, str, str, str, "float | None", str, str, str]


class ScheduleRows(Protocol):
    """Schedules and their ticks, each tick claimed once whoever claims it."""

    def keep_schedule(self, row: Sequence[Any]) -> str:
        """Record a schedule (a ``ScheduleRow``) and return its cursor.

        A new schedule is inserted with the row's cursor; a known one keeps its
        cursor and takes the row's definition (cron, zone, policies), so a
        changed schedule applies from its next tick on, with no back-fill.
        """
        ...

    def move_cursor(self, name: str, cursor: str) -> str:
        """Move the schedule's cursor (every tick at or before it was decided) forward to
        ``cursor`` unless it is already later; return the cursor now recorded."""
        ...

    def claim_tick(self, row: Sequence[Any]) -> bool:
        """Insert the tick's row (a ``TickRow`` without its finish) unless one is there:
        True for the one claimer that inserted it, False for every other."""
        ...

    def set_tick(self, schedule: str, tick: str, status: str, at: str | None, was: str) -> bool:
        """Change the tick's status from ``was`` to ``status`` (``at``: when it finished, or
        None); True if it was ``was`` (one of any number of racing callers wins)."""
        ...

    def unfinished_ticks(self, schedule: str) -> list[TickRow]:
        """The schedule's ticks ``started`` or ``queued`` (not finished), oldest first."""
        ...

    def named_run(self, goal: str, name: str) -> tuple[str, str] | None:
        """The id and status of the goal's run named ``name``, or None if it has none."""
        ...
