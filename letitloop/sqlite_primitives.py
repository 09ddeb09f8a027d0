"""The SQL of the run's primitives on a SQLite journal file: markers, sleeps, waits, tries.

``SqlitePrimitives`` is the base of ``SqliteStorage`` (``sqlite_storage.py``):
the part of the ``Storage`` protocol that ``markers.py``, ``sleeps.py``,
``waits.py``, ``retry.py``, ``cancellation.py`` and ``inflight.py`` use.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Sequence
from typing import Any, NamedTuple

import msgspec

from .checksums import damaged_marker, marker_sum, pause_sum
from .clock import iso_us, utc_iso, utc_us
from .errors import LetItLoopError
from .goals import iso_sql
from .storage import FunctionKey, MarkerAt, MarkerClaim, MarkerRecord, RowHandle
from .store import Store

#: The table of global markers (see migrations/0003_markers.sql); run- and
#: goal-scoped markers are rows of the goal's journal table.
GLOBAL_TABLE = "markers"


class _Place(NamedTuple):
    """Where a marker's row lives and how to address it."""

    table: str
    #: SQL that selects the row, and its parameters.
    where: str
    ids: tuple[str | int, ...]
    #: Columns (and values) that an INSERT adds besides the common ones.
    insert_cols: tuple[tuple[str, str], ...]
    #: The row's kind column (the global table holds markers only).
    kind_sql: str
    #: Whether the row is a goal's compact row (integer times) or of ``markers`` (text).
    compact: bool

    def select(self) -> str:
        started = iso_sql("started") if self.compact else "started_at"
        return (
            f"SELECT {self.kind_sql}, status, claims, crashes, holder_pid, holder_host, "
            f'holder_run, {started}, holder_token, checksum FROM "{self.table}" '
            f"WHERE {self.where}"
        )


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
    "next_at, input_tokens, output_tokens, cost, model) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
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
#: overwrite: a ``running`` row (its process died during the call, after the call
#: reported usage) and a ``failed`` row (the call raised, without a retry policy).
#: Parameters, numbered: ?1 the run id, ?2 the time now (ISO text), ?3 the run's key,
#: and ?4, ?5 the range of keys of ``_UNDER``.
_LEFT_USAGE = (
    "run = ?3 AND status IN ('running', 'failed') AND (input_tokens IS NOT NULL "
    "OR output_tokens IS NOT NULL OR cost IS NOT NULL)"
)

#: The same rows among a parent step's children (keys in a range), before the
#: parent's next try calls them again in this attempt (retry.reopen_children).
_UNDER = " AND key >= ?4 AND key < ?5"

#: When a new attempt claims a run, the usage of those rows moves to ``step_tries``
#: (a try numbered after the key's last; ``ended`` says how it ended), and leaves
#: their row: each paid call stays counted once, whatever the next call writes.
#: A ``failed`` row's end is its start plus its duration; a ``running`` row has none.
KEEP_LEFT_USAGE = (
    "INSERT INTO step_tries (run, key, try, attempt, started_at, failed_at, error, next_at, "
    "input_tokens, output_tokens, cost, model, ended) "
    "SELECT ?1, t.key, coalesce((SELECT max(s.try) FROM step_tries s WHERE s.run = ?1 "
    f"AND s.key = t.key), 0) + 1, t.attempt, coalesce({iso_sql('t.started')}, ?2), "
    "coalesce(CASE t.status WHEN 'running' THEN NULL ELSE "
    f"{iso_sql('t.started + t.duration')} END, ?2), "
    "coalesce(t.error, 'Interrupted: attempt ' || t.attempt || "
    "' ended during this call (its process died, or the call was cancelled)'), NULL, "
    "t.input_tokens, t.output_tokens, t.cost, t.model, "
    "CASE t.status WHEN 'running' THEN 'crashed' ELSE 'failed' END "
    'FROM "{table}" AS t WHERE ' + _LEFT_USAGE.replace("run = ", "t.run = ")
)
#: ... and their rows keep no usage.
CLEAR_LEFT_USAGE = (
    'UPDATE "{table}" SET input_tokens = NULL, output_tokens = NULL, cost = NULL, model = NULL '
    "WHERE " + _LEFT_USAGE
)


class SqlitePrimitives:
    """Markers, sleeps, waits and step tries in the journal file."""

    store: Store
    #: The goal's view (its readable name, in messages) and compact table (written).
    table: str
    rows: str
    #: Run id -> its key (``runs.num``), for the runs this storage met.
    run_keys: dict[str, int]

    def key_of_run(self, run_id: str) -> int:
        """The key (``runs.num``) of run ``run_id``; 0 for ``'*'`` (a goal-scoped marker's),
        -1 (no row has it) for a run that does not exist."""
        if run_id == "*":
            return 0
        key = self.run_keys.get(run_id)
        if key is None:
            found = self.store.query("SELECT num FROM runs WHERE id = ?", (run_id,))
            if not found or found[0][0] is None:
                return -1
            key = self.run_keys[run_id] = int(found[0][0])
        return key

    def function_key(self, name: str) -> FunctionKey:
        """``functions.id`` of ``name``, made the first time the file sees it; or ``name``
        itself, which the row then holds as text until its commit adds the name (see
        ``SqliteStorage.write_steps``), when adding it now would wait or commit on an
        event loop.

        Never waits for a lock and never commits on a running event loop: a fresh
        async step's commits go to a worker thread in power mode (commits.py), and
        another connection may hold the write lock. A new name otherwise costs one
        small commit, once per file and process.
        """
        store = self.store
        key: FunctionKey | None = store.function_keys.get(name)
        if key is not None:
            return key
        aio = sys.modules.get("asyncio")
        if aio is not None and aio._get_running_loop() is not None:
            return name
        with store.try_write() as c:
            if c is None:
                return name  # stored as text this time; its commit adds it
            made = self.intern(c, name)
        store.function_keys[name] = made
        return made

    def intern(self, c: sqlite3.Connection, name: str) -> int:
        """Inside a write transaction: ``functions.id`` of ``name``, added if new. Not
        remembered here: the caller does once the transaction commits."""
        c.execute("INSERT OR IGNORE INTO functions (name) VALUES (?)", (name,))
        (made,) = c.execute("SELECT id FROM functions WHERE name = ?", (name,)).fetchone()
        return int(made)

    # -- markers -------------------------------------------------------------------

    def _place(self, at: MarkerAt) -> _Place:
        if at.scope == "global":
            return _Place(
                GLOBAL_TABLE,
                "key = ?",
                (at.name,),
                (("holder_goal", at.goal),),
                "'marker'",
                False,
            )
        return _Place(
            self.rows,
            "run = ? AND key = ?",
            (self.key_of_run(at.run), at.name),
            (("kind", "marker"),),
            "kind",
            True,
        )

    def marker(self, at: MarkerAt) -> MarkerRecord | None:
        p = self._place(at)
        rows = self.store.query(p.select(), p.ids)
        return MarkerRecord(*rows[0][:9]) if rows else None

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
                    "started" if p.compact else "started_at",
                    "attempt",
                    "claims",
                    "crashes",
                    "holder_pid",
                    "holder_host",
                    "holder_run",
                    "holder_token",
                    "checksum",
                ]
                started: int | str = utc_us(now) if p.compact else utc_iso(now)
                values = [*p.ids, *vals, "pending", started, attempt, 1, 0, *holder]
                values.append(marker_sum(at.run, at.name, "pending"))
                c.execute(
                    f'INSERT INTO "{p.table}" ({", ".join(names)}) '
                    f"VALUES ({', '.join('?' * len(values))})",
                    values,
                )
                return MarkerClaim("marker", True, 1, 0)
            kind, status, claims, crashes = row[:4]
            old_token = row[8]
            if (
                kind == "marker"
                and row[9] is not None
                and row[9] != marker_sum(at.run, at.name, status)
            ):
                raise damaged_marker(at.name, at.run, at.goal, at.scope)
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
            times = (
                "started = ?, duration = NULL"
                if p.compact
                else "started_at = ?, finished_at = NULL, duration_ms = NULL"
            )
            cur = c.execute(
                f"UPDATE \"{p.table}\" SET status = 'pending', {times}, attempt = ?, claims = ?, "
                f"crashes = ?, holder_pid = ?, holder_host = ?, holder_run = ?, "
                f"holder_token = ?, error = NULL, traceback = NULL, checksum = ?{extra} "
                f"WHERE {p.where} AND status = ? AND holder_token IS ?",
                [
                    utc_us(now) if p.compact else utc_iso(now),
                    attempt,
                    claims,
                    crashes,
                    *holder,
                    marker_sum(at.run, at.name, "pending"),
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
        # A goal's compact row: its end is its start plus its duration.
        ended: tuple[int | str | float, ...]
        if p.compact:
            times, ended = "duration = ? - started", (utc_us(now),)
        else:
            times, ended = "finished_at = ?, duration_ms = ?", (utc_iso(now), duration_ms)
        with self.store.write() as c:
            if failure is None:
                cur = c.execute(
                    f"UPDATE \"{p.table}\" SET status = 'done', {times}, checksum = ? {where}",
                    (*ended, marker_sum(at.run, at.name, "done"), *p.ids, token),
                )
            else:
                error, traceback, interrupted = failure
                cur = c.execute(
                    f"UPDATE \"{p.table}\" SET status = 'failed', {times}, error = ?, "
                    f"traceback = ?, crashes = coalesce(crashes, 0) + ?, checksum = ? {where}",
                    (
                        *ended,
                        error,
                        traceback,
                        interrupted,
                        marker_sum(at.run, at.name, "failed"),
                        *p.ids,
                        token,
                    ),
                )
            if cur.rowcount == 1:
                return False, None
            row = c.execute(p.select(), p.ids).fetchone()
        return True, None if row is None else MarkerRecord(*row[:9])

    # -- the run's primitives ------------------------------------------------------

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

    def record_replays(self, run_id: str, attempt: int, keys: Sequence[str]) -> None:
        # One row per batch (its keys as a JSON list): a resume that replays
        # thousands of steps writes one small row, not thousands.
        self.store.write1(
            "INSERT INTO step_replays (run, attempt, keys) VALUES (?, ?, ?)",
            (run_id, attempt, msgspec.json.encode(list(keys)).decode()),
        )
