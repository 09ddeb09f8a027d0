"""Reaching a PostgreSQL database: the driver, a connection, and the schema's migrations.

What ``memory_database.py`` is to the in-memory store, for ``postgresql://…``
(docs/postgres.md): :func:`connect` (autocommit, TCP keepalives, times read
as ``clock.utc_iso`` text), :func:`redact` (a URL without its password, for
messages), :func:`lock_key` (the 64-bit advisory lock key of a text), and the
schema: tables prefixed ``ll_`` in the connection's schema (its
``search_path``), made and moved forward by the numbered files of
``migrations/postgres/`` (:func:`migrate`: under an advisory lock, so that
many workers starting at once migrate once), with their version in
``ll_meta``; a newer version is refused with SchemaVersionError, nothing
changed. It needs the extra ``letitloop[postgres]`` (psycopg 3).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import weakref
from collections.abc import Iterator
from datetime import timezone
from functools import lru_cache
from pathlib import Path
from typing import Any

from ...errors import JournalFileError, LetItLoopError, SchemaVersionError
from ..schemes import without_password
from ..sqlite.migration_files import migrations_dir

#: The driver, psycopg 3 (None without the extra): the PostgreSQL modules' one import of it.
try:
    import psycopg
except ImportError:  # pragma: no cover - the extra is missing
    psycopg = None  # type: ignore[assignment]

__all__ = [
    "CHANNEL",
    "connect",
    "lock_key",
    "migrate",
    "migrations",
    "psycopg",
    "redact",
    "schema_version",
    "schema_version_of",
    "server_error",
    "server_errors",
]

#: The numbered SQL files of the PostgreSQL schema: ``migrations/postgres/NNNN_name.sql``.
_MIGRATION_FILE = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")

#: TCP keepalives on every connection: a holder whose host vanished is noticed by the
#: server after about idle + interval * count = 10 + 5 * 3 = 25 seconds.
KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
}

#: The channel on which inspectors (lil send, lil cancel) and statements on ``ll_runs``
#: notify a change; the payload is the schema changed (migration 0003).
CHANNEL = "letitloop"


def lock_key(text: str) -> int:
    """The 64-bit advisory lock key of ``text`` (what a hold holds), signed as bigint."""
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _driver() -> Any:
    if psycopg is None:
        raise LetItLoopError(
            "expected psycopg 3 for a postgresql:// journal; found it not installed; "
            "pip install -e '.[postgres]'"
        )
    return psycopg


def connect(location: str) -> Any:
    """A connection to ``location`` in autocommit, with keepalives, reading times as
    ISO-8601 UTC text (as every store gives them); JournalFileError if none."""
    driver = _driver()
    try:
        conn = driver.connect(location, autocommit=True, **KEEPALIVES)
    except driver.Error as exc:
        raise JournalFileError(
            f"{redact(location)}: expected a PostgreSQL server to connect to; found "
            f"{type(exc).__name__}: {str(exc).strip()}. Start it, or fix the URL",
            path=redact(location),
        ) from exc
    _opened.add(conn)
    conn.adapters.register_loader("timestamptz", _iso_loader())
    # Every int as a bigint: psycopg otherwise types an int by its size (int2, int4,
    # int8), so a statement whose values differ in size (a checksum, say) has several
    # signatures and is prepared once per signature, parsed again meanwhile.
    conn.adapters.register_dumper(int, driver.types.numeric.Int8Dumper)
    return conn


#: Every connection :func:`connect` made that may still be open: what a forked child lets go.
_opened: weakref.WeakSet[Any] = weakref.WeakSet()
#: Those open at a fork, held from just before it until the child has let them go: the
#: child's other at-fork hooks may drop the last reference to one (a disowned journal's),
#: and psycopg, in a child, frees it without closing its socket.
_at_fork: list[Any] = []


def _before_fork() -> None:
    _at_fork[:] = list(_opened)


def _after_fork_in_parent() -> None:
    _at_fork.clear()


def _let_go_after_fork() -> None:
    """In a forked child: drop the child's copy of every inherited connection's socket.

    A session's advisory locks (a run's hold, a marker's) last while its
    socket is open in any process: a child that kept its copy would keep its
    parent's runs held after the parent died. The socket's descriptor is
    pointed at ``/dev/null`` (``dup2``) rather than closed: the number stays
    taken, so nothing else opened in the child gets it, and what libpq may
    write there when the connection is closed (its Terminate message) goes
    nowhere instead of ending the parent's session. The parent is untouched.
    """
    conns = {id(c): c for c in (*_at_fork, *_opened)}
    _at_fork.clear()
    _opened.clear()
    if not conns:
        return
    null = os.open(os.devnull, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
    try:
        for conn in conns.values():
            with contextlib.suppress(Exception):  # closed meanwhile: no socket
                fd = conn.pgconn.socket
                if fd >= 0:
                    os.dup2(null, fd, inheritable=False)
    finally:
        os.close(null)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_before_fork,
        after_in_parent=_after_fork_in_parent,
        after_in_child=_let_go_after_fork,
    )


@lru_cache(maxsize=1)
def _iso_loader() -> type:
    """A psycopg loader of ``timestamptz`` as ``clock.utc_iso``'s text (written back as is)."""
    from psycopg.types.datetime import TimestamptzLoader

    class IsoLoader(TimestamptzLoader):
        def load(self, data: Any) -> str:  # type: ignore[override]
            moment = super().load(data).astimezone(timezone.utc)
            return str(moment.isoformat(timespec="microseconds"))

    return IsoLoader


#: What to do when the server refuses, by SQLSTATE or its class (the first two characters).
_WHAT_TO_DO = {
    "3F000": "the schema the URL names (options=-csearch_path=…) does not exist, or this role "
    "may not use it; create it (CREATE SCHEMA …) and grant the role USAGE and CREATE on it, "
    "or fix the URL",
    "42501": "the URL's role lacks a right on letitloop's tables or schema; grant it (GRANT "
    "USAGE, CREATE ON SCHEMA …; GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN "
    "SCHEMA …) or connect as the role that made them",
    "25006": "the server takes no writes (a standby, or default_transaction_read_only); "
    "connect to the primary",
    "57": "the server is shutting down or restarting; open the journal again once it is "
    "back (the run resumes)",
    "08": "the connection to the server was lost; open the journal again once the server "
    "is back (the run resumes)",
}


def server_error(exc: BaseException, location: str) -> JournalFileError | None:
    """The JournalFileError of a server's refusal ``exc`` we know what to do about, else None:
    its reason as the server gave it, and what to do."""
    state = getattr(exc, "sqlstate", None) or ""
    todo = _WHAT_TO_DO.get(state) or _WHAT_TO_DO.get(state[:2])
    if todo is None:
        return None
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return JournalFileError(
        f"{redact(location)}: the PostgreSQL server refused: {type(exc).__name__}: {reason}. "
        f"Nothing more was written; {todo}",
        path=redact(location),
    )


@contextlib.contextmanager
def server_errors(location: str) -> Iterator[None]:
    """Turn a server's refusal we know (:func:`server_error`) into its JournalFileError."""
    try:
        yield
    except Exception as exc:
        if psycopg is None or not isinstance(exc, psycopg.Error):
            raise
        known = server_error(exc, location)
        if known is None:
            raise
        raise known from exc


def redact(location: str) -> str:
    """``location`` without its password, for messages (``schemes.without_password``)."""
    return without_password(location)


@lru_cache(maxsize=1)
def migrations() -> tuple[tuple[int, str, str], ...]:
    """``(number, name, sql)`` of every PostgreSQL migration this version knows, in order."""
    folder = Path(migrations_dir()) / "postgres"
    names = sorted(n[:-4] for n in os.listdir(folder) if _MIGRATION_FILE.match(n))
    return tuple((int(n[:4]), n, (folder / f"{n}.sql").read_text(encoding="utf-8")) for n in names)


def schema_version() -> int:
    """The schema this letitloop writes; a database with a higher ``ll_meta.version`` is refused."""
    return migrations()[-1][0]


def schema_version_of(conn: Any) -> int:
    """The database's schema version (0: no letitloop tables in the connection's schema)."""
    (found,) = conn.execute("SELECT to_regclass('ll_meta') IS NOT NULL").fetchone()
    if not found:
        return 0
    row = conn.execute("SELECT coalesce(max(version), 0) FROM ll_meta").fetchone()
    return int(row[0]) if row is not None else 0


def _refuse_newer(version: int, location: str) -> None:
    if version > schema_version():
        raise SchemaVersionError(
            f"{redact(location)}: expected a letitloop schema of version "
            f"{schema_version()} or older; found version {version}, written by a newer "
            f"letitloop. Nothing was changed; upgrade letitloop",
            path=redact(location),
        )


def migrate(conn: Any, location: str) -> None:
    """Bring the schema up to :func:`schema_version`, or refuse a newer one unchanged.

    One look when it is current (no lock). Otherwise under an advisory lock, so
    that workers starting at once migrate once: the first applies the numbered
    files it lacks, each recorded in ``ll_migrations`` (from 0002 on), in one
    transaction; the others wait, then find it done.
    """
    version = schema_version_of(conn)
    _refuse_newer(version, location)
    if version == schema_version():
        return
    key = lock_key("letitloop schema")
    # A session lock taken before the transaction begins, not a transaction's: a
    # transaction begun before another worker's migration committed could still read
    # the catalog as it was (a backend takes in others' catalog changes when a
    # transaction begins, not when an advisory lock is granted).
    conn.execute("SELECT pg_advisory_lock(%s)", (key,))
    try:
        with conn.transaction():
            version = schema_version_of(conn)  # again: another worker may have done it
            _refuse_newer(version, location)
            for number, name, sql in migrations():
                if number <= version:
                    continue
                conn.execute(sql)
                if number >= 2:  # ll_migrations is 0002's
                    conn.execute(
                        "INSERT INTO ll_migrations (version, name) VALUES (%s, %s)",
                        (number, name),
                    )
            if version < schema_version():
                conn.execute("DELETE FROM ll_meta")
                conn.execute("INSERT INTO ll_meta (version) VALUES (%s)", (schema_version(),))
    finally:
        if not conn.closed:
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
