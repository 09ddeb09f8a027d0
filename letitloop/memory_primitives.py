"""The in-memory store's markers and run primitives (``MemoryPrimitives``, for ``MemoryStorage``).

What ``sqlite_primitives.py`` is to SQLite: markers, steps in flight, cancel
requests, sleeps and waits, failed tries, usage and replays, each one
transaction of a ``MemoryConnection`` (``memory_database.py``). What each
write sets is ``row_rules.py``'s, shared with the PostgreSQL store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import row_rules
from .checksums import pause_sum
from .clock import utc_iso
from .memory_database import MemoryConnection, Row
from .memory_seals import seal_row
from .row_rules import USAGE
from .storage_markers import MarkerAt, MarkerClaim, MarkerRecord

#: The columns of a reservation after its run and number (``Storage.reserve``'s row).
RESERVED = ("key", "attempt", "reserved_at", "tokens", "cost", "model")


def reservation_values(rest: Sequence[Any]) -> dict[str, Any]:
    """A reservation's columns from ``Storage.reserve``'s row after ``(run, call)``: not
    settled yet."""
    return {
        **dict(zip(RESERVED, rest, strict=True)),
        "settled_at": None,
        "settled_tokens": None,
        "settled_cost": None,
    }


class MemoryPrimitives(MemoryConnection):
    """Markers, steps in flight, sleeps, waits, tries and usage in a ``MemoryDatabase``."""

    # -- a run name's generations (generations.py) ---------------------------------------

    def generation_rows(
        self, goal: str, name: str, prefix: str
    ) -> list[tuple[str, str, str | None]]:
        with self._read():
            return [
                (r["name"], r["status"], r["finished_at"])
                for r in self.db.runs.values()
                if r["goal"] == goal
                and r["name"] is not None
                and (r["name"] == name or r["name"].startswith(prefix))
            ]

    # -- markers ----------------------------------------------------------------------

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

    # -- the run's primitives -----------------------------------------------------------

    def write_running(self, rows: Sequence[Sequence[Any]]) -> None:
        with self._write():
            for entry in rows:
                run, key = entry[0], entry[1]
                values = row_rules.running_values(self._rows().get((run, key)), entry)
                if values is not None:
                    self._upsert(run, key).update(values)

    def cancel_request(self, run_id: str) -> tuple[str | None, str | None] | None:
        with self._read():
            run = self.db.runs.get(run_id)
            return None if run is None else (run["cancel_requested_at"], run["cancel_reason"])

    def _row(self, run_id: str, key: str) -> Row | None:
        with self._read():
            row = self._rows().get((run_id, key))
            return None if row is None else Row.copy_of(row)

    def sealed_row(self, run_id: str, key: str) -> Any:
        """Row ``key`` of run ``run_id`` as its seal entry's digest covers it (chains.Row);
        None if none."""
        from .memory_seals import chain_row

        r = self._row(run_id, key)
        return None if r is None else chain_row(r)

    def pause(self, run_id: str, key: str) -> tuple[str, str, str | None, str | None] | None:
        r = self._row(run_id, key)
        return None if r is None else (r["kind"], r["status"], r["started_at"], r["wake_at"])

    def start_pause(self, row: Sequence[Any]) -> None:
        with self._write():
            target = self._upsert(row[0], row[1])
            target.update(row_rules.pause_values(row))
            if self.sealing:
                seal_row(self.db.seals, self.sealing, target)

    def finish_sleep(
        self, run_id: str, key: str, finished_at: str, duration_ms: float, attempt: int
    ) -> None:
        with self._write():
            row = self._rows().get((run_id, key))
            if row is not None:
                row.update(
                    status="done",
                    finished_at=finished_at,
                    duration_ms=duration_ms,
                    attempt=attempt,
                    checksum=pause_sum(run_id, key, "sleep", None, None),
                )
                if self.sealing:
                    seal_row(self.db.seals, self.sealing, row)

    def wait_ending(self, run_id: str, key: str) -> tuple[str, str | None, str | None] | None:
        r = self._row(run_id, key)
        return None if r is None else (r["status"], r["result"], r["error"])

    def time_out_wait(
        self, run_id: str, key: str, error: str, finished_at: str, duration_ms: float
    ) -> None:
        with self._write():
            row = self._rows().get((run_id, key))
            if row is not None and row["status"] == "waiting":
                row.update(
                    status="done",
                    error=error,
                    finished_at=finished_at,
                    duration_ms=duration_ms,
                    checksum=pause_sum(run_id, key, "wait", None, error),
                )
                if self.sealing:
                    seal_row(self.db.seals, self.sealing, row)

    def recorded_wait(self, rowid: int) -> tuple[str | None, str | None] | None:
        with self._read():
            row = self.db.by_rowid.get(rowid)
            return None if row is None else (row["result"], row["error"])

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

    # -- what the run consumed and replayed ---------------------------------------------

    def record_usage(self, row: Sequence[Any]) -> None:
        with self._write():
            values = row_rules.usage_values(self._rows().get((row[0], row[1])), row)
            if values is not None:
                self._upsert(row[0], row[1]).update(values)

    def _keep_left_usage(self, run_id: str, stamp: str, prefix: str | None) -> None:
        """Inside a transaction: usage left on ``running``/``failed`` rows moves to a try."""
        db = self.db
        for row in db.rows(self.goal):
            if not row_rules.left_usage(row, run_id, prefix):
                continue
            key = row["key"]
            n = max((t for (r, k, t) in db.tries if r == run_id and k == key), default=0) + 1
            db.tries[(run_id, key, n)] = row_rules.left_usage_try(row, stamp)
            row.update(dict.fromkeys(USAGE))

    def keep_left_usage(self, run_id: str, now: float, prefix: str) -> None:
        with self._write():
            self._keep_left_usage(run_id, utc_iso(now), prefix)

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

    def fork_point(self, run_id: str) -> tuple[str, list[str]] | None:
        with self._read():
            run = self.db.runs.get(run_id)
            if run is None or run.get("forked_from") is None:
                return None
            source, at = run["forked_from"], run["forked_at"]
            keys = [r["key"] for r in self.db.rows(self.goal) if r["run"] == source]
        return source, keys[: keys.index(at)] if at in keys else keys

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

    def record_replays(self, run_id: str, attempt: int, keys: Sequence[str]) -> None:
        with self._write() as db:
            db.replays.append((run_id, attempt, tuple(keys)))

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

    def trace_attempt(self, run_id: str, attempt: int, trace: str) -> str | None:
        with self._write() as db:
            db.traces[run_id, attempt] = trace
            earlier = [a for (r, a) in db.traces if r == run_id and a < attempt]
            return db.traces[run_id, max(earlier)] if earlier else None
