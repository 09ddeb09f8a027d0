"""``SqliteRuns``: a journal file's goals and runs, found and told (the base of
:class:`~letitloop.inspection.sqlite_inspector.SqliteInspector`).

Which goals and runs there are (by id, name, prefix, filter, input), each as
a :class:`RunInfo` whose state ``state.run_infos`` tells from the run's row,
its counts and its rows in flight or paused; runs' locks (the lock files
beside the journal, :mod:`letitloop.stores.sqlite.locks`); and the times of the compact
tables as text (:func:`iso_us`).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ..errors import JournalFileError
from ..integrity.encryption import encrypted
from ..stores.sqlite import locks
from ..stores.sqlite.goals import iso_sql, rows_table
from ..stores.sqlite.holding import run_lock_path
from ..stores.sqlite.runs import resumable_run_id
from ..stores.sqlite.sqlerrors import DRIVER_ERRORS
from ..stores.sqlite.store import Store
from .decrypting import Decrypting
from .inspector_runs import RunFilter
from .records import RunInfo, RunRef
from .sqlite_changes import CHUNK
from .sqlite_filters import like_prefix, run_conditions
from .state import OpenRow, RunCounts, RunRow, plus, run_infos

RUN_COLUMNS = (
    "r.id, r.goal, r.name, r.status, r.attempts, r.started_at, r.updated_at, r.finished_at, "
    "r.error, r.holder_pid, r.holder_host, g.journal_table, r.input, r.forked_from, r.forked_at, "
    "r.cancel_requested_at, r.cancel_reason, (SELECT a.version FROM attempts a "
    "WHERE a.run = r.id AND a.attempt = r.attempts)"
)

#: Runs with their goal's journal table, in the order of :class:`RunRow`.
RUNS = f"SELECT {RUN_COLUMNS} FROM runs r JOIN goals g ON g.goal = r.goal"

_EPOCH = datetime(1970, 1, 1)

#: The text of the last second :func:`iso_us` formatted (rows of a run share their seconds).
_last_second: tuple[int, str] = (-1, "")


def iso_us(us: Any) -> str | None:
    """Integer microseconds since the epoch as the text a goal's view shows
    (:func:`letitloop.stores.sqlite.goals.iso_sql`, what ``clock.utc_iso`` writes); None
    stays None."""
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


class SqliteRuns:
    """A journal file's goals and runs, on a :class:`Store` it owns (closed by :meth:`close`)."""

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
        params = (like_prefix(prefix),) if prefix else ()
        bound = f" LIMIT {int(limit)}" if limit is not None else ""
        return [
            r[0]
            for r in self.store.query(f"SELECT goal FROM goals{where} ORDER BY goal{bound}", params)
        ]

    def has_run(self, run_id: str) -> bool:
        return bool(self.store.query("SELECT 1 FROM runs WHERE id = ?", (run_id,)))

    def runs(self, where: RunFilter, *, limit: int | None, offset: int = 0) -> list[RunInfo]:
        conditions, params = run_conditions(where)
        sql = RUNS
        if conditions:
            sql += " WHERE " + " AND ".join(conditions)
        sql += " ORDER BY r.rowid DESC"  # newest made first (ids of one millisecond: any order)
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        if offset:
            sql += f"{'' if limit is not None else ' LIMIT -1'} OFFSET {int(offset)}"
        return self._infos(self.store.query(sql, params))

    def run(self, run_id: str) -> RunInfo | None:
        return self._first(RUNS + " WHERE r.id = ?", (run_id,))

    def run_of_goal(self, goal: str, ref: str) -> RunInfo | None:
        return self._first(
            RUNS + " WHERE r.goal = ? AND (r.id = ? OR r.name = ?)", (goal, ref, ref)
        )

    def newest_run(self, goal: str) -> RunInfo | None:
        return self._first(RUNS + " WHERE r.goal = ? ORDER BY r.rowid DESC LIMIT 1", (goal,))

    def runs_named(self, name: str) -> list[RunInfo]:
        return self._infos(self.store.query(RUNS + " WHERE r.name = ? ORDER BY r.id DESC", (name,)))

    def runs_with_prefix(self, prefix: str, goal: str | None, limit: int) -> list[RunInfo]:
        # A range on the primary key, which the index answers directly (a LIKE is
        # case-insensitive, so SQLite scans the whole table for it).
        low = prefix.upper()
        high = low[:-1] + chr(ord(low[-1]) + 1)
        where, params = ("r.goal = ? AND ", (goal,)) if goal is not None else ("", ())
        rows = self.store.query(
            RUNS
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
                RUNS + " WHERE r.goal = ? AND r.name IS NULL AND r.input_fp IS NOT NULL AND "
                "r.status IN ('running', 'failed', 'waiting') AND r.cancel_requested_at IS NULL "
                f"ORDER BY r.rowid DESC LIMIT {int(limit)}",
                (goal,),
            )
        )

    def runs_updated_before(self, at: str) -> list[RunInfo]:
        return self._infos(self.store.query(RUNS + " WHERE r.updated_at < ? ORDER BY r.id", (at,)))

    def run_refs(self, prefix: str, limit: int) -> list[RunRef]:
        return [
            RunRef(*r)
            for r in self.store.query(
                "SELECT id, goal, name, status FROM runs WHERE id LIKE ? ESCAPE '\\' OR name "
                f"LIKE ? ESCAPE '\\' ORDER BY rowid DESC LIMIT {int(limit)}",
                (like_prefix(prefix.upper()), like_prefix(prefix)),
            )
        ]

    def step_keys(self, ref: str, prefix: str) -> list[str]:
        runs = self.store.query(
            "SELECT r.id, g.journal_table FROM runs r JOIN goals g ON g.goal = r.goal "
            "WHERE r.id = ? OR r.goal = ? OR r.name = ? OR r.id LIKE ? ESCAPE '\\' "
            "ORDER BY r.id = ? DESC, r.id DESC LIMIT 1",
            (ref, ref, ref, like_prefix(ref.upper()), ref),
        )
        if not runs:
            return []
        run_id, table = runs[0]
        return [
            k
            for (k,) in self.store.query(
                f"SELECT key FROM \"{table}\" WHERE run = ? AND key LIKE ? ESCAPE '\\' "
                "ORDER BY rowid",
                (run_id, like_prefix(prefix)),
            )
        ]

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
        """The runs of ``RUNS``' rows, with their counts, rows in flight or paused, state."""
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
        for i in range(0, len(run_ids), CHUNK):
            chunk = run_ids[i : i + CHUNK]
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
                    iso_us(last),
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
        for i in range(0, len(run_ids), CHUNK):
            chunk = run_ids[i : i + CHUNK]
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
