"""``SqliteDetail``: one run of a journal file in detail (its rows, sealed chain, key
check, attempts, tries, result, replays, supervisor events and waits), what ``lil show``
and ``lil ui``'s run page read; the base of
:class:`~letitloop.inspection.sqlite_inspector.SqliteInspector`."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from ..errors import LetItLoopError
from ..integrity.checksums import row_damaged
from ..integrity.encryption import PREFIX, encrypted
from ..stores.sqlite.goals import rows_table
from ..stores.sqlite.keychecks import stored_check
from ..stores.storage_schedules import ScheduleRow, TickRow
from ..stores.storage_streams import ChunkRow
from .inspector_changes import Convert, Rekeyed
from .records import AttemptInfo, ReservationInfo, RowInfo, RunInfo, TryInfo, row_info
from .sqlite_changes import has_table
from .sqlite_rekey import rekey_goal
from .sqlite_runs import SqliteRuns, iso_us
from .state import RunCounts

#: A row of a run as :class:`RowInfo` wants it, read from its goal's compact table ``t`` (not
#: its readable view): the function's name from ``functions``, the times as integer
#: microseconds (``started``, ``duration``), made text in Python by :func:`iso_us` as the
#: view makes them in SQL.
_COMPACT_ROW_COLUMNS = (
    "t.rowid, t.key, t.kind, t.status, coalesce(f.name, t.fn), t.result, t.started, "
    "t.duration, t.attempt, t.error, t.traceback, t.wake_at, t.input_tokens, "
    "t.output_tokens, t.cost, t.model, t.claims, t.crashes, t.holder_pid, t.holder_host, "
    "t.holder_run, t.args_fp, t.checksum"
)

#: What a reader shows for an encrypted error or input without the key.
ENCRYPTED_NOTE = "(encrypted: set LETITLOOP_ENCRYPTION_KEY to read it)"

#: A row's marker fields (claims … holder_run) when it is not a marker.
_NO_HOLDER = (None, None, None, None, None)


def _plus(a: Any, b: Any) -> Any:
    return None if a is None or b is None else a + b


class SqliteDetail(SqliteRuns):
    """One run of a journal file in detail."""

    def rows(self, run: RunInfo) -> list[RowInfo]:
        # The compact table, not the goal's view: the view formats two times per row in
        # SQL and joins ``runs`` and ``functions`` per row; here the run's number is found
        # once, and the times are formatted in Python (the same text, see iso_us).
        infos = []
        for row in self.store.query(
            f'SELECT {_COMPACT_ROW_COLUMNS} FROM "{rows_table(run.journal_table)}" AS t '
            "LEFT JOIN functions AS f ON f.id = t.fn "
            "WHERE t.run = (SELECT num FROM runs WHERE id = ?) ORDER BY t.rowid",
            (run.id,),
        ):
            started, duration = row[6], row[7]
            r = (
                *row[:6],
                iso_us(started),
                None if row[3] == "running" else iso_us(_plus(started, duration)),
                None if duration is None else duration / 1000.0,
                *row[8:],
            )
            # claims … holder_run: a marker's (by name); args_fp and checksum: whether the
            # row is damaged.
            damaged = row_damaged(run.id, r[1], r[2], r[3], r[4], r[-2], r[5], r[10], r[-1])
            marker = r[-7:-2] if r[2] == "marker" else _NO_HOLDER
            info = row_info((*r[:-7], damaged, r[-2], *marker))
            if encrypted(info.result) or encrypted(info.error) or encrypted(info.traceback):
                info = replace(
                    info,
                    result=self._reading(info.result, run.id, info.key, "result"),
                    error=self._reading(info.error, run.id, info.key, "error"),
                    traceback=self._reading(info.traceback, run.id, info.key, "traceback"),
                )
            infos.append(info)
        return infos

    def seal_chain(self, run: RunInfo) -> tuple[list[Any], list[Any]]:
        """The run's sealed chain (``seals``, in order) and its rows as ``inspection.verify``
        checks them; no entries in a file from before the chain (migration 0013)."""
        entries = []
        if has_table(self.store, "seals"):
            entries = self.store.query(
                "SELECT n, key, kind, status, digest, seal FROM seals "
                "WHERE run = (SELECT num FROM runs WHERE id = ?) ORDER BY n",
                (run.id,),
            )
        rows = self.store.query(
            f"SELECT key, kind, status, fn, args_fp, result, error, wake_at "
            f'FROM "{run.journal_table}" WHERE run = ? ORDER BY rowid',
            (run.id,),
        )
        return entries, rows

    def goal_key_check(self, goal: str) -> str | None:
        """The check value recorded for ``goal`` (sqlite_keychecks.py), None if none is."""
        return stored_check(self.store, goal)

    def rekey_goal(
        self, goal: str, convert: Convert, check: str, now: float, seal_secret: bytes | None
    ) -> Rekeyed:
        """``goal``'s encrypted values re-encrypted by ``convert`` in one transaction
        (sqlite_rekey.py; not part of Inspector: only a journal file has it)."""
        view = self.store.goal_table(goal)
        if view is None:
            raise LetItLoopError(f"no goal {goal!r} in {self.store.path}")
        return rekey_goal(self.store, goal, view, convert, check, now, seal_secret)

    def key_check(self, run: RunInfo) -> str | None:
        """The check value of the key ``run``'s goal is encrypted with (sqlite_keychecks.py);
        ``""`` when none is recorded but the run holds encrypted values (a file from before
        migration 0017, or a goal only read since); None when it holds none."""
        stored = stored_check(self.store, run.goal)
        if stored is not None:
            return stored
        like = PREFIX + "%"
        found = self.store.query(
            f'SELECT 1 FROM "{run.journal_table}" WHERE run = ? AND (result LIKE ? '
            f"OR error LIKE ?) LIMIT 1",
            (run.id, like, like),
        )
        return "" if found or encrypted(run.input_json) else None

    def attempts(self, run_id: str) -> list[AttemptInfo]:
        return [
            AttemptInfo(
                attempt,
                pid,
                host,
                watch,
                started,
                watch_attempt,
                outcome,
                self._reading(error, run_id, "", "run error") if encrypted(error) else error,
                version=version,
                ended_at=ended_at,
                recorded=outcome is not None,
            )
            for (
                attempt,
                pid,
                host,
                watch,
                started,
                watch_attempt,
                version,
                ended_at,
                outcome,
                error,
            ) in self.store.query(
                "SELECT attempt, pid, host, watch_id, started_at, watch_attempt, version, "
                "ended_at, outcome, error FROM attempts WHERE run = ? ORDER BY attempt",
                (run_id,),
            )
        ]

    def tries(self, run_id: str) -> list[TryInfo]:
        tries = [
            TryInfo(*t)
            for t in self.store.query(
                "SELECT key, try, attempt, started_at, failed_at, error, next_at, input_tokens, "
                "output_tokens, cost, model, ended, traceback FROM step_tries WHERE run = ? "
                "ORDER BY failed_at, try",
                (run_id,),
            )
        ]
        # An encrypted error (retry.py) as a reader shows it: decrypted, or a note.
        return [
            replace(
                t,
                error=self._reading(t.error, run_id, t.key, "error"),
                traceback=self._reading(t.traceback, run_id, t.key, "traceback"),
            )
            if encrypted(t.error) or encrypted(t.traceback)
            else t
            for t in tries
        ]

    def reservations(self, run_id: str) -> list[ReservationInfo]:
        if not has_table(self.store, "reservations"):  # a file from before migration 0018
            return []
        return [
            ReservationInfo(*r)
            for r in self.store.query(
                "SELECT key, call, attempt, reserved_at, tokens, cost, model, settled_at, "
                "settled_tokens, settled_cost FROM reservations WHERE run = ? ORDER BY call",
                (run_id,),
            )
        ]

    def result_json(self, run_id: str) -> str | None:
        result = self.store.query("SELECT result FROM runs WHERE id = ?", (run_id,))
        if not result:
            return None
        return self._reading(result[0][0], run_id, "", "run result")  # type: ignore[no-any-return]

    def previous_steps(self, run: RunInfo) -> int | None:
        # The previous completed run of the same work: the same input (a @durable call's
        # arguments), so that a run for other arguments does not set the count to reach.
        prev = self.store.query(
            "SELECT id FROM runs WHERE goal = ? AND status = 'completed' AND id < ? "
            "AND input IS ? ORDER BY id DESC LIMIT 1",
            (run.goal, run.id, run.input_json),
        )
        if not prev:
            return None
        return self._counts(run.journal_table, [prev[0][0]]).get(prev[0][0], RunCounts()).done

    def replays(self, run_id: str) -> list[Any]:
        out = []
        for (keys,) in self.store.query("SELECT keys FROM step_replays WHERE run = ?", (run_id,)):
            try:
                out.append(json.loads(keys))
            except (ValueError, TypeError):  # a damaged record counts nothing
                continue
        return out

    def attempt_replays(self, run_id: str) -> list[tuple[int, Any]]:
        out = []
        for attempt, keys in self.store.query(
            "SELECT attempt, keys FROM step_replays WHERE run = ? ORDER BY rowid", (run_id,)
        ):
            try:
                out.append((int(attempt), json.loads(keys)))
            except (ValueError, TypeError):  # a damaged record counts nothing
                continue
        return out

    def supervisor_events(self, run_id: str) -> list[dict[str, Any]]:
        return self._dicts(
            "SELECT * FROM supervisor_events WHERE watch_id IN "
            "(SELECT watch_id FROM attempts WHERE run = ? AND watch_id IS NOT NULL) ORDER BY id",
            (run_id,),
        )

    def last_watcher_event(self, run_id: str) -> dict[str, Any] | None:
        rows = self._dicts(
            "SELECT e.* FROM supervisor_events e WHERE e.id = (SELECT max(id) FROM "
            "supervisor_events WHERE watch_id = (SELECT watch_id FROM attempts WHERE run = ? "
            "AND watch_id IS NOT NULL ORDER BY attempt DESC LIMIT 1))",
            (run_id,),
        )
        return rows[0] if rows else None

    def schedule_rows(self) -> tuple[list[ScheduleRow], list[TickRow]]:
        if not has_table(self.store, "schedules"):  # an older file, read as it is
            return [], []
        schedules = self.store.query("SELECT * FROM schedules ORDER BY name")
        ticks = self.store.query(
            "SELECT schedule, tick, run_name, status, claimed_at, claimed_by, finished_at "
            "FROM schedule_ticks ORDER BY schedule, tick DESC"
        )
        return [tuple(r) for r in schedules], [tuple(r) for r in ticks]

    def stream_keys(self, run_id: str) -> list[str]:
        if not has_table(self.store, "stream_chunks"):  # an older file, read as it is
            return []
        rows = self.store.query(
            "SELECT DISTINCT key FROM stream_chunks WHERE run = ? ORDER BY key", (run_id,)
        )
        return [str(r[0]) for r in rows]

    def stream_chunks(self, run_id: str, key: str, after: int = -1) -> list[ChunkRow]:
        if not has_table(self.store, "stream_chunks"):
            return []
        rows = self.store.query(
            "SELECT seq, attempt, kind, data, mark, at FROM stream_chunks "
            "WHERE run = ? AND key = ? AND seq > ? ORDER BY seq",
            (run_id, key, after),
        )
        return [tuple(r) for r in rows]

    def waits_in_progress(self, goal: str) -> list[tuple[str, str]]:
        table = self.store.goal_table(goal)
        if table is None:
            return []
        return [
            (run_id, key)
            for run_id, key in self.store.query(
                f'SELECT w.run, w.key FROM "{table}" AS w JOIN runs AS r ON r.id = w.run '
                f"WHERE w.kind = 'wait' AND w.status = 'waiting' ORDER BY r.rowid DESC, w.rowid",
            )
        ]
