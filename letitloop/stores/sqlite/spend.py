"""``SqliteSpendRows``: what a run's paid calls spent and reserved, in a SQLite journal file.

``SpendRows`` on the goal's rows and ``step_tries`` (the usage calls reported,
summed), the table ``reservations`` (migration 0018: committed before a paid
call, settled after it) and ``runs.forked_from`` (where a fork's spend began).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from ...primitives.clock import iso_us
from .calls import USAGE_SO_FAR
from .keys import SqliteKeys

#: A paid call's reservation, committed before the call (migration 0018).
_RESERVE = (
    "INSERT INTO reservations (run, call, key, attempt, reserved_at, tokens, cost, model) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


#: ... settled by the usage its call reported (or released without any).
_SETTLE = (
    "UPDATE reservations SET settled_at = ?, settled_tokens = ?, settled_cost = ? "
    "WHERE run = ? AND call = ? AND settled_at IS NULL"
)


#: The run's last reservation, and those never settled (the last among them, if it is).
_RESERVATIONS_LEFT = (
    "SELECT key, call, tokens, cost, settled_at IS NOT NULL FROM reservations WHERE run = ?1 "
    "AND (settled_at IS NULL OR call = (SELECT max(call) FROM reservations WHERE run = ?1)) "
    "ORDER BY call"
)


class SqliteSpendRows(SqliteKeys):
    """A run's spend: its rows' and tries' usage summed, its paid calls' reservations."""

    def run_spend(self, run_id: str) -> list[tuple[str, int | None, int | None, float | None]]:
        return self.store.query(
            "SELECT key, sum(input_tokens), sum(output_tokens), sum(cost) FROM ("
            f'SELECT key, input_tokens, output_tokens, cost FROM "{self.rows}" WHERE run = ? '
            "UNION ALL SELECT key, input_tokens, output_tokens, cost FROM step_tries "
            "WHERE run = ?) WHERE input_tokens IS NOT NULL OR output_tokens IS NOT NULL "
            "OR cost IS NOT NULL GROUP BY key",
            (self.key_of_run(run_id), run_id),
        )

    def usage_of(
        self, run_id: str, keys: Sequence[str]
    ) -> tuple[int | None, int | None, float | None]:
        # The keys as one JSON list: a resume that replayed thousands binds one value.
        row = self.store.query(
            f'SELECT sum(input_tokens), sum(output_tokens), sum(cost) FROM "{self.rows}" '
            "WHERE run = ? AND key IN (SELECT value FROM json_each(?))",
            (self.key_of_run(run_id), msgspec.json.encode(list(keys)).decode()),
        )[0]
        return row[0], row[1], row[2]

    def reserve(self, row: Sequence[Any]) -> None:
        self.store.write1(_RESERVE, row)

    def settle(
        self,
        run_id: str,
        calls: Sequence[int],
        settled_at: str,
        spent: tuple[int | None, float | None],
        usage_row: Sequence[Any] | None,
    ) -> None:
        usage = None
        if usage_row is not None:  # its keys first: each may be a write of its own
            run, key, fn, started, *rest = usage_row
            usage = (self.key_of_run(run), key, self.function_key(fn), iso_us(started), *rest)
        with self.store.write() as c:
            if usage is not None:
                c.execute(USAGE_SO_FAR.format(table=self.rows), usage)
            for call in calls:
                c.execute(_SETTLE, (settled_at, *spent, run_id, call))

    def run_reservations(
        self, run_id: str
    ) -> tuple[int, list[tuple[str, int, int | None, float | None]]]:
        rows = self.store.query(_RESERVATIONS_LEFT, (run_id,))
        last = max((call for _, call, _, _, _ in rows), default=0)
        return last, [(k, call, t, c) for k, call, t, c, settled in rows if not settled]

    def fork_point(self, run_id: str) -> tuple[str, list[str]] | None:
        found = self.store.query("SELECT forked_from, forked_at FROM runs WHERE id = ?", (run_id,))
        if not found or found[0][0] is None:
            return None
        source, at = found[0]
        rows = self.store.query(
            f'SELECT key FROM "{self.rows}" WHERE run = ? ORDER BY rowid',
            (self.key_of_run(source),),
        )
        keys = [key for (key,) in rows]
        return source, keys[: keys.index(at)] if at in keys else keys
