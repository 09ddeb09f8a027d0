"""``PostgresConnection``: one journal's connection to a PostgreSQL database, its
transactions and their fence, and the journal's rows read and written by name.

The one base of each part of ``PostgresStorage`` (``postgres_storage.py``:
``postgres_runs.py``, ``postgres_steps.py``, …), as ``MemoryConnection`` is
of the in-memory store's: the state they share, owned here, with the
connection's identity and the change notices received on it. One connection per journal,
in autocommit: a statement is its own transaction (:meth:`_run`); operations
that read before they write run in one (:meth:`_tx`). Every write of a run's
rows is fenced: made only while the run's ``attempts`` is still this
journal's (a key-share lock on the run's row, which a new holder's claim
waits for). A lost server and a lost run are JournalFileErrors that say so.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ...errors import JournalFileError
from ...integrity.chains import Chain
from ..row_rules import ROW_COLUMNS, TRY_COLUMNS
from ..storage_steps import RunKey
from .database import psycopg, redact, server_error
from .seals import seal_row

__all__ = ["COLUMNS", "PostgresConnection"]

#: Every column of a journal row after (goal, run, key), as the in-memory store names them.
COLUMNS = tuple(c for c in ROW_COLUMNS if c not in ("run", "key"))


class PostgresConnection:
    """A journal's connection: its transactions, their fence, its rows by name."""

    def __init__(self, location: str, conn: Any) -> None:
        self.location = location
        self.conn = conn
        self.path = Path(redact(location))
        self.table = "ll_journal"
        self.run_key = RunKey(-1)
        self.goal = ""
        self._lock = threading.RLock()
        self._run_ids: dict[int, str] = {}
        #: The run this journal holds and its attempt: what every write is fenced on.
        self._held: tuple[str, int] | None = None
        self.gone = False
        #: The runs this journal seals: run id -> its chain (postgres_seals.py).
        self.sealing: dict[str, Chain] = {}
        #: Change notices received from other connections (``PostgresHolding.changes``).
        self._notices = 0
        info = conn.info
        self._identity = ("postgresql", info.host, info.port, info.dbname, self._schema())
        self._backend = info.backend_pid

    def _schema(self) -> str:
        row = self.conn.execute("SELECT current_schema()").fetchone()
        return str(row[0]) if row is not None else ""

    @property
    def _schema_name(self) -> str:
        return str(self._identity[4])

    def _notice(self, pid: int, payload: str) -> None:
        """A notification received (under ``_lock``): another connection's change here."""
        if pid != self._backend and payload == self._schema_name:
            self._notices += 1

    # -- transactions ------------------------------------------------------------------

    @contextlib.contextmanager
    def _tx(self, fenced: bool = True) -> Iterator[Any]:
        """One transaction on the journal's connection, for this thread alone; ``fenced``:
        refused (nothing written) unless the run is still this journal's attempt."""
        with self._lock:
            self._check()
            try:
                with self.conn.transaction():
                    if fenced:
                        self._fence(self.conn)
                    yield self.conn
            except psycopg.OperationalError as exc:
                raise self._lost(exc) from exc
            except psycopg.Error as exc:
                raise self._refused(exc) from exc

    def _fence(self, c: Any) -> None:
        """Refuse the transaction unless the held run's attempt is still this journal's.

        A key-share lock on the run's row: a new holder's claim (FOR UPDATE) waits
        for this transaction to end, and this one for a claim under way.
        """
        if self._held is None:
            return
        run_id, attempt = self._held
        row = c.execute(
            "SELECT attempts FROM ll_runs WHERE id = %s FOR KEY SHARE", (run_id,)
        ).fetchone()
        if row is None or row[0] != attempt:
            raise self._fenced(run_id, attempt, "this write")

    def _run(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """One statement, its own transaction (a read, or a write of no run); its rows."""
        with self._lock:
            self._check()
            try:
                cur = self.conn.execute(sql, params)
                return cur.fetchall() if cur.description is not None else []
            except psycopg.OperationalError as exc:
                raise self._lost(exc) from exc
            except psycopg.Error as exc:
                raise self._refused(exc) from exc

    def _check(self) -> None:
        if self.gone:
            raise JournalFileError(
                f"{self.path}: this journal's connection was closed; nothing was written. "
                f"Open a new Journal",
                path=str(self.path),
            )

    def _lost(self, exc: BaseException) -> JournalFileError:
        return JournalFileError(
            f"{self.path}: expected the PostgreSQL server to answer; found "
            f"{type(exc).__name__}: {str(exc).strip()}. What was not committed was not "
            f"recorded; open the journal again once the server is back (the run resumes)",
            path=str(self.path),
        )

    def _refused(self, exc: Exception) -> Exception:
        """A server's refusal we know what to do about as its JournalFileError; else as it is."""
        known = server_error(exc, self.location)
        return exc if known is None else known

    def _fenced(self, run_id: str, attempt: int, what: str) -> JournalFileError:
        return JournalFileError(
            f"{self.path}: {what} of run {run_id}: expected the run to be still held by this "
            f"journal's attempt {attempt}; found it taken by another attempt (this holder's "
            f"lock was lost, as when its connection was cut). Nothing was written; this "
            f"journal must stop: the run goes on with its new holder",
            path=str(self.path),
        )

    # -- rows by name, for markers and the run's primitives ------------------------------

    def _get(self, c: Any, goal: str, run: str, key: str) -> dict[str, Any] | None:
        cur = c.execute(
            f"SELECT rowid, {', '.join(COLUMNS)} FROM ll_journal "
            "WHERE goal = %s AND run = %s AND key = %s FOR UPDATE",
            (goal, run, key),
        )
        row = cur.fetchone()
        if row is None:
            return None
        return dict(zip(("rowid", *COLUMNS), row, strict=True), run=run, key=key)

    def _put(self, c: Any, goal: str, run: str, key: str, values: dict[str, Any]) -> None:
        names = list(values)
        c.execute(
            f"INSERT INTO ll_journal (goal, run, key, {', '.join(names)}) VALUES "
            f"(%s, %s, %s, {', '.join(['%s'] * len(names))}) ON CONFLICT (goal, run, key) "
            f"DO UPDATE SET {', '.join(f'{n} = excluded.{n}' for n in names)}",
            (goal, run, key, *values.values()),
        )
        if self.sealing:
            seal_row(c, self.sealing, goal, run, key, values.get("status"))

    @staticmethod
    def _put_try(c: Any, slot: tuple[str, str, int], values: dict[str, Any]) -> None:
        c.execute(
            f"INSERT INTO ll_tries (run, key, try, {', '.join(TRY_COLUMNS)}) VALUES "
            f"(%s, %s, %s, {', '.join(['%s'] * len(TRY_COLUMNS))}) "
            f"ON CONFLICT (run, key, try) DO UPDATE SET "
            f"{', '.join(f'{n} = excluded.{n}' for n in TRY_COLUMNS)}",
            (*slot, *(values[n] for n in TRY_COLUMNS)),
        )
