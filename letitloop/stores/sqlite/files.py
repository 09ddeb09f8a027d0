"""The journal file on disk before a writable connection touches it.

Where it lives (``path=``, ``$LETITLOOP_DB``, ``.letitloop/journal.db``), its
folder, whether it is a file, and the read-only probe that refuses a newer or
foreign file while leaving it, its -wal and its -shm byte for byte.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ...errors import JournalFileError, LetItLoopError
from ..schemes import malformed_url, not_a_file, scheme_of
from .connections import live
from .sqlerrors import DRIVER_ERRORS, explain

if TYPE_CHECKING:
    from pathlib import Path

# Paths are text here, and os calls: pathlib (with urllib.parse and ipaddress, which
# it imports) costs `import letitloop` and every resume about 17 M instructions
# (3 ms) that no open needs (issue 30). resolve_path gives lil its Path.

#: Where the journal lives when neither ``path=`` nor ``LETITLOOP_DB`` says.
DEFAULT_PATH = os.path.join(".letitloop", "journal.db")

#: The mode of a new journal file (SQLite gives its -wal and -shm the same):
#: readable by its owner only, since it holds API responses and model outputs.
#: ``LETITLOOP_FILE_MODE`` (octal, e.g. ``660`` for a group-shared folder) chooses
#: another; the umask still applies. An existing file's mode is never changed.
FILE_MODE = 0o600


def file_mode() -> int:
    """The mode a new journal file gets: ``$LETITLOOP_FILE_MODE`` (octal) or FILE_MODE.

    Raises JournalFileError for a value that is not an octal mode.
    """
    text = os.environ.get("LETITLOOP_FILE_MODE")
    if not text:
        return FILE_MODE
    try:
        mode = int(text, 8)
    except ValueError:
        mode = -1
    if not 0 <= mode <= 0o777:
        raise JournalFileError(
            f"LETITLOOP_FILE_MODE={text!r}: expected an octal file mode such as 600 or 660; "
            f"set it to one, or unset it for owner-only files"
        )
    return mode


def folder_mode() -> int:
    """The mode of a journal's new locks folder: the file's, with search where it reads."""
    mode = file_mode()
    return mode | ((mode & 0o444) >> 2)


def create_file(path: str) -> None:
    """Create the journal file ``path`` empty with :func:`file_mode`, if it does not exist.

    Before SQLite opens it, so that the file (and its -wal and -shm, which
    SQLite creates with the file's mode) never exists with looser permissions.
    Safe beside a connection: a file that does not exist has none of ours (an
    existing one is left alone, as one another process creates meanwhile).
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, file_mode())
    except FileExistsError:
        return
    except OSError:
        return  # SQLite's own open explains what is wrong (a folder, no permission, …)
    os.close(fd)


def resolve_file(path: str | os.PathLike[str] | None = None) -> str:
    """The journal file: ``path``, else ``$LETITLOOP_DB``, else the nearest
    ``.letitloop/journal.db`` here or above, else at the script's folder or above, else a
    new one beside the script (letitloop/stores/discovery.py).

    A URL (``scheme://…``) is never a file: UnknownStoreError (schemes.py).
    """
    if path is None:
        path = os.environ.get("LETITLOOP_DB") or None
        if path is None:
            from ..discovery import default_path  # loaded by programs that name no file

            return default_path()
    bad = malformed_url(os.fspath(path))  # postgresql:/… is a typo, not a folder
    if bad is not None:
        raise bad
    scheme = scheme_of(path)
    if scheme is not None:
        raise not_a_file(os.fspath(path), scheme)
    return os.fspath(path)


def resolve_path(path: str | os.PathLike[str] | None = None) -> Path:
    """:func:`resolve_file` as a ``Path`` (for lil and the adapters)."""
    from pathlib import Path

    return Path(resolve_file(path))


def file_uri(path: str | os.PathLike[str]) -> str:
    """``file:`` URI of ``path`` made absolute, as ``Path.as_uri`` writes it on POSIX.

    Every byte but letters, digits, ``_.-~/`` percent-encoded (so ``?``, ``#``
    and ``%`` in a name reach SQLite as part of it), without pathlib.
    """
    raw = os.fsencode(os.path.abspath(path))
    if not raw.translate(None, _URI_SAFE):
        return "file://" + raw.decode("ascii")
    return "file://" + "".join(chr(b) if b in _URI_SAFE else f"%{b:02X}" for b in raw)


_URI_SAFE = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~/"


def make_folder(path: str) -> None:
    """Create the folder of the journal file ``path`` if missing; explained if it cannot be."""
    hint = None
    if os.path.basename(path) == "journal.db":  # perhaps the default journal, to be made
        from ..discovery import new_default_journal

        hint = new_default_journal(path)
    folder = os.path.dirname(path)
    try:
        if folder:
            os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise JournalFileError(
            f"{path}: cannot create the folder {folder} ({exc}); "
            f"create it or pass another path= / LETITLOOP_DB",
            path=str(path),
        ) from None
    if hint and sys.stderr is not None:  # None under pythonw or a daemon without one
        import contextlib  # once, when the default journal is made

        # A closed or broken stderr: the journal opens all the same.
        with contextlib.suppress(OSError, ValueError):
            print(hint, file=sys.stderr, flush=True)


def check_is_a_file(path: str) -> bool:
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
        found, example = "a folder", os.path.join(path, "journal.db")
    else:
        found, example = "a device, pipe or socket, not a file", DEFAULT_PATH
    raise JournalFileError(
        f"{path}: expected a journal file (or a path where one can be created), found {found}; "
        f"pass the path of a file, e.g. {example} (path= or LETITLOOP_DB)",
        path=str(path),
    )


#: How :func:`probe_file` opens a file read-only, most careful first: each later one
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


def index_unusable_read_only(path: str | os.PathLike[str]) -> bool:
    """Whether the -shm index disagrees with the -wal, so only a writable -shm can recover it.

    What a writer killed while restarting or writing its log leaves: the two
    header copies of the index differ, or its salts are not the log's. A
    readable pending log (a writer that died after its commit) is False.

    It reads both headers with ``open()``, and closing those descriptors drops
    every POSIX lock this process holds on the files (SQLite's included): call
    it only while no connection of ours to the file is open
    (``connections.live``), under the file's lock (``connections.opening``).
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


def file_identity(path: str | os.PathLike[str]) -> tuple[int, int]:
    """The file itself, however it was reached (a symlink, a second mount of its
    folder): its (device, inode). Raises OSError when it cannot be stat'ed."""
    st = os.stat(path)
    return (st.st_dev, st.st_ino)


def check_unmoved(file: str, identity: tuple[int, int]) -> None:
    """After a commit through a connection to ``file`` (device and inode ``identity``): raise
    JournalFileError (``moved``) when ``file`` no longer reaches that file: deleted, replaced
    (``mv other.db journal.db``) or moved away while the journal was open.

    SQLite notices none of it in WAL mode: the commit went to the file as it was opened,
    which a next run will not find there (issue 50). One ``stat`` per commit.
    """
    try:
        st = os.stat(file)
    except OSError:
        found = "nothing is there now"
    else:
        if st.st_ino == identity[1] and st.st_dev == identity[0]:
            return
        found = "another file is there now"
    raise JournalFileError(
        f"{file}: expected the journal file this process opened; {found}: it was deleted, "
        f"replaced or moved away while the journal was open. What was just written went "
        f"to the file as opened, not to {file}, so it is not reported as recorded, and a "
        f"run started from {file} would not find it; put that file back at {file} (and "
        f"keep other files away from it while programs use it), then run again: the run "
        f"resumes from what it holds",
        path=file,
        moved=True,
    )


def _main_file_is_our_journal(path: str | os.PathLike[str], uri: str) -> bool:
    """Whether the database file alone (``immutable=1``: touches nothing) is a journal we open.

    Also True for a new journal whose first writer died before its first commit
    reached the log: an empty database (no schema at all) with a -wal that holds
    no frame. There is nothing in it to keep byte for byte, and the probe would
    otherwise stall on its index exactly as for a journal.
    """
    try:
        conn = sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True)
    except DRIVER_ERRORS:
        return False
    try:
        if conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone() is None:
            return _log_has_no_frame(path)
        tables = {
            name
            for (name,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('goals', 'runs')"
            )
        }
        if tables != {"goals", "runs"}:
            return False
        from . import migrate  # (loaded by the open already: connect.py)

        migrate.check(conn, path)
    except LetItLoopError:
        return False  # another application's, or a newer letitloop's: the probe refuses it
    except DRIVER_ERRORS:
        return False  # a file SQLite cannot read: the probe refuses it
    finally:
        conn.close()
    return True


def _log_has_no_frame(path: str | os.PathLike[str]) -> bool:
    """Whether the -wal is at most its 32-byte header: no page of anyone's data in it."""
    try:
        return os.stat(f"{path}-wal").st_size <= 32
    except OSError:
        return True


@contextlib.contextmanager
def _index_kept_open(path: str | os.PathLike[str], uri: str) -> Iterator[None]:
    """Hold a plain read-only connection (that has read) open while the probe runs, if needed.

    A writer killed right after restarting its WAL leaves a -wal of a bare
    header and a -shm describing the old log. A ``readonly_shm`` reader
    cannot recover that: it retries for about ten seconds and fails with
    "locking protocol", as every later open would, until a connection allowed
    to write the -shm recovers it. While a plain ``mode=ro`` connection that
    has read is open (it may rebuild the -shm index, never the database or
    its -wal), the probe reads the shared index at once. Taken only when the
    index is unusable read-only and the database file alone holds a journal
    this version opens (or an empty one that its log adds nothing to): a
    readable file, and a file the probe refuses, keep their -shm byte for byte.
    """
    keeper: sqlite3.Connection | None = None
    # A connection of ours that is open has read the index already (the probe
    # reads it at once), and its locks must not be dropped by a plain open().
    if not live(path) and index_unusable_read_only(path) and _main_file_is_our_journal(path, uri):
        try:
            keeper = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=30)
            keeper.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except DRIVER_ERRORS:
            if keeper is not None:
                keeper.close()
            keeper = None
    try:
        yield
    finally:
        if keeper is not None:
            keeper.close()


def probe_file(path: str | os.PathLike[str]) -> bool:
    """:func:`migrate.check` on a read-only connection: the file and its -wal stay as they were.

    A refused file (newer, foreign) must be left byte for byte; closing a
    writable connection would checkpoint a pending WAL into it and delete the
    -wal and -shm files. See ``_PROBES`` for what each attempt may touch.
    Run it under the file's lock (``connections.opening``): its first attempt
    maps the -shm read-only, and SQLite shares that mapping with every
    connection this process opens to the file meanwhile.
    """
    uri = file_uri(path)
    if not os.path.exists(f"{path}-wal"):
        # Closed cleanly (or never in WAL mode): the file alone is the whole journal, read
        # as it is (immutable=1), so that SQLite creates no -wal or -shm beside a file it
        # may refuse (a newer letitloop's), which a refusal promises to leave as it was.
        return _probe_with(path, uri, _PROBES[-1:])
    with _index_kept_open(path, uri):
        return _probe_with(path, uri, _PROBES)


def _probe_with(path: str | os.PathLike[str], uri: str, probes: tuple[str, ...]) -> bool:
    for query in probes:
        try:
            conn = sqlite3.connect(f"{uri}?{query}", uri=True, isolation_level=None)
        except DRIVER_ERRORS as exc:
            raise explain(exc, path) from None
        try:
            from . import migrate  # (loaded by the open already: connect.py)

            return migrate.check(conn, path)
        except JournalFileError as exc:
            # SQLITE_CANTOPEN, SQLITE_READONLY_RECOVERY/CANTINIT (the index needs
            # rebuilding) and SQLITE_PROTOCOL (a read-only index it cannot trust).
            text = str(exc)
            cannot = any(
                word in text
                for word in ("unable to open", "readonly", "read-only", "locking protocol")
            )
            if not cannot or query == probes[-1]:
                raise
        finally:
            conn.close()
    raise AssertionError("unreachable")  # pragma: no cover
