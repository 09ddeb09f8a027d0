"""``MemorySpendRows``: what a run's paid calls spent and reserved, in the in-memory store."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import row_rules
from .database import MemoryConnection

#: The columns of a reservation after its run and number (``SpendRows.reserve``'s row).
RESERVED = ("key", "attempt", "reserved_at", "tokens", "cost", "model")


def reservation_values(rest: Sequence[Any]) -> dict[str, Any]:
    """A reservation's columns from ``SpendRows.reserve``'s row after ``(run, call)``: not
    settled yet."""
    return {
        **dict(zip(RESERVED, rest, strict=True)),
        "settled_at": None,
        "settled_tokens": None,
        "settled_cost": None,
    }


class MemorySpendRows(MemoryConnection):
    """A run's spend: its rows' and tries' usage summed, its paid calls' reservations."""

    def run_spend(self, run_id: str) -> list[tuple[str, int | None, int | None, float | None]]:
        with self._read():
            rows = [r for r in self.db.rows(self.goal) if r["run"] == run_id]
            tries = [(k, t) for (run, k, _), t in self.db.tries.items() if run == run_id]
            found: dict[str, list[Any]] = {}
            for key, usage in [*((r["key"], r) for r in rows), *tries]:
                if all(usage[c] is None for c in ("input_tokens", "output_tokens", "cost")):
                    continue
                total = found.setdefault(key, [None, None, None])
                for i, c in enumerate(("input_tokens", "output_tokens", "cost")):
                    if usage[c] is not None:
                        total[i] = (total[i] or 0) + usage[c]
            return [(k, *v) for k, v in sorted(found.items())]

    def usage_of(
        self, run_id: str, keys: Sequence[str]
    ) -> tuple[int | None, int | None, float | None]:
        wanted = set(keys)
        sums: list[Any] = [None, None, None]
        with self._read():
            for row in self.db.rows(self.goal):
                if row["run"] == run_id and row["key"] in wanted:
                    for i, column in enumerate(("input_tokens", "output_tokens", "cost")):
                        if row[column] is not None:
                            sums[i] = (sums[i] or 0) + row[column]
        return sums[0], sums[1], sums[2]

    def reserve(self, row: Sequence[Any]) -> None:
        run, call, *rest = row
        with self._write() as db:
            db.reservations[(run, call)] = reservation_values(rest)

    def settle(
        self,
        run_id: str,
        calls: Sequence[int],
        settled_at: str,
        spent: tuple[int | None, float | None],
        usage_row: Sequence[Any] | None,
    ) -> None:
        with self._write() as db:
            if usage_row is not None:
                values = row_rules.usage_values(
                    self._rows().get((usage_row[0], usage_row[1])), usage_row
                )
                if values is not None:
                    self._upsert(usage_row[0], usage_row[1]).update(values)
            for call in calls:
                held = db.reservations.get((run_id, call))
                if held is not None and held["settled_at"] is None:
                    held.update(
                        settled_at=settled_at, settled_tokens=spent[0], settled_cost=spent[1]
                    )

    def run_reservations(
        self, run_id: str
    ) -> tuple[int, list[tuple[str, int, int | None, float | None]]]:
        with self._read():
            held = self.db.reservations.items()
            mine = sorted((c, r) for (run, c), r in held if run == run_id)
        last = mine[-1][0] if mine else 0
        return last, [
            (r["key"], c, r["tokens"], r["cost"]) for c, r in mine if r["settled_at"] is None
        ]

    def fork_point(self, run_id: str) -> tuple[str, list[str]] | None:
        with self._read():
            run = self.db.runs.get(run_id)
            if run is None or run.get("forked_from") is None:
                return None
            source, at = run["forked_from"], run["forked_at"]
            keys = [r["key"] for r in self.db.rows(self.goal) if r["run"] == source]
        return source, keys[: keys.index(at)] if at in keys else keys
