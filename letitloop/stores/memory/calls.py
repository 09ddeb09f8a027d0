"""``MemoryCallRows``: a step's calls in flight and their tries in the in-memory store.

What each write sets is ``row_rules.py``'s, shared with PostgreSQL;
``keep_left_usage_in`` is also a new attempt's claim's (``memory_runs.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...primitives.clock import utc_iso
from .. import row_rules
from ..row_rules import USAGE
from .database import MemoryConnection, MemoryDatabase


def keep_left_usage_in(
    db: MemoryDatabase, goal: str, run_id: str, stamp: str, prefix: str | None
) -> None:
    """Inside a transaction: usage left on ``running``/``failed`` rows of ``goal``'s run
    ``run_id`` (whose keys start with ``prefix``; None: all) moves to a try."""
    for row in db.rows(goal):
        if not row_rules.left_usage(row, run_id, prefix):
            continue
        key = row["key"]
        n = max((t for (r, k, t) in db.tries if r == run_id and k == key), default=0) + 1
        db.tries[(run_id, key, n)] = row_rules.left_usage_try(row, stamp)
        row.update(dict.fromkeys(USAGE))


class MemoryCallRows(MemoryConnection):
    """Calls in flight (their ``running`` rows, the usage they report), and their tries."""

    def write_running(self, rows: Sequence[Sequence[Any]]) -> None:
        with self._write():
            for entry in rows:
                run, key = entry[0], entry[1]
                values = row_rules.running_values(self._rows().get((run, key)), entry)
                if values is not None:
                    self._upsert(run, key).update(values)

    def record_usage(self, row: Sequence[Any]) -> None:
        with self._write():
            values = row_rules.usage_values(self._rows().get((row[0], row[1])), row)
            if values is not None:
                self._upsert(row[0], row[1]).update(values)

    def step_tries(self, run_id: str) -> list[tuple[str, int, str | None, str]]:
        with self._read():
            return sorted(
                (key, n, t["next_at"], t["ended"])
                for (run, key, n), t in self.db.tries.items()
                if run == run_id
            )

    def record_try(self, try_row: Sequence[Any], retrying_row: Sequence[Any] | None) -> None:
        with self._write() as db:
            slot, values = row_rules.try_values(try_row)
            db.tries[slot] = values
            if retrying_row is not None:
                run, key = retrying_row[0], retrying_row[1]
                self._upsert(run, key).update(row_rules.retrying_values(retrying_row))

    def keep_left_usage(self, run_id: str, now: float, prefix: str) -> None:
        with self._write():
            keep_left_usage_in(self.db, self.goal, run_id, utc_iso(now), prefix)
