"""``PostgresInspector``: the :class:`~letitloop.inspection.inspector.Inspector` on a
PostgreSQL journal (``postgresql://…``, ``postgres_storage.py``), for ``lil`` and
``letitloop.send``/``cancel``.

It answers with the in-memory store's rules (it is a ``MemoryInspector``),
over a snapshot of the database's tables read in one transaction: so the
state of a run is told by the same code on every store. A change reads the
snapshot under ``LOCK TABLE … IN EXCLUSIVE MODE`` (journals wait to write,
readers do not), applies the change to it, and writes back exactly the rows
it changed in the same transaction, with a notification (``NOTIFY
letitloop``) that wakes a journal waiting for a value sent or a cancel. A run is held through its
advisory lock, as a journal holds it.

What this costs: a question about one run (its rows, attempts, tries,
replays, result: what ``lil show`` and ``lil ui``'s run page ask) reads a
snapshot of that run alone; any other read, and every change, loads the
whole database (runs, rows, tries): fine for a journal of thousands of runs,
not of millions; reading by SQL query by query is left to do
(docs/postgres.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator, Sequence
from typing import Any

from ..errors import JournalFileError, SchemaVersionError
from ..stores.memory.database import MemoryDatabase
from ..stores.postgres.database import (
    CHANNEL,
    connect,
    migrate,
    redact,
    schema_version,
    schema_version_of,
    server_errors,
)
from ..stores.postgres.fork import finish_fork
from ..stores.postgres.holding import PostgresHold, is_held, run_hold_text
from ..stores.postgres.seals import chain_of
from ..stores.storage_schedules import ScheduleRow, TickRow
from ..stores.storage_streams import ChunkRow
from .images import RunImage
from .memory_copy import memory_image
from .memory_inspector import MemoryInspector
from .postgres_queues import PostgresQueues
from .postgres_snapshots import (
    has_stream_table,
    has_tables,
    image_extras,
    insert_images,
    load,
    write_back,
)
from .records import AttemptInfo, ReservationInfo, RowInfo, RunInfo, TryInfo

#: The tables a change locks, EXCLUSIVE: journals wait to write, readers do not.
CHANGED_TABLES = "ll_goals, ll_runs, ll_journal, ll_tries, ll_replays, ll_attempts, ll_key_checks"

#: How long a change waits for journals' transactions to let its tables go (seconds).
LOCK_WAIT = 30.0


def lock_tables(conn: Any, location: str) -> None:
    """Inside a transaction: every table a change reads and writes locked, all at once.

    Each try takes them all or none (``NOWAIT``, in a savepoint), and waits
    holding none: a journal's transaction holds one table and then asks for
    another (a run's insert checks its goal), so a change waiting for a table
    while holding others could deadlock with it, and PostgreSQL would abort one
    of the two (issue 50: ``lil gc`` racing a program that opens runs).
    """
    import psycopg  # this module is loaded only for a PostgreSQL journal

    deadline = time.monotonic() + LOCK_WAIT
    pause = 0.001
    while True:
        try:
            with conn.transaction():  # a savepoint: a refusal undoes only itself
                conn.execute(f"LOCK TABLE {CHANGED_TABLES} IN EXCLUSIVE MODE NOWAIT")
            return
        except psycopg.errors.LockNotAvailable:
            if time.monotonic() > deadline:
                raise JournalFileError(
                    f"{redact(location)}: expected to lock the journal's tables for a change; "
                    f"journals kept writing to them for {LOCK_WAIT:g} s; nothing was changed: "
                    f"try again when fewer programs write"
                ) from None
            time.sleep(pause)
            pause = min(pause * 2, 0.05)  # a journal's transaction is short: poll, briefly


def open_postgres_inspector(
    location: str, *, write: bool = False, live: bool = False
) -> PostgresInspector:
    """The inspector of the PostgreSQL journal at ``location``; read-only unless ``write``."""
    return PostgresInspector(location, write=write)


class PostgresInspector(PostgresQueues, MemoryInspector):
    """The inspector of one PostgreSQL journal (see the module's docstring)."""

    def __init__(self, location: str, *, write: bool = False) -> None:
        self.location = location
        self.conn = connect(location)
        try:
            with server_errors(location):
                row = self.conn.execute("SELECT current_schema()").fetchone()
                if row is None or row[0] is None:
                    raise self._no_schema()
                self.schema = str(row[0])
                if has_tables(self.conn):
                    self._upgrade(write)
            # Nothing read yet: every question reads its own snapshot (_reading).
            super().__init__(MemoryDatabase(location), write=write)
        except BaseException:
            self.conn.close()
            raise

    def _no_schema(self) -> JournalFileError:
        """The error of a URL whose schema is not there (``current_schema()`` is null: no
        schema of its ``search_path`` exists, or the role may use none), as a missing
        journal file's: nothing to read or change there."""
        found = self.conn.execute("SELECT current_setting('search_path'), current_database()")
        path, database = found.fetchone()
        return JournalFileError(
            f"{self.path}: no schema {path!r} (the URL's search_path) in database {database!r} "
            f"(it does not exist, or "
            f"this role may not use it), so no journal here; expected the schema a Journal "
            f"wrote its tables in, named by the URL's options=-csearch_path=…: check the URL, "
            f"or create the schema (CREATE SCHEMA …, and GRANT USAGE, CREATE ON SCHEMA … to "
            f"the role) for a program to write there",
            path=self.path,
        )

    def _upgrade(self, write: bool) -> None:
        """A newer schema refused, an older one upgraded to change it (``write``) or
        refused for reading: a reader never writes."""
        version = schema_version_of(self.conn)
        if write or version > schema_version():
            migrate(self.conn, self.location)  # refuses a newer schema, changing nothing
        elif version < schema_version():
            raise SchemaVersionError(
                f"{self.path}: expected a letitloop schema of version {schema_version()}; "
                f"found version {version}, written by an older letitloop, and a reader "
                f"changes nothing. Open a Journal on it (or run 'lil reset', 'fork' or "
                f"'gc', which write) to upgrade it, then read it again",
                path=self.path,
            )

    @property
    def path(self) -> str:
        return redact(self.location)

    def close(self) -> None:
        if not self.closed:
            self.conn.close()
        super().close()

    # -- snapshots ----------------------------------------------------------------------

    @contextlib.contextmanager
    def _reading(self) -> Iterator[MemoryDatabase]:
        self._check()
        with server_errors(self.location), self.conn.transaction():
            self.db = load(self.conn, self.location, self._run_only)
        yield self.db

    #: The run whose questions are being answered (``_of_run``): a snapshot of it alone.
    _run_only: str | None = None

    @contextlib.contextmanager
    def _of_run(self, run_id: str) -> Iterator[None]:
        """Answer a question about one run from a snapshot of that run only: its rows,
        not the database's (a run page asks several, each reading its own snapshot)."""
        self._run_only = run_id
        try:
            yield
        finally:
            self._run_only = None

    def rows(self, run: RunInfo) -> list[RowInfo]:
        with self._of_run(run.id):
            return super().rows(run)

    def tries(self, run_id: str) -> list[TryInfo]:
        with self._of_run(run_id):
            return super().tries(run_id)

    def reservations(self, run_id: str) -> list[ReservationInfo]:
        with self._of_run(run_id):
            return super().reservations(run_id)

    def result_json(self, run_id: str) -> str | None:
        with self._of_run(run_id):
            return super().result_json(run_id)

    def replays(self, run_id: str) -> list[Any]:
        with self._of_run(run_id):
            return super().replays(run_id)

    def attempt_replays(self, run_id: str) -> list[tuple[int, Any]]:
        with self._of_run(run_id):
            return super().attempt_replays(run_id)

    def key_check(self, run: RunInfo) -> str | None:
        with self._of_run(run.id):
            return super().key_check(run)

    @contextlib.contextmanager
    def _changing(self) -> Iterator[MemoryDatabase]:
        self._check_writable()
        with server_errors(self.location), self.conn.transaction():
            if has_tables(self.conn):
                lock_tables(self.conn, self.location)
            before = load(self.conn, self.location)
            after = self.db = load(self.conn, self.location)
            yield after
            write_back(self.conn, before, after)
            # Wakes the journals paused in this schema (a value sent, a cancel).
            self.conn.execute("SELECT pg_notify(%s, current_schema())", (CHANNEL,))

    def fork(
        self,
        source: RunInfo,
        new_id: str,
        at: str,
        from_step: str,
        before_seq: int,
        rename_source: str | None,
    ) -> None:
        """The memory store's fork, written back, and its copies sealed in the same
        transaction when ``LETITLOOP_SEAL_KEY`` is set (postgres_fork.py), as a file's."""
        with server_errors(self.location), self.conn.transaction():
            super().fork(source, new_id, at, from_step, before_seq, rename_source)
            finish_fork(self.conn, source.goal, source.id, new_id, before_seq)

    # -- lil copy ---------------------------------------------------------------------

    def run_image(self, run: RunInfo) -> RunImage:
        """Everything ``run`` owns: a snapshot of the run, its chain and watchers read apart
        (postgres_snapshots.image_extras)."""
        with self._of_run(run.id), self._reading() as db:
            image = memory_image(db, run.id, chain=False)
        with self.conn.transaction():
            return image_extras(self.conn, image)

    def add_runs(self, images: Sequence[RunImage]) -> None:
        """The runs of ``images`` inserted in one transaction (postgres_snapshots.insert_images:
        row by row, no snapshot), with a notification; the schema made first in a database
        that has none."""
        self._check_writable()
        if not has_tables(self.conn):
            migrate(self.conn, self.location)
        with self.conn.transaction():
            insert_images(self.conn, images)
            self.conn.execute("SELECT pg_notify(%s, current_schema())", (CHANNEL,))

    # -- one run's questions answered from a snapshot of that run ------------------------

    def has_run(self, run_id: str) -> bool:
        with self._of_run(run_id):
            return super().has_run(run_id)

    def run(self, run_id: str) -> RunInfo | None:
        with self._of_run(run_id):
            return super().run(run_id)

    def seal_chain(self, run: RunInfo) -> tuple[list[Any], list[Any]]:
        """The run's sealed chain (``ll_seals``) and its rows, in one snapshot of that run
        alone (postgres_seals.py)."""
        self._check()
        return chain_of(self.conn, run.goal, run.id)

    def stream_keys(self, run_id: str) -> list[str]:
        """Read where they are (migration 0013), not through the snapshot."""
        sql = "SELECT DISTINCT key FROM ll_stream_chunks WHERE run = %s ORDER BY key"
        return [str(r[0]) for r in self._streams(sql, (run_id,))]

    def stream_chunks(self, run_id: str, key: str, after: int = -1) -> list[ChunkRow]:
        sql = (
            "SELECT seq, attempt, kind, data, mark, at FROM ll_stream_chunks "
            "WHERE run = %s AND key = %s AND seq > %s ORDER BY seq"
        )
        return [(int(r[0]), *r[1:]) for r in self._streams(sql, (run_id, key, after))]

    def _streams(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        self._check()
        with server_errors(self.location):
            return self.conn.execute(sql, params).fetchall() if has_stream_table(self.conn) else []

    def schedule_rows(self) -> tuple[list[ScheduleRow], list[TickRow]]:
        """Read where they are (migration 0011), not through the snapshot."""
        self._check()
        if not has_tables(self.conn):
            return [], []
        with server_errors(self.location):
            schedules = self.conn.execute(
                "SELECT name, goal, cron, tz, catch_up, window_s, overlap, cursor, updated_at "
                "FROM ll_schedules ORDER BY name"
            ).fetchall()
            ticks = self.conn.execute(
                "SELECT schedule, tick, run_name, status, claimed_at, claimed_by, finished_at "
                "FROM ll_schedule_ticks ORDER BY schedule, tick DESC"
            ).fetchall()
        return [tuple(r) for r in schedules], [tuple(r) for r in ticks]

    # -- lil watch's records (migration 0006), read where they are ----------------------

    def _dicts(self, sql: str, params: tuple[Any, ...]) -> list[dict[str, Any]]:
        self._check()
        if not has_tables(self.conn):
            return []
        with server_errors(self.location):
            cur = self.conn.execute(sql, params)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def attempts(self, run_id: str) -> list[AttemptInfo]:
        with self._of_run(run_id):
            found = super().attempts(run_id)
        watchers = {
            a["attempt"]: a
            for a in self._dicts(
                "SELECT attempt, watch_id, watch_attempt FROM ll_attempts WHERE run = %s "
                "AND watch_id IS NOT NULL",
                (run_id,),
            )
        }
        return [
            dataclasses.replace(
                a,
                watch_id=watchers[a.attempt]["watch_id"],
                watch_attempt=watchers[a.attempt]["watch_attempt"],
            )
            if a.attempt in watchers
            else a
            for a in found
        ]

    def supervisor_events(self, run_id: str) -> list[dict[str, Any]]:
        return self._dicts(
            "SELECT * FROM ll_supervisor_events WHERE watch_id IN (SELECT watch_id FROM "
            "ll_attempts WHERE run = %s AND watch_id IS NOT NULL) ORDER BY id",
            (run_id,),
        )

    def last_watcher_event(self, run_id: str) -> dict[str, Any] | None:
        rows = self._dicts(
            "SELECT * FROM ll_supervisor_events WHERE watch_id = (SELECT watch_id FROM "
            "ll_attempts WHERE run = %s AND watch_id IS NOT NULL ORDER BY attempt DESC "
            "LIMIT 1) ORDER BY id DESC LIMIT 1",
            (run_id,),
        )
        return rows[0] if rows else None

    def supervisor_events_before(self, at: str, going: set[str]) -> int:
        kept = {
            r["watch_id"]
            for r in self._dicts(
                "SELECT run, watch_id FROM ll_attempts WHERE watch_id IS NOT NULL", ()
            )
            if r["run"] not in going
        }
        return sum(
            1
            for r in self._dicts("SELECT watch_id FROM ll_supervisor_events WHERE at < %s", (at,))
            if r["watch_id"] not in kept
        )

    def delete_supervisor_events(self, at: str) -> int:
        self._check()
        if not self.writable or not has_tables(self.conn):
            return 0
        cur = self.conn.execute(
            "DELETE FROM ll_supervisor_events WHERE at < %s AND watch_id NOT IN "
            "(SELECT watch_id FROM ll_attempts WHERE watch_id IS NOT NULL)",
            (at,),
        )
        return int(cur.rowcount)

    # -- runs' locks ------------------------------------------------------------------

    def is_held(self, run_id: str) -> bool:
        self._check()
        return is_held(self.conn, run_hold_text(self.schema, run_id))

    @contextlib.contextmanager
    def hold(self, run_id: str) -> Iterator[bool]:
        hold = PostgresHold(self.location, run_hold_text(self.schema, run_id))
        if not hold.acquire(0):
            yield False
            return
        try:
            yield True
        finally:
            hold.release()
