"""``SealRows``: a sealed run's chain, read and begun (``opening.seal``, ``sealcheck.py``).

Implemented by ``sqlite_chain.SqliteSealRows``, ``memory_chain.MemorySealRows`` and
``postgres_chain.PostgresSealRows``: the chain's entries read when a keyed opener
opens the run and when a replay meets a row its chain read did not hold yet, a
row read as its seal covers it, and a run sealed from now on.
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
