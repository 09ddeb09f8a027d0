"""The SQLite connection: where the file lives, its pragmas, transactions, rows in and out.

The store deals in rows and text. It knows nothing of steps' types (that is
the codec) nor of replay (that is the journal).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import sqlite3
import stat
import threading
import time
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from . import migrate as _migrations
from .errors import InvalidNameError, JournalFileError, LetItLoopError

try:  # the builtin module: hashlib would load OpenSSL's bindings (~3 ms) for nothing
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - a Python built without it
    from hashlib import blake2b

Durability = Literal["process", "power"]

#: Where the journal lives when neither ``path=`` nor ``LETITLOOP_DB`` says.
DEFAULT_PATH = Path(".letitloop") / "journal.db"

#: How long a write waits for another connection's write lock before failing.
#: Write transactions here last microseconds to milliseconds, so a wait this
#: long means something is badly wrong (a debugger paused a writer, a
#: network filesystem); generous enough that many processes hammering one
#: file never see "database is locked".
BUSY_TIMEOUT_MS = 30_000

#: The table every goal's journal table is copied from (see migrations/).
JOURNAL_TEMPLATE = "_journal_template"

#: ``journal_<word>`` names letitloop keeps for its own views and tables, now
#: and later: a goal whose readable table name would be one of them (a goal
#: named ``rows``) gets a hashed table name instead, like any goal whose name
#: is taken. Any other object already in the file is avoided the same way.
RESERVED_TABLES = frozenset(
    f"journal_{word}"
    for word in (
        "rows",
        "steps",
        "markers",
        "runs",
        "goals",
        "all",
        "view",
        "summary",
        "events",
        "usage",
        "waits",
        "sleeps",
        "signals",
        "template",
    )
)

#: Bytes of a row kept for its other columns when a value is checked against
#: SQLite's size limit (keys, names, timestamps, a traceback: far less).
ROW_ROOM = 1 << 20

_SLUG_DROP = re.compile(r"[^a-z0-9]+")
#: C0 and C1 control characters and DEL: they move terminals' cursors, set
#: window titles and clipboards (OSC 52); none belongs in a name.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
#: Lone surrogates (what os.fsdecode makes of undecodable bytes): not text
#: SQLite can store as UTF-8.
_SURROGATE = re.compile(r"[\ud800-\udfff]")
#: Goal and run names longer than this are almost certainly a bug (a payload
#: passed where a name was meant); the limit keeps tables and listings sane.
MAX_NAME_LENGTH = 512


def resolve_path(path: str | os.PathLike[str] | None = None) -> Path:
    """The journal file: ``path``, else ``$LETITLOOP_DB``, else ``.letitloop/journal.db``."""
    if path is not None:
        return Path(path)
    env = os.environ.get("LETITLOOP_DB")
    if env:
        return Path(env)
    return DEFAULT_PATH


#: The last whole second formatted by :func:`utc_iso`, and its text: every
#: step writes two timestamps, nearly always within the same second.
_iso_second: tuple[int, str] = (-1, "")


def utc_iso(t: float) -> str:
    """Seconds since the epoch as ISO-8601 UTC text with microseconds.

    The same text as ``datetime.fromtimestamp(t, timezone.utc).isoformat(
    timespec="microseconds")`` (``2026-11-30T08:12:03.123456+00:00``), at a
    fraction of the cost: the date and time of the second are formatted once
    per second, the microseconds each time.
    """
    global _iso_second
    second = int(t)
    micro = round((t - second) * 1_000_000)
    if micro >= 1_000_000 or t < 0:  # a carry into the next second, or before 1970
        return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="microseconds")
    cached = _iso_second
    if cached[0] != second:
        text = datetime.fromtimestamp(second, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
        cached = _iso_second = (second, text)
    return f"{cached[1]}.{micro:06d}+00:00"


def check_name(kind: str, name: object) -> str:
    """Return ``name`` if it is usable as a goal/run/step/marker name, else raise."""
    if not isinstance(name, str):
        raise InvalidNameError(
            f"{kind} name must be a string, got {type(name).__name__} {name!r}; "
            f"pass a text name such as 'customer_sync'"
        )
    if not name.strip():
        raise InvalidNameError(
            f"{kind} name must not be empty or blank, got {name!r}; pass a text name"
        )
    if _CONTROL.search(name):
        raise InvalidNameError(
            f"{kind} name must not contain control characters, got {name!r}; "
            f"remove newlines, tabs, NUL, escape and other control characters from the name"
        )
    if _SURROGATE.search(name):
        raise InvalidNameError(
            f"{kind} name must be valid Unicode text, got {name!r} with a lone surrogate "
            f"(what os.fsdecode makes of bytes that are not UTF-8); decode the bytes it "
            f"came from with an explicit encoding, or use another name"
        )
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidNameError(
            f"{kind} name must be at most {MAX_NAME_LENGTH} characters, got {len(name)} "
            f"({name[:40]!r}…); use a shorter name"
        )
    return name


def journal_table_name(goal: str, *, long_hash: bool = False) -> str:
    """A readable table name for ``goal``: ``journal_<goal>``, with a hash when needed.

    Goals made only of ``[a-z0-9_]`` keep their name; any other goal gets a
    slug plus a hash of the exact name, so two goals that differ only in
    characters a table name cannot hold still get distinct tables.
    """
    slug = _SLUG_DROP.sub("_", goal.lower()).strip("_")[:40]
    if slug == goal and not long_hash:
        return f"journal_{slug}"
    import hashlib  # a new goal's table name only

    digest = hashlib.sha256(goal.encode("utf-8")).hexdigest()[: 16 if long_hash else 8]
    return f"journal_{slug}_{digest}" if slug else f"journal_{digest}"


def _disk_full(path: Path) -> bool:
    """Whether the filesystem holding ``path`` has no free blocks or no free inodes left."""
    try:
        st = os.statvfs(path.parent if not path.is_dir() else path)
    except (OSError, AttributeError):  # no statvfs (Windows), or the folder is gone
        return False
    return st.f_bavail == 0 or (st.f_files > 0 and st.f_favail == 0)


def _explain(exc: BaseException, path: Path) -> JournalFileError:
    """Turn a foreign error about the journal file into a JournalFileError that says what to do.

    The one translation of sqlite3 errors (and undecodable text SQLite holds)
    for the store: what was expected, what was found, what to do.
    """
    if isinstance(exc, UnicodeError):
        return JournalFileError(
            f"{path}: this journal's schema or data is damaged: SQLite holds text that is not "
            f"valid UTF-8 ({exc}); every recorded row that is intact can still be read with "
            f"sqlite3 ('.recover'); move the file aside and start a new journal, or restore it "
            f"from a backup",
            path=str(path),
        )
    text = str(exc)
    low = text.lower()
    if "could not decode to utf-8" in low:
        head, _, rest = text.partition(" with text ")
        return JournalFileError(
            f"{path}: this journal's schema or data is damaged: SQLite holds text that is not "
            f"valid UTF-8 ({head}: {rest[:60]!r}…); nothing was changed by this call; move the "
            f"file aside (its intact rows can be read with sqlite3's '.recover') or restore it "
            f"from a backup",
            path=str(path),
        )
    if (
        "malformed database schema" in low
        or "no such column" in low
        or "no such table" in low
        or "has no column named" in low
    ):
        return JournalFileError(
            f"{path}: this journal's schema is damaged ({text}); expected the tables and columns "
            f"letitloop's migrations create. Nothing was changed by this call; move the file "
            f"aside (its rows can be read with sqlite3's '.recover') or restore it from a backup",
            path=str(path),
        )
    if "not a database" in low or "malformed" in low or "corrupt" in low:
        return JournalFileError(
            f"{path}: expected a letitloop journal (an SQLite file), found a file SQLite "
            f"cannot read ({text}); move it aside or pass another path= / LETITLOOP_DB",
            path=str(path),
        )
    if "full" in low or ("disk i/o error" in low and _disk_full(path)):
        return JournalFileError(
            f"{path}: the disk is full ({text}); nothing was recorded for this write and "
            f"every earlier step is intact; free space and run again",
            path=str(path),
        )
    if "readonly" in low or "read-only" in low or "unable to open" in low:
        return JournalFileError(
            f"{path}: expected a writable journal file and folder (SQLite also writes its "
            f"-wal and -shm files beside the journal), found {text}; check the permissions "
            f"and mount of {path} and {path.parent}, or pass another path= / LETITLOOP_DB",
            path=str(path),
        )
    if "locked" in low or "busy" in low:
        return JournalFileError(
            f"{path}: the journal stayed locked by another connection for over "
            f"{BUSY_TIMEOUT_MS / 1000:.0f} s ({text}); is a process stopped in a debugger, "
            f"or is the file on a network filesystem (not supported)?",
            path=str(path),
        )
    if "too big" in low:
        return JournalFileError(
            f"{path}: a value is over SQLite's size limit ({text}); nothing was recorded",
            path=str(path),
        )
    return JournalFileError(f"{path}: SQLite error: {text}", path=str(path))


#: How :func:`_probe` opens a file read-only, most careful first: each later one
#: is for a file the one before cannot read.
_PROBES = (
    # Writes nothing at all, not even its read marks into the -shm file.
    "mode=ro&readonly_shm=1",
    # After a crash the WAL index must be rebuilt (recovery), which writes the
    # -shm file (an index of the -wal, rebuilt from it): never the file or the -wal.
    # A read-only index it cannot trust is SQLITE_PROTOCOL: this one too.
    "mode=ro",
    # A -wal without a -shm, in a folder it cannot create one in: the main file alone.
    "mode=ro&immutable=1",
)


#: SQLite's wal-index header (two copies at the start of the -shm) and where its
#: salts sit; the write-ahead log's own salts sit at 16..24 of its header
#: (https://sqlite.org/walformat.html).
_SHM_HEADER = 48


def _index_unusable_read_only(path: Path) -> bool:
    """Whether the -shm index disagrees with the -wal, so only a writable -shm can recover it.

    What a writer killed while restarting or writing its log leaves: the two
    header copies of the index differ, or its salts are not the log's. A
    readable pending log (a writer that died after its commit) is False.
    """
    try:
        with open(f"{path}-wal", "rb") as f:
            wal = f.read(32)
        with open(f"{path}-shm", "rb") as f:
            shm = f.read(2 * _SHM_HEADER)
    except OSError:
        return False
    if len(wal) < 32 or len(shm) < 2 * _SHM_HEADER:
        return False
    return shm[:_SHM_HEADER] != shm[_SHM_HEADER:] or shm[32:40] != wal[16:24]


def _main_file_is_our_journal(path: Path, uri: str) -> bool:
    """Whether the database file alone (``immutable=1``: touches nothing) is a journal we open."""
    try:
        conn = sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True)
    except sqlite3.Error:
        return False
    try:
        tables = {
            name
            for (name,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('goals', 'runs')"
            )
        }
        if tables != {"goals", "runs"}:
            return False
        _migrations.check(conn, path)
    except (LetItLoopError, sqlite3.Error):
        return False  # another application's, or a newer letitloop's: the probe refuses it
    finally:
        conn.close()
    return True


@contextlib.contextmanager
def _index_kept_open(path: Path, uri: str) -> Iterator[None]:
    """Hold a plain read-only connection (that has read) open while the probe runs, if needed.

    A writer killed right after restarting its WAL leaves a -wal of a bare
    header and a -shm describing the old log. A ``readonly_shm`` reader
    cannot recover that: it retries for about ten seconds and fails with
    "locking protocol", as every later open would, until a connection allowed
    to write the -shm recovers it. While a plain ``mode=ro`` connection that
    has read is open (it may rebuild the -shm index, never the database or
    its -wal), the probe reads the shared index at once. Taken only when the
    index is unusable read-only and the database file alone holds a journal
    this version opens: a readable file, and a file the probe refuses, keep
    their -shm byte for byte.
    """
    keeper: sqlite3.Connection | None = None
    if _index_unusable_read_only(path) and _main_file_is_our_journal(path, uri):
        try:
            keeper = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=30)
            keeper.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error:
            if keeper is not None:
                keeper.close()
            keeper = None
    try:
        yield
    finally:
        if keeper is not None:
            keeper.close()


def _probe(path: Path) -> bool:
    """:func:`migrate.check` on a read-only connection: the file and its -wal stay as they were.

    A refused file (newer, foreign) must be left byte for byte; closing a
    writable connection would checkpoint a pending WAL into it and delete the
    -wal and -shm files. See ``_PROBES`` for what each attempt may touch.
    """
    uri = Path(os.path.abspath(path)).as_uri()
    with _index_kept_open(path, uri):
        return _probe_with(path, uri)


def _probe_with(path: Path, uri: str) -> bool:
    for query in _PROBES:
        try:
            conn = sqlite3.connect(f"{uri}?{query}", uri=True, isolation_level=None)
        except sqlite3.Error as exc:
            raise _explain(exc, path) from None
        try:
            return _migrations.check(conn, path)
        except JournalFileError as exc:
            # SQLITE_CANTOPEN, SQLITE_READONLY_RECOVERY/CANTINIT (the index needs
            # rebuilding) and SQLITE_PROTOCOL (a read-only index it cannot trust).
            text = str(exc)
            cannot = any(
                word in text
                for word in ("unable to open", "readonly", "read-only", "locking protocol")
            )
            if not cannot or query == _PROBES[-1]:
                raise
        finally:
            conn.close()
    raise AssertionError("unreachable")  # pragma: no cover


def _check_is_a_file(path: Path) -> bool:
    """Whether ``path`` is a file with content; refuses a folder, a device, a pipe."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False  # created on first use
    except OSError as exc:
        raise JournalFileError(
            f"{path}: cannot read it ({exc.strerror or exc}); check the path and its "
            f"permissions, or pass another path= / LETITLOOP_DB",
            path=str(path),
        ) from None
    if stat.S_ISREG(st.st_mode):
        return st.st_size > 0
    if stat.S_ISDIR(st.st_mode):
        found, example = "a folder", path / "journal.db"
    else:
        found, example = "a device, pipe or socket, not a file", DEFAULT_PATH
    raise JournalFileError(
        f"{path}: expected a journal file (or a path where one can be created), found {found}; "
        f"pass the path of a file, e.g. {example} (path= or LETITLOOP_DB)",
        path=str(path),
    )


def _rollback(conn: sqlite3.Connection) -> None:
    """Roll back an open transaction; a rollback that fails (an I/O error) must not hide why."""
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


class Store:
    """One connection to the journal file, shared by the threads of one journal.

    Writes go through :meth:`write`, which takes SQLite's write lock up front
    (``BEGIN IMMEDIATE``) and commits on exit, so a transaction never fails
    half-way on a lock upgrade. A process-local lock serializes the threads
    that share the connection.
    """

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
        self.path = resolve_path(path)
        self.durability: Durability = durability
        #: Opened for reading only (``lil runs``, ``show``, ``export``): SQLite refuses
        #: every write, nothing is migrated, created or checkpointed.
        self.readonly = readonly
        #: Whether this connection is the process's shared one for its file (open_store).
        self.shared = False
        self._goal_tables: dict[str, str] = {}
        self.lock = threading.RLock()
        if readonly:
            self._open_readonly(live)
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise JournalFileError(
                f"{self.path}: cannot create the folder {self.path.parent} ({exc}); "
                f"create it or pass another path= / LETITLOOP_DB",
                path=str(self.path),
            ) from None
        has_content = _check_is_a_file(self.path)
        # A file with content is checked on a read-only connection first: a file
        # refused as newer or foreign is then left byte for byte as it was, its
        # -wal and -shm included (closing a writable connection would checkpoint
        # a pending WAL into the file and delete both).
        current = _probe(self.path) if migrate and has_content else None
        try:
            # isolation_level=None: no implicit transactions; we open them ourselves.
            # check_same_thread=False: threads share this connection under self.lock.
            self.conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=0
            )
        except sqlite3.Error as exc:
            raise _explain(exc, self.path) from None
        try:
            # The file itself, however it was reached (a symlink, a second mount of
            # its folder): locks and this process's registry of held runs are keyed
            # by it, so two paths to one file share them.
            self.real_path = Path(os.path.realpath(self.path))
            st = os.stat(self.real_path)
            #: (device, inode) of the journal file: its identity within this machine.
            self.identity = (st.st_dev, st.st_ino)
            getlimit = getattr(self.conn, "getlimit", None)  # Python 3.11+
            self._set_max_text(getlimit(0) if getlimit is not None else 1_000_000_000)
        except OSError as exc:
            self.conn.close()
            raise JournalFileError(
                f"{self.path}: cannot read the journal file's identity ({exc}); "
                f"check that the path points to a local file",
                path=str(self.path),
            ) from None
        try:
            # Wait (instead of failing at once) while another connection writes.
            self.conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            # Refuse a newer or foreign file before anything writes to it.
            if current is None:
                current = _migrations.check(self.conn, self.path) if migrate else True
            self._configure()
            if not current:
                _migrations.migrate(self)
            self._schema_version = self._read_schema_version()
        except sqlite3.Error as exc:
            self.conn.close()
            raise _explain(exc, self.path) from None
        except BaseException:
            self.conn.close()
            raise

    def _open_readonly(self, live: bool) -> None:
        """Connect for reading only: refuse a file that is not at this version's schema.

        A file closed cleanly (no -wal beside it) is read as it is
        (``immutable=1``): SQLite then creates no -wal or -shm file either.
        Otherwise, or to watch a file others write (``live``: ``--follow``),
        ``mode=ro``: SQLite reads the -wal through its shared-memory index.
        """
        uri = Path(os.path.abspath(self.path)).as_uri()
        quiet = not live and not os.path.exists(f"{self.path}-wal")
        query = "mode=ro&immutable=1" if quiet else "mode=ro"
        try:
            self.conn = sqlite3.connect(
                f"{uri}?{query}", uri=True, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise _explain(exc, self.path) from None
        try:
            self.real_path = Path(os.path.realpath(self.path))
            st = os.stat(self.real_path)
            self.identity = (st.st_dev, st.st_ino)
            self._set_max_text(1_000_000_000)
            self.conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            if not _migrations.check(self.conn, self.path):
                names = _migrations.known_names()
                raise JournalFileError(
                    f"{self.path}: this journal was written by an older letitloop (it lacks "
                    f"migration {names[-1]!r}); reading it would need its schema upgraded, "
                    f"and a reader never writes: run 'lil upgrade' (or open it with a "
                    f"Journal of this version) first",
                    path=str(self.path),
                )
            self._schema_version = self._read_schema_version()
        except sqlite3.Error as exc:
            self.conn.close()
            raise _explain(exc, self.path) from None
        except OSError as exc:
            self.conn.close()
            raise JournalFileError(f"{self.path}: {exc}", path=str(self.path)) from None
        except BaseException:
            self.conn.close()
            raise

    def _configure(self) -> None:
        try:
            c = self.conn
            # WAL: readers never block the writer nor the writer readers, and a
            # commit is one append to the -wal file. Set on every open (it cannot
            # be changed inside a transaction, so not in a migration).
            mode = self._switch_to_wal()
            if str(mode).lower() != "wal":
                raise JournalFileError(
                    f"{self.path}: expected to switch the journal to WAL mode, SQLite "
                    f"answered {mode!r}; is the file on a filesystem without shared memory?",
                    path=str(self.path),
                )
            # NORMAL: in WAL mode a commit survives the death of the process (the
            # WAL lives in the OS page cache) and fsyncs only at checkpoints; a
            # power loss may lose the last commits. FULL: fsync the WAL at every
            # commit, so a commit also survives power loss and kernel crashes.
            sync = "FULL" if self.durability == "power" else "NORMAL"
            c.execute(f"PRAGMA synchronous = {sync}")
            if self.durability == "power":
                # On macOS a plain fsync() reaches the drive but not through its
                # cache; F_FULLFSYNC does. Both pragmas are no-ops elsewhere.
                c.execute("PRAGMA fullfsync = ON")
                c.execute("PRAGMA checkpoint_fullfsync = ON")
            # Enforce runs -> goals and attempts -> runs (ON DELETE CASCADE).
            c.execute("PRAGMA foreign_keys = ON")
        except sqlite3.Error as exc:
            raise _explain(exc, self.path) from None

    def _switch_to_wal(self) -> str:
        """``PRAGMA journal_mode = WAL``, retried while another opener is switching it too.

        Switching a new file to WAL takes an exclusive lock. When two
        connections try at once, each holding the shared lock the pragma
        starts with, SQLite answers one of them "database is locked" at once
        instead of calling the busy handler (waiting could not end the
        deadlock). The loser's pragma has ended and released its lock, so
        trying again succeeds, usually because the file is WAL by then.
        """
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                return str(self.conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
            time.sleep(0.005)

    # -- transactions --------------------------------------------------------

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction: ``BEGIN IMMEDIATE`` … ``COMMIT``, rolled back on error.

        Every statement of the block runs inside it, and this is where their
        errors are explained: a sqlite3 error (or text SQLite holds that is
        not UTF-8) raised anywhere in the block rolls the whole transaction
        back and becomes a JournalFileError that says what to do (a full disk,
        a read-only file, a damaged schema, a lock that outlived the busy
        timeout). Nothing of the transaction is kept then.
        """
        if self.readonly:
            raise LetItLoopError(
                f"{self.path} was opened for reading only, so nothing was written; to change "
                f"it, open it with open_journal_file(path, write=True) (lil reset, fork, gc "
                f"and upgrade do)"
            )
        with self.lock:
            conn = self.conn
            try:
                conn.execute("BEGIN IMMEDIATE")
            except (sqlite3.Error, UnicodeError) as exc:
                raise self.explain(exc) from None
            try:
                yield conn
                conn.execute("COMMIT")
            except (sqlite3.Error, UnicodeError) as exc:
                _rollback(conn)
                raise self.explain(exc) from None
            except BaseException:
                _rollback(conn)
                raise

    def write1(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Execute one statement in its own write transaction (the step path's hot loop)."""
        with self.lock:
            conn = self.conn
            try:
                conn.execute("BEGIN IMMEDIATE")
            except (sqlite3.Error, UnicodeError) as exc:
                raise self.explain(exc) from None
            self._commit(conn, sql, (params,))

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
        except (sqlite3.Error, UnicodeError) as exc:
            _rollback(conn)
            raise self.explain(exc) from None
        except BaseException:
            _rollback(conn)
            raise

    def write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Execute one statement per row of ``rows``, all in one write transaction."""
        with self.write() as conn:
            conn.executemany(sql, rows)

    def try_write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> bool:
        """:meth:`write_many`, but only if it can start without waiting; False if nothing was done.

        Returns False when another thread of this process is using the
        connection, or another connection holds SQLite's write lock. The event
        loop uses it to commit inline when that costs one small commit, and
        hands the write to a worker thread (:meth:`write_many`) when it would wait.
        """
        if not self.lock.acquire(blocking=False):
            return False
        try:
            conn = self.conn
            try:
                # Fail at once instead of sleeping in SQLite's busy handler.
                conn.execute("PRAGMA busy_timeout = 0")
                try:
                    conn.execute("BEGIN IMMEDIATE")
                finally:
                    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            except sqlite3.OperationalError as exc:
                low = str(exc).lower()
                if "locked" in low or "busy" in low:
                    return False
                raise self.explain(exc) from None
            except sqlite3.Error as exc:
                raise self.explain(exc) from None
            self._commit(conn, sql, rows)
            return True
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
        return int(self.conn.execute("PRAGMA schema_version").fetchone()[0])

    def recheck_schema(self) -> None:
        """Before reusing an idle connection: refuse a schema a newer letitloop moved on.

        ``PRAGMA schema_version`` changes with every schema change (a new goal's
        table too); only then is the file checked again, read-only, as on open.
        """
        with self.lock:
            try:
                version = self._read_schema_version()
                if version == self._schema_version:
                    return
                self._goal_tables.clear()  # a goal's table may have gone
                if not _migrations.check(self.conn, self.path):
                    _migrations.migrate(self)
                self._schema_version = self._read_schema_version()
            except sqlite3.Error as exc:
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
        return _explain(exc, self.path)

    def close(self) -> None:
        with self.lock:
            self.conn.close()

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
        known = self._goal_tables.get(goal)
        if known is not None:
            return known
        row = conn.execute("SELECT journal_table FROM goals WHERE goal = ?", (goal,)).fetchone()
        if row:
            self._goal_tables[goal] = table = str(row[0])
            return table
        table = journal_table_name(goal)
        taken = (
            table in RESERVED_TABLES
            or conn.execute(
                "SELECT 1 FROM goals WHERE journal_table = ? "
                "UNION ALL SELECT 1 FROM sqlite_master WHERE name = ? COLLATE NOCASE",
                (table, table),
            ).fetchone()
        )
        if taken:
            table = journal_table_name(goal, long_hash=True)
        for (sql,) in conn.execute(
            "SELECT sql FROM sqlite_master WHERE tbl_name = ? AND sql IS NOT NULL "
            "ORDER BY type = 'index'",
            (JOURNAL_TEMPLATE,),
        ).fetchall():
            # Table names we generate hold only [a-z0-9_], so plain substitution is safe.
            conn.execute(sql.replace(JOURNAL_TEMPLATE, table))
        conn.execute(
            "INSERT INTO goals (goal, journal_table, created_at) VALUES (?, ?, ?)",
            (goal, table, utc_iso(now)),
        )
        refresh_journal_rows(conn)
        return table

    # -- lock files ----------------------------------------------------------

    def lock_file(self, kind: str, name: str) -> Path:
        """The lock file for ``name`` beside the journal: bounded, hashed, safe on any filesystem.

        The folder is ``<journal>-locks`` beside the real file (symlinks
        resolved), and the file's name depends only on ``kind`` and ``name``,
        never on the path used to reach the journal: a symlink to the journal,
        or its folder mounted at another path (two containers sharing a
        volume), reaches the same lock files. Creates nothing (see
        letitloop.locks, which takes and removes them).
        """
        digest = blake2b(name.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
        return self.lock_folder / f"{kind}-{digest}.lock"

    @property
    def lock_folder(self) -> Path:
        """``<journal>-locks`` beside the real journal file."""
        return self.real_path.with_name(self.real_path.name + "-locks")


#: The browsing view of every goal's rows (see migrations/0004_views.sql).
JOURNAL_ROWS_VIEW = "journal_rows"

#: The most goals ``journal_rows`` covers. Every connection parses the view's
#: SQL when it opens the file, and adding a goal rebuilds it, so a view over
#: thousands of goals would slow every ``Journal()`` open for a browsing aid
#: (benchmarks/goal_view.py: at 450 goals, uncapped, adding a goal took 15.5 ms
#: instead of 1.0 ms and opening the file 16.8 ms instead of 11.0 ms). Beyond
#: this many goals the view is left empty; query a goal's own table instead.
#: It also keeps the view under SQLite's 500-term limit on a compound SELECT.
VIEW_MAX_GOALS = 200


def refresh_journal_rows(conn: sqlite3.Connection) -> None:
    """Inside a write transaction: rebuild the ``journal_rows`` view over every goal's table.

    A no-op on a file whose schema has no such view yet (its migration
    creates it). With more than VIEW_MAX_GOALS goals the view is an empty
    placeholder (same columns, no rows).
    """
    row = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'view' AND name = ?", (JOURNAL_ROWS_VIEW,)
    ).fetchone()
    if not row:
        return
    placeholder = (
        f"CREATE VIEW {JOURNAL_ROWS_VIEW} AS\n"
        f"SELECT NULL AS goal, rowid AS seq, * FROM {JOURNAL_TEMPLATE}"
    )
    (count,) = conn.execute("SELECT count(*) FROM goals").fetchone()
    if count > VIEW_MAX_GOALS:
        if row[0] == placeholder:
            return  # already given up on: adding a goal costs nothing here
        sql = placeholder
    else:
        arms = [placeholder.split("\n", 1)[1]]
        for goal, table in conn.execute("SELECT goal, journal_table FROM goals ORDER BY rowid"):
            literal = "'" + str(goal).replace("'", "''") + "'"
            # Table names we generate hold only [a-z0-9_]; the goal is a quoted literal.
            arms.append(f'SELECT {literal} AS goal, rowid AS seq, * FROM "{table}"')
        sql = f"CREATE VIEW {JOURNAL_ROWS_VIEW} AS\n" + "\nUNION ALL\n".join(arms)
    conn.execute(f"DROP VIEW {JOURNAL_ROWS_VIEW}")
    conn.execute(sql)


def now() -> float:
    """The default clock: seconds since the epoch."""
    return time.time()


# -- one connection per journal file per process, kept across runs ----------------------

#: Idle connections kept open per process: a program that opens runs of a few
#: journal files in turn reuses each file's connection instead of paying a new
#: one per run (connect, probe, pragmas, and on close a checkpoint that also
#: deletes the -wal file). Beyond this many idle ones, the oldest is closed.
MAX_IDLE_STORES = 8


class _Shared:
    __slots__ = ("stamp", "store", "users")

    def __init__(self, store: Store) -> None:
        self.store = store
        self.users = 0
        #: (mtime, size) of the file and of its -wal when the last user let go;
        #: None while in use.
        self.stamp: tuple[int, int, int, int] | None = None


_shared: dict[tuple[str, str], _Shared] = {}
_shared_lock = threading.Lock()


def _stamp(path: Path) -> tuple[int, int, int, int] | None:
    """(mtime, size) of the file and its -wal: anyone's write since changes one of them."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    try:
        wal = os.stat(f"{path}-wal")
    except OSError:
        return (st.st_mtime_ns, st.st_size, 0, -1)
    return (st.st_mtime_ns, st.st_size, wal.st_mtime_ns, wal.st_size)


#: Connections to files that changed behind SQLite's back while they were
#: idle: never closed before exit (closing the last connection to a file
#: checkpoints its WAL into it, which must not happen to a file that was
#: replaced, nor to one just refused as newer or foreign).
_abandoned: list[Store] = []


def open_store(
    path: str | os.PathLike[str] | None = None, *, durability: Durability = "process"
) -> Store:
    """A connection to the journal at ``path`` for one user, shared in this process.

    Reuses this process's connection to the same file and durability when it
    is still valid: the same file (device and inode); if no one was using it,
    unchanged since its last user let go (mtime and size of the file and its
    -wal: a file another process wrote, or a copy rewrote, gets a fresh
    connection, so nothing read before is trusted); and
    the same schema, or one this version still accepts (a newer letitloop's
    migration is refused, as on a first open). Give it back with
    :func:`close_store`. Raises what ``Store()`` raises.
    """
    resolved = resolve_path(path)
    key = (os.path.realpath(resolved), durability)
    stale: Store | None = None
    with _shared_lock:
        entry = _shared.get(key)
        if entry is not None:
            store = entry.store
            try:
                st = os.stat(resolved)
                same = (st.st_dev, st.st_ino) == store.identity and (
                    entry.users > 0 or (entry.stamp is not None and entry.stamp == _stamp(resolved))
                )
            except OSError:
                same = False
            if same:
                entry.users += 1
                entry.stamp = None
            elif entry.users == 0:
                del _shared[key]
                stale = store
    if entry is not None and stale is None:
        try:
            store.recheck_schema()
        except BaseException:
            close_store(store)
            raise
        return store
    try:
        store = Store(resolved, durability=durability)
    except BaseException:
        if stale is not None:
            _abandoned.append(stale)
        raise
    if stale is not None:
        stale.close()  # not the last connection now: no checkpoint into the file
    with _shared_lock:
        entry = _shared.get(key)
        if entry is not None:  # another thread made one meanwhile: keep ours private
            return store
        entry = _shared[key] = _Shared(store)
        entry.users += 1
    store.shared = True
    return store


def close_store(store: Store) -> None:
    """Give back a connection from :func:`open_store` (closed if it was not shared)."""
    if not store.shared:
        store.close()
        return
    key = (str(store.real_path), store.durability)
    with _shared_lock:
        entry = _shared.get(key)
        if entry is None or entry.store is not store:
            store.close()
            return
        entry.users -= 1
        if entry.users > 0:
            return
        entry.stamp = _stamp(store.path)
        idle = [k for k, e in _shared.items() if e.users == 0]
        closing = [_shared.pop(k).store for k in idle[: max(0, len(idle) - MAX_IDLE_STORES)]]
    for old in closing:
        old.close()


def close_idle_stores() -> None:
    """Close every shared connection no one is using (at exit: SQLite checkpoints the WAL)."""
    with _shared_lock:
        idle = [k for k, e in _shared.items() if e.users == 0]
        closing = [_shared.pop(k).store for k in idle]
    closing += _abandoned
    _abandoned.clear()
    for store in closing:
        with contextlib.suppress(sqlite3.Error):
            store.close()


def _forget_after_fork() -> None:
    # A forked child must not use (nor close) its parent's connections.
    global _shared_lock
    _shared.clear()
    _abandoned.clear()
    _shared_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)

atexit.register(close_idle_stores)
