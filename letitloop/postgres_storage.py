"""``PostgresStorage``: the ``Storage`` protocol on a PostgreSQL database: ``postgresql://…``.

The same journal as a SQLite file's, in a database every host reaches
(docs/postgres.md). Imported only when such a URL is opened (``schemes.py``);
it needs the extra ``letitloop[postgres]`` (psycopg 3).

- **Schema**: tables prefixed ``ll_`` in the connection's schema, migrated by
  ``postgres_database.py``. One row per step, sleep, wait and marker in ``ll_journal``
  (every goal's, keyed by goal, run and key; global markers under goal and
  run ``''``; times ``timestamptz``, read back as ``clock.utc_iso`` text;
  a checksum as ``checksums.py`` computes it), runs in ``ll_runs``. What
  each write sets is ``row_rules.py``'s, shared with the in-memory store.
- **Transactions**: one connection per journal, in autocommit; a step row
  is one statement, so one round trip. Operations that read before they
  write run in one transaction. Every write of a run's rows is fenced: made
  only while the run's ``attempts`` is still this journal's (a key-share
  lock on the run's row, which a new holder's claim waits for).
  ``durability``: ``"process"`` commits with ``synchronous_commit = local``,
  ``"power"`` with ``on``; a commit that returned survives the client's
  death in both.
- **Holding** a run or a marker is a session-level advisory lock
  (``pg_advisory_lock``) on a connection of the hold's own, keyed by a
  64-bit hash of what it holds; PostgreSQL releases it when that connection
  ends, including when the holder's process dies (at once for a killed
  process on the same host; over a network, once the server notices the
  connection is gone: the TCP keepalives set here, about 25 s).
- **Change notices**: a journal ``LISTEN``s on :data:`CHANNEL`; inspectors
  (``lil send``, ``lil cancel``) and every statement on ``ll_runs`` notify
  it with the schema as payload; ``changes`` counts the notices from other
  backends received so far, reading them without a round trip.

This module opens the storage and holds what is the journal's own: its
identity, holds, change notices, and its steps (written by
``postgres_steps.py``'s statement). Its bases own the rest, bottom up:
``postgres_connection.py`` (transactions, the fence, rows by name),
``postgres_primitives.py`` (markers and the run's primitives) and
``postgres_runs.py`` (finding, claiming and ending runs).
"""

from __future__ import annotations

import contextlib
from collections.abc import Hashable, Iterator, Sequence
from typing import Any

from .postgres_database import CHANNEL, connect, migrate, psycopg, server_errors
from .postgres_holding import PostgresHold, is_held, run_hold_text
from .postgres_runs import PostgresRuns
from .postgres_seals import seal_step
from .postgres_seals import write_step as write_sealed
from .postgres_steps import WRITE_PLAIN_STEP, StepWriter, step_statement
from .pragmas import Durability
from .row_rules import MAX_TEXT
from .storage_steps import RESULT_BYTES, DoneRow, FunctionKey, StepRow, step_row_of

__all__ = ["PREFETCH_BYTES", "PostgresStorage", "open_postgres"]

#: How many bytes of results ``recorded_steps`` reads with the run's rows, in the same
#: round trip: the results of the done rows in journal order, as long as their total
#: stays within this, so a run whose results fit replays in the one round trip that
#: finds them (a run of 1,000 or 100,000 small results alike); the rest are read by
#: ``results`` as replay asks for them, a chunk at a time (``replay.RESULT_CHUNK``,
#: at most ``storage.RESULT_BYTES``), and no more than this is held in memory at once.
PREFETCH_BYTES = 32 << 20


def open_postgres(location: str, durability: Durability = "process") -> PostgresStorage:
    """The storage of one journal's open of ``postgresql://…`` (the scheme's opener)."""
    conn = connect(location)
    try:
        with server_errors(location):
            migrate(conn, location)
            level = "local" if durability == "process" else "on"
            # Change notices (``changes``) come as notifications on this connection.
            conn.execute(f"SET synchronous_commit = {level}; LISTEN {CHANNEL}")
            return PostgresStorage(location, conn)
    except BaseException:
        conn.close()
        raise


class PostgresStorage(PostgresRuns):
    """One journal's connection to a PostgreSQL database: the whole ``Storage`` protocol.

    Its identity, holds, change notices and steps here; runs, markers, the
    run's primitives, transactions and the fence are its bases'. What each
    write of a marker, a step in flight, a pause, a try or usage sets is
    ``row_rules.py``'s, shared with the in-memory store. Every write is
    fenced: made only while the run's attempt is still this journal's (see
    ``postgres_steps.WRITE_STEP`` and ``PostgresConnection._fence``).
    """

    def __init__(self, location: str, conn: Any) -> None:
        super().__init__(location, conn)
        #: Results read with ``recorded_steps``, by rowid, until ``results`` hands them out
        #: (at most PREFETCH_BYTES of them).
        self._prefetched: dict[int, str | None] = {}
        #: Change notices received from other connections (``changes``).
        self._notices = 0
        #: The cursor of ``write_step``'s statements, and its usual one's faster twin.
        self._steps = conn.cursor()
        self._raw = StepWriter(conn, WRITE_PLAIN_STEP, self._notice)
        info = conn.info
        self._identity = ("postgresql", info.host, info.port, info.dbname, self._schema())
        self._backend = info.backend_pid

    def _schema(self) -> str:
        row = self.conn.execute("SELECT current_schema()").fetchone()
        return str(row[0]) if row is not None else ""

    def function_key(self, name: str) -> FunctionKey:
        return name  # rows keep the name itself

    @property
    def max_text(self) -> int:
        return MAX_TEXT

    # -- identity, holding, change notices, closing --------------------------------

    @property
    def identity(self) -> Hashable:
        return self._identity

    def run_hold(self, run_id: str) -> PostgresHold:
        return PostgresHold(self.location, run_hold_text(self._schema_name, run_id))

    def marker_hold(self, name: str) -> PostgresHold:
        return PostgresHold(self.location, f"marker\x1f{self._schema_name}\x1f{name}")

    @property
    def _schema_name(self) -> str:
        return str(self._identity[4])

    def is_run_held(self, run_id: str) -> bool:
        with self._lock:
            self._check()
            return is_held(self.conn, run_hold_text(self._schema_name, run_id))

    def _notice(self, pid: int, payload: str) -> None:
        """A notification received (under ``_lock``): another connection's change here."""
        if pid != self._backend and payload == self._schema_name:
            self._notices += 1

    def changes(self, *, wait: bool = True) -> int | None:
        """Notices of other connections' changes to this schema received so far.

        The notifications that came in with other answers, and those waiting on the
        socket, read without a round trip (``LISTEN`` at open, migration 0003).
        """
        if not self._lock.acquire(blocking=wait):
            return None
        try:
            self._check()
            try:
                for notice in self.conn.notifies(timeout=0):
                    self._notice(notice.pid, notice.payload)
            except psycopg.OperationalError as exc:
                raise self._lost(exc) from exc
            return self._notices
        finally:
            self._lock.release()

    @contextlib.contextmanager
    def if_free(self) -> Iterator[bool]:
        if not self._lock.acquire(blocking=False):
            yield False
            return
        try:
            yield True
        finally:
            self._lock.release()

    def close(self) -> None:
        with self._lock:
            self.gone = True
            self.conn.close()

    # -- steps ------------------------------------------------------------------------

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
