"""Opening an existing journal file: read-only for readers, which never write (no
migration, no lock file, no checkpoint); writable for maintenance (:func:`open_journal_file`).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from ..errors import JournalFileError
from ..stores.sqlite.connections import opening, sqlite_entry
from ..stores.sqlite.files import check_is_a_file, resolve_path
from ..stores.sqlite.sqlerrors import DRIVER_ERRORS
from ..stores.sqlite.store import Store


def open_journal_file(
    path: str | Path | None = None, *, write: bool = False, live: bool = False
) -> Store:
    """Open an existing journal: for reading (the default) or for maintenance (``write``).

    Unlike ``Journal``, this never creates a file, and refuses an SQLite file
    that is not a letitloop journal rather than adding tables to it. A reader
    (``lil runs``, ``show``, ``export``) opens the file read-only and never
    changes it: no migration, no lock file, no checkpoint; a file written by
    an older letitloop is refused with the way to upgrade it (``live``: the
    reader watches a file others are writing, as ``--follow`` does). ``write=True``
    (``reset``, ``fork``, ``gc``, ``upgrade``) opens it writable and upgrades
    an older schema first. Raises JournalFileError saying what was found.
    The check and the connection are made under the file's lock
    (``connections.opening``), as every connection of ours to it.
    """
    p = resolve_path(path)
    if not p.exists() and path is None and not os.environ.get("LETITLOOP_DB"):
        raise JournalFileError(
            f"no journal in {Path.cwd()} or the folders above it: lil looks for "
            f".letitloop/journal.db there, as git looks for .git (a script makes it beside "
            f"itself, and said where on stderr). Run lil in the script's folder or below it, "
            f"or pass --db PATH, or set LETITLOOP_DB",
            path=str(p),
        )
    if not p.exists():
        raise JournalFileError(
            f"{p}: no journal file here; expected the file a Journal wrote (pass --db PATH "
            f"or set LETITLOOP_DB; the default is .letitloop/journal.db under the current "
            f"folder or a folder above it)",
            path=str(p),
        )
    if p.is_dir():
        raise JournalFileError(
            f"{p}: expected a journal file, found a folder; pass the file's path to --db",
            path=str(p),
        )
    # A FIFO, a device or a socket: refused here, before SQLite's open() of it, which
    # would wait for a writer at the pipe's other end and ignore Ctrl-C meanwhile.
    check_is_a_file(str(p))
    # Under the file's lock, as every connection of ours to it (connections.py).
    with opening(p):
        return _open(p, write, live)


def _open(p: Path, write: bool, live: bool) -> Store:
    try:
        # Read as it is when closed cleanly (no -wal): nothing is created beside it.
        quiet = "&immutable=1" if not Path(f"{p}-wal").exists() else ""
        with sqlite_entry():  # outside any store's lock: a fork waits for it
            probe = sqlite3.connect(f"{p.resolve().as_uri()}?mode=ro{quiet}", uri=True)
            try:
                names = {
                    r[0]
                    for r in probe.execute(
                        "SELECT name FROM sqlite_master WHERE type = 'table' "
                        "AND name IN ('goals', 'runs')"
                    )
                }
            finally:
                probe.close()
    except DRIVER_ERRORS as exc:
        from ..stores.sqlite.sqlerrors import explain

        raise explain(exc, p) from None
    if names != {"goals", "runs"}:
        raise JournalFileError(
            f"{p}: expected a letitloop journal, found an SQLite file without letitloop's "
            f"tables (goals, runs); pass the journal's path to --db. The file was not changed.",
            path=str(p),
        )
    return Store(p) if write else Store(p, readonly=True, live=live)


def create_journal_file(path: str | Path) -> None:
    """Make a new journal file at ``path``, its schema current and no run in it (``lil
    copy``'s target when it does not exist yet). Its folder must exist: JournalFileError
    otherwise, nothing made."""
    p = Path(path)
    if not p.parent.is_dir():
        raise JournalFileError(
            f"{p}: its folder does not exist; create it first (mkdir -p {p.parent})",
            path=str(p),
        )
    Store(p).close()
