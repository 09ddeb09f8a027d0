"""``PostgresStorage``: the ``Storage`` protocol on a PostgreSQL database: ``postgresql://…``.

The same journal as a SQLite file's, in a database every host reaches
(docs/postgres.md). Imported only when such a URL is opened (``schemes.py``);
it needs the extra ``letitloop[postgres]`` (psycopg 3).

- **Schema**: tables prefixed ``ll_`` in the connection's schema, migrated by
  ``postgres_database.py``. One row per step, sleep, wait and marker in ``ll_journal``
  (every goal's, keyed by goal, run and key; global markers under goal and
  run ``''``; times ``timestamptz``, read back as ``clock.utc_iso`` text;
  a checksum as ``checksums.py`` computes it), runs in ``ll_runs``. What
  each write sets is ``row_rules.py``'s, shared with the in-memory store.
- **Transactions**: one connection per journal, in autocommit; a step row
  is one statement, so one round trip. Operations that read before they
  write run in one transaction. Every write of a run's rows is fenced: made
  only while the run's ``attempts`` is still this journal's (a key-share
  lock on the run's row, which a new holder's claim waits for).
  ``durability``: ``"process"`` commits with ``synchronous_commit = local``,
  ``"power"`` with ``on``; a commit that returned survives the client's
  death in both.
- **Holding** a run or a marker is a session-level advisory lock
  (``pg_advisory_lock``) on a connection of the hold's own, keyed by a
  64-bit hash of what it holds; PostgreSQL releases it when that connection
  ends, including when the holder's process dies (at once for a killed
  process on the same host; over a network, once the server notices the
  connection is gone: the TCP keepalives set here, about 25 s).
- **Change notices**: a journal ``LISTEN``s on :data:`CHANNEL`; inspectors
  (``lil send``, ``lil cancel``) and every statement on ``ll_runs`` notify
  it with the schema as payload; ``changes`` counts the notices from other
  backends received so far, reading them without a round trip.

This module opens the storage; its parts, one class per narrow protocol of
``storage.py`` over ``PostgresConnection`` (``postgres_connection.py``:
transactions, the fence, rows by name, the connection's identity and
notices), are ``postgres_runs.py``, ``postgres_steps.py``,
``postgres_markers.py``, ``postgres_pauses.py``, ``postgres_calls.py``,
``postgres_spend.py``, ``postgres_chain.py``, ``postgres_schedules.py`` and
``postgres_holding.py``.
"""

from __future__ import annotations

from ..sqlite.pragmas import Durability
from .calls import PostgresCallRows
from .chain import PostgresSealRows
from .database import CHANNEL, connect, migrate, server_errors
from .holding import PostgresHolding
from .markers import PostgresMarkerRows
from .pauses import PostgresPauseRows
from .runs import PostgresRunRows
from .schedules import PostgresSchedules
from .spend import PostgresSpendRows
from .steps import PostgresStepRows
from .streams import PostgresStreamRows

__all__ = ["PostgresStorage", "open_postgres"]


class PostgresStorage(
    PostgresRunRows,
    PostgresStepRows,
    PostgresMarkerRows,
    PostgresPauseRows,
    PostgresCallRows,
    PostgresSpendRows,
    PostgresSealRows,
    PostgresSchedules,
    PostgresStreamRows,
    PostgresHolding,
):
    """One journal's connection to a PostgreSQL database: the whole ``Storage`` protocol, one
    part per narrow protocol. What each write of a marker, a step in flight, a pause, a try
    or usage sets is ``row_rules.py``'s, shared with the in-memory store. Every write is
    fenced: made only while the run's attempt is still this journal's (see
    ``postgres_steps.WRITE_STEP`` and ``PostgresConnection._fence``)."""


def open_postgres(location: str, durability: Durability = "process") -> PostgresStorage:
    """The storage of one journal's open of ``postgresql://…`` (the scheme's opener)."""
    conn = connect(location)
    try:
        with server_errors(location):
            migrate(conn, location)
            level = "local" if durability == "process" else "on"
            # Change notices (``changes``) come as notifications on this connection.
            conn.execute(f"SET synchronous_commit = {level}; LISTEN {CHANNEL}")
            return PostgresStorage(location, conn)
    except BaseException:
        conn.close()
        raise
