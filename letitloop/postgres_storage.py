"""``PostgresStorage``: the ``Storage`` protocol on a PostgreSQL database: ``postgresql://…``.

The same journal as a SQLite file's, in a database every host reaches
(docs/postgres.md). Imported only when such a URL is opened (``schemes.py``);
it needs the extra ``letitloop[postgres]`` (psycopg 3).

- **Schema**: tables prefixed ``ll_`` in the connection's schema (its
  ``search_path``), created on first connect under a transaction-level
  advisory lock (so that many workers starting at once create them once),
  with their version in ``ll_meta``; a newer version is refused with
  SchemaVersionError, nothing changed. One row per step, sleep, wait and
  marker in ``ll_journal`` (every goal's, keyed by goal, run and key; global
  markers under goal and run ``''``), runs in ``ll_runs``.
- **Transactions**: one connection per journal, in autocommit; a step row
  is one statement, so one round trip. Operations that read before they
  write run in one transaction. ``durability``: ``"process"`` commits with
  ``synchronous_commit = local``, ``"power"`` with ``on``; a commit that
  returned survives the client's death in both.
- **Holding** a run or a marker is a session-level advisory lock
  (``pg_advisory_lock``) on a connection of the hold's own, keyed by a
  64-bit hash of what it holds; PostgreSQL releases it when that connection
  ends, including when the holder's process dies (at once for a killed
  process on the same host; over a network, once the server notices the
  connection is gone: the TCP keepalives set here, about 25 s).
- **Change notices**: every statement on ``ll_runs`` and ``ll_journal``
  counts one commit for its connection's backend in ``ll_commits``;
  ``changes`` sums the other backends' counts.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Callable, Hashable, Iterator, Sequence
from pathlib import Path
from typing import Any

from .clock import utc_iso
from .errors import JournalFileError, LetItLoopError, SchemaVersionError
from .ids import HOST, new_run_id
from .pragmas import Durability
from .storage import (
    FunctionKey,
    MarkerAt,
    MarkerClaim,
    MarkerRecord,
    RunDecision,
    RunKey,
    RunState,
    StepRow,
)

try:
    import psycopg
except ImportError:  # pragma: no cover - the extra is missing
    psycopg = None  # type: ignore[assignment]

__all__ = [
    "SCHEMA_VERSION",
    "PostgresHold",
    "PostgresStorage",
    "connect",
    "is_held",
    "migrate",
    "open_postgres",
    "run_hold_text",
]

#: The schema this letitloop writes; a database with a higher ``ll_meta.version`` is refused.
SCHEMA_VERSION = 3

#: The longest text one value may hold: SQLite's default limit, as the other stores.
MAX_TEXT = 1_000_000_000 - (1 << 20)

#: TCP keepalives on every connection: a holder whose host vanished is noticed by the
#: server after about idle + interval * count = 10 + 5 * 3 = 25 seconds.
KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
}

#: Every column of a journal row after (goal, run, key), as the in-memory store names them.
COLUMNS = (
    "status",
    "kind",
    "fn",
    "result",
    "started_at",
    "finished_at",
    "duration_ms",
    "attempt",
    "error",
    "traceback",
    "args_fp",
    "input_tokens",
    "output_tokens",
    "cost",
    "model",
    "wake_at",
    "claims",
    "crashes",
    "holder_pid",
    "holder_host",
    "holder_run",
    "holder_token",
    "holder_goal",
)
USAGE = ("input_tokens", "output_tokens", "cost", "model")

SCHEMA = """
CREATE TABLE IF NOT EXISTS ll_meta (version integer NOT NULL);
CREATE TABLE IF NOT EXISTS ll_goals (goal text PRIMARY KEY);
CREATE TABLE IF NOT EXISTS ll_runs (
    num bigserial UNIQUE,
    id text PRIMARY KEY,
    goal text NOT NULL,
    name text,
    status text NOT NULL,
    attempts integer NOT NULL,
    holder_pid integer,
    holder_host text,
    started_at text,
    updated_at text,
    finished_at text,
    input text,
    input_fp text,
    result text,
    error text,
    cancel_requested_at text,
    cancel_reason text,
    forked_from text,
    forked_at text
);
CREATE INDEX IF NOT EXISTS ll_runs_goal ON ll_runs (goal, num);
CREATE TABLE IF NOT EXISTS ll_journal (
    rowid bigserial PRIMARY KEY,
    goal text NOT NULL,
    run text NOT NULL,
    key text NOT NULL,
    status text,
    kind text,
    fn text,
    result text,
    started_at text,
    finished_at text,
    duration_ms double precision,
    attempt integer,
    error text,
    traceback text,
    args_fp text,
    input_tokens bigint,
    output_tokens bigint,
    cost double precision,
    model text,
    wake_at text,
    claims integer,
    crashes integer,
    holder_pid integer,
    holder_host text,
    holder_run text,
    holder_token text,
    holder_goal text,
    UNIQUE (goal, run, key)
);
CREATE TABLE IF NOT EXISTS ll_tries (
    run text NOT NULL,
    key text NOT NULL,
    try integer NOT NULL,
    attempt integer,
    started_at text,
    failed_at text,
    error text,
    next_at text,
    ended text NOT NULL,
    input_tokens bigint,
    output_tokens bigint,
    cost double precision,
    model text,
    PRIMARY KEY (run, key, try)
);
CREATE TABLE IF NOT EXISTS ll_attempts (
    run text NOT NULL,
    attempt integer NOT NULL,
    pid integer,
    host text,
    started_at text,
    PRIMARY KEY (run, attempt)
);
-- Version 2: the attempt's span as a W3C traceparent (letitloop/otel.py).
ALTER TABLE ll_attempts ADD COLUMN IF NOT EXISTS trace text;
-- Version 3: the version of the code each attempt ran (letitloop/versions.py).
ALTER TABLE ll_attempts ADD COLUMN IF NOT EXISTS version text;
CREATE TABLE IF NOT EXISTS ll_replays (run text NOT NULL, attempt integer, keys text[]);
CREATE TABLE IF NOT EXISTS ll_commits (pid integer PRIMARY KEY, n bigint NOT NULL);
CREATE OR REPLACE FUNCTION ll_count_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ll_commits AS c (pid, n) VALUES (pg_backend_pid(), 1)
    ON CONFLICT (pid) DO UPDATE SET n = c.n + 1;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS ll_runs_commit ON ll_runs;
CREATE TRIGGER ll_runs_commit AFTER INSERT OR UPDATE OR DELETE ON ll_runs
    FOR EACH STATEMENT EXECUTE FUNCTION ll_count_commit();
DROP TRIGGER IF EXISTS ll_journal_commit ON ll_journal;
CREATE TRIGGER ll_journal_commit AFTER INSERT OR UPDATE OR DELETE ON ll_journal
    FOR EACH STATEMENT EXECUTE FUNCTION ll_count_commit();
"""

_WRITE_STEP = (
    "INSERT INTO ll_journal (goal, run, key, status, kind, fn, result, started_at, finished_at, "
    "duration_ms, attempt, error, traceback, args_fp, input_tokens, output_tokens, cost, model, "
    "wake_at) SELECT %s::text, %s::text, %s::text, %s::text, 'step', %s::text, %s::text, "
    "%s::text, %s::text, %s::float8, %s::integer, %s::text, %s::text, %s::text, %s::bigint, "
    "%s::bigint, %s::float8, %s::text, NULL "
    # The fence: written only while the run's attempt is still this holder's (a holder
    # that lost the run to a new attempt writes nothing, whatever its lock did).
    "WHERE EXISTS (SELECT 1 FROM ll_runs WHERE id = %s AND attempts = %s) "
    "ON CONFLICT (goal, run, key) DO UPDATE SET "
    + ", ".join(
        f"{c} = excluded.{c}"
        for c in [
            "status",
            "kind",
            "fn",
            "result",
            "started_at",
            "finished_at",
            "duration_ms",
            "attempt",
            "error",
            "traceback",
            "args_fp",
            "input_tokens",
            "output_tokens",
            "cost",
            "model",
            "wake_at",
        ]
    )
)


def lock_key(text: str) -> int:
    """The 64-bit advisory lock key of ``text`` (what a hold holds), signed as bigint."""
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _driver() -> Any:
    if psycopg is None:
        raise LetItLoopError(
            "expected psycopg 3 for a postgresql:// journal; found it not installed; "
            "pip install -e '.[postgres]'"
        )
    return psycopg


def connect(location: str) -> Any:
    """A connection to ``location`` in autocommit, with keepalives; JournalFileError if none."""
    driver = _driver()
    try:
        return driver.connect(location, autocommit=True, **KEEPALIVES)
    except driver.Error as exc:
        raise JournalFileError(
            f"{redact(location)}: expected a PostgreSQL server to connect to; found "
            f"{type(exc).__name__}: {str(exc).strip()}. Start it, or fix the URL",
            path=redact(location),
        ) from exc


def redact(location: str) -> str:
    """``location`` without its password, for messages."""
    head, sep, tail = location.partition("@")
    if not sep or "://" not in head:
        return location
    scheme, _, user = head.partition("://")
    return f"{scheme}://{user.split(':', 1)[0]}@{tail}"


def migrate(conn: Any, location: str) -> None:
    """Create the schema (once, under an advisory lock), or refuse a newer one unchanged."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("letitloop schema"),))
        found = conn.execute(
            "SELECT 1 FROM pg_tables WHERE tablename = 'll_meta' "
            "AND schemaname = ANY (current_schemas(false))"
        ).fetchone()
        if found is not None:
            row = conn.execute("SELECT max(version) FROM ll_meta").fetchone()
            version = row[0] if row is not None else None
            if version is not None and version > SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"{redact(location)}: expected a letitloop schema of version "
                    f"{SCHEMA_VERSION} or older; found version {version}, written by a newer "
                    f"letitloop. Nothing was changed; upgrade letitloop",
                    path=redact(location),
                )
            if version == SCHEMA_VERSION:
                return
        conn.execute(SCHEMA)
        conn.execute("DELETE FROM ll_meta")
        conn.execute("INSERT INTO ll_meta (version) VALUES (%s)", (SCHEMA_VERSION,))


def open_postgres(location: str, durability: Durability = "process") -> PostgresStorage:
    """The storage of one journal's open of ``postgresql://…`` (the scheme's opener)."""
    conn = connect(location)
    try:
        migrate(conn, location)
        level = "local" if durability == "process" else "on"
        conn.execute(f"SET synchronous_commit = {level}")
    except BaseException:
        conn.close()
        raise
    return PostgresStorage(location, conn)


def run_hold_text(schema: str, run_id: str) -> str:
    """What a run's hold holds: its schema and its id (lock_key makes the lock's key)."""
    return f"run\x1f{schema}\x1f{run_id}"


def is_held(conn: Any, what: str) -> bool:
    """Whether a live session holds the advisory lock of ``what``; takes nothing."""
    unsigned = lock_key(f"letitloop\x1f{what}") & 0xFFFFFFFFFFFFFFFF
    row = conn.execute(
        "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1 "
        "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
        "AND classid = %s::bigint::oid AND objid = %s::bigint::oid",
        (unsigned >> 32, unsigned & 0xFFFFFFFF),
    ).fetchone()
    return row is not None


class PostgresHold:
    """One holder's advisory lock on a run or a marker, on a connection of its own."""

    __slots__ = ("_conn", "key", "location", "what")

    def __init__(self, location: str, what: str) -> None:
        self.location = location
        self.what = what
        self.key = lock_key(f"letitloop\x1f{what}")
        self._conn: Any = None

    @property
    def where(self) -> str:
        return f"{redact(self.location)} advisory lock {self.key} ({self.what!r})"

    def acquire(self, timeout: float) -> bool:
        if self._conn is not None:
            return True
        conn = connect(self.location)
        try:
            if timeout == 0:
                (got,) = conn.execute("SELECT pg_try_advisory_lock(%s)", (self.key,)).fetchone()
            else:
                ms = 0 if timeout < 0 else max(1, int(timeout * 1000))
                conn.execute(f"SET lock_timeout = {ms}")
                try:
                    conn.execute("SELECT pg_advisory_lock(%s)", (self.key,))
                    got = True
                except psycopg.errors.LockNotAvailable:
                    got = False
        except BaseException:
            conn.close()
            raise
        if not got:
            conn.close()
            return False
        self._conn = conn
        return True

    def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()  # the session's advisory locks go with it


class PostgresStorage:
    """One journal's connection to a PostgreSQL database: the whole ``Storage`` protocol."""

    def __init__(self, location: str, conn: Any) -> None:
        self.location = location
        self.conn = conn
        self.path = Path(redact(location))
        self.table = "ll_journal"
        self.run_key = RunKey(-1)
        self.goal = ""
        self._lock = threading.RLock()
        self._run_ids: dict[int, str] = {}
        self.gone = False
        info = conn.info
        self._identity = ("postgresql", info.host, info.port, info.dbname, self._schema())

    def _schema(self) -> str:
        row = self.conn.execute("SELECT current_schema()").fetchone()
        return str(row[0]) if row is not None else ""

    def function_key(self, name: str) -> FunctionKey:
        return name  # rows keep the name itself

    @property
    def max_text(self) -> int:
        return MAX_TEXT

    # -- transactions ------------------------------------------------------------------

    @contextlib.contextmanager
    def _tx(self) -> Iterator[Any]:
        """One transaction on the journal's connection, for this thread alone."""
        with self._lock:
            self._check()
            try:
                with self.conn.transaction():
                    yield self.conn
            except psycopg.OperationalError as exc:
                raise self._lost(exc) from exc

    def _run(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """One statement, its own transaction; its rows."""
        with self._lock:
            self._check()
            try:
                cur = self.conn.execute(sql, params)
                return cur.fetchall() if cur.description is not None else []
            except psycopg.OperationalError as exc:
                raise self._lost(exc) from exc

    def _check(self) -> None:
        if self.gone:
            raise JournalFileError(
                f"{self.path}: this journal's connection was closed; nothing was written. "
                f"Open a new Journal",
                path=str(self.path),
            )

    def _lost(self, exc: BaseException) -> JournalFileError:
        return JournalFileError(
            f"{self.path}: expected the PostgreSQL server to answer; found "
            f"{type(exc).__name__}: {str(exc).strip()}. What was not committed was not "
            f"recorded; open the journal again once the server is back (the run resumes)",
            path=str(self.path),
        )

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

    def changes(self, *, wait: bool = True) -> int | None:
        if not self._lock.acquire(blocking=wait):
            return None
        try:
            rows = self._run(
                "SELECT coalesce(sum(n), 0) FROM ll_commits WHERE pid <> pg_backend_pid()"
            )
            return int(rows[0][0])
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

    # -- runs -------------------------------------------------------------------------

    def _key_of(self, num: int, run_id: str) -> None:
        self._run_ids[num] = run_id
        self.run_key = RunKey(num)

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
        with self._tx() as c:
            self.goal = goal
            c.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(f"letitloop goal {goal}"),))
            c.execute("INSERT INTO ll_goals VALUES (%s) ON CONFLICT DO NOTHING", (goal,))
            if name is not None:
                row = c.execute(
                    "SELECT id, num FROM ll_runs WHERE goal = %s AND name = %s ORDER BY num "
                    "LIMIT 1",
                    (goal, name),
                ).fetchone()
            else:
                # The opener's rule (sqlite_storage.resumable_run_id): the newest unnamed
                # run for the same input that is unfinished and not cancelled.
                row = c.execute(
                    "SELECT id, num FROM ll_runs WHERE goal = %s AND name IS NULL "
                    "AND input_fp IS NOT DISTINCT FROM %s "
                    "AND status IN ('running', 'failed', 'waiting') "
                    "AND cancel_requested_at IS NULL ORDER BY num DESC LIMIT 1",
                    (goal, input_fp),
                ).fetchone()
            if row is not None:
                self._key_of(row[1], row[0])
                return row[0], False
            run_id = new_run_id(now)
            hold(run_id)  # held before the run exists; a refusal leaves nothing behind
            started = utc_iso(now)
            (num,) = c.execute(
                "INSERT INTO ll_runs (id, goal, name, status, attempts, holder_pid, holder_host, "
                "started_at, updated_at, input, input_fp) VALUES "
                "(%s, %s, %s, 'running', 1, %s, %s, %s, %s, %s, %s) RETURNING num",
                (run_id, goal, name, os.getpid(), HOST, started, started, input_text, input_fp),
            ).fetchone()
            c.execute(
                "INSERT INTO ll_attempts (run, attempt, pid, host, started_at, version) "
                "VALUES (%s, 1, %s, %s, %s, %s)",
                (run_id, os.getpid(), HOST, started, version),
            )
            self._key_of(num, run_id)
        return run_id, True

    def claim_run(
        self,
        run_id: str,
        now: float,
        decide: Callable[[RunState | None], RunDecision],
        *,
        version: str | None = None,
    ) -> tuple[RunDecision, RunState | None]:
        with self._tx() as c:
            row = c.execute(
                "SELECT status, attempts, result, name, cancel_requested_at, cancel_reason, "
                "finished_at FROM ll_runs WHERE id = %s FOR UPDATE",
                (run_id,),
            ).fetchone()
            found = None if row is None else RunState(*row[:6])
            claim = decide(found)
            stamp = utc_iso(now)
            if claim == "cancel" and found is not None and found.status != "cancelled":
                c.execute(
                    "UPDATE ll_runs SET status = 'cancelled', finished_at = "
                    "coalesce(finished_at, cancel_requested_at, %s), updated_at = %s "
                    "WHERE id = %s",
                    (stamp, stamp, run_id),
                )
            elif claim == "resume" and found is not None:
                self._keep_left_usage(c, run_id, stamp, None)
                attempts = found.attempts + 1
                found = found._replace(attempts=attempts)
                c.execute(
                    "UPDATE ll_runs SET status = 'running', attempts = %s, holder_pid = %s, "
                    "holder_host = %s, updated_at = %s WHERE id = %s",
                    (attempts, os.getpid(), HOST, stamp, run_id),
                )
                c.execute(
                    "INSERT INTO ll_attempts (run, attempt, pid, host, started_at, version) "
                    "VALUES (%s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT DO NOTHING",
                    (run_id, attempts, os.getpid(), HOST, stamp, version),
                )
        return claim, found

    def run_holder(self, run_id: str) -> tuple[int | None, str | None, str | None] | None:
        rows = self._run(
            "SELECT holder_pid, holder_host, updated_at FROM ll_runs WHERE id = %s", (run_id,)
        )
        return None if not rows else (rows[0][0], rows[0][1], rows[0][2])

    def _end_run(self, run_id: str, sets: str, values: Sequence[Any]) -> None:
        self._run(f"UPDATE ll_runs SET {sets} WHERE id = %s", (*values, run_id))

    def complete_run(self, run_id: str, now: float, result: str | None) -> None:
        at = utc_iso(now)
        self._end_run(
            run_id,
            "status = 'completed', finished_at = %s, updated_at = %s, result = %s, error = NULL",
            (at, at, result),
        )

    def fail_run(self, run_id: str, now: float, error: str) -> None:
        self._end_run(
            run_id, "status = 'failed', updated_at = %s, error = %s", (utc_iso(now), error)
        )

    def cancel_run(self, run_id: str, now: float, error: str) -> None:
        at = utc_iso(now)
        self._end_run(
            run_id,
            "status = 'cancelled', finished_at = %s, updated_at = %s, error = %s",
            (at, at, error),
        )

    def leave_waiting(self, run_id: str, now: float) -> None:
        self._end_run(run_id, "status = 'waiting', updated_at = %s", (utc_iso(now),))

    # -- steps ------------------------------------------------------------------------

    def _done(
        self, run_id: str, prefix: str = ""
    ) -> list[tuple[str, str, str | None, int, int | None]]:
        rows = self._run(
            "SELECT key, fn, args_fp, rowid FROM ll_journal WHERE goal = %s AND run = %s "
            "AND starts_with(key, %s) AND kind IN ('step', 'sleep', 'wait') "
            "AND status = 'done' ORDER BY rowid",
            (self.goal, run_id, prefix),
        )
        # No checksum column yet (issue 35's row checksums are SQLite's and the memory
        # store's): a row without one replays unchecked, as a SQLite row written before 0012.
        return [(k, f, a, r, None) for k, f, a, r in rows]

    def recorded_steps(
        self, run_id: str
    ) -> tuple[list[tuple[str, str, str | None, int, int | None]], set[str]]:
        markers = self._run(
            "SELECT key FROM ll_journal WHERE goal = %s AND run = %s AND kind = 'marker'",
            (self.goal, run_id),
        )
        return self._done(run_id), {k for (k,) in markers}

    def recorded_under(
        self, run_id: str, prefix: str
    ) -> list[tuple[str, str, str | None, int, int | None]]:
        return self._done(run_id, prefix)

    def results(self, handles: Sequence[int]) -> dict[int, str | None]:
        rows = self._run(
            "SELECT rowid, result FROM ll_journal WHERE rowid = ANY(%s)", (list(handles),)
        )
        return {r: t for r, t in rows}

    def _step_params(self, row: StepRow) -> tuple[Any, ...]:
        started, duration = row.started, row.duration
        return (
            self.goal,
            self._run_ids[row.run],
            row.key,
            row.status,
            str(row.fn),
            row.result,
            utc_iso(started / 1e6),
            utc_iso((started + duration) / 1e6),
            duration / 1000.0,
            row.attempt,
            row.error,
            row.traceback,
            row.args_fp,
            row.input_tokens,
            row.output_tokens,
            row.cost,
            row.model,
            self._run_ids[row.run],
            row.attempt,
        )

    def write_step(self, row: StepRow) -> None:
        with self._lock:
            self._check()
            try:
                cur = self.conn.execute(_WRITE_STEP, self._step_params(row))
            except psycopg.OperationalError as exc:
                raise self._lost(exc) from exc
            if cur.rowcount != 1:
                raise self._fenced(row)

    def write_steps(self, rows: Sequence[StepRow]) -> None:
        with self._tx() as c:
            for row in rows:
                if c.execute(_WRITE_STEP, self._step_params(row)).rowcount != 1:
                    raise self._fenced(row)

    def _fenced(self, row: StepRow) -> JournalFileError:
        run_id = self._run_ids[row.run]
        return JournalFileError(
            f"{self.path}: step {row.key!r} of run {run_id}: expected the run to be still held "
            f"by this journal's attempt {row.attempt}; found it taken by another attempt (this "
            f"holder's lock was lost, as when its connection was cut). Nothing was written; "
            f"this journal must stop: the run goes on with its new holder",
            path=str(self.path),
        )

    def try_write_steps(self, rows: Sequence[StepRow]) -> bool:
        if not self._lock.acquire(blocking=False):
            return False
        try:
            self.write_steps(rows)
        finally:
            self._lock.release()
        return True

    # -- rows by name, for markers and the run's primitives ------------------------------

    def _get(self, c: Any, goal: str, run: str, key: str) -> dict[str, Any] | None:
        cur = c.execute(
            f"SELECT rowid, {', '.join(COLUMNS)} FROM ll_journal "
            "WHERE goal = %s AND run = %s AND key = %s FOR UPDATE",
            (goal, run, key),
        )
        row = cur.fetchone()
        return None if row is None else dict(zip(("rowid", *COLUMNS), row, strict=True))

    def _put(self, c: Any, goal: str, run: str, key: str, values: dict[str, Any]) -> None:
        names = list(values)
        c.execute(
            f"INSERT INTO ll_journal (goal, run, key, {', '.join(names)}) VALUES "
            f"(%s, %s, %s, {', '.join(['%s'] * len(names))}) ON CONFLICT (goal, run, key) "
            f"DO UPDATE SET {', '.join(f'{n} = excluded.{n}' for n in names)}",
            (goal, run, key, *values.values()),
        )

    # -- markers ----------------------------------------------------------------------

    def _marker_place(self, at: MarkerAt) -> tuple[str, str, str]:
        if at.scope == "global":
            return "", "", at.name
        return self.goal, at.run, at.name

    @staticmethod
    def _record(row: dict[str, Any]) -> MarkerRecord:
        return MarkerRecord(
            kind=row["kind"],
            status=row["status"],
            claims=row["claims"],
            crashes=row["crashes"],
            holder_pid=row["holder_pid"],
            holder_host=row["holder_host"],
            holder_run=row["holder_run"],
            started_at=row["started_at"],
            holder_token=row["holder_token"],
        )

    def marker(self, at: MarkerAt) -> MarkerRecord | None:
        with self._tx() as c:
            row = self._get(c, *self._marker_place(at))
            return None if row is None else self._record(row)

    def claim_marker(
        self, at: MarkerAt, holder: tuple[int, str, str, str], now: float, attempt: int
    ) -> MarkerClaim:
        place = self._marker_place(at)
        with self._tx() as c:
            row = self._get(c, *place)
            claims = crashes = 0
            if row is not None:
                claims, crashes = row["claims"] or 0, row["crashes"] or 0
                if row["kind"] != "marker" or row["status"] == "done":
                    return MarkerClaim(row["kind"], False, claims, crashes)
                if row["status"] == "pending":  # its holder died inside the block
                    crashes += 1
            pid, host, run, token = holder
            values: dict[str, Any] = dict(
                kind="marker",
                status="pending",
                started_at=utc_iso(now),
                finished_at=None,
                duration_ms=None,
                attempt=attempt,
                claims=claims + 1,
                crashes=crashes,
                holder_pid=pid,
                holder_host=host,
                holder_run=run,
                holder_token=token,
                error=None,
                traceback=None,
            )
            if at.scope == "global":
                values["holder_goal"] = at.goal
            self._put(c, *place, values)
        return MarkerClaim("marker", True, claims + 1, crashes)

    def finish_marker(
        self,
        at: MarkerAt,
        token: str,
        now: float,
        duration_ms: float,
        failure: tuple[str, str, int] | None,
    ) -> tuple[bool, MarkerRecord | None]:
        place = self._marker_place(at)
        with self._tx() as c:
            row = self._get(c, *place)
            if row is not None and row["status"] == "pending" and row["holder_token"] == token:
                values: dict[str, Any] = dict(finished_at=utc_iso(now), duration_ms=duration_ms)
                if failure is None:
                    values["status"] = "done"
                else:
                    error, traceback, interrupted = failure
                    values.update(
                        status="failed",
                        error=error,
                        traceback=traceback,
                        crashes=(row["crashes"] or 0) + interrupted,
                    )
                self._put(c, *place, values)
                return False, None
            return True, None if row is None else self._record(row)

    # -- the run's primitives -----------------------------------------------------------

    def write_running(self, rows: Sequence[Sequence[Any]]) -> None:
        with self._tx() as c:
            for run, key, fn, started_at, duration_ms, attempt, args_fp in rows:
                old = self._get(c, self.goal, run, key)
                if old is not None and not (
                    old["status"] == "running"
                    or (
                        old["status"] != "done"
                        and (
                            (old["attempt"] or 0) < attempt
                            or (old["started_at"] or "") < started_at
                        )
                    )
                ):
                    continue
                self._put(
                    c,
                    self.goal,
                    run,
                    key,
                    dict(
                        kind=old["kind"] if old is not None else "step",
                        status="running",
                        fn=fn,
                        result=None,
                        started_at=started_at,
                        finished_at=None,
                        duration_ms=duration_ms,
                        attempt=attempt,
                        error=None,
                        traceback=None,
                        args_fp=args_fp,
                    ),
                )

    def cancel_request(self, run_id: str) -> tuple[str | None, str | None] | None:
        rows = self._run(
            "SELECT cancel_requested_at, cancel_reason FROM ll_runs WHERE id = %s", (run_id,)
        )
        return None if not rows else (rows[0][0], rows[0][1])

    def _row(self, run_id: str, key: str) -> dict[str, Any] | None:
        with self._tx() as c:
            return self._get(c, self.goal, run_id, key)

    def pause(self, run_id: str, key: str) -> tuple[str, str, str | None, str | None] | None:
        r = self._row(run_id, key)
        return None if r is None else (r["kind"], r["status"], r["started_at"], r["wake_at"])

    def start_pause(self, row: Sequence[Any]) -> None:
        run, key, kind, status, fn, started_at, attempt, wake_at = row
        with self._tx() as c:
            self._put(
                c,
                self.goal,
                run,
                key,
                dict(
                    kind=kind,
                    status=status,
                    fn=fn,
                    result=None,
                    started_at=started_at,
                    finished_at=None,
                    duration_ms=None,
                    attempt=attempt,
                    error=None,
                    traceback=None,
                    args_fp="",
                    wake_at=wake_at,
                ),
            )

    def finish_sleep(
        self, run_id: str, key: str, finished_at: str, duration_ms: float, attempt: int
    ) -> None:
        self._run(
            "UPDATE ll_journal SET status = 'done', finished_at = %s, duration_ms = %s, "
            "attempt = %s WHERE goal = %s AND run = %s AND key = %s",
            (finished_at, duration_ms, attempt, self.goal, run_id, key),
        )

    def wait_ending(self, run_id: str, key: str) -> tuple[str, str | None, str | None] | None:
        r = self._row(run_id, key)
        return None if r is None else (r["status"], r["result"], r["error"])

    def time_out_wait(
        self, run_id: str, key: str, error: str, finished_at: str, duration_ms: float
    ) -> None:
        self._run(
            "UPDATE ll_journal SET status = 'done', error = %s, finished_at = %s, "
            "duration_ms = %s WHERE goal = %s AND run = %s AND key = %s AND status = 'waiting'",
            (error, finished_at, duration_ms, self.goal, run_id, key),
        )

    def recorded_wait(self, handle: int) -> tuple[str | None, str | None] | None:
        rows = self._run("SELECT result, error FROM ll_journal WHERE rowid = %s", (handle,))
        return None if not rows else (rows[0][0], rows[0][1])

    def step_tries(self, run_id: str) -> list[tuple[str, int, str | None, str]]:
        rows = self._run(
            "SELECT key, try, next_at, ended FROM ll_tries WHERE run = %s ORDER BY key, try",
            (run_id,),
        )
        return [(k, n, t, e) for k, n, t, e in rows]

    def record_try(self, try_row: Sequence[Any], retrying_row: Sequence[Any] | None) -> None:
        (run, key, n, attempt, started_at, failed_at, error, next_at, *usage) = try_row
        with self._tx() as c:
            c.execute(
                "INSERT INTO ll_tries VALUES (%s, %s, %s, %s, %s, %s, %s, %s, 'failed', "
                "%s, %s, %s, %s) ON CONFLICT (run, key, try) DO UPDATE SET "
                "attempt = excluded.attempt, started_at = excluded.started_at, "
                "failed_at = excluded.failed_at, error = excluded.error, "
                "next_at = excluded.next_at, ended = excluded.ended, "
                "input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens, "
                "cost = excluded.cost, model = excluded.model",
                (run, key, n, attempt, started_at, failed_at, error, next_at, *usage),
            )
            if retrying_row is not None:
                run, key, fn, started, finished, duration, attempt, err, tb, fp, wake = retrying_row
                self._put(
                    c,
                    self.goal,
                    run,
                    key,
                    dict(
                        kind="step",
                        status="retrying",
                        fn=fn,
                        result=None,
                        started_at=started,
                        finished_at=finished,
                        duration_ms=duration,
                        attempt=attempt,
                        error=err,
                        traceback=tb,
                        args_fp=fp,
                        wake_at=wake,
                        **dict.fromkeys(USAGE),
                    ),
                )

    # -- what the run consumed and replayed ---------------------------------------------

    def record_usage(self, row: Sequence[Any]) -> None:
        run, key, fn, started_at, attempt, args_fp, *usage = row
        with self._tx() as c:
            old = self._get(c, self.goal, run, key)
            if old is not None and old["status"] == "done":
                return
            self._put(
                c,
                self.goal,
                run,
                key,
                dict(
                    kind="step",
                    status="running",
                    fn=fn,
                    result=None,
                    started_at=started_at,
                    finished_at=None,
                    duration_ms=None,
                    attempt=attempt,
                    error=None,
                    traceback=None,
                    args_fp=args_fp,
                    wake_at=None,
                    **dict(zip(USAGE, usage, strict=True)),
                ),
            )

    def _keep_left_usage(self, c: Any, run_id: str, stamp: str, prefix: str | None) -> None:
        """Inside a transaction: usage left on ``running``/``failed`` rows moves to a try."""
        rows = c.execute(
            "SELECT key, status, attempt, started_at, finished_at, error, input_tokens, "
            "output_tokens, cost, model FROM ll_journal WHERE goal = %s AND run = %s "
            "AND status IN ('running', 'failed') AND starts_with(key, %s) "
            "AND (input_tokens IS NOT NULL OR output_tokens IS NOT NULL OR cost IS NOT NULL) "
            "ORDER BY rowid FOR UPDATE",
            (self.goal, run_id, prefix or ""),
        ).fetchall()
        for key, status, attempt, started_at, finished_at, error, *usage in rows:
            (n,) = c.execute(
                "SELECT coalesce(max(try), 0) + 1 FROM ll_tries WHERE run = %s AND key = %s",
                (run_id, key),
            ).fetchone()
            c.execute(
                "INSERT INTO ll_tries VALUES "
                "(%s, %s, %s, %s, %s, %s, %s, NULL, %s, %s, %s, %s, %s)",
                (
                    run_id,
                    key,
                    n,
                    attempt,
                    started_at or stamp,
                    finished_at or stamp,
                    error
                    or (
                        f"Interrupted: attempt {attempt} ended during this call (its "
                        f"process died, or the call was cancelled)"
                    ),
                    "crashed" if status == "running" else "failed",
                    *usage,
                ),
            )
            c.execute(
                "UPDATE ll_journal SET input_tokens = NULL, output_tokens = NULL, cost = NULL, "
                "model = NULL WHERE goal = %s AND run = %s AND key = %s",
                (self.goal, run_id, key),
            )

    def keep_left_usage(self, run_id: str, now: float, prefix: str) -> None:
        with self._tx() as c:
            self._keep_left_usage(c, run_id, utc_iso(now), prefix)

    def record_replays(self, run_id: str, attempt: int, keys: Sequence[str]) -> None:
        self._run("INSERT INTO ll_replays VALUES (%s, %s, %s)", (run_id, attempt, list(keys)))

    def usage_of(
        self, run_id: str, keys: Sequence[str]
    ) -> tuple[int | None, int | None, float | None]:
        row = self._run(
            "SELECT sum(input_tokens), sum(output_tokens), sum(cost) FROM ll_journal "
            "WHERE goal = %s AND run = %s AND key = ANY(%s)",
            (self.goal, run_id, list(keys)),
        )[0]
        return (
            None if row[0] is None else int(row[0]),
            None if row[1] is None else int(row[1]),
            None if row[2] is None else float(row[2]),
        )

    def trace_attempt(self, run_id: str, attempt: int, trace: str) -> str | None:
        with self._tx() as c:
            c.execute(
                "UPDATE ll_attempts SET trace = %s WHERE run = %s AND attempt = %s",
                (trace, run_id, attempt),
            )
            row = c.execute(
                "SELECT trace FROM ll_attempts WHERE run = %s AND attempt < %s "
                "AND trace IS NOT NULL ORDER BY attempt DESC LIMIT 1",
                (run_id, attempt),
            ).fetchone()
        return None if row is None else str(row[0])
