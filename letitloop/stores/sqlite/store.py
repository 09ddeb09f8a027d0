"""The SQLite connection to a journal file: its pragmas, write transactions, reads, goal tables.

The store deals in rows and text. It knows nothing of steps' types (that is
the codec) nor of replay (that is the journal). Connecting to the file
(writable or read-only) is ``connect.py``; finding and probing it,
``files.py``; its pragmas, ``pragmas.py``; explaining sqlite3's errors,
``sqlerrors.py``; goals' tables, ``goals.py``; the process's shared
connections, ``stores.py``. Each name is imported from the module that
defines it: this one re-exports none of theirs.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ...errors import JournalFileError, LetItLoopError
from . import migrate as _migrations
from .connect import connect_readonly, connect_writable
from .connections import close_unclosed, guard_fork
from .files import check_unmoved, resolve_file
from .goals import GoalTables, ensure_goal
from .pragmas import Durability
from .sqlerrors import BUSY_TIMEOUT_MS, DRIVER_ERRORS, explain, is_busy

if TYPE_CHECKING:
    from pathlib import Path

try:  # the builtin module: hashlib would load OpenSSL's bindings (~3 ms) for nothing
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - a Python built without it
    from hashlib import blake2b

__all__ = ["ROW_ROOM", "Begin", "Store", "rollback"]

#: What starts a write transaction on a connection (``BEGIN IMMEDIATE``, and
#: however it waits for the write lock); it raises explained errors.
Begin = Callable[[sqlite3.Connection], None]

#: Bytes of a row kept for its other columns when a value is checked against
#: SQLite's size limit (keys, names, timestamps, a traceback: far less).
ROW_ROOM = 1 << 20


def _nothing() -> None:
    return None


def rollback(conn: sqlite3.Connection) -> None:
    """Roll back an open transaction; a rollback that fails (an I/O error) must not hide why."""
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


class Store:
    """One connection to the journal file, shared by the threads of one journal.

    Writes go through :meth:`write`, which takes SQLite's write lock up front
    (``BEGIN IMMEDIATE``) and commits on exit, so a transaction never fails
    half-way on a lock upgrade; a single statement goes through
    :meth:`write1`, its own autocommit transaction. A process-local lock
    serializes the threads that share the connection.
    """

    #: The connection (set by ``connect.py``, as are the four below).
    conn: sqlite3.Connection
    #: The journal file itself, symlinks resolved (``real_path`` as a ``Path``).
    real_file: str
    #: (device, inode) of the journal file: its identity within this machine.
    identity: tuple[int, int]
    #: The most bytes one value may hold (see ``_set_max_text``).
    max_text: int
    #: ``PRAGMA schema_version`` when the file was last checked (recheck_schema).
    _schema_version: int
    #: ``PRAGMA data_version`` then: another connection's commit changes it.
    _data_version: int
    #: The runs this connection seals (runs.num -> run id and key), made by
    #: ``sqlite_seals.start`` with the connection's functions; None: it seals none.
    sealing: dict[int, tuple[str, bytes]] | None = None

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        durability: Durability = "process",
        migrate: bool = True,
        readonly: bool = False,
        live: bool = False,
    ) -> None:
        if durability not in ("process", "power"):
            raise ValueError(f"durability must be 'process' or 'power', got {durability!r}")
        #: The journal file, as reached (``path`` as a ``Path``): text, since pathlib
        #: (with urllib.parse and ipaddress, which it imports) is loaded only when a
        #: ``Path`` is asked for, never by a step's open (issue 30).
        self.file = resolve_file(path)
        self.durability: Durability = durability
        #: Opened for reading only (``lil runs``, ``show``, ``export``): SQLite refuses
        #: every write, nothing is migrated, created or checkpointed.
        self.readonly = readonly
        #: Whether this connection is the process's shared one for its file (open_store).
        self.shared = False
        #: Stops counting the connection among this process's open ones
        #: (``connections.track``; set by ``connect.py``). Runs once.
        self._untrack: Callable[[], object] = _nothing
        self._goal_tables = GoalTables()
        #: Function name -> its id in ``functions`` (never changes once made; see
        #: ``SqliteKeys.function_key``).
        self.function_keys: dict[str, Any] = {}
        self.lock = threading.RLock()
        guard_fork(self)  # a fork waits while this store is in SQLite
        with self.lock:
            if readonly:
                connect_readonly(self, live)
            else:
                connect_writable(self, migrate)
        # Garbage without close(): its connection is closed where a fork waits for it
        # (sqlite3 would close it in the collection, outside any lock a fork takes).
        weakref.finalize(self, close_unclosed, self.conn).atexit = False

    @property
    def path(self) -> Path:
        """The journal file, as reached (``file``)."""
        from pathlib import Path

        return Path(self.file)

    @property
    def real_path(self) -> Path:
        """The journal file itself, symlinks resolved (``real_file``)."""
        from pathlib import Path

        return Path(self.real_file)

    # -- transactions --------------------------------------------------------

    @contextlib.contextmanager
    def write(self, begin: Begin | None = None) -> Iterator[sqlite3.Connection]:
        """A write transaction: ``BEGIN IMMEDIATE`` … ``COMMIT``, rolled back on error.

        Every statement of the block runs inside it, and this is where their
        errors are explained: a sqlite3 error (or text SQLite holds that is
        not UTF-8) raised anywhere in the block rolls the whole transaction
        back and becomes a JournalFileError that says what to do (a full disk,
        a read-only file, a damaged schema, a lock that outlived the busy
        timeout). Nothing of the transaction is kept then.

        ``begin`` (raising explained errors) starts it instead of :meth:`_begin`.
        """
        if self.readonly:
            raise LetItLoopError(
                f"{self.path} was opened for reading only, so nothing was written; to change "
                f"it, open it with open_journal_file(path, write=True) (lil reset, fork, gc "
                f"and upgrade do)"
            )
        with self.lock:
            conn = self.conn
            if begin is None:
                self._begin(conn)
            else:
                begin(conn)
            try:
                yield conn
                conn.execute("COMMIT")
                check_unmoved(self.real_file, self.identity)
            except (sqlite3.Error, UnicodeError) as exc:
                rollback(conn)
                raise self.explain(exc) from None
            except BaseException:
                rollback(conn)
                raise

    def write1(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Execute one statement in its own write transaction (the step path's hot loop).

        The statement runs in SQLite's autocommit mode: one statement is its
        own transaction, as ``BEGIN IMMEDIATE`` … ``COMMIT`` around it would be
        (it waits for the write lock in SQLite's busy handler and has read
        nothing before, so it cannot meet a stale snapshot). The store's lock
        keeps it out of another thread's open transaction on this connection.
        Every commit checks that the path still reaches the file (files.py).
        """
        # acquire() and a finally, not ``with``: its special-method lookups cost as
        # much as the lock itself, on every step.
        lock = self.lock
        lock.acquire()
        try:
            conn = self.conn
            if conn.in_transaction:
                # Inside this thread's own write() (the lock is reentrant): the
                # statement would join that transaction and not be committed on
                # return. Refused, as its own BEGIN IMMEDIATE would be.
                self._begin(conn)
            try:
                conn.execute(sql, params)
            except (sqlite3.Error, UnicodeError) as exc:
                if conn.in_transaction:  # SQLite ends a failed one; never leave one open
                    rollback(conn)
                raise self.explain(exc) from None
            check_unmoved(self.real_file, self.identity)
        finally:
            lock.release()

    def _begin(self, conn: sqlite3.Connection, *, wait: bool = True) -> bool:
        """``BEGIN IMMEDIATE``: the one place a write transaction starts, its error explained.

        It waits up to BUSY_TIMEOUT_MS for another connection's write lock;
        with ``wait=False`` it fails at once instead of sleeping in SQLite's
        busy handler, and returns False (nothing begun) if the lock is held.
        """
        try:
            if not wait:
                conn.execute("PRAGMA busy_timeout = 0")
            try:
                conn.execute("BEGIN IMMEDIATE")
            finally:
                if not wait:
                    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            return True
        except sqlite3.OperationalError as exc:
            if not wait and is_busy(exc):
                return False
            raise self.explain(exc) from None
        except (sqlite3.Error, UnicodeError) as exc:
            raise self.explain(exc) from None

    def _commit(self, conn: sqlite3.Connection, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Inside an open write transaction: ``sql`` once per row, then COMMIT.

        On any error the transaction is rolled back (nothing of it is kept) and
        a sqlite3 error is explained as a JournalFileError.
        """
        try:
            if len(rows) == 1:
                conn.execute(sql, rows[0])
            else:
                conn.executemany(sql, rows)
            conn.execute("COMMIT")
            check_unmoved(self.real_file, self.identity)
        except (sqlite3.Error, UnicodeError) as exc:
            rollback(conn)
            raise self.explain(exc) from None
        except BaseException:
            rollback(conn)
            raise

    def commit_rows(self, sql: str, rows: Sequence[Sequence[Any]], begin: Begin) -> None:
        """``sql`` once per row in one write transaction started by ``begin`` (see write())."""
        with self.lock:
            conn = self.conn
            begin(conn)
            self._commit(conn, sql, rows)

    def write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Execute one statement per row of ``rows``, all in one write transaction."""
        with self.write() as conn:
            conn.executemany(sql, rows)

    def try_write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> bool:
        """:meth:`write_many`, but only if it can start without waiting; False if nothing was done.

        Returns False when another thread of this process uses the connection, or
        another connection holds SQLite's write lock: the event loop then hands the
        write to a worker thread (:meth:`write_many`) instead of committing inline.
        """
        if not self.lock.acquire(blocking=False):
            return False
        try:
            conn = self.conn
            if not self._begin(conn, wait=False):
                return False
            self._commit(conn, sql, rows)
            return True
        finally:
            self.lock.release()

    @contextlib.contextmanager
    def try_write(self) -> Iterator[sqlite3.Connection | None]:
        """A write transaction as :meth:`write`, but only if it starts without waiting.

        Yields None, having done nothing, when another thread of this process is
        using the connection, this thread is inside its own transaction, or another
        connection holds SQLite's write lock (see :meth:`try_write_many`).
        """
        if not self.lock.acquire(blocking=False):
            yield None
            return
        try:
            conn = self.conn
            if conn.in_transaction or not self._begin(conn, wait=False):
                yield None
                return
            try:
                yield conn
                conn.execute("COMMIT")
                check_unmoved(self.real_file, self.identity)
            except (sqlite3.Error, UnicodeError) as exc:
                rollback(conn)
                raise self.explain(exc) from None
            except BaseException:
                rollback(conn)
                raise
        finally:
            self.lock.release()

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Rows of a read query (outside any write transaction); errors explained as in write()."""
        with self.lock:
            try:
                return self.conn.execute(sql, params).fetchall()
            except (sqlite3.Error, UnicodeError) as exc:
                raise self.explain(exc) from None

    def _read_schema_version(self) -> int:
        conn = self.conn
        # data_version changes when another connection commits (never for this
        # one's own commits): what recheck_schema compares.
        self._data_version = int(conn.execute("PRAGMA data_version").fetchone()[0])
        return int(conn.execute("PRAGMA schema_version").fetchone()[0])

    def recheck_schema(self) -> None:
        """Before reusing a connection: refuse a schema a newer letitloop moved on.

        Nothing to do when no other connection wrote since the last check
        (``PRAGMA data_version``) and the schema did not change
        (``PRAGMA schema_version``: a goal's table made or dropped). Otherwise
        the file's migrations are checked again, as on open (a newer
        letitloop's migration is refused with SchemaVersionError, an older
        file upgraded), and after a schema change the goal tables this
        connection remembered are forgotten.
        """
        with self.lock:
            try:
                conn = self.conn
                data = int(conn.execute("PRAGMA data_version").fetchone()[0])
                version = int(conn.execute("PRAGMA schema_version").fetchone()[0])
                if data == self._data_version and version == self._schema_version:
                    return
                if version != self._schema_version:
                    self._goal_tables.clear()  # a goal's table may have gone
                if not _migrations.check(conn, self.file):
                    _migrations.migrate(self)
                self._schema_version = self._read_schema_version()
            except DRIVER_ERRORS as exc:
                raise self.explain(exc) from None

    def _set_max_text(self, limit: int) -> None:
        #: The most bytes one value may hold: SQLite's SQLITE_LIMIT_LENGTH (1e9 by
        #: default) less room for the rest of its row.
        self.max_text = limit - min(ROW_ROOM, limit // 2)

    def set_max_length(self, limit: int) -> None:
        """Lower SQLite's limit on one value's bytes for this connection (Python 3.11+).

        Values over it are refused before anything is written (EncodeError for
        a step's result). Mostly for tests: the default is SQLite's 1e9 bytes.
        """
        conn: Any = self.conn  # setlimit and getlimit are Python 3.11+
        conn.setlimit(0, limit)  # 0: SQLITE_LIMIT_LENGTH
        self._set_max_text(conn.getlimit(0))

    def explain(self, exc: BaseException) -> JournalFileError:
        """The one place a foreign error about the file becomes a JournalFileError."""
        return explain(exc, self.file)

    def close(self) -> None:
        """Close the connection (SQLite checkpoints the WAL if it was the file's last one)."""
        with self.lock:
            self.conn.close()
            self._untrack()

    # -- goals and their tables ----------------------------------------------

    def goal_table(self, goal: str) -> str | None:
        """The journal table of ``goal``, or None if the goal was never opened."""
        rows = self.query("SELECT journal_table FROM goals WHERE goal = ?", (goal,))
        return rows[0][0] if rows else None

    def ensure_goal(self, conn: sqlite3.Connection, goal: str, now: float) -> str:
        """Inside a write transaction: the goal's table, created from the template if new.

        A goal's table, once read, is remembered by this connection until the
        schema changes (``lil gc`` dropping an empty goal's table does).
        """
        return ensure_goal(conn, goal, now, self._goal_tables)

    # -- lock files ----------------------------------------------------------

    def lock_file(self, kind: str, name: str) -> Path:
        """:meth:`lock_name` as a ``Path``."""
        from pathlib import Path

        return Path(self.lock_name(kind, name))

    def lock_name(self, kind: str, name: str) -> str:
        """The lock file for ``name`` beside the journal: bounded, hashed, safe on any filesystem.

        The folder is ``<journal>-locks`` beside the real file (symlinks
        resolved), and the file's name depends only on ``kind`` and ``name``,
        never on the path used to reach the journal: a symlink to the journal,
        or its folder mounted at another path (two containers sharing a
        volume), reaches the same lock files. Creates nothing (see
        letitloop.stores.sqlite.locks, which takes and removes them).
        """
        digest = blake2b(name.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
        return os.path.join(f"{self.real_file}-locks", f"{kind}-{digest}.lock")

    @property
    def lock_folder(self) -> Path:
        """``<journal>-locks`` beside the real journal file."""
        from pathlib import Path

        return Path(f"{self.real_file}-locks")
