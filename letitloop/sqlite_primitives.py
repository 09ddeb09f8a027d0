"""The SQL of the run's primitives on a SQLite journal file: sleeps, waits, tries, usage.

``SqlitePrimitives`` is the base of ``SqliteStorage`` (``sqlite_storage.py``):
the part of the ``Storage`` protocol that ``sleeps.py``, ``waits.py``,
``retry.py``, ``cancellation.py`` and ``inflight.py`` use, over the markers'
part (``SqliteMarkers``, ``sqlite_markers.py``) that ``markers.py`` uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from .checksums import pause_sum
from .clock import iso_us, utc_iso
from .goals import iso_sql
from .sqlite_markers import SqliteMarkers
from .sqlite_reads import LEFT_USAGE_ROWS
from .storage import RowHandle

#: The row of a sleep or a wait that starts, over the key's earlier row. ``{table}``
#: is the goal's compact table: ``run`` its run's key, times integer microseconds.
_START_PAUSE = (
    'INSERT INTO "{table}" (run, key, kind, status, fn, result, started, duration, '
    "attempt, error, traceback, args_fp, wake_at) "
    "VALUES (?, ?, ?, ?, ?, NULL, ?, NULL, ?, NULL, NULL, '', ?) "
    "ON CONFLICT (run, key) DO UPDATE SET kind = excluded.kind, status = excluded.status, "
    "fn = excluded.fn, result = NULL, started = excluded.started, duration = NULL, "
    "attempt = excluded.attempt, error = NULL, traceback = NULL, "
    "args_fp = '', wake_at = excluded.wake_at, checksum = NULL"
)

#: Insert the ``running`` row, or refresh it. Never over a finished row: a row
#: is overwritten only if it is ``running`` already, or if it was written by an
#: earlier attempt or an earlier call of the key (a ``failed`` row a retry now
#: runs again). The step's own final row has the same attempt and start time,
#: so a ``running`` row that comes after it changes nothing.
RUNNING_UPSERT = (
    'INSERT INTO "{table}" AS t (run, key, kind, status, fn, result, started, duration, '
    "attempt, error, traceback, args_fp) "
    "VALUES (?, ?, 'step', 'running', ?, NULL, ?, ?, ?, NULL, NULL, ?) "
    "ON CONFLICT (run, key) DO UPDATE SET status = 'running', fn = excluded.fn, result = NULL, "
    "started = excluded.started, duration = excluded.duration, "
    "attempt = excluded.attempt, error = NULL, traceback = NULL, args_fp = excluded.args_fp, "
    "checksum = NULL WHERE t.status = 'running' "
    "OR (t.status != 'done' AND (t.attempt < excluded.attempt OR t.started < excluded.started))"
)

#: A step's failed try (see retry.py).
_INSERT_TRY = (
    "INSERT OR REPLACE INTO step_tries (run, key, try, attempt, started_at, failed_at, error, "
    "next_at, input_tokens, output_tokens, cost, model, traceback) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

#: The step's row between two tries: ``retrying``, the try's error, ``wake_at`` the next try.
#: No usage: the failed try's usage is on its ``step_tries`` row, written with this one
#: (it may have been on the ``running`` row this replaces, see ``_USAGE_SO_FAR``).
_RETRYING_ROW = (
    'INSERT INTO "{table}" (run, key, kind, status, fn, result, started, duration, '
    "attempt, error, traceback, args_fp, wake_at) "
    "VALUES (?, ?, 'step', 'retrying', ?, NULL, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (run, key) DO UPDATE SET kind = 'step', status = 'retrying', fn = excluded.fn, "
    "result = NULL, started = excluded.started, "
    "duration = excluded.duration, attempt = excluded.attempt, error = excluded.error, "
    "traceback = excluded.traceback, args_fp = excluded.args_fp, wake_at = excluded.wake_at, "
    "input_tokens = NULL, output_tokens = NULL, cost = NULL, model = NULL, checksum = NULL"
)

#: What a call in flight reported with ``usage()`` so far, on its step's ``running``
#: row: written at each report, so a SIGKILL after a paid call loses none of it
#: (the next attempt keeps it as a ``crashed`` try, see ``KEEP_LEFT_USAGE``). The
#: call's own ``done`` or ``failed`` row replaces it with the call's whole usage.
_USAGE_SO_FAR = (
    'INSERT INTO "{table}" AS t (run, key, kind, status, fn, started, attempt, args_fp, '
    "input_tokens, output_tokens, cost, model) "
    "VALUES (?, ?, 'step', 'running', ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (run, key) DO UPDATE SET status = 'running', fn = excluded.fn, result = NULL, "
    "started = excluded.started, duration = NULL, "
    "attempt = excluded.attempt, error = NULL, traceback = NULL, args_fp = excluded.args_fp, "
    "wake_at = NULL, input_tokens = excluded.input_tokens, "
    "output_tokens = excluded.output_tokens, cost = excluded.cost, model = excluded.model, "
    "checksum = NULL WHERE t.status != 'done'"
)

#: Rows of an earlier attempt that carry usage a new call of their key would
#: overwrite (sqlite_reads.LEFT_USAGE_ROWS), of the run. Parameters, numbered: ?1 the
#: run id, ?2 the time now (ISO text), ?3 the run's key,
#: and ?4, ?5 the range of keys of ``_UNDER``.
_LEFT_USAGE = "run = ?3 AND " + LEFT_USAGE_ROWS

#: The same rows among a parent step's children (keys in a range), before the
#: parent's next try calls them again in this attempt (retry.reopen_children).
_UNDER = " AND key >= ?4 AND key < ?5"

#: When a new attempt claims a run, the usage of those rows moves to ``step_tries``
#: (a try numbered after the key's last; ``ended`` says how it ended), and leaves
#: their row: each paid call stays counted once, whatever the next call writes.
#: A ``failed`` row's end is its start plus its duration; a ``running`` row has none.
KEEP_LEFT_USAGE = (
    "INSERT INTO step_tries (run, key, try, attempt, started_at, failed_at, error, next_at, "
    "input_tokens, output_tokens, cost, model, ended, traceback) "
    "SELECT ?1, t.key, coalesce((SELECT max(s.try) FROM step_tries s WHERE s.run = ?1 "
    f"AND s.key = t.key), 0) + 1, t.attempt, coalesce({iso_sql('t.started')}, ?2), "
    "coalesce(CASE t.status WHEN 'running' THEN NULL ELSE "
    f"{iso_sql('t.started + t.duration')} END, ?2), "
    "coalesce(t.error, 'Interrupted: attempt ' || t.attempt || "
    "' ended during this call (its process died, or the call was cancelled)'), NULL, "
    "t.input_tokens, t.output_tokens, t.cost, t.model, "
    "CASE t.status WHEN 'running' THEN 'crashed' ELSE 'failed' END, t.traceback "
    'FROM "{table}" AS t WHERE ' + _LEFT_USAGE.replace("run = ", "t.run = ")
)
#: ... and their rows keep no usage.
CLEAR_LEFT_USAGE = (
    'UPDATE "{table}" SET input_tokens = NULL, output_tokens = NULL, cost = NULL, model = NULL '
    "WHERE " + _LEFT_USAGE
)


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


#: A run's end by its holder, by outcome (``SqliteStorage._end``; named parameters).
_ENDS = {
    "completed": "UPDATE runs SET status = 'completed', finished_at = :at, updated_at = :at, "
    "result = :text, error = NULL WHERE id = :id",
    "failed": "UPDATE runs SET status = 'failed', updated_at = :at, error = :text WHERE id = :id",
    "cancelled": "UPDATE runs SET status = 'cancelled', finished_at = :at, updated_at = :at, "
    "error = :text WHERE id = :id",
    "waiting": "UPDATE runs SET status = 'waiting', updated_at = :at WHERE id = :id",
}
#: ... and how its latest attempt ended, in the same transaction.
_END_ATTEMPT = (
    "UPDATE attempts SET ended_at = :at, outcome = :outcome, error = :error WHERE run = :id "
    "AND attempt = (SELECT attempts FROM runs WHERE id = :id)"
)


class SqlitePrimitives(SqliteMarkers):
    """Markers (``SqliteMarkers``), sleeps, waits and step tries in the journal file."""

    def write_running(self, rows: Sequence[Sequence[Any]]) -> None:
        compact = [
            (
                self.key_of_run(run),
                key,
                self.function_key(fn),
                iso_us(started),
                None if ran_ms is None else round(ran_ms * 1000.0),
                attempt,
                fp,
            )
            for run, key, fn, started, ran_ms, attempt, fp in rows
        ]
        self.store.write_many(RUNNING_UPSERT.format(table=self.rows), compact)

    # -- a cancel request, sleeps and waits, step tries -------------------------

    def cancel_request(self, run_id: str) -> tuple[str | None, str | None] | None:
        rows = self.store.query(
            "SELECT cancel_requested_at, cancel_reason FROM runs WHERE id = ?", (run_id,)
        )
        return (rows[0][0], rows[0][1]) if rows else None

    def pause(self, run_id: str, key: str) -> tuple[str, str, str | None, str | None] | None:
        rows = self.store.query(
            f'SELECT kind, status, {iso_sql("started")}, wake_at FROM "{self.rows}" '
            f"WHERE run = ? AND key = ?",
            (self.key_of_run(run_id), key),
        )
        return (rows[0][0], rows[0][1], rows[0][2], rows[0][3]) if rows else None

    def start_pause(self, row: Sequence[Any]) -> None:
        run, key, kind, status, fn, started, attempt, wake_at = row
        self.store.write1(
            _START_PAUSE.format(table=self.rows),
            (
                self.key_of_run(run),
                key,
                kind,
                status,
                None if fn is None else self.function_key(fn),
                iso_us(started),
                attempt,
                wake_at,
            ),
        )

    def finish_sleep(
        self, run_id: str, key: str, finished_at: str, duration_ms: float, attempt: int
    ) -> None:
        self.store.write1(
            f"UPDATE \"{self.rows}\" SET status = 'done', duration = ? - started, "
            f"attempt = ?, checksum = ? WHERE run = ? AND key = ?",
            (
                iso_us(finished_at),
                attempt,
                pause_sum(run_id, key, "sleep", None, None),
                self.key_of_run(run_id),
                key,
            ),
        )

    def wait_ending(self, run_id: str, key: str) -> tuple[str, str | None, str | None] | None:
        rows = self.store.query(
            f'SELECT status, result, error FROM "{self.rows}" WHERE run = ? AND key = ?',
            (self.key_of_run(run_id), key),
        )
        return (rows[0][0], rows[0][1], rows[0][2]) if rows else None

    def time_out_wait(
        self, run_id: str, key: str, error: str, finished_at: str, duration_ms: float
    ) -> None:
        with self.store.write() as c:
            c.execute(
                f"UPDATE \"{self.rows}\" SET status = 'done', error = ?, checksum = ?, "
                f"duration = ? - started WHERE run = ? AND key = ? AND status = 'waiting'",
                (
                    error,
                    pause_sum(run_id, key, "wait", None, error),
                    iso_us(finished_at),
                    self.key_of_run(run_id),
                    key,
                ),
            )

    def recorded_wait(self, handle: RowHandle) -> tuple[str | None, str | None] | None:
        rows = self.store.query(
            f'SELECT result, error FROM "{self.rows}" WHERE rowid = ?', (handle,)
        )
        return (rows[0][0], rows[0][1]) if rows else None

    # -- the run's end, by its holder ---------------------------------------------

    def complete_run(self, run_id: str, now: float, result: str | None) -> None:
        self._end(run_id, now, "completed", result)

    def fail_run(self, run_id: str, now: float, error: str) -> None:
        self._end(run_id, now, "failed", error)

    def cancel_run(self, run_id: str, now: float, error: str) -> None:
        self._end(run_id, now, "cancelled", error)

    def leave_waiting(self, run_id: str, now: float) -> None:
        self._end(run_id, now, "waiting", None)

    def _end(self, run_id: str, now: float, outcome: str, text: str | None) -> None:
        """The run's end (``text``: its result, or its error) and its latest attempt's, in
        one transaction: the attempt keeps how it ended (migration 0019) whatever a later
        attempt writes on the run."""
        error = text if outcome in ("failed", "cancelled") else None
        values = {
            "id": run_id,
            "at": utc_iso(now),
            "text": text,
            "outcome": outcome,
            "error": error,
        }
        with self.store.write() as c:
            c.execute(_ENDS[outcome], values)
            c.execute(_END_ATTEMPT, values)

    def step_tries(self, run_id: str) -> list[tuple[str, int, str | None, str]]:
        return self.store.query(
            "SELECT key, try, next_at, ended FROM step_tries WHERE run = ? ORDER BY key, try",
            (run_id,),
        )

    def record_try(self, try_row: Sequence[Any], retrying_row: Sequence[Any] | None) -> None:
        retrying = None
        if retrying_row is not None:  # its keys first: each may be a write of its own
            run, key, fn, started, finished, _, attempt, error, tb, fp, wake = retrying_row
            begun = iso_us(started)
            retrying = (
                self.key_of_run(run),
                key,
                self.function_key(fn),
                begun,
                iso_us(finished) - begun,
                attempt,
                error,
                tb,
                fp,
                wake,
            )
        with self.store.write() as c:
            c.execute(_INSERT_TRY, try_row)
            if retrying is not None:
                c.execute(_RETRYING_ROW.format(table=self.rows), retrying)

    # -- what the run consumed and replayed -------------------------------------

    def record_usage(self, row: Sequence[Any]) -> None:
        run, key, fn, started, *rest = row
        self.store.write1(
            _USAGE_SO_FAR.format(table=self.rows),
            (self.key_of_run(run), key, self.function_key(fn), iso_us(started), *rest),
        )

    def keep_left_usage(self, run_id: str, now: float, prefix: str) -> None:
        stamp = utc_iso(now)
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        under = _UNDER.replace("key", "t.key")
        args = (run_id, stamp, self.key_of_run(run_id), prefix, end)
        with self.store.write() as c:
            c.execute(KEEP_LEFT_USAGE.format(table=self.rows) + under, args)
            c.execute(CLEAR_LEFT_USAGE.format(table=self.rows) + _UNDER, args)

    def run_spend(self, run_id: str) -> list[tuple[str, int | None, int | None, float | None]]:
        return self.store.query(
            "SELECT key, sum(input_tokens), sum(output_tokens), sum(cost) FROM ("
            f'SELECT key, input_tokens, output_tokens, cost FROM "{self.rows}" WHERE run = ? '
            "UNION ALL SELECT key, input_tokens, output_tokens, cost FROM step_tries "
            "WHERE run = ?) WHERE input_tokens IS NOT NULL OR output_tokens IS NOT NULL "
            "OR cost IS NOT NULL GROUP BY key",
            (self.key_of_run(run_id), run_id),
        )

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
                c.execute(_USAGE_SO_FAR.format(table=self.rows), usage)
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

    def record_replays(self, run_id: str, attempt: int, keys: Sequence[str]) -> None:
        # One row per batch (its keys as a JSON list): a resume that replays
        # thousands of steps writes one small row, not thousands.
        self.store.write1(
            "INSERT INTO step_replays (run, attempt, keys) VALUES (?, ?, ?)",
            (run_id, attempt, msgspec.json.encode(list(keys)).decode()),
        )
