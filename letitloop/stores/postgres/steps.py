"""A step's row in a PostgreSQL journal: its statement (``step_statement``) and ``StepWriter``,
which sends a usual step's through libpq's own call, not psycopg's cursor.

A step's row is one statement, so one round trip, fenced: written only while
the run's attempt is still its holder's (``WRITE_STEP``). A usual step (no
error, no usage) binds 6 fewer values (``WRITE_PLAIN_STEP``).

``StepWriter`` is a speed trick behind one function with a portable twin
(STYLE.md). The statement of a step without error or usage is prepared once
on the journal's connection under a name
of its own and run by ``PGconn.exec_prepared``, its parameters sent as text:
what psycopg's cursor does, less its Python machinery (about 25 µs of client
CPU of the statement's 55; benchmarks/README.md). The twin is that cursor: a
value that text cannot carry as psycopg would (a str holding NUL, which libpq
would cut there, or a lone surrogate) goes through it, which refuses it as
before; tests/test_postgres.py writes the same rows both ways and compares them.

Notifications that arrive with the answer stay in libpq's queue, where
psycopg's ``notifies()`` does not look without new data on the socket: each
is handed to ``notice`` at once.

``PostgresStepRows`` is ``StepRows`` on a journal's connection (a part of
``PostgresStorage``): the step rows written with this statement, and read
back for a replay, with the results that fit ``PREFETCH_BYTES`` in the one
round trip that finds the run's rows.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from ...primitives.clock import utc_iso
from .. import row_rules
from ..row_rules import MAX_TEXT, STEP_COLUMNS
from ..storage_steps import RESULT_BYTES, DoneRow, FunctionKey, StepRow, step_row_of
from .connection import PostgresConnection
from .database import psycopg
from .seals import seal_step
from .seals import write_step as write_sealed

__all__ = [
    "PLAIN_COLUMNS",
    "PREFETCH_BYTES",
    "WRITE_PLAIN_STEP",
    "WRITE_STEP",
    "PostgresStepRows",
    "StepWriter",
    "step_statement",
]

#: The columns whose type is not text, for the casts of a step's INSERT … SELECT.
_TYPES = {
    "started_at": "timestamptz",
    "finished_at": "timestamptz",
    "wake_at": "timestamptz",
    "duration_ms": "float8",
    "cost": "float8",
    "attempt": "integer",
    "input_tokens": "bigint",
    "output_tokens": "bigint",
    "checksum": "bigint",
}

#: The columns of a step row that a usual step leaves empty (no error, no usage): a
#: step whose are all None is written by a statement that binds none of them.
_OPTIONAL = ("error", "traceback", "input_tokens", "output_tokens", "cost", "model")
#: The columns every step binds, in ``STEP_COLUMNS``' order (``step_statement``).
PLAIN_COLUMNS = tuple(c for c in STEP_COLUMNS if c not in _OPTIONAL)


def write_step_sql(columns: Sequence[str]) -> str:
    """A step's row in one statement (so one round trip), binding ``columns`` (the
    columns left out are set NULL, an overwritten row's too): the goal, their values,
    then the fence's run number and attempt."""
    casts = ", ".join(f"%s::{_TYPES.get(c, 'text')}" for c in columns)
    return (
        f"INSERT INTO ll_journal (goal, {', '.join(columns)}, kind) "
        f"SELECT %s::text, {casts}, 'step' "
        # The fence: written only while the run's attempt is still this holder's (a
        # holder that lost the run to a new attempt writes nothing, whatever its lock
        # did). The run by its number (``ll_runs.num``, the storage's RunKey): an
        # integer's index, not the id's text. The key-share lock makes a new holder's
        # claim (SELECT … FOR UPDATE) wait for this statement's commit, and this
        # statement wait for the claim's: never both.
        "WHERE EXISTS (SELECT 1 FROM ll_runs WHERE num = %s AND attempts = %s FOR KEY SHARE) "
        "ON CONFLICT (goal, run, key) DO UPDATE SET "
        + ", ".join(f"{c} = excluded.{c}" for c in (*STEP_COLUMNS[2:], "kind", "wake_at"))
    )


#: A step with an error or usage: every column bound.
WRITE_STEP = write_step_sql(STEP_COLUMNS)
#: A usual step (no error, no usage): 6 fewer values to bind and parse.
WRITE_PLAIN_STEP = write_step_sql(PLAIN_COLUMNS)


def step_statement(goal: str, run_id: str, row: StepRow) -> tuple[str, tuple[Any, ...]]:
    """The statement that writes ``row`` (of run ``run_id`` in ``goal``) and its parameters.

    A usual step (no error, no usage) binds its values straight from the row
    (about 3 µs against 12 through ``row_rules.step_values``, whose values they
    are: tests/test_postgres.py checks that both agree); any other, every column.
    """
    if (
        row.error is None
        and row.traceback is None
        and row.input_tokens is None
        and row.output_tokens is None
        and row.cost is None
        and row.model is None
    ):
        started, duration = row.started, row.duration
        return WRITE_PLAIN_STEP, (
            goal,
            run_id,
            row.key,
            row.status,
            row.fn,  # these stores' function keys are the names themselves
            row.result,
            utc_iso(started / 1e6),
            utc_iso((started + duration) / 1e6),
            duration / 1000.0,
            row.attempt,
            row.args_fp,
            row.checksum,
            row.run,
            row.attempt,
        )
    values = row_rules.step_values(row, run_id).values()
    return WRITE_STEP, (goal, *values, row.run, row.attempt)


#: The statement's name on the connection (psycopg names its own ``_pg3_N``).
NAME = b"letitloop_step"

#: SQLSTATE 26000: no prepared statement of that name (psycopg's DEALLOCATE ALL after a
#: ROLLBACK or a DROP on the connection drops ours too): prepared again, run once more.
_GONE = b"26000"


class StepWriter:
    """One journal connection's prepared step statement (see the module's docstring)."""

    def __init__(self, conn: Any, sql: str, notice: Callable[[int, str], None]) -> None:
        numbers = iter(range(1, 1000))
        self.conn = conn
        self.sql = re.sub(r"%s", lambda _: f"${next(numbers)}", sql).encode()
        self.notice = notice
        self.prepared = False

    def write(self, params: Sequence[Any]) -> int | None:
        """Run the statement with ``params``: the rows it wrote, or None when a value
        must go through the twin (psycopg's cursor). Raises psycopg's errors."""
        values: list[bytes | None] = []
        for v in params:
            if v is None:
                values.append(None)
            elif isinstance(v, str):
                if "\x00" in v:
                    return None
                try:
                    values.append(v.encode())
                except UnicodeEncodeError:
                    return None
            else:  # int, float: their text is PostgreSQL's
                values.append(str(v).encode())
        for _ in range(2):
            result = self._run(values)
            if result is not None:
                return result
            self.prepared = False
        return None  # dropped again at once: the twin it is

    def _run(self, values: list[bytes | None]) -> int | None:
        """The rows written; None: the statement was not there (prepared on the next run)."""
        from psycopg import pq

        pg = self.conn.pgconn
        if not self.prepared:
            made = pg.prepare(NAME, self.sql)
            self._check(made, pq)
            self.prepared = True
        result = pg.exec_prepared(NAME, values)
        while (n := pg.notifies()) is not None:
            self.notice(n.be_pid, n.extra.decode())
        if result.status == pq.ExecStatus.COMMAND_OK:
            return int(result.command_tuples or 0)
        if result.error_field(pq.DiagnosticField.SQLSTATE) == _GONE:
            return None
        self._check(result, pq)
        return 0  # not reached: _check raised

    def _check(self, result: Any, pq: Any) -> None:
        """Raise what psycopg's cursor would for ``result`` unless it is COMMAND_OK."""
        import psycopg
        from psycopg import errors

        if result.status == pq.ExecStatus.COMMAND_OK:
            return
        # No SQLSTATE: libpq's own failure (the server gone mid-call, the socket closed),
        # which psycopg's cursor raises as OperationalError too.
        gone = self.conn.pgconn.status != pq.ConnStatus.OK
        if gone or not result.error_field(pq.DiagnosticField.SQLSTATE):
            raise psycopg.OperationalError(result.get_error_message("utf-8").strip())
        raise errors.error_from_result(result)


#: How many bytes of results ``recorded_steps`` reads with the run's rows, in the same
#: round trip: the results of the done rows in journal order, as long as their total
#: stays within this, so a run whose results fit replays in the one round trip that
#: finds them (a run of 1,000 or 100,000 small results alike); the rest are read by
#: ``results`` as replay asks for them, a chunk at a time (``replay.RESULT_CHUNK``,
#: at most ``storage.RESULT_BYTES``), and no more than this is held in memory at once.
PREFETCH_BYTES = 32 << 20


class PostgresStepRows(PostgresConnection):
    """The goal's rows of the run this journal holds: written, read back for a replay."""

    def __init__(self, location: str, conn: Any) -> None:
        super().__init__(location, conn)
        #: Results read with ``recorded_steps``, by rowid, until ``results`` hands them out
        #: (at most PREFETCH_BYTES of them).
        self._prefetched: dict[int, str | None] = {}
        #: The cursor of ``write_step``'s statements, and its usual one's faster twin.
        self._steps = conn.cursor()
        self._raw = StepWriter(conn, WRITE_PLAIN_STEP, self._notice)

    def function_key(self, name: str) -> FunctionKey:
        return name  # rows keep the name itself

    @property
    def max_text(self) -> int:
        return MAX_TEXT

    def _done(
        self, run_id: str, prefix: str = ""
    ) -> list[tuple[str, str, str | None, int, int | None]]:
        rows = self._run(
            "SELECT key, fn, args_fp, rowid, checksum FROM ll_journal WHERE goal = %s "
            "AND run = %s AND starts_with(key, %s) AND kind IN ('step', 'sleep', 'wait') "
            "AND status = 'done' ORDER BY rowid",
            (self.goal, run_id, prefix),
        )
        return [(k, f, a, r, s) for k, f, a, r, s in rows]

    def recorded_steps(
        self, run_id: str
    ) -> tuple[list[tuple[str, str, str | None, int, int | None]], set[str]]:
        # One round trip: the done steps, sleeps and waits, the markers' keys, and the
        # results of the done rows, in journal order, while their total size stays
        # within PREFETCH_BYTES; replay asks for them in that order (results).
        rows = self._run(
            "SELECT key, kind, fn, args_fp, rowid, checksum, fits, CASE WHEN fits THEN result "
            "END FROM (SELECT *, kind <> 'marker' AND sum(coalesce(octet_length(result), 0)) "
            "OVER (ORDER BY kind = 'marker', rowid) <= %s AS fits FROM ll_journal "
            "WHERE goal = %s AND run = %s AND (kind = 'marker' OR "
            "(kind IN ('step', 'sleep', 'wait') AND status = 'done'))) AS r ORDER BY rowid",
            (PREFETCH_BYTES, self.goal, run_id),
        )
        done = [(k, f, a, r, s) for k, kind, f, a, r, s, _, _ in rows if kind != "marker"]
        with self._lock:
            self._prefetched = {row[4]: row[7] for row in rows if row[6]}
        return done, {k for k, kind, *_ in rows if kind == "marker"}

    def recorded_under(
        self, run_id: str, prefix: str
    ) -> list[tuple[str, str, str | None, int, int | None]]:
        return self._done(run_id, prefix)

    def results(self, handles: Sequence[int]) -> dict[int, str | None]:
        found: dict[int, str | None] = {}
        with self._lock:
            cached = self._prefetched
            if cached:  # read with recorded_steps: handed out once, from the first up
                for h in handles:
                    if h not in cached:
                        break
                    found[h] = cached.pop(h)
        if found:
            return found  # the caller asks again from the first row it lacks
        # From the first row up, while the texts before a row stay under RESULT_BYTES
        # (octet_length reads a stored text's size, not the text).
        return dict(
            self._run(
                "SELECT rowid, result FROM (SELECT rowid, result, sum(coalesce("
                "octet_length(result), 0)) OVER (ORDER BY rowid) - coalesce("
                "octet_length(result), 0) AS before FROM ll_journal WHERE rowid = ANY(%s)) "
                "AS r WHERE before < %s ORDER BY rowid",
                (list(handles), RESULT_BYTES),
            )
        )

    def _step(self, row: StepRow) -> tuple[str, tuple[Any, ...]]:
        return step_statement(self.goal, self._run_ids[row.run], row)

    def write_step(self, row: StepRow) -> None:
        with self._lock:
            self._check()
            sql, params = self._step(row)
            try:
                if self.sealing:  # the row and its entry in one statement (postgres_seals.py)
                    run_id = self._run_ids[row.run]
                    written = write_sealed(self.conn, self.sealing, run_id, row, sql, params)
                else:
                    # A usual step through libpq's call (postgres_steps.py); else, or for a
                    # value it leaves to psycopg, the cursor kept for steps, prepared at once.
                    fast = self._raw.write(params) if sql is WRITE_PLAIN_STEP else None
                    if fast is None:
                        fast = self._steps.execute(sql, params, prepare=True).rowcount
                    written = fast
            except psycopg.OperationalError as exc:
                raise self._lost(exc) from exc
            if written != 1:
                raise self._fenced(self._run_ids[row.run], row.attempt, f"step {row.key!r}")

    def write_done(self, done: DoneRow) -> None:
        self.write_step(step_row_of(done))

    def write_steps(self, rows: Sequence[StepRow]) -> None:
        with self._tx(fenced=False) as c:
            for row in rows:
                if c.execute(*self._step(row), prepare=True).rowcount != 1:
                    raise self._fenced(self._run_ids[row.run], row.attempt, f"step {row.key!r}")
                if self.sealing:
                    seal_step(c, self.sealing, self._run_ids[row.run], row)

    def try_write_steps(self, rows: Sequence[StepRow]) -> bool:
        if not self._lock.acquire(blocking=False):
            return False
        try:
            self.write_steps(rows)
        finally:
            self._lock.release()
        return True

    def record_replays(self, run_id: str, attempt: int, keys: Sequence[str]) -> None:
        with self._tx() as c:
            c.execute("INSERT INTO ll_replays VALUES (%s, %s, %s)", (run_id, attempt, list(keys)))
