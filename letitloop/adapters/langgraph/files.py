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
store opens, when a ``-wal`` file is there. The real fix belongs in
``letitloop.store._probe`` (see the branch report); this is harmless once it
lands.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from ...store import Durability, Store, resolve_path


@contextlib.contextmanager
def wal_index_kept_open(path: str | os.PathLike[str] | None) -> Iterator[None]:
    """Hold a read-only connection to ``path`` (that has read) while the block runs.

    Does nothing when there is no ``-wal`` file beside the journal (nothing
    to recover) or when the read-only open fails (the store's own open then
    says what is wrong).
    """
    target = resolve_path(path)
    if not Path(f"{target}-wal").exists():
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
