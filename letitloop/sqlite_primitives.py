"""The SQL of the run's primitives on a SQLite journal file: markers, sleeps, waits, tries.

``SqlitePrimitives`` is the base of ``SqliteStorage`` (``sqlite_storage.py``):
the part of the ``Storage`` protocol that ``markers.py``, ``sleeps.py``,
``waits.py``, ``retry.py``, ``cancellation.py`` and ``inflight.py`` use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import msgspec

from .clock import utc_iso
from .errors import LetItLoopError
from .storage import MarkerAt, MarkerClaim, MarkerRecord
from .store import Store

#: The table of global markers (see migrations/0003_markers.sql); run- and
#: goal-scoped markers are rows of the goal's journal table.
GLOBAL_TABLE = "markers"


class _Place(NamedTuple):
    """Where a marker's row lives and how to address it."""

    table: str
    #: SQL that selects the row, and its parameters.
    where: str
    ids: tuple[str, ...]
    #: Columns (and values) that an INSERT adds besides the common ones.
    insert_cols: tuple[tuple[str, str], ...]
    #: The row's kind column (the global table holds markers only).
    kind_sql: str

    def select(self) -> str:
        return (
            f"SELECT {self.kind_sql}, status, claims, crashes, holder_pid, holder_host, "
            f'holder_run, started_at, holder_token FROM "{self.table}" WHERE {self.where}'
        )


#: The row of a sleep or a wait that starts, over the key's earlier row.
_START_PAUSE = (
    'INSERT INTO "{table}" (run, key, kind, status, fn, result, started_at, finished_at, '
    "duration_ms, attempt, error, traceback, args_fp, wake_at) "
    "VALUES (?, ?, ?, ?, ?, NULL, ?, NULL, NULL, ?, NULL, NULL, '', ?) "
    "ON CONFLICT (run, key) DO UPDATE SET kind = excluded.kind, status = excluded.status, "
    "fn = excluded.fn, result = NULL, started_at = excluded.started_at, finished_at = NULL, "
    "duration_ms = NULL, attempt = excluded.attempt, error = NULL, traceback = NULL, "
    "args_fp = '', wake_at = excluded.wake_at"
)

#: Insert the ``running`` row, or refresh it. Never over a finished row: a row
#: is overwritten only if it is ``running`` already, or if it was written by an
#: earlier attempt or an earlier call of the key (a ``failed`` row a retry now
#: runs again). The step's own final row has the same attempt and start time,
#: so a ``running`` row that comes after it changes nothing.
RUNNING_UPSERT = (
    'INSERT INTO "{table}" AS t (run, key, kind, status, fn, result, started_at, finished_at, '
    "duration_ms, attempt, error, traceback, args_fp) "
    "VALUES (?, ?, 'step', 'running', ?, NULL, ?, NULL, ?, ?, NULL, NULL, ?) "
    "ON CONFLICT (run, key) DO UPDATE SET status = 'running', fn = excluded.fn, result = NULL, "
    "started_at = excluded.started_at, finished_at = NULL, duration_ms = excluded.duration_ms, "
    "attempt = excluded.attempt, error = NULL, traceback = NULL, args_fp = excluded.args_fp "
    "WHERE t.status = 'running' OR (t.status != 'done' AND (t.attempt < excluded.attempt "
    "OR t.started_at < excluded.started_at))"
)

#: A step's failed try (see retry.py).
_INSERT_TRY = (
    "INSERT OR REPLACE INTO step_tries (run, key, try, attempt, started_at, failed_at, error, "
    "next_at, input_tokens, output_tokens, cost, model) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

#: The step's row between two tries: ``retrying``, the try's error, ``wake_at`` the next try.
#: No usage: the failed try's usage is on its ``step_tries`` row, written with this one
#: (it may have been on the ``running`` row this replaces, see ``_USAGE_SO_FAR``).
_RETRYING_ROW = (
    'INSERT INTO "{table}" (run, key, kind, status, fn, result, started_at, finished_at, '
    "duration_ms, attempt, error, traceback, args_fp, wake_at) "
    "VALUES (?, ?, 'step', 'retrying', ?, NULL, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (run, key) DO UPDATE SET kind = 'step', status = 'retrying', fn = excluded.fn, "
    "result = NULL, started_at = excluded.started_at, finished_at = excluded.finished_at, "
    "duration_ms = excluded.duration_ms, attempt = excluded.attempt, error = excluded.error, "
    "traceback = excluded.traceback, args_fp = excluded.args_fp, wake_at = excluded.wake_at, "
    "input_tokens = NULL, output_tokens = NULL, cost = NULL, model = NULL"
)

#: What a call in flight reported with ``usage()`` so far, on its step's ``running``
#: row: written at each report, so a SIGKILL after a paid call loses none of it
#: (the next attempt keeps it as a ``crashed`` try, see ``KEEP_LEFT_USAGE``). The
#: call's own ``done`` or ``failed`` row replaces it with the call's whole usage.
_USAGE_SO_FAR = (
    'INSERT INTO "{table}" AS t (run, key, kind, status, fn, started_at, attempt, args_fp, '
    "input_tokens, output_tokens, cost, model) "
    "VALUES (?, ?, 'step', 'running', ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (run, key) DO UPDATE SET status = 'running', fn = excluded.fn, result = NULL, "
    "started_at = excluded.started_at, finished_at = NULL, duration_ms = NULL, "
    "attempt = excluded.attempt, error = NULL, traceback = NULL, args_fp = excluded.args_fp, "
    "wake_at = NULL, input_tokens = excluded.input_tokens, "
    "output_tokens = excluded.output_tokens, cost = excluded.cost, model = excluded.model "
    "WHERE t.status != 'done'"
)

#: Rows of an earlier attempt that carry usage a new call of their key would
#: overwrite: a ``running`` row (its process died during the call, after the call
#: reported usage) and a ``failed`` row (the call raised, without a retry policy).
_LEFT_USAGE = (
    "run = ? AND status IN ('running', 'failed') AND (input_tokens IS NOT NULL "
    "OR output_tokens IS NOT NULL OR cost IS NOT NULL)"
)

#: The same rows among a parent step's children (keys in a range), before the
#: parent's next try calls them again in this attempt (retry.reopen_children).
_UNDER = " AND key >= ? AND key < ?"

#: When a new attempt claims a run, the usage of those rows moves to ``step_tries``
#: (a try numbered after the key's last; ``ended`` says how it ended), and leaves
#: their row: each paid call stays counted once, whatever the next call writes.
KEEP_LEFT_USAGE = (
    "INSERT INTO step_tries (run, key, try, attempt, started_at, failed_at, error, next_at, "
    "input_tokens, output_tokens, cost, model, ended) "
    "SELECT t.run, t.key, coalesce((SELECT max(s.try) FROM step_tries s WHERE s.run = t.run "
    "AND s.key = t.key), 0) + 1, t.attempt, coalesce(t.started_at, ?), "
    "coalesce(t.finished_at, ?), coalesce(t.error, 'Interrupted: attempt ' || t.attempt || "
    "' ended during this call (its process died, or the call was cancelled)'), NULL, "
    "t.input_tokens, t.output_tokens, t.cost, t.model, "
    "CASE t.status WHEN 'running' THEN 'crashed' ELSE 'failed' END "
    'FROM "{table}" AS t WHERE ' + _LEFT_USAGE.replace("run = ?", "t.run = ?")
)
#: ... and their rows keep no usage.
CLEAR_LEFT_USAGE = (
    'UPDATE "{table}" SET input_tokens = NULL, output_tokens = NULL, cost = NULL, model = NULL '
    "WHERE " + _LEFT_USAGE
)


class SqlitePrimitives:
    """Markers, sleeps, waits and step tries in the journal file."""

    store: Store
    #: The goal's journal table.
    table: str

    # -- markers -------------------------------------------------------------------

    def _place(self, at: MarkerAt) -> _Place:
        if at.scope == "global":
            return _Place(
                GLOBAL_TABLE, "key = ?", (at.name,), (("holder_goal", at.goal),), "'marker'"
            )
        return _Place(
            self.table, "run = ? AND key = ?", (at.run, at.name), (("kind", "marker"),), "kind"
        )

    def marker(self, at: MarkerAt) -> MarkerRecord | None:
        p = self._place(at)
        rows = self.store.query(p.select(), p.ids)
        return MarkerRecord(*rows[0]) if rows else None

    def claim_marker(
        self, at: MarkerAt, holder: tuple[int, str, str, str], now: float, attempt: int
    ) -> MarkerClaim:
        p = self._place(at)
        with self.store.write() as c:
            row = c.execute(p.select(), p.ids).fetchone()
            if row is None:
                cols = [col for col, _ in p.insert_cols]
                vals = [val for _, val in p.insert_cols]
                id_cols = ["key"] if p.table == GLOBAL_TABLE else ["run", "key"]
                names = [
                    *id_cols,
                    *cols,
                    "status",
                    "started_at",
                    "attempt",
                    "claims",
                    "crashes",
                    "holder_pid",
                    "holder_host",
                    "holder_run",
                    "holder_token",
                ]
                values = [*p.ids, *vals, "pending", utc_iso(now), attempt, 1, 0, *holder]
                c.execute(
                    f'INSERT INTO "{p.table}" ({", ".join(names)}) '
                    f"VALUES ({', '.join('?' * len(values))})",
                    values,
                )
                return MarkerClaim("marker", True, 1, 0)
            kind, status, claims, crashes = row[:4]
            old_token = row[8]
            claims, crashes = claims or 0, crashes or 0
            if kind != "marker" or status == "done":
                return MarkerClaim(kind, False, claims, crashes)
            # 'pending' under both locks: its holder died inside the block
            # (a live holder keeps the lock file). 'failed': the block raised.
            if status == "pending":
                crashes += 1
            claims += 1
            extra = "".join(f", {col} = ?" for col, _ in p.insert_cols if col != "kind")
            extra_vals = [val for col, val in p.insert_cols if col != "kind"]
            cur = c.execute(
                f"UPDATE \"{p.table}\" SET status = 'pending', started_at = ?, "
                f"finished_at = NULL, duration_ms = NULL, attempt = ?, claims = ?, "
                f"crashes = ?, holder_pid = ?, holder_host = ?, holder_run = ?, "
                f"holder_token = ?, error = NULL, traceback = NULL{extra} "
                f"WHERE {p.where} AND status = ? AND holder_token IS ?",
                [
                    utc_iso(now),
                    attempt,
                    claims,
                    crashes,
                    *holder,
                    *extra_vals,
                    *p.ids,
                    status,
                    old_token,
                ],
            )
            if cur.rowcount != 1:  # cannot happen inside one write transaction
                raise LetItLoopError(
                    f"marker {at.name!r} (scope={at.scope!r}): the row changed while claiming it"
                )
        return MarkerClaim("marker", True, claims, crashes)

    def finish_marker(
        self,
        at: MarkerAt,
        token: str,
        now: float,
        duration_ms: float,
        failure: tuple[str, str, int] | None,
    ) -> tuple[bool, MarkerRecord | None]:
        p = self._place(at)
        where = f"WHERE {p.where} AND status = 'pending' AND holder_token = ?"
        with self.store.write() as c:
            if failure is None:
                cur = c.execute(
                    f"UPDATE \"{p.table}\" SET status = 'done', finished_at = ?, "
                    f"duration_ms = ? {where}",
                    (utc_iso(now), duration_ms, *p.ids, token),
                )
            else:
                error, traceback, interrupted = failure
                cur = c.execute(
                    f"UPDATE \"{p.table}\" SET status = 'failed', finished_at = ?, "
                    f"duration_ms = ?, error = ?, traceback = ?, "
                    f"crashes = coalesce(crashes, 0) + ? {where}",
                    (utc_iso(now), duration_ms, error, traceback, interrupted, *p.ids, token),
                )
            if cur.rowcount == 1:
                return False, None
            row = c.execute(p.select(), p.ids).fetchone()
        return True, None if row is None else MarkerRecord(*row)

    # -- the run's primitives ------------------------------------------------------

    def write_running(self, rows: Sequence[Sequence[Any]]) -> None:
        self.store.write_many(RUNNING_UPSERT.format(table=self.table), rows)

    # -- a cancel request, sleeps and waits, step tries -------------------------

    def cancel_request(self, run_id: str) -> tuple[str | None, str | None] | None:
        rows = self.store.query(
            "SELECT cancel_requested_at, cancel_reason FROM runs WHERE id = ?", (run_id,)
        )
        return (rows[0][0], rows[0][1]) if rows else None

    def pause(self, run_id: str, key: str) -> tuple[str, str, str | None, str | None] | None:
        rows = self.store.query(
            f'SELECT kind, status, started_at, wake_at FROM "{self.table}" '
            f"WHERE run = ? AND key = ?",
            (run_id, key),
        )
        return (rows[0][0], rows[0][1], rows[0][2], rows[0][3]) if rows else None

    def start_pause(self, row: Sequence[Any]) -> None:
        self.store.write1(_START_PAUSE.format(table=self.table), row)

    def finish_sleep(
        self, run_id: str, key: str, finished_at: str, duration_ms: float, attempt: int
    ) -> None:
        self.store.write1(
            f"UPDATE \"{self.table}\" SET status = 'done', finished_at = ?, duration_ms = ?, "
            f"attempt = ? WHERE run = ? AND key = ?",
            (finished_at, duration_ms, attempt, run_id, key),
        )

    def wait_ending(self, run_id: str, key: str) -> tuple[str, str | None, str | None] | None:
        rows = self.store.query(
            f'SELECT status, result, error FROM "{self.table}" WHERE run = ? AND key = ?',
            (run_id, key),
        )
        return (rows[0][0], rows[0][1], rows[0][2]) if rows else None

    def time_out_wait(
        self, run_id: str, key: str, error: str, finished_at: str, duration_ms: float
    ) -> None:
        with self.store.write() as c:
            c.execute(
                f"UPDATE \"{self.table}\" SET status = 'done', error = ?, finished_at = ?, "
                f"duration_ms = ? WHERE run = ? AND key = ? AND status = 'waiting'",
                (error, finished_at, duration_ms, run_id, key),
            )

    def recorded_wait(self, rowid: int) -> tuple[str | None, str | None] | None:
        rows = self.store.query(
            f'SELECT result, error FROM "{self.table}" WHERE rowid = ?', (rowid,)
        )
        return (rows[0][0], rows[0][1]) if rows else None

    def step_tries(self, run_id: str) -> list[tuple[str, int, str | None, str]]:
        return self.store.query(
            "SELECT key, try, next_at, ended FROM step_tries WHERE run = ? ORDER BY key, try",
            (run_id,),
        )

    def record_try(self, try_row: Sequence[Any], retrying_row: Sequence[Any] | None) -> None:
        with self.store.write() as c:
            c.execute(_INSERT_TRY, try_row)
            if retrying_row is not None:
                c.execute(_RETRYING_ROW.format(table=self.table), retrying_row)

    # -- what the run consumed and replayed -------------------------------------

    def record_usage(self, row: Sequence[Any]) -> None:
        self.store.write1(_USAGE_SO_FAR.format(table=self.table), row)

    def keep_left_usage(self, run_id: str, now: float, prefix: str) -> None:
        stamp = utc_iso(now)
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        under = _UNDER.replace("key", "t.key")
        with self.store.write() as c:
            c.execute(
                KEEP_LEFT_USAGE.format(table=self.table) + under,
                (stamp, stamp, run_id, prefix, end),
            )
            c.execute(CLEAR_LEFT_USAGE.format(table=self.table) + _UNDER, (run_id, prefix, end))

    def record_replays(self, run_id: str, attempt: int, keys: Sequence[str]) -> None:
        # One row per batch (its keys as a JSON list): a resume that replays
        # thousands of steps writes one small row, not thousands.
        self.store.write1(
            "INSERT INTO step_replays (run, attempt, keys) VALUES (?, ?, ?)",
            (run_id, attempt, msgspec.json.encode(list(keys)).decode()),
        )
