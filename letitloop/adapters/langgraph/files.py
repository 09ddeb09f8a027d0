"""Opening the journal file after a SIGKILL: around a stall of the store's read-only probe.

``Store()`` first checks a journal on a read-only connection that must not
write SQLite's ``-shm`` file (``readonly_shm=1``). When the last process
that had the file open was killed in the middle of a write, its ``-wal`` and
``-shm`` files are left in a state that only a connection allowed to write
the ``-shm`` can recover; the read-only probe then retries inside SQLite for
about ten seconds and fails with "locking protocol", and so does every
later open, until some connection recovers the index. LangGraph graphs are
exactly the programs that get killed and reopen the file at once.

While another connection that did recover the index is open, the probe
reads the shared index and succeeds at once. So the adapter opens the
journal with a plain read-only connection (``mode=ro``: it may recover the
``-shm`` index, never writes the database or its ``-wal``) for the moment a
store opens, when a ``-wal`` file is there and the database file alone
(read with ``immutable=1``, which touches none of the three files) holds a
letitloop journal this version opens. Any other file (empty, another
application's, a newer letitloop's) is left to the store, so a file it
refuses stays byte for byte as it was, ``-shm`` included; the one exception
is a journal whose ``-wal`` holds a newer letitloop's migration not yet in
the database file, whose ``-shm`` index may be rebuilt before the store
refuses it (the database and its ``-wal`` are untouched).

The real fix belongs in ``letitloop.store._probe``, which alone knows when
its ``readonly_shm`` read failed this way: there, on "locking protocol",
probe the database file alone (``immutable=1``) and, when it holds a journal
this version opens, hold a plain ``mode=ro`` connection open while the store
opens its writable one (what this module does before trying). Once that
lands, this module is harmless and can go.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from ... import migrate
from ...errors import LetItLoopError
from ...store import Durability, Store, resolve_path


def _a_journal_we_open(target: Path) -> bool:
    """Whether the database file alone says: a letitloop journal this version opens.

    An empty database file says nothing (what it holds may all be in the
    ``-wal``): no.
    """
    uri = Path(os.path.abspath(target)).as_uri()
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
        migrate.check(conn, target)
    except (LetItLoopError, sqlite3.Error):
        return False  # another application's, or a newer letitloop's: the store refuses it
    finally:
        conn.close()
    return True


@contextlib.contextmanager
def wal_index_kept_open(path: str | os.PathLike[str] | None) -> Iterator[None]:
    """Hold a read-only connection to ``path`` (that has read) while the block runs.

    Does nothing when there is no ``-wal`` file beside the journal (nothing
    to recover), when the file is not a journal this version opens (the
    store refuses it untouched), or when the read-only open fails (the
    store's own open then says what is wrong).
    """
    target = resolve_path(path)
    if not Path(f"{target}-wal").exists() or not _a_journal_we_open(target):
        yield
        return
    conn: sqlite3.Connection | None = None
    try:
        uri = Path(os.path.abspath(target)).as_uri()
        conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=30)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error:
        if conn is not None:
            conn.close()
        conn = None
    try:
        yield
    finally:
        if conn is not None:
            conn.close()


def open_store(path: str | os.PathLike[str] | None, durability: Durability) -> Store:
    """``Store(path, durability=...)``, opened without the probe's stall (see the module)."""
    with wal_index_kept_open(path):
        return Store(path, durability=durability)
