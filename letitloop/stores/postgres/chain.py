"""A sealed run's chain in PostgreSQL, begun and read (``PostgresSealRows``: ``SealRows``).

The chain's entries (``ll_seals``) and a row as its entry's digest covers it;
``seal_run`` starts sealing the run's rows from now on (``postgres_seals.py``
writes each entry with its row).
"""

from __future__ import annotations

from typing import Any

from .connection import PostgresConnection
from .seals import start as start_sealing

__all__ = ["PostgresSealRows"]


class PostgresSealRows(PostgresConnection):
    """A sealed run's chain: begun, its entries read, a row read as its seal covers it."""

    def seal_run(self, run_id: str, secret: bytes) -> None:
        """Chain the run's final rows under ``secret`` from now on (postgres_seals.py)."""
        with self._tx() as c:
            self.sealing[run_id] = start_sealing(c, self.goal, run_id, secret)

    def seal_entries(self, run_id: str, after: int) -> list[Any]:
        """The entries of sealed run ``run_id``'s chain after position ``after``, in order."""
        return self._run(
            "SELECT n, key, kind, status, digest, seal FROM ll_seals WHERE run = %s AND n > %s "
            "ORDER BY n",
            (run_id, after),
        )

    def sealed_row(self, run_id: str, key: str) -> Any:
        """Row ``key`` of run ``run_id`` as its seal entry's digest covers it (chains.Row);
        None if none."""
        rows = self._run(
            "SELECT key, kind, status, fn, args_fp, result, error, wake_at FROM ll_journal "
            "WHERE goal = %s AND run = %s AND key = %s",
            (self.goal, run_id, key),
        )
        return tuple(rows[0]) if rows else None
