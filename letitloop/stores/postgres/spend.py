"""What a run's paid calls spent and reserved, in PostgreSQL (``PostgresSpendRows``: ``SpendRows``).

The usage the run's rows and tries (``ll_tries``) hold, summed, and the
reservations of ``ll_reservations``, and a fork's point (``postgres_fork.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import row_rules
from .connection import PostgresConnection
from .fork import fork_point

__all__ = ["PostgresSpendRows"]


class PostgresSpendRows(PostgresConnection):
    """A run's spend: its rows' and tries' usage summed, its paid calls' reservations."""

    def run_spend(self, run_id: str) -> list[tuple[str, int | None, int | None, float | None]]:
        rows = self._run(
            "SELECT key, sum(input_tokens), sum(output_tokens), sum(cost) FROM ("
            "SELECT key, input_tokens, output_tokens, cost FROM ll_journal "
            "WHERE goal = %s AND run = %s UNION ALL "
            "SELECT key, input_tokens, output_tokens, cost FROM ll_tries WHERE run = %s) AS u "
            "WHERE input_tokens IS NOT NULL OR output_tokens IS NOT NULL OR cost IS NOT NULL "
            "GROUP BY key",
            (self.goal, run_id, run_id),
        )
        return [
            (k, None if i is None else int(i), None if o is None else int(o), c)
            for k, i, o, c in rows
        ]

    def usage_of(
        self, run_id: str, keys: Sequence[str]
    ) -> tuple[int | None, int | None, float | None]:
        row = self._run(
            "SELECT sum(input_tokens), sum(output_tokens), sum(cost) FROM ll_journal "
            "WHERE goal = %s AND run = %s AND key = ANY(%s)",
            (self.goal, run_id, list(keys)),
        )[0]
        return (
            None if row[0] is None else int(row[0]),
            None if row[1] is None else int(row[1]),
            None if row[2] is None else float(row[2]),
        )

    def reserve(self, row: Sequence[Any]) -> None:
        with self._tx() as c:
            c.execute(
                "INSERT INTO ll_reservations (run, call, key, attempt, reserved_at, tokens, "
                "cost, model) VALUES (%s, %s, %s, %s, %s::timestamptz, %s, %s, %s)",
                tuple(row),
            )

    def settle(
        self,
        run_id: str,
        calls: Sequence[int],
        settled_at: str,
        spent: tuple[int | None, float | None],
        usage_row: Sequence[Any] | None,
    ) -> None:
        with self._tx() as c:
            if usage_row is not None:
                got = self._get(c, self.goal, usage_row[0], usage_row[1])
                values = row_rules.usage_values(got, usage_row)
                if values is not None:
                    self._put(c, self.goal, usage_row[0], usage_row[1], values)
            for call in calls:
                c.execute(
                    "UPDATE ll_reservations SET settled_at = %s::timestamptz, "
                    "settled_tokens = %s, settled_cost = %s "
                    "WHERE run = %s AND call = %s AND settled_at IS NULL",
                    (settled_at, *spent, run_id, call),
                )

    def run_reservations(
        self, run_id: str
    ) -> tuple[int, list[tuple[str, int, int | None, float | None]]]:
        rows = self._run(
            "SELECT key, call, tokens, cost, settled_at IS NOT NULL FROM ll_reservations "
            "WHERE run = %s AND (settled_at IS NULL OR call = "
            "(SELECT max(call) FROM ll_reservations WHERE run = %s)) ORDER BY call",
            (run_id, run_id),
        )
        last = max((call for _, call, _, _, _ in rows), default=0)
        return last, [
            (k, call, None if t is None else int(t), c) for k, call, t, c, done in rows if not done
        ]

    def fork_point(self, run_id: str) -> tuple[str, list[str]] | None:
        return fork_point(self._run, run_id)  # postgres_fork.py
