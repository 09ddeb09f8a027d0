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

import hashlib
import os
import re
from datetime import timezone
from functools import lru_cache
from pathlib import Path
from typing import Any

from .errors import JournalFileError, LetItLoopError, SchemaVersionError
from .migration_files import migrations_dir

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
    conn.adapters.register_loader("timestamptz", _iso_loader())
    # Every int as a bigint: psycopg otherwise types an int by its size (int2, int4,
    # int8), so a statement whose values differ in size (a checksum, say) has several
    # signatures and is prepared once per signature, parsed again meanwhile.
    conn.adapters.register_dumper(int, driver.types.numeric.Int8Dumper)
    return conn


@lru_cache(maxsize=1)
def _iso_loader() -> type:
    """A psycopg loader of ``timestamptz`` as ``clock.utc_iso``'s text (written back as is)."""
    from psycopg.types.datetime import TimestamptzLoader

    class IsoLoader(TimestamptzLoader):
        def load(self, data: Any) -> str:  # type: ignore[override]
            moment = super().load(data).astimezone(timezone.utc)
            return str(moment.isoformat(timespec="microseconds"))

    return IsoLoader


def redact(location: str) -> str:
    """``location`` without its password, for messages."""
    head, sep, tail = location.partition("@")
    if not sep or "://" not in head:
        return location
    scheme, _, user = head.partition("://")
    return f"{scheme}://{user.split(':', 1)[0]}@{tail}"


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
