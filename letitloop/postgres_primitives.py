"""PostgreSQL's markers and run primitives (``PostgresPrimitives``, for ``PostgresStorage``).

What ``sqlite_primitives.py`` is to SQLite: markers, steps in flight, cancel
requests, sleeps and waits, failed tries, usage and replays, and an
attempt's trace, each one transaction of a ``PostgresConnection``
(``postgres_connection.py``), fenced. What each write sets is
``row_rules.py``'s, shared with the in-memory store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import row_rules
from .clock import utc_iso
from .postgres_connection import COLUMNS, PostgresConnection
from .postgres_seals import seal_row
from .row_rules import USAGE
from .storage_markers import MarkerAt, MarkerClaim, MarkerRecord

__all__ = ["PostgresPrimitives"]


class PostgresPrimitives(PostgresConnection):
    """Markers, steps in flight, sleeps, waits, tries, usage and traces in PostgreSQL."""

    # -- markers ----------------------------------------------------------------------

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

    # -- the run's primitives -----------------------------------------------------------

    def write_running(self, rows: Sequence[Sequence[Any]]) -> None:
        with self._tx() as c:
            for entry in rows:
                run, key = entry[0], entry[1]
                values = row_rules.running_values(self._get(c, self.goal, run, key), entry)
                if values is not None:
                    self._put(c, self.goal, run, key, values)

    def cancel_request(self, run_id: str) -> tuple[str | None, str | None] | None:
        rows = self._run(
            "SELECT cancel_requested_at, cancel_reason FROM ll_runs WHERE id = %s", (run_id,)
        )
        return None if not rows else (rows[0][0], rows[0][1])

    def _row(self, run_id: str, key: str) -> dict[str, Any] | None:
        with self._tx(fenced=False) as c:
            return self._get(c, self.goal, run_id, key)

    def pause(self, run_id: str, key: str) -> tuple[str, str, str | None, str | None] | None:
        r = self._row(run_id, key)
        return None if r is None else (r["kind"], r["status"], r["started_at"], r["wake_at"])

    def start_pause(self, row: Sequence[Any]) -> None:
        with self._tx() as c:
            self._put(c, self.goal, row[0], row[1], row_rules.pause_values(row))

    def finish_sleep(
        self, run_id: str, key: str, finished_at: str, duration_ms: float, attempt: int
    ) -> None:
        with self._tx() as c:
            c.execute(
                "UPDATE ll_journal SET status = 'done', finished_at = %s, duration_ms = %s, "
                "attempt = %s WHERE goal = %s AND run = %s AND key = %s",
                (finished_at, duration_ms, attempt, self.goal, run_id, key),
            )
            if self.sealing:
                seal_row(c, self.sealing, self.goal, run_id, key, "done")

    def wait_ending(self, run_id: str, key: str) -> tuple[str, str | None, str | None] | None:
        r = self._row(run_id, key)
        return None if r is None else (r["status"], r["result"], r["error"])

    def time_out_wait(
        self, run_id: str, key: str, error: str, finished_at: str, duration_ms: float
    ) -> None:
        with self._tx() as c:
            c.execute(
                "UPDATE ll_journal SET status = 'done', error = %s, finished_at = %s, "
                "duration_ms = %s WHERE goal = %s AND run = %s AND key = %s "
                "AND status = 'waiting'",
                (error, finished_at, duration_ms, self.goal, run_id, key),
            )
            if self.sealing:
                seal_row(c, self.sealing, self.goal, run_id, key, "done")

    def recorded_wait(self, handle: int) -> tuple[str | None, str | None] | None:
        rows = self._run("SELECT result, error FROM ll_journal WHERE rowid = %s", (handle,))
        return None if not rows else (rows[0][0], rows[0][1])

    def step_tries(self, run_id: str) -> list[tuple[str, int, str | None, str]]:
        rows = self._run(
            "SELECT key, try, next_at, ended FROM ll_tries WHERE run = %s ORDER BY key, try",
            (run_id,),
        )
        return [(k, n, t, e) for k, n, t, e in rows]

    def record_try(self, try_row: Sequence[Any], retrying_row: Sequence[Any] | None) -> None:
        with self._tx() as c:
            self._put_try(c, *row_rules.try_values(try_row))
            if retrying_row is not None:
                run, key = retrying_row[0], retrying_row[1]
                self._put(c, self.goal, run, key, row_rules.retrying_values(retrying_row))

    # -- what the run consumed and replayed ---------------------------------------------

    def record_usage(self, row: Sequence[Any]) -> None:
        with self._tx() as c:
            values = row_rules.usage_values(self._get(c, self.goal, row[0], row[1]), row)
            if values is not None:
                self._put(c, self.goal, row[0], row[1], values)

    def _keep_left_usage(self, c: Any, run_id: str, stamp: str, prefix: str | None) -> None:
        """Inside a transaction: usage left on ``running``/``failed`` rows moves to a try."""
        found = c.execute(
            f"SELECT rowid, key, {', '.join(COLUMNS)} FROM ll_journal WHERE goal = %s "
            "AND run = %s AND status IN ('running', 'failed') AND starts_with(key, %s) "
            "ORDER BY rowid FOR UPDATE",
            (self.goal, run_id, prefix or ""),
        ).fetchall()
        for rowid, key, *values in found:
            row = dict(zip(COLUMNS, values, strict=True), run=run_id, key=key)
            if not row_rules.left_usage(row, run_id, prefix):
                continue
            (n,) = c.execute(
                "SELECT coalesce(max(try), 0) + 1 FROM ll_tries WHERE run = %s AND key = %s",
                (run_id, key),
            ).fetchone()
            self._put_try(c, (run_id, key, n), row_rules.left_usage_try(row, stamp))
            c.execute(
                f"UPDATE ll_journal SET {', '.join(f'{u} = NULL' for u in USAGE)} WHERE rowid = %s",
                (rowid,),
            )

    def keep_left_usage(self, run_id: str, now: float, prefix: str) -> None:
        with self._tx() as c:
            self._keep_left_usage(c, run_id, utc_iso(now), prefix)

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

    def fork_point(self, run_id: str) -> tuple[str, list[str]] | None:
        return None  # lil fork makes no PostgreSQL run (the store has no fork)

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

    def record_replays(self, run_id: str, attempt: int, keys: Sequence[str]) -> None:
        with self._tx() as c:
            c.execute("INSERT INTO ll_replays VALUES (%s, %s, %s)", (run_id, attempt, list(keys)))

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

    def trace_attempt(self, run_id: str, attempt: int, trace: str) -> str | None:
        with self._tx() as c:
            c.execute(
                "UPDATE ll_attempts SET trace = %s WHERE run = %s AND attempt = %s",
                (trace, run_id, attempt),
            )
            row = c.execute(
                "SELECT trace FROM ll_attempts WHERE run = %s AND attempt < %s "
                "AND trace IS NOT NULL ORDER BY attempt DESC LIMIT 1",
                (run_id, attempt),
            ).fetchone()
        return None if row is None else str(row[0])
