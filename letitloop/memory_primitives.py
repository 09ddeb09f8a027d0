"""The in-memory store's markers and run primitives (``MemoryPrimitives``, for ``MemoryStorage``).

What ``sqlite_primitives.py`` is to SQLite: markers, steps in flight, cancel
requests, sleeps and waits, failed tries, usage and replays, each one
transaction of a ``MemoryConnection`` (``memory_database.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .checksums import damaged_marker, marker_sum
from .clock import utc_iso
from .memory_database import USAGE, MemoryConnection, Row
from .storage import MarkerAt, MarkerClaim, MarkerRecord


class MemoryPrimitives(MemoryConnection):
    """Markers, steps in flight, sleeps, waits, tries and usage in a ``MemoryDatabase``."""

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

    @staticmethod
    def _record(row: Row) -> MarkerRecord:
        return MarkerRecord(
            kind=row["kind"],
            status=row["status"],
            claims=row["claims"],
            crashes=row["crashes"],
            holder_pid=row["holder_pid"],
            holder_host=row["holder_host"],
            holder_run=row["holder_run"],
            started_at=row["started_at"],
            holder_token=row["holder_token"],
        )

    def marker(self, at: MarkerAt) -> MarkerRecord | None:
        with self._read():
            row = self._marker_row(at, make=False)
            return None if row is None else self._record(row)

    def claim_marker(
        self, at: MarkerAt, holder: tuple[int, str, str, str], now: float, attempt: int
    ) -> MarkerClaim:
        with self._write():
            row = self._marker_row(at, make=False)
            claims = crashes = 0
            if row is not None:
                claims, crashes = row["claims"] or 0, row["crashes"] or 0
                if (
                    row["kind"] == "marker"
                    and row["checksum"] is not None
                    and row["checksum"] != marker_sum(at.run, at.name, row["status"])
                ):
                    raise damaged_marker(at.name, at.run, at.goal, at.scope)
                if row["kind"] != "marker" or row["status"] == "done":
                    return MarkerClaim(row["kind"], False, claims, crashes)
                # 'pending' under both holds: its holder died inside the block.
                if row["status"] == "pending":
                    crashes += 1
            row = self._marker_row(at, make=True)
            assert row is not None
            pid, host, run, token = holder
            row.update(
                status="pending",
                started_at=utc_iso(now),
                finished_at=None,
                duration_ms=None,
                attempt=attempt,
                claims=claims + 1,
                crashes=crashes,
                holder_pid=pid,
                holder_host=host,
                holder_run=run,
                holder_token=token,
                error=None,
                traceback=None,
                checksum=marker_sum(at.run, at.name, "pending"),
            )
            if at.scope == "global":
                row["holder_goal"] = at.goal
        return MarkerClaim("marker", True, claims + 1, crashes)

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
            if row is not None and row["status"] == "pending" and row["holder_token"] == token:
                row.update(finished_at=utc_iso(now), duration_ms=duration_ms)
                if failure is None:
                    row["status"] = "done"
                    row["checksum"] = marker_sum(at.run, at.name, "done")
                else:
                    error, traceback, interrupted = failure
                    row.update(
                        status="failed",
                        error=error,
                        traceback=traceback,
                        crashes=(row["crashes"] or 0) + interrupted,
                        checksum=marker_sum(at.run, at.name, "failed"),
                    )
                return False, None
            return True, None if row is None else self._record(row)

    # -- the run's primitives -----------------------------------------------------------

    def write_running(self, rows: Sequence[Sequence[Any]]) -> None:
        with self._write():
            for run, key, fn, started_at, duration_ms, attempt, args_fp in rows:
                old = self._rows().get((run, key))
                if old is not None and not (
                    old["status"] == "running"
                    or (
                        old["status"] != "done"
                        and (
                            (old["attempt"] or 0) < attempt
                            or (old["started_at"] or "") < started_at
                        )
                    )
                ):
                    continue
                self._upsert(run, key).update(
                    kind=old["kind"] if old is not None else "step",
                    status="running",
                    fn=fn,
                    result=None,
                    started_at=started_at,
                    finished_at=None,
                    duration_ms=duration_ms,
                    attempt=attempt,
                    error=None,
                    traceback=None,
                    args_fp=args_fp,
                )

    def cancel_request(self, run_id: str) -> tuple[str | None, str | None] | None:
        with self._read():
            run = self.db.runs.get(run_id)
            return None if run is None else (run["cancel_requested_at"], run["cancel_reason"])

    def _row(self, run_id: str, key: str) -> Row | None:
        with self._read():
            row = self._rows().get((run_id, key))
            return None if row is None else Row.copy_of(row)

    def pause(self, run_id: str, key: str) -> tuple[str, str, str | None, str | None] | None:
        r = self._row(run_id, key)
        return None if r is None else (r["kind"], r["status"], r["started_at"], r["wake_at"])

    def start_pause(self, row: Sequence[Any]) -> None:
        run, key, kind, status, fn, started_at, attempt, wake_at = row
        with self._write():
            self._upsert(run, key).update(
                kind=kind,
                status=status,
                fn=fn,
                result=None,
                started_at=started_at,
                finished_at=None,
                duration_ms=None,
                attempt=attempt,
                error=None,
                traceback=None,
                args_fp="",
                wake_at=wake_at,
            )

    def finish_sleep(
        self, run_id: str, key: str, finished_at: str, duration_ms: float, attempt: int
    ) -> None:
        with self._write():
            row = self._rows().get((run_id, key))
            if row is not None:
                row.update(
                    status="done", finished_at=finished_at, duration_ms=duration_ms, attempt=attempt
                )

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
                    status="done", error=error, finished_at=finished_at, duration_ms=duration_ms
                )

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
        (run, key, n, attempt, started_at, failed_at, error, next_at, *usage) = try_row
        with self._write() as db:
            db.tries[(run, key, n)] = dict(
                attempt=attempt,
                started_at=started_at,
                failed_at=failed_at,
                error=error,
                next_at=next_at,
                ended="failed",
                **dict(zip(USAGE, usage, strict=True)),
            )
            if retrying_row is not None:
                run, key, fn, started, finished, duration, attempt, err, tb, fp, wake = retrying_row
                self._upsert(run, key).update(
                    kind="step",
                    status="retrying",
                    fn=fn,
                    result=None,
                    started_at=started,
                    finished_at=finished,
                    duration_ms=duration,
                    attempt=attempt,
                    error=err,
                    traceback=tb,
                    args_fp=fp,
                    wake_at=wake,
                    **dict.fromkeys(USAGE),
                )

    # -- what the run consumed and replayed ---------------------------------------------

    def record_usage(self, row: Sequence[Any]) -> None:
        run, key, fn, started_at, attempt, args_fp, *usage = row
        with self._write():
            old = self._rows().get((run, key))
            if old is not None and old["status"] == "done":
                return
            self._upsert(run, key).update(
                kind="step",
                status="running",
                fn=fn,
                result=None,
                started_at=started_at,
                finished_at=None,
                duration_ms=None,
                attempt=attempt,
                error=None,
                traceback=None,
                args_fp=args_fp,
                wake_at=None,
                **dict(zip(USAGE, usage, strict=True)),
            )

    def _keep_left_usage(self, run_id: str, stamp: str, prefix: str | None) -> None:
        """Inside a transaction: usage left on ``running``/``failed`` rows moves to a try."""
        db = self.db
        for row in db.rows(self.goal):
            if (
                row["run"] != run_id
                or row["status"] not in ("running", "failed")
                or (prefix is not None and not row["key"].startswith(prefix))
                or all(row[c] is None for c in ("input_tokens", "output_tokens", "cost"))
            ):
                continue
            key = row["key"]
            n = max((t for (r, k, t) in db.tries if r == run_id and k == key), default=0) + 1
            db.tries[(run_id, key, n)] = dict(
                attempt=row["attempt"],
                started_at=row["started_at"] or stamp,
                failed_at=row["finished_at"] or stamp,
                error=row["error"]
                or (
                    f"Interrupted: attempt {row['attempt']} ended during this call (its "
                    f"process died, or the call was cancelled)"
                ),
                next_at=None,
                ended="crashed" if row["status"] == "running" else "failed",
                **{c: row[c] for c in USAGE},
            )
            row.update(dict.fromkeys(USAGE))

    def keep_left_usage(self, run_id: str, now: float, prefix: str) -> None:
        with self._write():
            self._keep_left_usage(run_id, utc_iso(now), prefix)

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
