"""Connecting a :class:`~letitloop.stores.sqlite.store.Store` to its journal file: writable,
or read-only.

Writable: the folder made, the file probed read-only first (unless a writable
connection of ours to it is open: it was checked), then connected, configured
and migrated. Read-only: never migrated, created or checkpointed. Both under
the file's lock, and counted while open (``connections.py``).
"""

from __future__ import annotations

import os
import sqlite3
from typing import TYPE_CHECKING

from ...errors import JournalFileError
from . import migrate as _migrations
from .connections import checked, opening, track
from .files import check_is_a_file, create_file, file_identity, file_uri, make_folder, probe_file
from .pragmas import configure, synchronous
from .sqlerrors import BUSY_TIMEOUT_MS, DRIVER_ERRORS, explain

if TYPE_CHECKING:
    from .store import Store


#: Bytes per page of a new journal file: 1 KiB, not SQLite's default 4 KiB. Every
#: table and index takes one page at least, so a new file's 26 of them and its
#: schema take 48 KiB instead of 128 KiB (a file of 1,000 small steps: 189 KiB
#: instead of 276), and a small step's commit appends two 1 KiB pages to the -wal
#: instead of two of 4 KiB (its CPU time about a fifth less). The price: a result
#: of many KiB spans four times as many overflow pages (a 100 KB result's step
#: about a third slower); benchmarks/README.md, "The page size". A file made
#: with another page size keeps it.
PAGE_SIZE = 1024


def _identify(store: Store) -> None:
    # The file itself, however it was reached (a symlink, a second mount of its
    # folder): locks and this process's registry of held runs are keyed by it,
    # so two paths to one file share them.
    store.real_file = os.path.realpath(store.file)
    store.identity = file_identity(store.real_file)


def _close(store: Store) -> None:
    """Close a connection that failed to open, and stop counting it."""
    store.conn.close()
    store._untrack()


def connect_writable(store: Store, migrate: bool) -> None:
    """Connect ``store`` to its file for writing, the file checked and migrated first.

    Sets its ``conn``, ``real_file``, ``identity``, ``max_text`` and schema
    version. A file refused as newer or foreign is left byte for byte as it
    was (the check runs on a read-only connection). On any error the
    connection is closed; sqlite3's and the OS's are explained as
    JournalFileError.
    """
    make_folder(store.file)
    with opening(store.file):
        create_file(store.file)  # owner-only (files.FILE_MODE) unless it exists
        _connect_writable(store, migrate)


def _connect_writable(store: Store, migrate: bool) -> None:
    has_content = check_is_a_file(store.file)
    # A file with content is checked on a read-only connection first: a file
    # refused as newer or foreign is then left byte for byte as it was, its
    # -wal and -shm included (closing a writable connection would checkpoint
    # a pending WAL into the file and delete both). Not when a writable
    # connection of ours to it is open: that one checked it, closing this one
    # would not be the last close (no checkpoint), and the probe would only
    # cost time. The schema is checked again on this connection below, before
    # anything writes.
    probe = migrate and has_content and not checked(store.file)
    current = probe_file(store.file) if probe else None
    try:
        # isolation_level=None: no implicit transactions; we open them ourselves.
        # check_same_thread=False: threads share this connection under the store's lock.
        store.conn = sqlite3.connect(
            store.file, isolation_level=None, check_same_thread=False, timeout=0
        )
    except DRIVER_ERRORS as exc:
        raise explain(exc, store.file) from None
    try:
        _identify(store)
        # Counted before its first statement maps the -shm or takes a lock.
        store._untrack = track(store, store.identity, writable=True)
        getlimit = getattr(store.conn, "getlimit", None)  # Python 3.11+
        store._set_max_text(getlimit(0) if getlimit is not None else 1_000_000_000)
    except OSError as exc:
        _close(store)
        raise JournalFileError(
            f"{store.file}: cannot read the journal file's identity ({exc}); "
            f"check that the path points to a local file",
            path=store.file,
        ) from None
    try:
        # Wait (instead of failing at once) while another connection writes.
        store.conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if not has_content:
            # A new file's page size, set before its first page is written (a file
            # keeps the one it was made with). See PAGE_SIZE.
            store.conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
        # Refuse a newer or foreign file before anything writes to it.
        if current is None:
            current = _migrations.check(store.conn, store.file) if migrate else True
        configure(store.conn, store.file, store.durability, creating=not has_content)
        if not current:
            _migrations.migrate(store)
        if not has_content:
            synchronous(store.conn, store.durability)  # once the schema is in (configure)
        store._schema_version = store._read_schema_version()
    except DRIVER_ERRORS as exc:
        _close(store)
        raise explain(exc, store.file) from None
    except BaseException:
        _close(store)
        raise


def connect_readonly(store: Store, live: bool) -> None:
    """Connect ``store`` for reading only: refuse a file that is not at this version's schema.

    A file closed cleanly (no -wal beside it) is read as it is
    (``immutable=1``): SQLite then creates no -wal or -shm file either.
    Otherwise, or to watch a file others write (``live``: ``--follow``),
    ``mode=ro``: SQLite reads the -wal through its shared-memory index.
    """
    with opening(store.file):
        _connect_readonly(store, live)


def _connect_readonly(store: Store, live: bool) -> None:
    uri = file_uri(store.file)
    quiet = not live and not os.path.exists(f"{store.file}-wal")
    query = "mode=ro&immutable=1" if quiet else "mode=ro"
    try:
        store.conn = sqlite3.connect(
            f"{uri}?{query}", uri=True, isolation_level=None, check_same_thread=False
        )
    except DRIVER_ERRORS as exc:
        raise explain(exc, store.file) from None
    try:
        _identify(store)
        if not quiet:  # immutable=1 takes no lock: nothing to keep
            store._untrack = track(store, store.identity, writable=False)
        store._set_max_text(1_000_000_000)
        store.conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if not _migrations.check(store.conn, store.file):
            from .migration_files import known_names  # only for this refusal

            names = known_names()
            raise JournalFileError(
                f"{store.file}: this journal was written by an older letitloop (it lacks "
                f"migration {names[-1]!r}); reading it would need its schema upgraded, "
                f"and a reader never writes: run 'lil upgrade' (or open it with a "
                f"Journal of this version) first",
                path=store.file,
            )
        store._schema_version = store._read_schema_version()
    except DRIVER_ERRORS as exc:
        _close(store)
        raise explain(exc, store.file) from None
    except OSError as exc:
        _close(store)
        raise JournalFileError(f"{store.file}: {exc}", path=store.file) from None
    except BaseException:
        _close(store)
        raise
