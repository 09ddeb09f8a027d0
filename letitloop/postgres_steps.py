"""``StepWriter``: a usual step's row sent through libpq's own call, not psycopg's cursor.

A speed trick behind one function with a portable twin (STYLE.md). The
statement of a step without error or usage (``postgres_storage``'s
``step_statement``) is prepared once on the journal's connection under a name
of its own and run by ``PGconn.exec_prepared``, its parameters sent as text:
what psycopg's cursor does, less its Python machinery (about 25 µs of client
CPU of the statement's 55; benchmarks/README.md). The twin is that cursor: a
value that text cannot carry as psycopg would (a str holding NUL, which libpq
would cut there, or a lone surrogate) goes through it, which refuses it as
before; tests/test_postgres.py writes the same rows both ways and compares them.

Notifications that arrive with the answer stay in libpq's queue, where
psycopg's ``notifies()`` does not look without new data on the socket: each
is handed to ``notice`` at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["StepWriter"]

#: The statement's name on the connection (psycopg names its own ``_pg3_N``).
NAME = b"letitloop_step"

#: SQLSTATE 26000: no prepared statement of that name (psycopg's DEALLOCATE ALL after a
#: ROLLBACK or a DROP on the connection drops ours too): prepared again, run once more.
_GONE = b"26000"


class StepWriter:
    """One journal connection's prepared step statement (see the module's docstring)."""

    def __init__(self, conn: Any, sql: str, notice: Callable[[int, str], None]) -> None:
        numbers = iter(range(1, 1000))
        self.conn = conn
        self.sql = re.sub(r"%s", lambda _: f"${next(numbers)}", sql).encode()
        self.notice = notice
        self.prepared = False

    def write(self, params: Sequence[Any]) -> int | None:
        """Run the statement with ``params``: the rows it wrote, or None when a value
        must go through the twin (psycopg's cursor). Raises psycopg's errors."""
        values: list[bytes | None] = []
        for v in params:
            if v is None:
                values.append(None)
            elif isinstance(v, str):
                if "\x00" in v:
                    return None
                try:
                    values.append(v.encode())
                except UnicodeEncodeError:
                    return None
            else:  # int, float: their text is PostgreSQL's
                values.append(str(v).encode())
        for _ in range(2):
            result = self._run(values)
            if result is not None:
                return result
            self.prepared = False
        return None  # dropped again at once: the twin it is

    def _run(self, values: list[bytes | None]) -> int | None:
        """The rows written; None: the statement was not there (prepared on the next run)."""
        from psycopg import pq

        pg = self.conn.pgconn
        if not self.prepared:
            made = pg.prepare(NAME, self.sql)
            self._check(made, pq)
            self.prepared = True
        result = pg.exec_prepared(NAME, values)
        while (n := pg.notifies()) is not None:
            self.notice(n.be_pid, n.extra.decode())
        if result.status == pq.ExecStatus.COMMAND_OK:
            return int(result.command_tuples or 0)
        if result.error_field(pq.DiagnosticField.SQLSTATE) == _GONE:
            return None
        self._check(result, pq)
        return 0  # not reached: _check raised

    def _check(self, result: Any, pq: Any) -> None:
        """Raise what psycopg's cursor would for ``result`` unless it is COMMAND_OK."""
        import psycopg
        from psycopg import errors

        if result.status == pq.ExecStatus.COMMAND_OK:
            return
        # No SQLSTATE: libpq's own failure (the server gone mid-call, the socket closed),
        # which psycopg's cursor raises as OperationalError too.
        gone = self.conn.pgconn.status != pq.ConnStatus.OK
        if gone or not result.error_field(pq.DiagnosticField.SQLSTATE):
            raise psycopg.OperationalError(result.get_error_message("utf-8").strip())
        raise errors.error_from_result(result)
