"""The pragmas every writable connection to a journal gets: WAL, ``synchronous`` by durability.

How much a commit survives (the death of the process, or a power loss too)
is decided here, on every open.
"""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Literal

from ...errors import JournalFileError
from .sqlerrors import BUSY_TIMEOUT_MS, DRIVER_ERRORS, explain

#: How much a commit survives: the death of the process, or a power loss too.
Durability = Literal["process", "power"]


def configure(
    c: sqlite3.Connection,
    path: str | os.PathLike[str],
    durability: Durability,
    creating: bool = False,
) -> None:
    """Set a writable connection's pragmas: WAL, ``synchronous`` by ``durability``, foreign keys.

    ``creating``: the file is new and empty, and its schema is written next. Under
    ``durability="process"`` it is switched to WAL and given its schema with
    ``synchronous = OFF``, and the opener calls :func:`synchronous` once the schema
    is committed: the switch's rollback journal and the new -wal's header cost six
    fsyncs, which only a power loss during the file's creation would need, and this
    durability does not promise to survive one.
    """
    try:
        if creating and durability == "process":
            c.execute("PRAGMA synchronous = OFF")
        # WAL: readers never block the writer nor the writer readers, and a
        # commit is one append to the -wal file. Set on every open (it cannot
        # be changed inside a transaction, so not in a migration).
        mode = switch_to_wal(c)
        if str(mode).lower() != "wal":
            raise JournalFileError(
                f"{path}: expected to switch the journal to WAL mode, SQLite "
                f"answered {mode!r}; is the file on a filesystem without shared memory?",
                path=str(path),
            )
        if not (creating and durability == "process"):
            synchronous(c, durability)
        if durability == "power":
            # On macOS a plain fsync() reaches the drive but not through its
            # cache; F_FULLFSYNC does. Both pragmas are no-ops elsewhere.
            c.execute("PRAGMA fullfsync = ON")
            c.execute("PRAGMA checkpoint_fullfsync = ON")
        # Enforce runs -> goals and attempts -> runs (ON DELETE CASCADE).
        c.execute("PRAGMA foreign_keys = ON")
    except DRIVER_ERRORS as exc:
        raise explain(exc, path) from None


def synchronous(c: sqlite3.Connection, durability: Durability) -> None:
    """``PRAGMA synchronous`` by ``durability``."""
    # NORMAL: in WAL mode a commit survives the death of the process (the WAL
    # lives in the OS page cache) and fsyncs only at checkpoints; a power loss
    # may lose the last commits. FULL: fsync the WAL at every commit, so a
    # commit also survives power loss and kernel crashes.
    c.execute(f"PRAGMA synchronous = {'FULL' if durability == 'power' else 'NORMAL'}")


def switch_to_wal(conn: sqlite3.Connection) -> str:
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
            return str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(0.005)
