"""``MemoryRunRows``: a goal's runs in the in-memory store, found or started, claimed, ended.

``RunRows`` and ``RunEnds`` on a ``MemoryDatabase``'s ``runs`` and ``attempts``,
with the opener's rules of SQLite's (``sqlite_runs.resumable_run_id``), each
operation one transaction of the ``MemoryConnection``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ...identity.ids import HOST, new_run_id
from ...primitives.clock import utc_iso
from ..storage_runs import RunDecision, RunState
from ..storage_steps import RunKey
from .calls import keep_left_usage_in
from .database import MemoryConnection


class MemoryRunRows(MemoryConnection):
    """The goal's runs and their attempts in the database."""

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
        with self._write() as db:
            self.goal = goal
            self.table = f"journal_{goal}"
            db.goals.setdefault(goal, {})
            found = None
            runs = [r for r in db.runs.values() if r["goal"] == goal]
            if name is not None:
                found = next((r["id"] for r in runs if r["name"] == name), None)
            else:
                # The opener's rule (sqlite_runs.resumable_run_id): the newest
                # unnamed run for the same input that is unfinished and not cancelled.
                for r in sorted(runs, key=lambda r: r["order"], reverse=True):
                    if (
                        r["name"] is None
                        and r["input_fp"] == input_fp
                        and r["status"] in ("running", "failed", "waiting")
                        and r["cancel_requested_at"] is None
                    ):
                        found = r["id"]
                        break
            if found is not None:
                self.run_key = RunKey(db.runs[found]["order"])
                return found, False
            run_id = new_run_id(now)
            hold(run_id)  # held before the run exists; a refusal leaves nothing behind
            started = utc_iso(now)
            db.runs[run_id] = {
                "id": run_id,
                "goal": goal,
                "name": name,
                "status": "running",
                "attempts": 1,
                "holder_pid": os.getpid(),
                "holder_host": HOST,
                "started_at": started,
                "updated_at": started,
                "finished_at": None,
                "input": input_text,
                "input_fp": input_fp,
                "result": None,
                "error": None,
                "cancel_requested_at": None,
                "cancel_reason": None,
                "order": db.run_order(),
            }
            db.attempts.append((run_id, 1, os.getpid(), HOST, started, version))
            self.run_key = RunKey(db.runs[run_id]["order"])
        return run_id, True

    def claim_run(
        self,
        run_id: str,
        now: float,
        decide: Callable[[RunState | None], RunDecision],
        *,
        version: str | None = None,
    ) -> tuple[RunDecision, RunState | None]:
        with self._write() as db:
            run = db.runs.get(run_id)
            found = None
            if run is not None:
                found = RunState(
                    status=run["status"],
                    attempts=run["attempts"],
                    result=run["result"],
                    name=run["name"],
                    cancel_requested_at=run["cancel_requested_at"],
                    cancel_reason=run["cancel_reason"],
                )
            claim = decide(found)
            stamp = utc_iso(now)
            if claim == "cancel" and run is not None and run["status"] != "cancelled":
                run["status"] = "cancelled"
                run["finished_at"] = run["finished_at"] or run["cancel_requested_at"] or stamp
                run["updated_at"] = stamp
            elif claim == "resume" and run is not None and found is not None:
                keep_left_usage_in(db, self.goal, run_id, stamp, None)
                attempts = found.attempts + 1
                found = found._replace(attempts=attempts)
                run.update(
                    status="running",
                    attempts=attempts,
                    holder_pid=os.getpid(),
                    holder_host=HOST,
                    updated_at=stamp,
                )
                db.attempts.append((run_id, attempts, os.getpid(), HOST, stamp, version))
        return claim, found

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

    def key_check(self, goal: str, check: str | None, now: float) -> str | None:
        """The check value of the key ``goal``'s values are encrypted with; ``check`` is
        recorded first when none is (the first opener's wins)."""
        with self._read():
            stored = self.db.key_checks.get(goal)  # a read; a write only the first time
        if stored is not None or check is None:
            return stored
        with self._write() as db:
            return db.key_checks.setdefault(goal, check)

    def trace_attempt(self, run_id: str, attempt: int, trace: str) -> str | None:
        with self._write() as db:
            db.traces[run_id, attempt] = trace
            earlier = [a for (r, a) in db.traces if r == run_id and a < attempt]
            return db.traces[run_id, max(earlier)] if earlier else None

    def cancel_request(self, run_id: str) -> tuple[str | None, str | None] | None:
        with self._read():
            run = self.db.runs.get(run_id)
            return None if run is None else (run["cancel_requested_at"], run["cancel_reason"])

    def _end_run(self, run_id: str, ended: str | None, **values: Any) -> None:
        """The run's end, and its latest attempt's (kept whatever a later one writes)."""
        with self._write() as db:
            run = db.runs.get(run_id)
            if run is not None:
                run.update(values)
                ending = (values["updated_at"], values["status"], ended)
                db.endings[run_id, run["attempts"]] = ending

    def complete_run(self, run_id: str, now: float, result: str | None) -> None:
        at = utc_iso(now)
        ended = {"status": "completed", "finished_at": at, "updated_at": at, "result": result}
        self._end_run(run_id, None, error=None, **ended)

    def fail_run(self, run_id: str, now: float, error: str) -> None:
        self._end_run(run_id, error, status="failed", updated_at=utc_iso(now), error=error)

    def cancel_run(self, run_id: str, now: float, error: str) -> None:
        at = utc_iso(now)
        self._end_run(run_id, error, status="cancelled", finished_at=at, updated_at=at, error=error)

    def leave_waiting(self, run_id: str, now: float) -> None:
        self._end_run(run_id, None, status="waiting", updated_at=utc_iso(now))
