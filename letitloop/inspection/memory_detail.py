"""``MemoryDetail``: one run of the in-memory store in detail (its rows, sealed chain,
key check, attempts, tries, result, replays and waits), what ``lil show`` reads; the base
of :class:`~letitloop.inspection.memory_inspector.MemoryInspector`."""

from __future__ import annotations

from typing import Any

from ..integrity.checksums import row_damaged
from ..integrity.encryption import encrypted
from ..stores.memory.database import Row
from ..stores.memory.seals import chain_row
from ..stores.storage_schedules import ScheduleRow, TickRow
from ..stores.storage_streams import ChunkRow
from .decrypting import Decrypting
from .memory_runs import MemoryRuns, attempt_version
from .records import AttemptInfo, ReservationInfo, RowInfo, RunInfo, TryInfo
from .state import RunCounts


def _ending(
    decrypt: Decrypting, run_id: str, ending: tuple[str, str, str | None] | None
) -> dict[str, Any]:
    """What an attempt recorded when it closed its run (``MemoryDatabase.endings``)."""
    if ending is None:
        return {}
    at, outcome, error = ending
    shown = decrypt.text(error, run_id, "", "run error")
    return {"ended_at": at, "outcome": outcome, "error": shown, "recorded": True}


def _row_info(r: Row) -> RowInfo:
    return RowInfo(
        r.rowid,
        r["key"],
        r["kind"],
        r["status"],
        r["fn"],
        r["result"],
        r["started_at"],
        r["finished_at"],
        r["duration_ms"],
        r["attempt"],
        r["error"],
        r["traceback"],
        r["wake_at"],
        r["input_tokens"],
        r["output_tokens"],
        r["cost"],
        r["model"],
        row_damaged(
            r["run"],
            r["key"],
            r["kind"],
            r["status"],
            r["fn"],
            r["args_fp"],
            r["result"],
            r["error"],
            r["checksum"],
        ),
        r["args_fp"],
        r.get("claims"),
        r.get("crashes"),
        r.get("holder_pid"),
        r.get("holder_host"),
        r.get("holder_run"),
    )


class MemoryDetail(MemoryRuns):
    """One run of an in-memory database in detail."""

    # -- one run in detail ------------------------------------------------------------

    def rows(self, run: RunInfo) -> list[RowInfo]:
        with self._reading():
            rows = self._rows_of(run.goal, run.id)
            return [self._decrypt.row(_row_info(r), run.id) for r in rows]

    def seal_chain(self, run: RunInfo) -> tuple[list[Any], list[Any]]:
        """The run's sealed chain (memory_seals.py) and its rows as ``inspection.verify``
        checks them; no entries for a run never sealed."""
        with self._reading() as db:
            entries = list(db.seals.get(run.id, ()))
            return entries, [chain_row(r) for r in self._rows_of(run.goal, run.id)]

    def key_check(self, run: RunInfo) -> str | None:
        """The check value of the key ``run``'s goal is encrypted with (recorded by the first
        journal that opened the goal with a key: ``key_checks``); ``""`` when none is recorded
        but the run holds encrypted values; None when it holds none (control.py's send)."""
        with self._reading() as db:
            stored = db.key_checks.get(run.goal)
            if stored is not None:
                return stored
            rows = self._rows_of(run.goal, run.id)
            held = any(encrypted(r["result"]) or encrypted(r["error"]) for r in rows)
        return "" if held or encrypted(run.input_json) else None

    def attempts(self, run_id: str) -> list[AttemptInfo]:
        with self._reading() as db:
            found = sorted((a for a in db.attempts if a[0] == run_id), key=lambda a: a[1])
            return [
                AttemptInfo(
                    a[1],
                    a[2],
                    a[3],
                    None,
                    a[4],
                    None,
                    **_ending(self._decrypt, run_id, db.endings.get((run_id, a[1]))),
                    version=attempt_version(a),
                )
                for a in found
            ]

    def tries(self, run_id: str) -> list[TryInfo]:
        with self._reading() as db:
            found = [
                TryInfo(
                    key,
                    n,
                    t["attempt"],
                    t["started_at"],
                    t["failed_at"],
                    self._decrypt.text(t["error"], run_id, key, "error"),
                    t["next_at"],
                    t["input_tokens"],
                    t["output_tokens"],
                    t["cost"],
                    t["model"],
                    t["ended"],
                    self._decrypt.text(t.get("traceback"), run_id, key, "traceback"),
                )
                for (run, key, n), t in db.tries.items()
                if run == run_id
            ]
        return sorted(found, key=lambda t: (t.failed_at, t.number))

    def reservations(self, run_id: str) -> list[ReservationInfo]:
        with self._reading() as db:
            held = sorted((c, r) for (run, c), r in db.reservations.items() if run == run_id)
        return [
            ReservationInfo(
                r["key"],
                c,
                r["attempt"],
                r["reserved_at"],
                r["tokens"],
                r["cost"],
                r["model"],
                r["settled_at"],
                r["settled_tokens"],
                r["settled_cost"],
            )
            for c, r in held
        ]

    def result_json(self, run_id: str) -> str | None:
        with self._reading() as db:
            run = db.runs.get(run_id)
        if run is None:
            return None
        return self._decrypt.text(run["result"], run_id, "", "run result")  # type: ignore[no-any-return]

    def previous_steps(self, run: RunInfo) -> int | None:
        with self._reading():
            prev = [
                r
                for r in self._by_id(newest=True)
                if r["goal"] == run.goal
                and r["status"] == "completed"
                and r["id"] < run.id
                and r["input"] == run.input_json
            ]
            if not prev:
                return None
            return self._counts(prev[:1]).get(prev[0]["id"], RunCounts()).done

    def replays(self, run_id: str) -> list[Any]:
        with self._reading() as db:
            return [list(keys) for run, _, keys in db.replays if run == run_id]

    def attempt_replays(self, run_id: str) -> list[tuple[int, Any]]:
        with self._reading() as db:
            return [(attempt, list(keys)) for run, attempt, keys in db.replays if run == run_id]

    def supervisor_events(self, run_id: str) -> list[dict[str, Any]]:
        return []  # no lil watch starts a run of this store: it is another process

    def last_watcher_event(self, run_id: str) -> dict[str, Any] | None:
        return None

    def schedule_rows(self) -> tuple[list[ScheduleRow], list[TickRow]]:
        with self._reading() as db:
            schedules = [db.schedules[name] for name in sorted(db.schedules)]
            ticks = sorted((tuple(r) for r in db.ticks.values()), key=lambda r: r[1], reverse=True)
        ticks.sort(key=lambda r: r[0])  # stable: newest first within each schedule
        return schedules, ticks

    def stream_keys(self, run_id: str) -> list[str]:
        with self._reading() as db:
            return sorted(key for run, key in db.chunks if run == run_id)

    def stream_chunks(self, run_id: str, key: str, after: int = -1) -> list[ChunkRow]:
        with self._reading() as db:
            rows = list(db.chunks.get((run_id, key), ()))
        return [r for r in rows if r[0] > after]

    def waits_in_progress(self, goal: str) -> list[tuple[str, str]]:
        with self._reading() as db:
            order = {r["id"]: r["order"] for r in db.runs.values()}
            found = [
                row
                for row in db.rows(goal)
                if row["kind"] == "wait" and row["status"] == "waiting" and row["run"] in order
            ]
            found.sort(key=lambda row: -order[row["run"]])  # stable: journal order next
            return [(row["run"], row["key"]) for row in found]
