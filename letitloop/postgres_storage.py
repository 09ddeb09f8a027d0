"""``PostgresStorage``: the ``Storage`` protocol on a PostgreSQL database: ``postgresql://…``.

The same journal as a SQLite file's, in a database every host reaches
(docs/postgres.md). Imported only when such a URL is opened (``schemes.py``);
it needs the extra ``letitloop[postgres]`` (psycopg 3).

- **Schema**: tables prefixed ``ll_`` in the connection's schema (its
  ``search_path``), made and moved forward by the numbered files of
  ``migrations/postgres/`` (:func:`migrate`: under an advisory lock, so that
  many workers starting at once migrate once), with their version in
  ``ll_meta``; a newer version is refused with SchemaVersionError, nothing
  changed. One row per step, sleep, wait and marker in ``ll_journal``
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
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import threading
from collections.abc import Callable, Hashable, Iterator, Sequence
from datetime import timezone
from functools import lru_cache
from pathlib import Path
from typing import Any

from . import row_rules
from .chains import Chain
from .clock import utc_iso
from .errors import JournalFileError, LetItLoopError, SchemaVersionError
from .ids import HOST, new_run_id
from .migrate import migrations_dir
from .postgres_seals import seal_row, seal_step
from .postgres_seals import start as start_sealing
from .postgres_seals import write_step as write_sealed
from .postgres_steps import StepWriter
from .pragmas import Durability
from .row_rules import MAX_TEXT, ROW_COLUMNS, STEP_COLUMNS, TRY_COLUMNS, USAGE
from .storage import (
    DoneRow,
    FunctionKey,
    MarkerAt,
    MarkerClaim,
    MarkerRecord,
    RunDecision,
    RunKey,
    RunState,
    StepRow,
    step_row_of,
)

try:
    import psycopg
except ImportError:  # pragma: no cover - the extra is missing
    psycopg = None  # type: ignore[assignment]

__all__ = [
    "CHANNEL",
    "PostgresHold",
    "PostgresStorage",
    "connect",
    "is_held",
    "migrate",
    "migrations",
    "open_postgres",
    "run_hold_text",
    "schema_version",
    "schema_version_of",
]

#: The numbered SQL files of the PostgreSQL schema: ``migrations/postgres/NNNN_name.sql``.
_MIGRATION_FILE = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")

#: TCP keepalives on every connection: a holder whose host vanished is noticed by the
#: server after about idle + interval * count = 10 + 5 * 3 = 25 seconds.
KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
}

#: Every column of a journal row after (goal, run, key), as the in-memory store names them.
COLUMNS = tuple(c for c in ROW_COLUMNS if c not in ("run", "key"))

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


def _write_step_sql(columns: Sequence[str]) -> str:
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
_WRITE_STEP = _write_step_sql(STEP_COLUMNS)
#: A usual step (no error, no usage): 6 fewer values to bind and parse.
_WRITE_PLAIN_STEP = _write_step_sql(PLAIN_COLUMNS)

#: How many bytes of results ``recorded_steps`` reads with the run's rows, in the same
#: round trip: the results of the done rows in journal order, as long as their total
#: stays within this, so a run whose results fit replays in the one round trip that
#: finds them (a run of 1,000 or 100,000 small results alike); the rest are read by
#: ``results`` as replay asks for them, a chunk at a time (``replay.RESULT_CHUNK``),
#: and no more than this is held in memory at once.
PREFETCH_BYTES = 32 << 20

#: The channel on which inspectors (lil send, lil cancel) and statements on ``ll_runs``
#: notify a change; the payload is the schema changed (migration 0003).
CHANNEL = "letitloop"


#: An attempt's row, with the ``lil watch`` that started its process (migration 0006).
#: A goal's encryption key check (migration 0008; opening.check_key).
_KEY_CHECK = "SELECT key_check FROM ll_key_checks WHERE goal = %s"
_RECORD_KEY_CHECK = (
    "INSERT INTO ll_key_checks (goal, key_check, set_at) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING"
)

_INSERT_ATTEMPT = (
    "INSERT INTO ll_attempts (run, attempt, pid, host, started_at, version, watch_id, "
    "watch_attempt) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)


def _watcher() -> tuple[str | None, int | None]:
    """The ``lil watch`` session and start of this process (set in its environment), if any."""
    attempt = os.environ.get("LETITLOOP_ATTEMPT", "")
    return os.environ.get("LETITLOOP_WATCH_ID"), int(attempt) if attempt.isdigit() else None


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
        return _WRITE_PLAIN_STEP, (
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
    return _WRITE_STEP, (goal, *values, row.run, row.attempt)


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
    """A connection to ``location`` in autocommit, with keepalives, reading times as
    ISO-8601 UTC text (as every store gives them); JournalFileError if none."""
    driver = _driver()
    try:
        conn = driver.connect(location, autocommit=True, **KEEPALIVES)
    except driver.Error as exc:
        raise JournalFileError(
            f"{redact(location)}: expected a PostgreSQL server to connect to; found "
            f"{type(exc).__name__}: {str(exc).strip()}. Start it, or fix the URL",
            path=redact(location),
        ) from exc
    conn.adapters.register_loader("timestamptz", _iso_loader())
    # Every int as a bigint: psycopg otherwise types an int by its size (int2, int4,
    # int8), so a statement whose values differ in size (a checksum, say) has several
    # signatures and is prepared once per signature, parsed again meanwhile.
    conn.adapters.register_dumper(int, driver.types.numeric.Int8Dumper)
    return conn


@lru_cache(maxsize=1)
def _iso_loader() -> type:
    """A psycopg loader of ``timestamptz`` as ``clock.utc_iso``'s text (written back as is)."""
    from psycopg.types.datetime import TimestamptzLoader

    class IsoLoader(TimestamptzLoader):
        def load(self, data: Any) -> str:  # type: ignore[override]
            moment = super().load(data).astimezone(timezone.utc)
            return str(moment.isoformat(timespec="microseconds"))

    return IsoLoader


def redact(location: str) -> str:
    """``location`` without its password, for messages."""
    head, sep, tail = location.partition("@")
    if not sep or "://" not in head:
        return location
    scheme, _, user = head.partition("://")
    return f"{scheme}://{user.split(':', 1)[0]}@{tail}"


@lru_cache(maxsize=1)
def migrations() -> tuple[tuple[int, str, str], ...]:
    """``(number, name, sql)`` of every PostgreSQL migration this version knows, in order."""
    folder = migrations_dir() / "postgres"
    names = sorted(n[:-4] for n in os.listdir(folder) if _MIGRATION_FILE.match(n))
    return tuple((int(n[:4]), n, (folder / f"{n}.sql").read_text(encoding="utf-8")) for n in names)


def schema_version() -> int:
    """The schema this letitloop writes; a database with a higher ``ll_meta.version`` is refused."""
    return migrations()[-1][0]


def schema_version_of(conn: Any) -> int:
    """The database's schema version (0: no letitloop tables in the connection's schema)."""
    (found,) = conn.execute("SELECT to_regclass('ll_meta') IS NOT NULL").fetchone()
    if not found:
        return 0
    row = conn.execute("SELECT coalesce(max(version), 0) FROM ll_meta").fetchone()
    return int(row[0]) if row is not None else 0


def _refuse_newer(version: int, location: str) -> None:
    if version > schema_version():
        raise SchemaVersionError(
            f"{redact(location)}: expected a letitloop schema of version "
            f"{schema_version()} or older; found version {version}, written by a newer "
            f"letitloop. Nothing was changed; upgrade letitloop",
            path=redact(location),
        )


def migrate(conn: Any, location: str) -> None:
    """Bring the schema up to :func:`schema_version`, or refuse a newer one unchanged.

    One look when it is current (no lock). Otherwise under an advisory lock, so
    that workers starting at once migrate once: the first applies the numbered
    files it lacks, each recorded in ``ll_migrations`` (from 0002 on), in one
    transaction; the others wait, then find it done.
    """
    version = schema_version_of(conn)
    _refuse_newer(version, location)
    if version == schema_version():
        return
    key = lock_key("letitloop schema")
    # A session lock taken before the transaction begins, not a transaction's: a
    # transaction begun before another worker's migration committed could still read
    # the catalog as it was (a backend takes in others' catalog changes when a
    # transaction begins, not when an advisory lock is granted).
    conn.execute("SELECT pg_advisory_lock(%s)", (key,))
    try:
        with conn.transaction():
            version = schema_version_of(conn)  # again: another worker may have done it
            _refuse_newer(version, location)
            for number, name, sql in migrations():
                if number <= version:
                    continue
                conn.execute(sql)
                if number >= 2:  # ll_migrations is 0002's
                    conn.execute(
                        "INSERT INTO ll_migrations (version, name) VALUES (%s, %s)",
                        (number, name),
                    )
            if version < schema_version():
                conn.execute("DELETE FROM ll_meta")
                conn.execute("INSERT INTO ll_meta (version) VALUES (%s)", (schema_version(),))
    finally:
        if not conn.closed:
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))


def open_postgres(location: str, durability: Durability = "process") -> PostgresStorage:
    """The storage of one journal's open of ``postgresql://…`` (the scheme's opener)."""
    conn = connect(location)
    try:
        migrate(conn, location)
        level = "local" if durability == "process" else "on"
        # Change notices (``changes``) come as notifications on this connection.
        conn.execute(f"SET synchronous_commit = {level}; LISTEN {CHANNEL}")
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
    """One journal's connection to a PostgreSQL database: the whole ``Storage`` protocol.

    What each write of a marker, a step in flight, a pause, a try or usage sets
    is ``row_rules.py``'s, shared with the in-memory store. Every write is
    fenced: made only while the run's attempt is still this journal's (see
    ``_WRITE_STEP`` and ``_fence``).
    """

    def __init__(self, location: str, conn: Any) -> None:
        self.location = location
        self.conn = conn
        self.path = Path(redact(location))
        self.table = "ll_journal"
        self.run_key = RunKey(-1)
        self.goal = ""
        self._lock = threading.RLock()
        self._run_ids: dict[int, str] = {}
        #: The run this journal holds and its attempt: what every write is fenced on.
        self._held: tuple[str, int] | None = None
        #: Results read with ``recorded_steps``, by rowid, until ``results`` hands them out
        #: (at most PREFETCH_BYTES of them).
        self._prefetched: dict[int, str | None] = {}
        #: Change notices received from other connections (``changes``).
        self._notices = 0
        self.gone = False
        #: The runs this journal seals: run id -> its chain (postgres_seals.py).
        self.sealing: dict[str, Chain] = {}
        #: The cursor of ``write_step``'s statements, and its usual one's faster twin.
        self._steps = conn.cursor()
        self._raw = StepWriter(conn, _WRITE_PLAIN_STEP, self._notice)
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

    # -- transactions ------------------------------------------------------------------

    @contextlib.contextmanager
    def _tx(self, fenced: bool = True) -> Iterator[Any]:
        """One transaction on the journal's connection, for this thread alone; ``fenced``:
        refused (nothing written) unless the run is still this journal's attempt."""
        with self._lock:
            self._check()
            try:
                with self.conn.transaction():
                    if fenced:
                        self._fence(self.conn)
                    yield self.conn
            except psycopg.OperationalError as exc:
                raise self._lost(exc) from exc

    def _fence(self, c: Any) -> None:
        """Refuse the transaction unless the held run's attempt is still this journal's.

        A key-share lock on the run's row: a new holder's claim (FOR UPDATE) waits
        for this transaction to end, and this one for a claim under way.
        """
        if self._held is None:
            return
        run_id, attempt = self._held
        row = c.execute(
            "SELECT attempts FROM ll_runs WHERE id = %s FOR KEY SHARE", (run_id,)
        ).fetchone()
        if row is None or row[0] != attempt:
            raise self._fenced(run_id, attempt, "this write")

    def _run(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """One statement, its own transaction (a read, or a write of no run); its rows."""
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

    def _fenced(self, run_id: str, attempt: int, what: str) -> JournalFileError:
        return JournalFileError(
            f"{self.path}: {what} of run {run_id}: expected the run to be still held by this "
            f"journal's attempt {attempt}; found it taken by another attempt (this holder's "
            f"lock was lost, as when its connection was cut). Nothing was written; this "
            f"journal must stop: the run goes on with its new holder",
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
        with self._tx(fenced=False) as c:
            self.goal = goal
            self._held = None
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
                _INSERT_ATTEMPT, (run_id, 1, os.getpid(), HOST, started, version, *_watcher())
            )
            self._key_of(num, run_id)
        self._held = (run_id, 1)
        return run_id, True

    def claim_run(
        self,
        run_id: str,
        now: float,
        decide: Callable[[RunState | None], RunDecision],
        *,
        version: str | None = None,
    ) -> tuple[RunDecision, RunState | None]:
        with self._tx(fenced=False) as c:
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
                    _INSERT_ATTEMPT + " ON CONFLICT DO NOTHING",
                    (run_id, attempts, os.getpid(), HOST, stamp, version, *_watcher()),
                )
        self._held = None if found is None else (run_id, found.attempts)
        return claim, found

    def run_holder(self, run_id: str) -> tuple[int | None, str | None, str | None] | None:
        rows = self._run(
            "SELECT holder_pid, holder_host, updated_at FROM ll_runs WHERE id = %s", (run_id,)
        )
        return None if not rows else (rows[0][0], rows[0][1], rows[0][2])

    def _end_run(self, run_id: str, sets: str, values: Sequence[Any]) -> None:
        with self._tx() as c:
            c.execute(f"UPDATE ll_runs SET {sets} WHERE id = %s", (*values, run_id))

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

    def seal_run(self, run_id: str, secret: bytes) -> None:
        """Chain the run's final rows under ``secret`` from now on (postgres_seals.py)."""
        with self._tx() as c:
            self.sealing[run_id] = start_sealing(c, self.goal, run_id, secret)

    def key_check(self, goal: str, check: str | None, now: float) -> str | None:
        """The check value of the key ``goal``'s values are encrypted with (``ll_key_checks``,
        migration 0008); ``check`` is recorded first when none is, in a transaction of its own
        (the first opener's value wins: the read after the insert sees the one committed)."""
        rows = self._run(_KEY_CHECK, (goal,))  # a read; a write only the first time
        if rows or check is None:
            return str(rows[0][0]) if rows else None
        with self._tx(fenced=False) as c:
            c.execute(_RECORD_KEY_CHECK, (goal, check, utc_iso(now)))
            return str(c.execute(_KEY_CHECK, (goal,)).fetchone()[0])

    def leave_waiting(self, run_id: str, now: float) -> None:
        self._end_run(run_id, "status = 'waiting', updated_at = %s", (utc_iso(now),))

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
            if cached:  # read with recorded_steps: handed out once
                found = {h: cached.pop(h) for h in handles if h in cached}
        missing = [h for h in handles if h not in found]
        if missing:
            found.update(
                self._run("SELECT rowid, result FROM ll_journal WHERE rowid = ANY(%s)", (missing,))
            )
        return found

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
                    fast = self._raw.write(params) if sql is _WRITE_PLAIN_STEP else None
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

    # -- rows by name, for markers and the run's primitives ------------------------------

    def _get(self, c: Any, goal: str, run: str, key: str) -> dict[str, Any] | None:
        cur = c.execute(
            f"SELECT rowid, {', '.join(COLUMNS)} FROM ll_journal "
            "WHERE goal = %s AND run = %s AND key = %s FOR UPDATE",
            (goal, run, key),
        )
        row = cur.fetchone()
        if row is None:
            return None
        return dict(zip(("rowid", *COLUMNS), row, strict=True), run=run, key=key)

    def _put(self, c: Any, goal: str, run: str, key: str, values: dict[str, Any]) -> None:
        names = list(values)
        c.execute(
            f"INSERT INTO ll_journal (goal, run, key, {', '.join(names)}) VALUES "
            f"(%s, %s, %s, {', '.join(['%s'] * len(names))}) ON CONFLICT (goal, run, key) "
            f"DO UPDATE SET {', '.join(f'{n} = excluded.{n}' for n in names)}",
            (goal, run, key, *values.values()),
        )
        if self.sealing:
            seal_row(c, self.sealing, goal, run, key, values.get("status"))

    # -- markers ----------------------------------------------------------------------

    def _marker_place(self, at: MarkerAt) -> tuple[str, str, str]:
        if at.scope == "global":
            return "", "", at.name
        return self.goal, at.run, at.name

    def marker(self, at: MarkerAt) -> MarkerRecord | None:
        with self._tx(fenced=False) as c:
            row = self._get(c, *self._marker_place(at))
            return None if row is None else row_rules.marker_record(row)

    def claim_marker(
        self, at: MarkerAt, holder: tuple[int, str, str, str], now: float, attempt: int
    ) -> MarkerClaim:
        place = self._marker_place(at)
        with self._tx() as c:
            claim, values = row_rules.claim_marker(self._get(c, *place), at, holder, now, attempt)
            if values is not None:
                self._put(c, *place, values)
        return claim

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
            values = row_rules.finish_marker(row, at, token, now, duration_ms, failure)
            if values is not None:
                self._put(c, *place, values)
                return False, None
            return True, None if row is None else row_rules.marker_record(row)

    # -- the run's primitives -----------------------------------------------------------

    def write_running(self, rows: Sequence[Sequence[Any]]) -> None:
        with self._tx() as c:
            for entry in rows:
                run, key = entry[0], entry[1]
                values = row_rules.running_values(self._get(c, self.goal, run, key), entry)
                if values is not None:
                    self._put(c, self.goal, run, key, values)

    def cancel_request(self, run_id: str) -> tuple[str | None, str | None] | None:
        rows = self._run(
            "SELECT cancel_requested_at, cancel_reason FROM ll_runs WHERE id = %s", (run_id,)
        )
        return None if not rows else (rows[0][0], rows[0][1])

    def _row(self, run_id: str, key: str) -> dict[str, Any] | None:
        with self._tx(fenced=False) as c:
            return self._get(c, self.goal, run_id, key)

    def pause(self, run_id: str, key: str) -> tuple[str, str, str | None, str | None] | None:
        r = self._row(run_id, key)
        return None if r is None else (r["kind"], r["status"], r["started_at"], r["wake_at"])

    def start_pause(self, row: Sequence[Any]) -> None:
        with self._tx() as c:
            self._put(c, self.goal, row[0], row[1], row_rules.pause_values(row))

    def finish_sleep(
        self, run_id: str, key: str, finished_at: str, duration_ms: float, attempt: int
    ) -> None:
        with self._tx() as c:
            c.execute(
                "UPDATE ll_journal SET status = 'done', finished_at = %s, duration_ms = %s, "
                "attempt = %s WHERE goal = %s AND run = %s AND key = %s",
                (finished_at, duration_ms, attempt, self.goal, run_id, key),
            )
            if self.sealing:
                seal_row(c, self.sealing, self.goal, run_id, key, "done")

    def wait_ending(self, run_id: str, key: str) -> tuple[str, str | None, str | None] | None:
        r = self._row(run_id, key)
        return None if r is None else (r["status"], r["result"], r["error"])

    def time_out_wait(
        self, run_id: str, key: str, error: str, finished_at: str, duration_ms: float
    ) -> None:
        with self._tx() as c:
            c.execute(
                "UPDATE ll_journal SET status = 'done', error = %s, finished_at = %s, "
                "duration_ms = %s WHERE goal = %s AND run = %s AND key = %s "
                "AND status = 'waiting'",
                (error, finished_at, duration_ms, self.goal, run_id, key),
            )
            if self.sealing:
                seal_row(c, self.sealing, self.goal, run_id, key, "done")

    def recorded_wait(self, handle: int) -> tuple[str | None, str | None] | None:
        rows = self._run("SELECT result, error FROM ll_journal WHERE rowid = %s", (handle,))
        return None if not rows else (rows[0][0], rows[0][1])

    def step_tries(self, run_id: str) -> list[tuple[str, int, str | None, str]]:
        rows = self._run(
            "SELECT key, try, next_at, ended FROM ll_tries WHERE run = %s ORDER BY key, try",
            (run_id,),
        )
        return [(k, n, t, e) for k, n, t, e in rows]

    @staticmethod
    def _put_try(c: Any, slot: tuple[str, str, int], values: dict[str, Any]) -> None:
        c.execute(
            f"INSERT INTO ll_tries (run, key, try, {', '.join(TRY_COLUMNS)}) VALUES "
            f"(%s, %s, %s, {', '.join(['%s'] * len(TRY_COLUMNS))}) "
            f"ON CONFLICT (run, key, try) DO UPDATE SET "
            f"{', '.join(f'{n} = excluded.{n}' for n in TRY_COLUMNS)}",
            (*slot, *(values[n] for n in TRY_COLUMNS)),
        )

    def record_try(self, try_row: Sequence[Any], retrying_row: Sequence[Any] | None) -> None:
        with self._tx() as c:
            self._put_try(c, *row_rules.try_values(try_row))
            if retrying_row is not None:
                run, key = retrying_row[0], retrying_row[1]
                self._put(c, self.goal, run, key, row_rules.retrying_values(retrying_row))

    # -- what the run consumed and replayed ---------------------------------------------

    def record_usage(self, row: Sequence[Any]) -> None:
        with self._tx() as c:
            values = row_rules.usage_values(self._get(c, self.goal, row[0], row[1]), row)
            if values is not None:
                self._put(c, self.goal, row[0], row[1], values)

    def _keep_left_usage(self, c: Any, run_id: str, stamp: str, prefix: str | None) -> None:
        """Inside a transaction: usage left on ``running``/``failed`` rows moves to a try."""
        found = c.execute(
            f"SELECT rowid, key, {', '.join(COLUMNS)} FROM ll_journal WHERE goal = %s "
            "AND run = %s AND status IN ('running', 'failed') AND starts_with(key, %s) "
            "ORDER BY rowid FOR UPDATE",
            (self.goal, run_id, prefix or ""),
        ).fetchall()
        for rowid, key, *values in found:
            row = dict(zip(COLUMNS, values, strict=True), run=run_id, key=key)
            if not row_rules.left_usage(row, run_id, prefix):
                continue
            (n,) = c.execute(
                "SELECT coalesce(max(try), 0) + 1 FROM ll_tries WHERE run = %s AND key = %s",
                (run_id, key),
            ).fetchone()
            self._put_try(c, (run_id, key, n), row_rules.left_usage_try(row, stamp))
            c.execute(
                f"UPDATE ll_journal SET {', '.join(f'{u} = NULL' for u in USAGE)} WHERE rowid = %s",
                (rowid,),
            )

    def keep_left_usage(self, run_id: str, now: float, prefix: str) -> None:
        with self._tx() as c:
            self._keep_left_usage(c, run_id, utc_iso(now), prefix)

    def run_spend(self, run_id: str) -> list[tuple[str, int | None, int | None, float | None]]:
        rows = self._run(
            "SELECT key, sum(input_tokens), sum(output_tokens), sum(cost) FROM ("
            "SELECT key, input_tokens, output_tokens, cost FROM ll_journal "
            "WHERE goal = %s AND run = %s UNION ALL "
            "SELECT key, input_tokens, output_tokens, cost FROM ll_tries WHERE run = %s) AS u "
            "WHERE input_tokens IS NOT NULL OR output_tokens IS NOT NULL OR cost IS NOT NULL "
            "GROUP BY key",
            (self.goal, run_id, run_id),
        )
        return [
            (k, None if i is None else int(i), None if o is None else int(o), c)
            for k, i, o, c in rows
        ]

    def record_replays(self, run_id: str, attempt: int, keys: Sequence[str]) -> None:
        with self._tx() as c:
            c.execute("INSERT INTO ll_replays VALUES (%s, %s, %s)", (run_id, attempt, list(keys)))

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
