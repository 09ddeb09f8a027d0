"""``SqliteCallRows``: a step's calls in flight and their tries in a SQLite journal file.

The ``running`` row a call shows while it runs (``inflight.py``) and the usage
it reports on it (``durable.usage``), a failed try in ``step_tries`` and the
step's ``retrying`` row between two tries (``retry.py``), and the usage a dead
or failed call left on its row, kept as a try before the key is called again
(``KEEP_LEFT_USAGE``: a new attempt's claim does it for the whole run,
``sqlite_runs.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...primitives.clock import iso_us, utc_iso
from .goals import iso_sql
from .keys import SqliteKeys
from .reads import LEFT_USAGE_ROWS

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
#: (it may have been on the ``running`` row this replaces, see ``USAGE_SO_FAR``).
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
USAGE_SO_FAR = (
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


class SqliteCallRows(SqliteKeys):
    """Calls in flight (their ``running`` rows, the usage they report), and their tries."""

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

    def record_usage(self, row: Sequence[Any]) -> None:
        run, key, fn, started, *rest = row
        self.store.write1(
            USAGE_SO_FAR.format(table=self.rows),
            (self.key_of_run(run), key, self.function_key(fn), iso_us(started), *rest),
        )

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

    def keep_left_usage(self, run_id: str, now: float, prefix: str) -> None:
        stamp = utc_iso(now)
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        under = _UNDER.replace("key", "t.key")
        args = (run_id, stamp, self.key_of_run(run_id), prefix, end)
        with self.store.write() as c:
            c.execute(KEEP_LEFT_USAGE.format(table=self.rows) + under, args)
            c.execute(CLEAR_LEFT_USAGE.format(table=self.rows) + _UNDER, args)
