"""Markers' records in PostgreSQL (``PostgresMarkerRows``: ``MarkerRows``).

A run's or goal's marker is a row of ``ll_journal`` under its goal and run, a
global one under goal and run ``''``; what a claim and a finish set is
``row_rules.py``'s, shared with the in-memory store.
"""

from __future__ import annotations

from .. import row_rules
from ..storage_markers import MarkerAt, MarkerClaim, MarkerRecord
from .connection import PostgresConnection

__all__ = ["PostgresMarkerRows"]


class PostgresMarkerRows(PostgresConnection):
    """Markers' rows: read, claimed, finished."""

    def _marker_place(self, at: MarkerAt) -> tuple[str, str, str]:
        if at.scope == "global":
            return "", "", at.name
        return self.goal, at.run, at.name

    def marker(self, at: MarkerAt) -> MarkerRecord | None:
        with self._tx(fenced=False) as c:
            row = self._get(c, *self._marker_place(at))
            return None if row is None else row_rules.marker_record(row)

    def claim_marker(
        self, at: MarkerAt, holder: tuple[int, str, str, str], now: float, attempt: int
    ) -> MarkerClaim:
        place = self._marker_place(at)
        with self._tx() as c:
            claim, values = row_rules.claim_marker(self._get(c, *place), at, holder, now, attempt)
            if values is not None:
                self._put(c, *place, values)
        return claim

    def finish_marker(
        self,
        at: MarkerAt,
        token: str,
        now: float,
        duration_ms: float,
        failure: tuple[str, str, int] | None,
    ) -> tuple[bool, MarkerRecord | None]:
        place = self._marker_place(at)
        with self._tx() as c:
            row = self._get(c, *place)
            values = row_rules.finish_marker(row, at, token, now, duration_ms, failure)
            if values is not None:
                self._put(c, *place, values)
                return False, None
            return True, None if row is None else row_rules.marker_record(row)
