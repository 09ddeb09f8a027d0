"""``SqliteSealRows``: a sealed run's chain in a SQLite journal file, begun and read (``SealRows``).

The chain's entries (table ``seals``) and a row as its entry's digest covers
it; ``seal_run`` starts sealing the run's rows from now on, with the triggers
of ``sqlite_seals.py``, loaded only by programs that seal.
"""

from __future__ import annotations

from typing import Any

from .keys import SqliteKeys


class SqliteSealRows(SqliteKeys):
    """A sealed run's chain: begun, its entries read, a row read as its seal covers it."""

    def seal_run(self, run_id: str, secret: bytes) -> None:
        """Chain the run's final rows under ``secret`` from now on (sqlite_seals.py)."""
        from .seals import start as start_sealing  # loaded by programs that seal

        start_sealing(self.store, self.rows, self.key_of_run(run_id), run_id, secret)

    def seal_entries(self, run_id: str, after: int) -> list[Any]:
        """The entries of sealed run ``run_id``'s chain after position ``after``, in order
        (``n, key, kind, status, digest, seal``: chains.Entry)."""
        return self.store.query(
            "SELECT n, key, kind, status, digest, seal FROM seals WHERE run = ? AND n > ? "
            "ORDER BY n",
            (self.key_of_run(run_id), after),
        )

    def sealed_row(self, run_id: str, key: str) -> Any:
        """Row ``key`` of run ``run_id`` as its seal entry's digest covers it (chains.Row:
        key, kind, status, function name, args_fp, result, error, wake_at); None if none."""
        rows = self.store.query(
            "SELECT t.key, t.kind, t.status, coalesce(f.name, t.fn), t.args_fp, t.result, "
            f't.error, t.wake_at FROM "{self.rows}" AS t LEFT JOIN functions AS f '
            "ON f.id = t.fn WHERE t.run = ? AND t.key = ?",
            (self.key_of_run(run_id), key),
        )
        return tuple(rows[0]) if rows else None
