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
store opens, only when both hold:

- the ``-shm`` index disagrees with the ``-wal`` (its two header copies
  differ, or its salts are not the log's), which no read-only reader can
  use; a readable pending log is left alone;
- the database file alone (read with ``immutable=1``, which touches none of
  the three files) holds a letitloop journal this version opens; another
  application's file, or a newer letitloop's, is left to the store.

So a file the store refuses keeps its ``-shm`` byte for byte, except one
whose index is already unusable and whose ``-wal`` holds a newer letitloop's
migration not yet in the database file (its database and ``-wal`` are
untouched).

The real fix belongs in ``letitloop.store._probe`` (the same two tests,
then a ``mode=ro`` connection held open during the probe; the branch report
has the diff). Once that lands, this module is harmless and can go.
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

#: Bytes of SQLite's wal-index header (two copies at the start of the -shm)
#: and where its salts sit; the write-ahead log's own salts sit at 16..24.
#: Both are SQLite's documented file formats (https://sqlite.org/walformat.html).
_SHM_HEADER = 48
_SHM_SALTS = slice(32, 40)
_WAL_SALTS = slice(16, 24)


def _index_unusable_read_only(target: Path) -> bool:
    """Whether the -shm index disagrees with the -wal, so only a writable -shm can recover it.

    True when the index's two header copies differ, or its salts are not the
    log's: what a writer killed while restarting or writing the log leaves.
    A readable pending log (a writer that died after its commit) is False.
    """
    try:
        with open(f"{target}-wal", "rb") as f:
            wal = f.read(32)
        with open(f"{target}-shm", "rb") as f:
            shm = f.read(2 * _SHM_HEADER)
    except OSError:
        return False
    if len(wal) < 32 or len(shm) < 2 * _SHM_HEADER:
        return False
    return shm[:_SHM_HEADER] != shm[_SHM_HEADER:] or shm[_SHM_SALTS] != wal[_WAL_SALTS]


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

    Does nothing unless the ``-shm`` index is unusable read-only and the
    database file holds a journal this version opens (see the module), or
    when the read-only open fails (the store's own open then says what is
    wrong).
    """
    target = resolve_path(path)
    if not _index_unusable_read_only(target) or not _a_journal_we_open(target):
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
