"""A PostgreSQL journal's runs (``PostgresRunRows``: ``RunRows`` and ``RunEnds``): finding,
starting and claiming a run, and ending it.

The opener's rules are SQLite's (``sqlite_runs.py``): a named run is found
by name; an unnamed one is the newest unfinished, uncancelled run for the
same input. A run is started under a transaction-level advisory lock on its
goal; a claim locks the run's row (``FOR UPDATE``), which the fence of every
write (``postgres_connection.py``) waits for. Each attempt gets a row in
``ll_attempts``, with the ``lil watch`` that started its process.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from ...identity.ids import HOST, new_run_id
from ...primitives.clock import utc_iso
from ..storage_runs import RunDecision, RunState
from ..storage_steps import RunKey
from .calls import keep_left_usage_in
from .connection import PostgresConnection
from .database import lock_key

__all__ = ["PostgresRunRows"]

#: A goal's encryption key check (migration 0008; opening.check_key).
_KEY_CHECK = "SELECT key_check FROM ll_key_checks WHERE goal = %s"


_RECORD_KEY_CHECK = (
    "INSERT INTO ll_key_checks (goal, key_check, set_at) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING"
)


#: An attempt's row, with the ``lil watch`` that started its process (migration 0006).
_INSERT_ATTEMPT = (
    "INSERT INTO ll_attempts (run, attempt, pid, host, started_at, version, watch_id, "
    "watch_attempt) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)


def _watcher() -> tuple[str | None, int | None]:
    """The ``lil watch`` session and start of this process (set in its environment), if any."""
    attempt = os.environ.get("LETITLOOP_ATTEMPT", "")
    return os.environ.get("LETITLOOP_WATCH_ID"), int(attempt) if attempt.isdigit() else None


class PostgresRunRows(PostgresConnection):
    """A journal's runs in PostgreSQL: find or start one, claim it, end it."""

    def _key_of(self, num: int, run_id: str) -> None:
        self._run_ids[num] = run_id
        self.run_key = RunKey(num)

    def find_or_start_run(
        self,
        goal: str,
        name: str | None,
        input_fp: str | None,
        input_text: str | None,
        now: float,
        hold: Callable[[str], None],
        *,
        version: str | None = None,
    ) -> tuple[str, bool]:
        with self._tx(fenced=False) as c:
            self.goal = goal
            self._held = None
            c.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(f"letitloop goal {goal}"),))
            c.execute("INSERT INTO ll_goals VALUES (%s) ON CONFLICT DO NOTHING", (goal,))
            if name is not None:
                row = c.execute(
                    "SELECT id, num FROM ll_runs WHERE goal = %s AND name = %s ORDER BY num "
                    "LIMIT 1",
                    (goal, name),
                ).fetchone()
            else:
                # The opener's rule (sqlite_runs.resumable_run_id): the newest unnamed
                # run for the same input that is unfinished and not cancelled.
                row = c.execute(
                    "SELECT id, num FROM ll_runs WHERE goal = %s AND name IS NULL "
                    "AND input_fp IS NOT DISTINCT FROM %s "
                    "AND status IN ('running', 'failed', 'waiting') "
                    "AND cancel_requested_at IS NULL ORDER BY num DESC LIMIT 1",
                    (goal, input_fp),
                ).fetchone()
            if row is not None:
                self._key_of(row[1], row[0])
                return row[0], False
            run_id = new_run_id(now)
            hold(run_id)  # held before the run exists; a refusal leaves nothing behind
            started = utc_iso(now)
            (num,) = c.execute(
                "INSERT INTO ll_runs (id, goal, name, status, attempts, holder_pid, holder_host, "
                "started_at, updated_at, input, input_fp) VALUES "
                "(%s, %s, %s, 'running', 1, %s, %s, %s, %s, %s, %s) RETURNING num",
                (run_id, goal, name, os.getpid(), HOST, started, started, input_text, input_fp),
            ).fetchone()
            c.execute(
                _INSERT_ATTEMPT, (run_id, 1, os.getpid(), HOST, started, version, *_watcher())
            )
            self._key_of(num, run_id)
        self._held = (run_id, 1)
        return run_id, True

    def claim_run(
        self,
        run_id: str,
        now: float,
        decide: Callable[[RunState | None], RunDecision],
        *,
        version: str | None = None,
    ) -> tuple[RunDecision, RunState | None]:
        with self._tx(fenced=False) as c:
            row = c.execute(
                "SELECT status, attempts, result, name, cancel_requested_at, cancel_reason, "
                "finished_at FROM ll_runs WHERE id = %s FOR UPDATE",
                (run_id,),
            ).fetchone()
            found = None if row is None else RunState(*row[:6])
            claim = decide(found)
            stamp = utc_iso(now)
            if claim == "cancel" and found is not None and found.status != "cancelled":
                c.execute(
                    "UPDATE ll_runs SET status = 'cancelled', finished_at = "
                    "coalesce(finished_at, cancel_requested_at, %s), updated_at = %s "
                    "WHERE id = %s",
                    (stamp, stamp, run_id),
                )
            elif claim == "resume" and found is not None:
                keep_left_usage_in(self, c, run_id, stamp, None)
                attempts = found.attempts + 1
                found = found._replace(attempts=attempts)
                c.execute(
                    "UPDATE ll_runs SET status = 'running', attempts = %s, holder_pid = %s, "
                    "holder_host = %s, updated_at = %s WHERE id = %s",
                    (attempts, os.getpid(), HOST, stamp, run_id),
                )
                c.execute(
                    _INSERT_ATTEMPT + " ON CONFLICT DO NOTHING",
                    (run_id, attempts, os.getpid(), HOST, stamp, version, *_watcher()),
                )
        self._held = None if found is None else (run_id, found.attempts)
        return claim, found

    def generation_rows(
        self, goal: str, name: str, prefix: str
    ) -> list[tuple[str, str, str | None]]:
        # starts_with, not a range: the column's collation may not order text by its bytes.
        rows = self._run(
            "SELECT name, status, finished_at FROM ll_runs WHERE goal = %s AND "
            "(name = %s OR starts_with(name, %s))",
            (goal, name, prefix),
        )
        return [(r[0], r[1], r[2]) for r in rows]

    def key_check(self, goal: str, check: str | None, now: float) -> str | None:
        """The check value of the key ``goal``'s values are encrypted with (``ll_key_checks``,
        migration 0008); ``check`` is recorded first when none is, in a transaction of its own
        (the first opener's value wins: the read after the insert sees the one committed)."""
        rows = self._run(_KEY_CHECK, (goal,))  # a read; a write only the first time
        if rows or check is None:
            return str(rows[0][0]) if rows else None
        with self._tx(fenced=False) as c:
            c.execute(_RECORD_KEY_CHECK, (goal, check, utc_iso(now)))
            return str(c.execute(_KEY_CHECK, (goal,)).fetchone()[0])

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

    def cancel_request(self, run_id: str) -> tuple[str | None, str | None] | None:
        rows = self._run(
            "SELECT cancel_requested_at, cancel_reason FROM ll_runs WHERE id = %s", (run_id,)
        )
        return None if not rows else (rows[0][0], rows[0][1])

    def _end_run(
        self, run_id: str, sets: str, values: Sequence[Any], outcome: str, error: str | None
    ) -> None:
        """The run's end and its latest attempt's (migration 0010), in one transaction: the
        attempt keeps how it ended whatever a later attempt writes on the run."""
        with self._tx() as c:
            c.execute(f"UPDATE ll_runs SET {sets} WHERE id = %s", (*values, run_id))
            c.execute(
                "UPDATE ll_attempts SET ended_at = %s, outcome = %s, error = %s WHERE run = %s "
                "AND attempt = (SELECT attempts FROM ll_runs WHERE id = %s)",
                (values[0], outcome, error, run_id, run_id),
            )

    def complete_run(self, run_id: str, now: float, result: str | None) -> None:
        at = utc_iso(now)
        self._end_run(
            run_id,
            "status = 'completed', updated_at = %s, finished_at = %s, result = %s, error = NULL",
            (at, at, result),
            "completed",
            None,
        )

    def fail_run(self, run_id: str, now: float, error: str) -> None:
        self._end_run(
            run_id,
            "status = 'failed', updated_at = %s, error = %s",
            (utc_iso(now), error),
            "failed",
            error,
        )

    def cancel_run(self, run_id: str, now: float, error: str) -> None:
        at = utc_iso(now)
        self._end_run(
            run_id,
            "status = 'cancelled', updated_at = %s, finished_at = %s, error = %s",
            (at, at, error),
            "cancelled",
            error,
        )

    def leave_waiting(self, run_id: str, now: float) -> None:
        self._end_run(
            run_id, "status = 'waiting', updated_at = %s", (utc_iso(now),), "waiting", None
        )
