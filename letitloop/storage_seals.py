"""The part of the storage protocol a sealed run's opener and its replays use (``chains.py``).

``Storage`` (``storage.py``) includes it; each store implements it beside its
seals (``sqlite_storage.py`` and ``sqlite_reads.py``, ``postgres_runs.py``,
``memory_storage.py`` and ``memory_primitives.py``): the chain's entries read
when a keyed opener opens the run and when a replay meets a row its chain read
did not hold yet, a row read as its seal covers it, and a run sealed from now on.
"""

from __future__ import annotations

from typing import Any, Protocol


class SealRows(Protocol):
    """A sealed run's chain, read and begun, and its rows as the chain covers them."""

    def seal_run(self, run_id: str, secret: bytes) -> None:
        """Chain the run's final rows under ``secret`` from now on."""
        ...

    def seal_entries(self, run_id: str, after: int) -> list[Any]:
        """The entries of sealed run ``run_id``'s chain after position ``after``, in order
        (``n, key, kind, status, digest, seal``: chains.Entry)."""
        ...

    def sealed_row(self, run_id: str, key: str) -> Any:
        """Row ``key`` of run ``run_id`` as its seal entry's digest covers it (chains.Row:
        key, kind, status, function name, args_fp, result, error, wake_at); None if none."""
        ...
