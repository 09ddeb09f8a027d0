"""``SqliteStorage``: the ``Storage`` protocol on a SQLite journal file; the SQL of runs, steps.

Built on ``store.Store`` (connection, transactions, errors); the statements of
the per-step path are bound once per journal, so a step costs one call.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import msgspec

from .clock import utc_iso
from .goals import rows_table
from .ids import HOST, new_run_id
from .sqlerrors import DRIVER_ERRORS
from .sqlite_holding import SqliteHolding
from .sqlite_keychecks import record as record_key_check
from .sqlite_keychecks import stored_check
from .sqlite_primitives import CLEAR_LEFT_USAGE, KEEP_LEFT_USAGE, SqlitePrimitives
from .sqlite_reads import PACKED_RESULTS, SqliteReads, read_recorded
from .sqlite_schedules import SqliteSchedules
from .storage import DoneRow, RunDecision, RunKey, RunState, StepRow
from .store import Store

#: The row of a step that returned or failed, over the key's earlier row if any
#: (its ``running`` or ``retrying`` row); ``{table}`` is the goal's compact table
#: and the parameters a ``StepRow``, in its order.
UPSERT_STEP = (
    'INSERT INTO "{table}" (run, key, kind, status, fn, result, started, duration, '
    "attempt, error, traceback, args_fp, input_tokens, output_tokens, cost, model, checksum) "
    "VALUES (?, ?, 'step', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (run, key) DO UPDATE SET status = excluded.status, fn = excluded.fn, "
    "result = excluded.result, started = excluded.started, duration = excluded.duration, "
    "attempt = excluded.attempt, error = excluded.error, traceback = excluded.traceback, "
    "args_fp = excluded.args_fp, input_tokens = excluded.input_tokens, "
    "output_tokens = excluded.output_tokens, cost = excluded.cost, model = excluded.model, "
    "checksum = excluded.checksum, wake_at = NULL"
)

#: UPSERT_STEP for the usual row: a step that returned, whose function reported no
#: usage. Its NULLs (error, traceback, the usage columns) are written in the SQL, not
#: bound: sqlite3 binds each None through its adapter lookup, which before Python 3.12
#: formats and clears an AttributeError per None (six of them: about 13,000
#: instructions, 2 µs, of a 4 µs statement). Parameters: ``done_params`` of a StepRow.
UPSERT_DONE = (
    'INSERT INTO "{table}" (run, key, kind, status, fn, result, started, duration, '
    "attempt, args_fp, checksum) VALUES (?, ?, 'step', ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (run, key) DO UPDATE SET status = excluded.status, fn = excluded.fn, "
    "result = excluded.result, started = excluded.started, duration = excluded.duration, "
    "attempt = excluded.attempt, error = NULL, traceback = NULL, "
    "args_fp = excluded.args_fp, input_tokens = NULL, output_tokens = NULL, cost = NULL, "
    "model = NULL, checksum = excluded.checksum, wake_at = NULL"
)


def step_writer(
    write1: Callable[[str, Sequence[Any]], None], upsert_sql: str, done_sql: str
) -> Callable[[StepRow], None]:
    """``write_step`` of a goal's table: one statement, its own transaction (``Store.write1``).

    A row with no error, traceback nor usage goes through ``done_sql`` (UPSERT_DONE),
    with its other columns bound; any other through ``upsert_sql`` (UPSERT_STEP), the
    whole row bound. Both write the same row (tests/test_sqlite_storage.py).
    """

    def write_step(row: StepRow) -> None:
        if row[8] is None and row[9] is None and row[11:15] == _NO_USAGE:
            write1(done_sql, (*row[:8], row[10], row[15]))
        else:
            write1(upsert_sql, row)

    return write_step


_NO_USAGE = (None, None, None, None)

_FIND_NAMED = "SELECT id FROM runs WHERE goal = ? AND name = ?"

# Unnamed openers resume only unnamed runs opened for the same input (named
# runs are reached by their name). rowid: the order runs were made in (ids
# made in one millisecond sort in no particular order). A run cancelled, or
# asked to be, is never resumed by an opener.
_FIND_UNNAMED = (
    "SELECT id FROM runs WHERE goal = ? AND name IS NULL AND input_fp IS ? "
    "AND status IN ('running', 'failed', 'waiting') "
    "AND cancel_requested_at IS NULL ORDER BY rowid DESC LIMIT 1"
)

#: The run an unnamed replay-only opener replays: the newest for the same input, any status.
_FIND_RECORDED = (
    "SELECT id FROM runs WHERE goal = ? AND name IS NULL AND input_fp IS ? "
    "ORDER BY rowid DESC LIMIT 1"
)


def resumable_run_id(
    query: Callable[[str, tuple[Any, ...]], Iterable[Sequence[Any]]],
    goal: str,
    input_fp: str | None,
) -> str | None:
    """The run an unnamed opener of ``goal`` resumes, or None: it starts a new one.

    The one definition of that rule, for the opener (``find_or_start_run``,
    inside its write transaction) and for readers that say which run the next
    opener takes (``lil reset GOAL``, ``lil reset``'s "then"): the newest
    unnamed run of the goal opened for the same input (``input_fp``: None for
    ``Journal(goal)``, the arguments' fingerprint for ``@durable``) that is
    running, failed or waiting, and that no one asked to cancel. ``query`` runs
    one statement with its parameters (a cursor's ``execute``, ``Store.query``).
    """
    for row in query(_FIND_UNNAMED, (goal, input_fp)):
        return str(row[0])
    return None


_INSERT_RUN = (
    "INSERT INTO runs (id, goal, name, status, attempts, holder_pid, "
    "holder_host, started_at, updated_at, input, input_fp) "
    "VALUES (?, ?, ?, 'running', 1, ?, ?, ?, ?, ?, ?)"
)

#: A run's key (its step rows' ``run``), given by the trigger ``runs_num`` to every new run.
_RUN_NUM = "SELECT num FROM runs WHERE id = ?"

_INSERT_ATTEMPT = (
    "INSERT OR REPLACE INTO attempts (run, attempt, pid, host, watch_id, "
    "watch_attempt, started_at, version) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["UPSERT_DONE", "UPSERT_STEP", "SqliteStorage", "step_writer"]


def _watch_attempt() -> int | None:
    """The supervisor's attempt number (``lil watch`` sets LETITLOOP_ATTEMPT), if any."""
    text = os.environ.get("LETITLOOP_ATTEMPT")
    if text is None or not text.isdigit():
        return None
    return int(text)


def _insert_attempt(c: Any, run_id: str, attempt: int, started: str, version: str | None) -> None:
    c.execute(
        _INSERT_ATTEMPT,
        (
            run_id,
            attempt,
            os.getpid(),
            HOST,
            os.environ.get("LETITLOOP_WATCH_ID"),
            _watch_attempt(),
            started,
            version,
        ),
    )


class SqliteStorage(SqliteReads, SqlitePrimitives, SqliteHolding, SqliteSchedules):
    """One goal's runs and steps in a journal file (``journal_<goal>`` and ``runs``).

    Recorded steps and results: ``sqlite_reads.py``; markers, sleeps, waits and step tries:
    ``sqlite_primitives.py``; holding, change notices and identity: ``sqlite_holding.py``;
    schedules and their ticks: ``sqlite_schedules.py``.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        #: The goal's view (journal_<goal>, named in messages) and its compact table,
        #: known once ``find_or_start_run`` made them.
        self.table = ""
        self.rows = ""
        self.run_key = RunKey(-1)
        self.run_keys: dict[str, int] = {}
        self.upsert_sql = ""
        self.done_sql = ""
        self.packed_sql = ""
        #: Commit one step row: ``store.write1`` with the statement bound (no extra call).
        self.write_step: Callable[[StepRow], None] = self._not_found
        self.write_done: Callable[[DoneRow], None] = self._not_found

    @property
    def path(self) -> Path:
        """The journal file (``Store.path``: made when asked; a step never asks)."""
        return self.store.path

    @property
    def max_text(self) -> int:
        return self.store.max_text

    def _not_found(self, row: StepRow | DoneRow) -> None:
        raise AssertionError("find_or_start_run comes before any step is written")

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
        store = self.store
        with store.write() as c:
            table = store.ensure_goal(c, goal, now)
            if table != self.table:
                self.table = table
                self.rows = rows_table(table)
                self.upsert_sql = UPSERT_STEP.format(table=self.rows)
                self.done_sql = UPSERT_DONE.format(table=self.rows)
                self.packed_sql = PACKED_RESULTS.format(table=self.rows)
                self.write_step = step_writer(store.write1, self.upsert_sql, self.done_sql)
                # A fresh step's row, bound as it is: no Python frame of ours before write1.
                self.write_done = partial(store.write1, self.done_sql)
            if name is not None:
                row = c.execute(_FIND_NAMED, (goal, name)).fetchone()
                found = None if row is None else str(row[0])
            else:
                found = resumable_run_id(c.execute, goal, input_fp)
            if found is not None:
                self._keep_key(c, found)
                return found, False
            run_id = new_run_id(now)
            # Held before its row exists (nobody else knows this id, so it is
            # free at once): if the lock cannot be taken, the transaction rolls
            # back and no run is left behind. A new run is then written whole in
            # this one transaction: its row and its first attempt.
            hold(run_id)
            started = utc_iso(now)
            c.execute(
                _INSERT_RUN,
                (run_id, goal, name, os.getpid(), HOST, started, started, input_text, input_fp),
            )
            _insert_attempt(c, run_id, 1, started, version)
            self._keep_key(c, run_id)
        return run_id, True

    def recorded_run(
        self, goal: str, name: str | None, input_fp: str | None
    ) -> tuple[str, RunState] | None:
        """The run a replay-only opener replays, read without writing anything; None: no such run.

        The named run, else the goal's newest unnamed run opened for the same
        input, whatever its status (a fixture's run is usually completed).
        """
        store = self.store
        table = store.goal_table(goal)
        if table is None:
            return None
        self.table, self.rows = table, rows_table(table)
        self.packed_sql = PACKED_RESULTS.format(table=self.rows)
        if name is not None:
            found = store.query(_FIND_NAMED, (goal, name))
        else:
            found = store.query(_FIND_RECORDED, (goal, input_fp))
        if not found:
            return None
        run_id = str(found[0][0])
        row = store.query(
            "SELECT status, attempts, result, name, cancel_requested_at, cancel_reason "
            "FROM runs WHERE id = ?",
            (run_id,),
        )
        self.run_key = RunKey(self.key_of_run(run_id))
        return run_id, RunState(*row[0])

    def _keep_key(self, c: Any, run_id: str) -> None:
        (num,) = c.execute(_RUN_NUM, (run_id,)).fetchone()
        self.run_keys[run_id] = num
        self.run_key = RunKey(num)

    def claim_run(
        self,
        run_id: str,
        now: float,
        decide: Callable[[RunState | None], RunDecision],
        *,
        version: str | None = None,
    ) -> tuple[RunDecision, RunState | None]:
        # A run resumed or replayed has its recorded steps read here, in the claim's
        # transaction, for the opener's recorded_steps that follows (claimed_read): one
        # scan of the run's rows, which also tells whether any left usage to keep.
        self.claimed_read = None
        with self.store.write() as c:
            row = c.execute(
                "SELECT status, attempts, result, name, cancel_requested_at, cancel_reason "
                "FROM runs WHERE id = ?",
                (run_id,),
            ).fetchone()
            found = None if row is None else RunState(*row)
            claim = decide(found)
            read = None
            if claim in ("resume", "replay"):
                try:
                    read = read_recorded(c.execute, self.rows, self.key_of_run(run_id))
                except DRIVER_ERRORS:  # that statement undone, the transaction goes on
                    read = None
            if claim == "cancel":
                assert found is not None
                c.execute(
                    "UPDATE runs SET status = 'cancelled', finished_at = coalesce("
                    "finished_at, ?), updated_at = ? WHERE id = ? AND status != 'cancelled'",
                    (found.cancel_requested_at or utc_iso(now), utc_iso(now), run_id),
                )
            elif claim == "resume":
                assert found is not None
                # Usage an earlier attempt left on rows the new calls will overwrite, kept
                # as tries: none left (the read counted none), nothing to keep; the
                # clearing picks the rows the keeping copied. Each is a scan of the run's
                # rows (1.4 M instructions for 999).
                if read is None or read[1]:
                    args = (run_id, utc_iso(now), self.key_of_run(run_id))
                    if c.execute(KEEP_LEFT_USAGE.format(table=self.rows), args).rowcount:
                        c.execute(CLEAR_LEFT_USAGE.format(table=self.rows), args)
                attempts = found.attempts + 1
                found = found._replace(attempts=attempts)
                c.execute(
                    "UPDATE runs SET status = 'running', attempts = ?, holder_pid = ?, "
                    "holder_host = ?, updated_at = ? WHERE id = ?",
                    (attempts, os.getpid(), HOST, utc_iso(now), run_id),
                )
                _insert_attempt(c, run_id, attempts, utc_iso(now), version)
        if read is not None:  # committed: the opener reads these rows next
            self.claimed_read = (run_id, read[0])
        return claim, found

    def run_holder(self, run_id: str) -> tuple[int | None, str | None, str | None] | None:
        rows = self.store.query(
            "SELECT holder_pid, holder_host, updated_at FROM runs WHERE id = ?", (run_id,)
        )
        return tuple(rows[0]) if rows else None

    def write_steps(self, rows: Sequence[StepRow]) -> None:
        if not any(type(r[3]) is str for r in rows):
            self.store.write_many(self.upsert_sql, rows)
            return
        with self.store.write() as c:
            made = self._interned(c, rows)
        self.store.function_keys.update(made)

    def try_write_steps(self, rows: Sequence[StepRow]) -> bool:
        if not any(type(r[3]) is str for r in rows):
            return self.store.try_write_many(self.upsert_sql, rows)
        with self.store.try_write() as c:
            if c is None:
                return False
            made = self._interned(c, rows)
        self.store.function_keys.update(made)
        return True

    def _interned(self, c: Any, rows: Sequence[StepRow]) -> dict[str, int]:
        """Inside a write transaction: ``rows`` written, each function name a row holds
        as text (function_key could not add it on an event loop) added to ``functions``
        and written as its id; returns the names added, remembered once committed."""
        made = {name: self.intern(c, name) for name in {r[3] for r in rows if type(r[3]) is str}}
        c.executemany(
            self.upsert_sql,
            [r._replace(fn=made[r[3]]) if type(r[3]) is str else r for r in rows],
        )
        return made

    def seal_run(self, run_id: str, secret: bytes) -> None:
        """Chain the run's final rows under ``secret`` from now on (sqlite_seals.py)."""
        from .sqlite_seals import start as start_sealing  # loaded by programs that seal

        start_sealing(self.store, self.rows, self.key_of_run(run_id), run_id, secret)

    def key_check(self, goal: str, check: str | None, now: float) -> str | None:
        """The check value of the key ``goal``'s values are encrypted with; ``check`` is
        recorded first when none is and the file is writable (sqlite_keychecks.py)."""
        stored = stored_check(self.store, goal)  # a read; a write only the first time
        if stored is not None or check is None or self.store.readonly:
            return stored
        return record_key_check(self.store, goal, check, now)

    def usage_of(
        self, run_id: str, keys: Sequence[str]
    ) -> tuple[int | None, int | None, float | None]:
        # The keys as one JSON list: a resume that replayed thousands binds one value.
        row = self.store.query(
            f'SELECT sum(input_tokens), sum(output_tokens), sum(cost) FROM "{self.rows}" '
            "WHERE run = ? AND key IN (SELECT value FROM json_each(?))",
            (self.key_of_run(run_id), msgspec.json.encode(list(keys)).decode()),
        )[0]
        return row[0], row[1], row[2]

    def trace_attempt(self, run_id: str, attempt: int, trace: str) -> str | None:
        with self.store.write() as c:
            c.execute(
                "UPDATE attempts SET trace = ? WHERE run = ? AND attempt = ?",
                (trace, run_id, attempt),
            )
            row = c.execute(
                "SELECT trace FROM attempts WHERE run = ? AND attempt < ? AND trace IS NOT NULL "
                "ORDER BY attempt DESC LIMIT 1",
                (run_id, attempt),
            ).fetchone()
        return None if row is None else str(row[0])
