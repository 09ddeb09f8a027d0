"""``MemorySealRows``: a sealed run's chain in the in-memory store, begun and read (``SealRows``).

The chain's entries (``MemoryDatabase.seals``) and a row as its entry's digest
covers it; ``seal_run`` starts sealing the run's rows from now on
(``memory_seals.py`` writes each entry with its row).
"""

from __future__ import annotations

from typing import Any

from .database import MemoryConnection
from .seals import chain_row, start

__all__ = ["MemorySealRows"]


class MemorySealRows(MemoryConnection):
    """A sealed run's chain (``SealRows``): begun, its entries read, a row read as it covers it."""

    def seal_run(self, run_id: str, secret: bytes) -> None:
        """Chain the run's final rows under ``secret`` from now on (memory_seals.py)."""
        with self._write() as db:
            rows = [r for r in db.rows(self.goal) if r["run"] == run_id]
            self.sealing[run_id] = start(db.seals, rows, run_id, secret)

    def seal_entries(self, run_id: str, after: int) -> list[Any]:
        """The entries of sealed run ``run_id``'s chain after position ``after``, in order."""
        with self._read():
            return [e for e in self.db.seals.get(run_id, ()) if e[0] > after]

    def sealed_row(self, run_id: str, key: str) -> Any:
        """Row ``key`` of run ``run_id`` as its seal entry's digest covers it (chains.Row);
        None if none."""
        r = self._row(run_id, key)
        return None if r is None else chain_row(r)
