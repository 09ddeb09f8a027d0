"""The one place a sqlite3 or OS error about the journal file becomes a JournalFileError.

Each message says what was expected, what was found and what to do.
"""

from __future__ import annotations

import os
import sqlite3

from ...errors import JournalFileError

#: How long a write waits for another connection's write lock before failing.
#: Write transactions here last microseconds to milliseconds, so a wait this
#: long means something is badly wrong (a debugger paused a writer, a
#: network filesystem); generous enough that many processes hammering one
#: file never see "database is locked".
BUSY_TIMEOUT_MS = 30_000

#: What reading a journal file through Python's sqlite3 may raise about the file:
#: ``sqlite3.Error``, and ``UnicodeError`` when SQLite's text is not UTF-8 (a
#: value the driver decodes, or an error message that quotes schema text, such as
#: "malformed database schema" near a damaged byte). Every ``except`` that hands
#: an error to :func:`explain` catches this tuple, so both become a
#: JournalFileError.
DRIVER_ERRORS: tuple[type[Exception], ...] = (sqlite3.Error, UnicodeError)


def is_busy(exc: sqlite3.OperationalError) -> bool:
    """Whether ``exc`` is another connection holding the lock (SQLITE_BUSY or SQLITE_LOCKED)."""
    low = str(exc).lower()
    return "locked" in low or "busy" in low


def _disk_full(path: str | os.PathLike[str]) -> bool:
    """Whether the filesystem holding ``path`` has no free blocks or no free inodes left."""
    try:
        st = os.statvfs(path if os.path.isdir(path) else os.path.dirname(path) or ".")
    except (OSError, AttributeError):  # no statvfs (Windows), or the folder is gone
        return False
    return st.f_bavail == 0 or (st.f_files > 0 and st.f_favail == 0)


def explain(exc: BaseException, path: str | os.PathLike[str]) -> JournalFileError:
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
            f"and mount of {path} and {os.path.dirname(path) or '.'}, or pass another path= / "
            f"LETITLOOP_DB",
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
