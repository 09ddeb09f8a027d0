"""``SqliteInspector``: the :class:`~letitloop.inspection.inspector.Inspector` on a journal
file, built on :class:`~letitloop.store.Store`. Every SQL statement of ``lil``'s reading and
changing commands, of :mod:`letitloop.maintenance` and of :mod:`letitloop.control` is here.

Runs' locks are the lock files beside the journal (:mod:`letitloop.locks`).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from .. import locks
from ..checksums import marker_sum, pause_sum, row_damaged, step_sum
from ..encryption import PREFIX, encrypted, env_cipher
from ..errors import EncryptionKeyError, JournalFileError, LetItLoopError
from ..goals import (
    delete_run_rows,
    drop_goal_tables,
    iso_sql,
    refresh_journal_rows,
    rows_table,
)
from ..seals import env_seal_key
from ..sqlerrors import DRIVER_ERRORS
from ..sqlite_holding import run_lock_path
from ..sqlite_keychecks import stored_check
from ..sqlite_seals import adopt
from ..sqlite_storage import resumable_run_id
from ..store import Store
from .decrypting import Decrypting
from .inspector import Inspector, RunFilter, WaitAnswer
from .records import AttemptInfo, RowInfo, RunInfo, RunRef, TryInfo, WaitRow, row_info
from .sqlite_fixture import copy_run_to_file
from .sqlite_rekey import Convert, Rekeyed, rekey_goal
from .state import OpenRow, RunCounts, RunRow, plus, run_infos

RUN_COLUMNS = (
    "r.id, r.goal, r.name, r.status, r.attempts, r.started_at, r.updated_at, r.finished_at, "
    "r.error, r.holder_pid, r.holder_host, g.journal_table, r.input, r.forked_from, r.forked_at, "
    "r.cancel_requested_at, r.cancel_reason, (SELECT a.version FROM attempts a "
    "WHERE a.run = r.id AND a.attempt = r.attempts)"
)

#: Runs with their goal's journal table, in the order of :class:`RunRow`.
_RUNS = f"SELECT {RUN_COLUMNS} FROM runs r JOIN goals g ON g.goal = r.goal"

#: A row of a run as :class:`RowInfo` wants it, read from its goal's compact table ``t`` (not
#: its readable view): the function's name from ``functions``, the times as integer
#: microseconds (``started``, ``duration``), made text in Python by :func:`_iso_us` as the
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

#: Ids bound per statement: SQLite allows at most 999 parameters in old builds.
_CHUNK = 500


class SqliteInspector:
    """The inspector of one journal file, on a :class:`Store` it owns (closed by :meth:`close`)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        #: The cipher of LETITLOOP_ENCRYPTION_KEY, read when an encrypted value is first met.
        self._decrypting = Decrypting()

    @property
    def path(self) -> Path:
        return self.store.path

    def close(self) -> None:
        self.store.close()

    # -- runs' locks ---------------------------------------------------------------------

    def is_held(self, run_id: str) -> bool:
        return locks.is_held(run_lock_path(self.store, run_id))

    @contextlib.contextmanager
    def hold(self, run_id: str) -> Iterator[bool]:
        lock = locks.new_lock(run_lock_path(self.store, run_id))
        if not locks.acquire(lock, 0):
            yield False
            return
        try:
            yield True
        finally:
            locks.release(lock)

    # -- goals and runs ------------------------------------------------------------------

    def has_goal(self, goal: str) -> bool:
        return self.store.goal_table(goal) is not None

    def goal_names(self, prefix: str = "", limit: int | None = None) -> list[str]:
        where = " WHERE goal LIKE ? ESCAPE '\\'" if prefix else ""
        params = (_like(prefix),) if prefix else ()
        bound = f" LIMIT {int(limit)}" if limit is not None else ""
        return [
            r[0]
            for r in self.store.query(f"SELECT goal FROM goals{where} ORDER BY goal{bound}", params)
        ]

    def has_run(self, run_id: str) -> bool:
        return bool(self.store.query("SELECT 1 FROM runs WHERE id = ?", (run_id,)))

    def runs(self, where: RunFilter, *, limit: int | None, offset: int = 0) -> list[RunInfo]:
        conditions, params = _conditions(where)
        sql = _RUNS
        if conditions:
            sql += " WHERE " + " AND ".join(conditions)
        sql += " ORDER BY r.rowid DESC"  # newest made first (ids of one millisecond: any order)
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        if offset:
            sql += f"{'' if limit is not None else ' LIMIT -1'} OFFSET {int(offset)}"
        return self._infos(self.store.query(sql, params))

    def run(self, run_id: str) -> RunInfo | None:
        return self._first(_RUNS + " WHERE r.id = ?", (run_id,))

    def run_of_goal(self, goal: str, ref: str) -> RunInfo | None:
        return self._first(
            _RUNS + " WHERE r.goal = ? AND (r.id = ? OR r.name = ?)", (goal, ref, ref)
        )

    def newest_run(self, goal: str) -> RunInfo | None:
        return self._first(_RUNS + " WHERE r.goal = ? ORDER BY r.rowid DESC LIMIT 1", (goal,))

    def runs_named(self, name: str) -> list[RunInfo]:
        return self._infos(
            self.store.query(_RUNS + " WHERE r.name = ? ORDER BY r.id DESC", (name,))
        )

    def runs_with_prefix(self, prefix: str, goal: str | None, limit: int) -> list[RunInfo]:
        # A range on the primary key, which the index answers directly (a LIKE is
        # case-insensitive, so SQLite scans the whole table for it).
        low = prefix.upper()
        high = low[:-1] + chr(ord(low[-1]) + 1)
        where, params = ("r.goal = ? AND ", (goal,)) if goal is not None else ("", ())
        rows = self.store.query(
            _RUNS
            + " WHERE "
            + where
            + f"r.id >= ? AND r.id < ? ORDER BY r.id DESC LIMIT {int(limit)}",
            (*params, low, high),
        )
        return self._infos(rows)

    def resumable_run_id(self, goal: str) -> str | None:
        return resumable_run_id(self.store.query, goal, None)

    def argument_runs(self, goal: str, limit: int) -> list[RunInfo]:
        return self._infos(
            self.store.query(
                _RUNS + " WHERE r.goal = ? AND r.name IS NULL AND r.input_fp IS NOT NULL AND "
                "r.status IN ('running', 'failed', 'waiting') AND r.cancel_requested_at IS NULL "
                f"ORDER BY r.rowid DESC LIMIT {int(limit)}",
                (goal,),
            )
        )

    def runs_updated_before(self, at: str) -> list[RunInfo]:
        return self._infos(self.store.query(_RUNS + " WHERE r.updated_at < ? ORDER BY r.id", (at,)))

    def run_refs(self, prefix: str, limit: int) -> list[RunRef]:
        return [
            RunRef(*r)
            for r in self.store.query(
                "SELECT id, goal, name, status FROM runs WHERE id LIKE ? ESCAPE '\\' OR name "
                f"LIKE ? ESCAPE '\\' ORDER BY rowid DESC LIMIT {int(limit)}",
                (_like(prefix.upper()), _like(prefix)),
            )
        ]

    def step_keys(self, ref: str, prefix: str) -> list[str]:
        runs = self.store.query(
            "SELECT r.id, g.journal_table FROM runs r JOIN goals g ON g.goal = r.goal "
            "WHERE r.id = ? OR r.goal = ? OR r.name = ? OR r.id LIKE ? ESCAPE '\\' "
            "ORDER BY r.id = ? DESC, r.id DESC LIMIT 1",
            (ref, ref, ref, _like(ref.upper()), ref),
        )
        if not runs:
            return []
        run_id, table = runs[0]
        return [
            k
            for (k,) in self.store.query(
                f"SELECT key FROM \"{table}\" WHERE run = ? AND key LIKE ? ESCAPE '\\' "
                "ORDER BY rowid",
                (run_id, _like(prefix)),
            )
        ]

    # -- one run in detail ---------------------------------------------------------------

    def rows(self, run: RunInfo) -> list[RowInfo]:
        # The compact table, not the goal's view: the view formats two times per row in
        # SQL and joins ``runs`` and ``functions`` per row; here the run's number is found
        # once, and the times are formatted in Python (the same text, see _iso_us).
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
                _iso_us(started),
                None if row[3] == "running" else _iso_us(_plus(started, duration)),
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
        if _has_table(self.store, "seals"):
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
            AttemptInfo(attempt, pid, host, watch, started, watch_attempt, version=version)
            for attempt, pid, host, watch, started, watch_attempt, version in self.store.query(
                "SELECT attempt, pid, host, watch_id, started_at, watch_attempt, version "
                "FROM attempts WHERE run = ? ORDER BY attempt",
                (run_id,),
            )
        ]

    def tries(self, run_id: str) -> list[TryInfo]:
        tries = [
            TryInfo(*t)
            for t in self.store.query(
                "SELECT key, try, attempt, started_at, failed_at, error, next_at, input_tokens, "
                "output_tokens, cost, model, ended FROM step_tries WHERE run = ? "
                "ORDER BY failed_at, try",
                (run_id,),
            )
        ]
        # An encrypted error (retry.py) as a reader shows it: decrypted, or a note.
        return [
            replace(t, error=self._reading(t.error, run_id, t.key, "error"))
            if encrypted(t.error)
            else t
            for t in tries
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

    # -- changes -------------------------------------------------------------------------

    def delete_runs(self, runs: list[RunInfo]) -> int:
        by_table: dict[str, list[str]] = {}
        for run in runs:
            by_table.setdefault(run.journal_table, []).append(run.id)
        deleted = 0
        with self.store.write() as c:
            for table, ids in by_table.items():
                deleted += delete_runs(c, table, ids)
        return deleted

    def copy_run(self, run: RunInfo, to: Path, text: Callable[[str | None], str | None]) -> int:
        """``lil fixture``: ``run`` copied into a new journal file ``to``; the rows copied.

        Not part of :class:`Inspector`: only a journal file's runs are copied
        (:mod:`letitloop.inspection.sqlite_fixture`)."""
        return copy_run_to_file(self.store, run, to, text)

    def fork(
        self,
        source: RunInfo,
        new_id: str,
        at: str,
        from_step: str,
        before_seq: int,
        rename_source: str | None,
    ) -> None:
        table = source.journal_table
        with self.store.write() as c:
            if rename_source is not None:
                c.execute("UPDATE runs SET name = ? WHERE id = ?", (rename_source, source.id))
            # The fork is a re-run of the same call: it keeps the source's input (so an
            # opener called with the same arguments resumes it) and records its lineage.
            c.execute(
                "INSERT INTO runs (id, goal, name, status, attempts, started_at, updated_at, "
                "input, input_fp, forked_from, forked_at) SELECT ?, goal, ?, 'running', 0, ?, ?, "
                "input, input_fp, id, ? FROM runs WHERE id = ?",
                (new_id, source.name, at, at, from_step, source.id),
            )
            # Each copied row keeps its arguments' fingerprint (a replay must match it, or
            # the fork would hand a result to a call with any arguments) and its model,
            # but not its tokens or cost: that money was spent once, by the source run,
            # where it stays counted (a sum over the journal table counts it once).
            c.execute(
                f'INSERT INTO "{table}" (run, key, kind, status, fn, result, started_at, '
                f"finished_at, duration_ms, attempt, error, traceback, wake_at, args_fp, model) "
                f"SELECT ?, key, kind, status, fn, result, started_at, finished_at, duration_ms, "
                f"0, error, traceback, wake_at, args_fp, model "
                f'FROM "{table}" WHERE run = ? AND rowid < ? '
                f"AND status = 'done' ORDER BY rowid",
                (new_id, source.id, before_seq),
            )
            _copied(c, table, new_id, source)

    def answer_wait(
        self, run: RunInfo, choose: Callable[[list[WaitRow]], WaitAnswer]
    ) -> WaitAnswer:
        table = run.journal_table
        with self.store.write() as c:
            rows = c.execute(
                f'SELECT key, status, error, started_at, finished_at, wake_at FROM "{table}" '
                f"WHERE run = ? AND kind = 'wait' ORDER BY rowid",
                (run.id,),
            ).fetchall()
            answer = choose([WaitRow(*r) for r in rows])
            c.execute(
                f"UPDATE \"{table}\" SET status = 'done', result = ?, error = NULL, "
                f"finished_at = ?, duration_ms = ?, checksum = ? WHERE run = ? AND key = ? "
                f"AND status = 'waiting'",
                (
                    answer.result,
                    answer.finished_at,
                    answer.duration_ms,
                    pause_sum(run.id, answer.key, "wait", answer.result, None),
                    run.id,
                    answer.key,
                ),
            )
        return answer

    def cancel_now(self, run_id: str, at: str, reason: str, error: str) -> None:
        with self.store.write() as c:
            c.execute(
                "UPDATE runs SET status = 'cancelled', cancel_requested_at = coalesce("
                "cancel_requested_at, ?), cancel_reason = coalesce(cancel_reason, ?), "
                "finished_at = ?, updated_at = ?, error = ? WHERE id = ? "
                "AND status NOT IN ('completed', 'cancelled')",
                (at, reason, at, at, error, run_id),
            )

    def request_cancel(self, run_id: str, at: str, reason: str) -> None:
        with self.store.write() as c:
            c.execute(
                "UPDATE runs SET cancel_requested_at = coalesce(cancel_requested_at, ?), "
                "cancel_reason = coalesce(cancel_reason, ?), updated_at = ? WHERE id = ? "
                "AND status NOT IN ('completed', 'cancelled')",
                (at, reason, at, run_id),
            )

    # -- gc ------------------------------------------------------------------------------

    def supervisor_events_before(self, at: str, going: set[str]) -> int:
        kept_watchers = {
            w
            for run, w in self.store.query(
                "SELECT run, watch_id FROM attempts WHERE watch_id IS NOT NULL"
            )
            if run not in going
        }
        return sum(
            1
            for (w,) in self.store.query(
                "SELECT watch_id FROM supervisor_events WHERE at < ?", (at,)
            )
            if w not in kept_watchers
        )

    def delete_supervisor_events(self, at: str) -> int:
        with self.store.write() as c:
            deleted: int = c.execute(
                "DELETE FROM supervisor_events WHERE at < ? AND watch_id NOT IN "
                "(SELECT watch_id FROM attempts WHERE watch_id IS NOT NULL)",
                (at,),
            ).rowcount
        return deleted

    def empty_goals(self, going: set[str]) -> list[str]:
        return _empty_goals(self.store.conn, self.store, going)

    def drop_empty_goals(self) -> list[str]:
        with self.store.write() as c:
            gone = _empty_goals(c, self.store, set())
            for goal in gone:
                (table,) = c.execute(
                    "SELECT journal_table FROM goals WHERE goal = ?", (goal,)
                ).fetchone()
                c.execute("DELETE FROM goals WHERE goal = ?", (goal,))
                if _has_table(c, "key_checks"):  # no value is left under its key
                    c.execute("DELETE FROM key_checks WHERE goal = ?", (goal,))
                drop_goal_tables(c, table)
            if gone:
                refresh_journal_rows(c)  # the browsing view must not name a dropped table
        return gone

    def size(self) -> int:
        total = 0
        for suffix in ("", "-wal"):
            with contextlib.suppress(OSError):
                total += Path(str(self.store.path) + suffix).stat().st_size
        return total

    def sweep_locks(self) -> None:
        locks.sweep(self.store.lock_folder)

    def compact(self) -> None:
        store = self.store
        with store.lock:
            try:
                # VACUUM rewrites the file without the freed pages (the journal does not
                # use auto_vacuum, so incremental vacuum is not available); in WAL mode the
                # new pages land in the -wal file, and the checkpoint moves them into the
                # database and truncates the WAL, so the file really shrinks.
                store.conn.execute("VACUUM")
                store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as exc:
                from ..sqlerrors import explain

                raise explain(exc, store.path) from None

    # -- helpers -------------------------------------------------------------------------

    def _reading(self, text: Any, run_id: str, key: str, field: str) -> Any:
        """Stored text as a reader shows it (``Decrypting.text``: decrypted with
        ``LETITLOOP_ENCRYPTION_KEY``, else a value as stored and a text as a note)."""
        return self._decrypting.text(text, run_id, key, field)

    def _readable_run(self, run: RunRow) -> RunRow:
        if not (encrypted(run.error) or encrypted(run.input_json)):
            return run
        return run._replace(
            error=self._reading(run.error, run.id, "", "run error"),
            input_json=self._input(run),
        )

    def _input(self, run: RunRow) -> Any:
        fp = self.store.query("SELECT input_fp FROM runs WHERE id = ?", (run.id,))
        return self._reading(run.input_json, (fp[0][0] if fp else None) or "", run.goal, "input")

    def _first(self, sql: str, params: tuple[Any, ...]) -> RunInfo | None:
        rows = self.store.query(sql, params)
        return self._infos(rows[:1])[0] if rows else None

    def _infos(self, rows: list[Any]) -> list[RunInfo]:
        """The runs of ``_RUNS``' rows, with their counts, rows in flight or paused, state."""
        runs = [self._readable_run(RunRow(*r)) for r in rows]
        by_table: dict[str, list[str]] = {}
        for run in runs:
            by_table.setdefault(run.journal_table, []).append(run.id)
        counts: dict[str, RunCounts] = {}
        open_rows: dict[str, list[OpenRow]] = {}
        for table, ids in by_table.items():
            counts.update(self._counts(table, ids))
            open_rows.update(self._open_rows(table, ids))
        return run_infos(runs, counts, open_rows, self.is_held)

    def _counts(self, table: str, run_ids: list[str]) -> dict[str, RunCounts]:
        out: dict[str, RunCounts] = {}
        for i in range(0, len(run_ids), _CHUNK):
            chunk = run_ids[i : i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            # The compact table (not the view): the latest finish as microseconds, made
            # text once per run rather than per row.
            for run, done, failed, markers, last, inp, outp, cost in self.store.query(
                "SELECT r.id, sum(t.kind = 'step' AND t.status = 'done'), "
                "sum(t.kind = 'step' AND t.status = 'failed'), sum(t.kind = 'marker'), "
                "max(CASE WHEN t.status = 'running' THEN NULL ELSE t.started + t.duration END), "
                "sum(t.input_tokens), sum(t.output_tokens), sum(t.cost) "
                f'FROM runs AS r JOIN "{rows_table(table)}" AS t ON t.run = r.num '
                f"WHERE r.id IN ({marks}) GROUP BY r.id",
                chunk,
            ):
                out[run] = RunCounts(
                    int(done or 0),
                    int(failed or 0),
                    int(markers or 0),
                    _iso_us(last),
                    inp,
                    outp,
                    cost,
                )
            for run, inp, outp, cost in self.store.query(
                f"SELECT run, sum(input_tokens), sum(output_tokens), sum(cost) FROM step_tries "
                f"WHERE run IN ({marks}) AND (input_tokens IS NOT NULL OR output_tokens IS NOT "
                f"NULL OR cost IS NOT NULL) GROUP BY run",
                chunk,
            ):
                c = out.get(run, RunCounts())
                out[run] = c._replace(
                    input_tokens=plus(c.input_tokens, inp),
                    output_tokens=plus(c.output_tokens, outp),
                    cost=plus(c.cost, cost),
                )
        return out

    def _open_rows(self, table: str, run_ids: list[str]) -> dict[str, list[OpenRow]]:
        """Per run: its ``running`` rows and its paused ones, in journal order."""
        out: dict[str, list[OpenRow]] = {}
        for i in range(0, len(run_ids), _CHUNK):
            chunk = run_ids[i : i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            for run, *row in self.store.query(
                f"SELECT run, key, kind, status, started_at, duration_ms, attempt, wake_at, "
                f'error FROM "{table}" WHERE run IN ({marks}) AND status IN '
                f"('running', 'sleeping', 'waiting', 'retrying') AND kind != 'marker' "
                f"ORDER BY rowid",
                chunk,
            ):
                out.setdefault(run, []).append(OpenRow(*row))
        return out

    def _dicts(self, sql: str, params: tuple[Any, ...]) -> list[dict[str, Any]]:
        store = self.store
        with store.lock:
            try:
                cur = store.conn.execute(sql, params)
                names = [d[0] for d in cur.description]
                return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
            except DRIVER_ERRORS as exc:
                raise JournalFileError(f"{store.path}: SQLite error: {exc}") from None


_EPOCH = datetime(1970, 1, 1)

#: The text of the last second :func:`_iso_us` formatted (rows of a run share their seconds).
_last_second: tuple[int, str] = (-1, "")


def _iso_us(us: Any) -> str | None:
    """Integer microseconds since the epoch as the text a goal's view shows
    (:func:`letitloop.goals.iso_sql`, what ``clock.utc_iso`` writes); None stays None."""
    global _last_second
    if us is None:
        return None
    if not isinstance(us, int) or us < 0:  # not what letitloop writes: as the view says it
        return _iso_sql_text(us)
    second, micro = divmod(us, 1_000_000)
    cached, text = _last_second  # read once: another thread may replace it meanwhile
    if cached != second:
        text = (_EPOCH + timedelta(seconds=second)).strftime("%Y-%m-%dT%H:%M:%S")
        _last_second = (second, text)
    return f"{text}.{micro:06d}+00:00"


def _iso_sql_text(us: Any) -> str | None:
    conn = sqlite3.connect(":memory:")
    try:
        return conn.execute(f"SELECT {iso_sql(':us')}", {"us": us}).fetchone()[0]  # type: ignore[no-any-return]
    finally:
        conn.close()


def _plus(a: Any, b: Any) -> Any:
    return None if a is None or b is None else a + b


def as_inspector(journal: Inspector | Store) -> Inspector:
    """``journal`` as an :class:`Inspector`: a :class:`Store` (what
    :func:`~letitloop.inspection.open_journal_file` returns) is read through a
    :class:`SqliteInspector` that does not own it; an inspector is itself."""
    return SqliteInspector(journal) if isinstance(journal, Store) else journal


def delete_runs(c: sqlite3.Connection, table: str, ids: list[str]) -> int:
    """Inside a write transaction: delete the runs ``ids`` of journal table ``table`` with
    their rows, tries, replays and attempts; the rows deleted."""
    deleted = 0
    for i in range(0, len(ids), _CHUNK):
        chunk = ids[i : i + _CHUNK]
        marks = ",".join("?" * len(chunk))
        deleted += delete_run_rows(c, table, chunk)
        c.execute(f"DELETE FROM step_tries WHERE run IN ({marks})", chunk)
        c.execute(f"DELETE FROM step_replays WHERE run IN ({marks})", chunk)
        c.execute(f"DELETE FROM attempts WHERE run IN ({marks})", chunk)
        if _has_table(c, "seals"):
            c.execute(
                f"DELETE FROM seals WHERE run IN (SELECT num FROM runs WHERE id IN ({marks}))",
                chunk,
            )
        c.execute(f"DELETE FROM runs WHERE id IN ({marks})", chunk)
    return deleted


def _has_table(db: Store | sqlite3.Connection, name: str) -> bool:
    sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
    if isinstance(db, Store):
        return bool(db.query(sql, (name,)))
    return db.execute(sql, (name,)).fetchone() is not None


def _copied(c: sqlite3.Connection, view: str, run_id: str, source: RunInfo) -> None:
    """Inside the fork's write transaction: the rows it copied into run ``run_id`` get their
    encrypted values bound to it (``_rebound``), their checksums (letitloop/checksums.py)
    and, with ``LETITLOOP_SEAL_KEY`` set, the new run's sealed chain
    (letitloop/sqlite_seals.py)."""
    table = rows_table(view)
    _rebound(c, view, run_id, source)
    sums = []
    for rowid, key, kind, status, fn, fp, result, error in c.execute(
        f'SELECT rowid, key, kind, status, fn, args_fp, result, error FROM "{view}" WHERE run = ?',
        (run_id,),
    ).fetchall():
        if kind == "step":
            sums.append((step_sum(run_id, key, status, fn, fp, result, error), rowid))
        elif kind == "marker":
            sums.append((marker_sum(run_id, key, status), rowid))
        elif kind in ("sleep", "wait"):
            sums.append((pause_sum(run_id, key, kind, result, error), rowid))
    c.executemany(f'UPDATE "{table}" SET checksum = ? WHERE rowid = ?', sums)
    secret = env_seal_key()
    if secret is not None and _has_table(c, "seals"):
        (num,) = c.execute("SELECT num FROM runs WHERE id = ?", (run_id,)).fetchone()
        adopt(c, table, num, run_id, secret, chained=False)


#: The fields of a row that may be stored encrypted, in the order the statements name them.
_ENCRYPTED_FIELDS = ("result", "error", "traceback")


def _rebound(c: sqlite3.Connection, view: str, run_id: str, source: RunInfo) -> None:
    """Inside the fork's write transaction: the encrypted values copied from run ``source``
    into run ``run_id`` decrypted and encrypted again for the new run (each is bound to its
    run: letitloop/encryption.py), with ``LETITLOOP_ENCRYPTION_KEY``. EncryptionKeyError
    without that key (or with another one): the fork is not made."""
    like = PREFIX + "%"
    rows = c.execute(
        f'SELECT rowid, key, result, error, traceback FROM "{view}" WHERE run = ? '
        f"AND (result LIKE ? OR error LIKE ? OR traceback LIKE ?)",
        (run_id, like, like, like),
    ).fetchall()
    if not rows:
        return
    cipher = env_cipher()
    if cipher is None:
        raise EncryptionKeyError(
            f"run {source.id} of goal {source.goal!r}: its values are encrypted, each bound "
            f"to its run, so a fork's copies must be encrypted again for the new run: "
            f"expected the key in LETITLOOP_ENCRYPTION_KEY; nothing was forked",
            run_id=source.id,
        )
    for rowid, key, *values in rows:
        again = [
            cipher.seal(cipher.open(v, source.id, key, f), run_id, key, f) if encrypted(v) else v
            for v, f in zip(values, _ENCRYPTED_FIELDS, strict=True)
        ]
        c.execute(
            f'UPDATE "{rows_table(view)}" SET result = ?, error = ?, traceback = ? WHERE rowid = ?',
            (*again, rowid),
        )


def _glob_prefix(text: str) -> str:
    """A GLOB pattern for what starts with ``text`` (its ``*?[`` matched as themselves)."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text) + "*"


def _like(text: str) -> str:
    """A LIKE pattern for what starts with ``text`` (``\\`` escapes)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _empty_goals(conn: sqlite3.Connection, store: Store, going: set[str]) -> list[str]:
    """Goals that have no run but those in ``going`` and no row of another run (in order).

    A goal's table may hold rows of no run: goal-scoped markers (run ``*``),
    which guard side effects across runs; such a goal is never empty.
    """
    with store.lock:
        try:
            goals = conn.execute("SELECT goal, journal_table FROM goals ORDER BY goal").fetchall()
            empty = []
            for goal, table in goals:
                runs = {r for (r,) in conn.execute("SELECT id FROM runs WHERE goal = ?", (goal,))}
                if runs - going:
                    continue
                marks = ",".join("?" * len(runs))
                other = conn.execute(
                    f'SELECT 1 FROM "{table}" WHERE run NOT IN ({marks}) LIMIT 1', sorted(runs)
                ).fetchone()
                if other is None:
                    empty.append(str(goal))
            return empty
        except sqlite3.Error as exc:
            raise store.explain(exc) from None


def _conditions(where: RunFilter) -> tuple[list[str], list[Any]]:
    """``where`` as SQL conditions on ``runs r`` and their parameters."""
    conditions: list[str] = []
    params: list[Any] = []
    if where.goal is not None:
        conditions.append("r.goal = ?")
        params.append(where.goal)
    if where.statuses is not None:
        conditions.append(f"r.status IN ({','.join('?' * len(where.statuses))})")
        params.extend(where.statuses)
    if where.since is not None:
        conditions.append("r.started_at >= ?")
        params.append(where.since)
    if where.until is not None:
        conditions.append("r.started_at < ?")
        params.append(where.until)
    if where.name is not None:
        conditions.append("r.name GLOB ?")
        params.append(where.name)
    if where.version is not None:
        conditions.append(
            "(SELECT a.version FROM attempts a WHERE a.run = r.id AND a.attempt = r.attempts) "
            "GLOB ?"
        )
        params.append(_glob_prefix(where.version))
    for parts, value in where.inputs:
        cond, cond_params = _input_condition(parts, value)
        conditions.append(cond)
        params.extend(cond_params)
    return conditions, params


def _input_condition(parts: tuple[str, ...], value: str) -> tuple[str, list[Any]]:
    """SQL matching runs whose recorded input has ``value`` at ``parts`` (see
    :attr:`RunFilter.inputs`)."""
    try:
        wanted: Any = json.loads(value)
    except ValueError:
        wanted = value
    if not parts:  # the caller checks the key; an empty path would name the whole input
        raise LetItLoopError("an input condition needs a key")
    quoted = "".join('."' + p.replace('"', '""') + '"' for p in parts)
    if isinstance(wanted, (dict, list)):
        same, bound = "= json(?)", json.dumps(wanted)
    else:
        same, bound = "= ?", wanted
    arms, params = [], []
    for path in ("$" + quoted, '$."!dict"' + quoted):
        arms.append(
            f"json_extract(r.input, ?) {same} OR (json_type(r.input, ?) = 'object' AND EXISTS "
            f"(SELECT 1 FROM json_each(r.input, ?) WHERE key LIKE '!%' AND value {same}))"
        )
        params += [path, bound, path, path, bound]
    return f"(CASE WHEN json_valid(r.input) THEN ({' OR '.join(arms)}) ELSE 0 END)", params
