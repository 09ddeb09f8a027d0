"""``MemoryMarkerRows``: markers' records in the in-memory store (``MarkerRows``).

A run's or goal's marker is a row of the goal's rows, a global one a row of
``MemoryDatabase.global_markers``; what a claim and a finish set is
``row_rules.py``'s, shared with PostgreSQL.
"""

from __future__ import annotations

from .. import row_rules
from ..storage_markers import MarkerAt, MarkerClaim, MarkerRecord
from .database import MemoryConnection, Row
from .seals import seal_row


class MemoryMarkerRows(MemoryConnection):
    """Markers' rows: read, claimed, finished."""

    def _marker_row(self, at: MarkerAt, make: bool) -> Row | None:
        if at.scope == "global":
            table = self.db.global_markers
            row = table.get(at.name)
            if row is None and make:
                row = table[at.name] = self.db.new_row()
                row.update(key=at.name, kind="marker", holder_goal=at.goal)
            return row
        rows = self._rows()
        row = rows.get((at.run, at.name))
        if row is None and make:
            row = self._upsert(at.run, at.name)
            row["kind"] = "marker"
        return row

    def marker(self, at: MarkerAt) -> MarkerRecord | None:
        with self._read():
            row = self._marker_row(at, make=False)
            return None if row is None else row_rules.marker_record(row)

    def claim_marker(
        self, at: MarkerAt, holder: tuple[int, str, str, str], now: float, attempt: int
    ) -> MarkerClaim:
        with self._write():
            claim, values = row_rules.claim_marker(
                self._marker_row(at, make=False), at, holder, now, attempt
            )
            if values is not None:
                row = self._marker_row(at, make=True)
                assert row is not None
                row.update(values)
        return claim

    def finish_marker(
        self,
        at: MarkerAt,
        token: str,
        now: float,
        duration_ms: float,
        failure: tuple[str, str, int] | None,
    ) -> tuple[bool, MarkerRecord | None]:
        with self._write():
            row = self._marker_row(at, make=False)
            values = row_rules.finish_marker(row, at, token, now, duration_ms, failure)
            if values is not None and row is not None:
                row.update(values)
                if self.sealing:
                    seal_row(self.db.seals, self.sealing, row)
                return False, None
            return True, None if row is None else row_rules.marker_record(row)
