"""``PauseRows``: a sleep's or a wait's row, started, read and ended (``sleeps.py``, ``waits.py``).

Implemented by ``sqlite_pauses.SqlitePauseRows``, ``memory_pauses.MemoryPauseRows``
and ``postgres_pauses.PostgresPauseRows``. A pause that waits for a value sent or
a cancel watches ``Holding.changes`` (``timers.py``). ``PauseStore`` adds the
run's seal (``SealRows``), which a wait's value sent from outside gets before
it is handed on: what ``sleeps.py`` and ``waits.py`` ask of a store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from .storage_seals import SealRows
from .storage_steps import RowHandle


class PauseRows(Protocol):
    """A sleep's or a wait's row: started over the key's earlier row, read, done."""

    def pause(self, run_id: str, key: str) -> tuple[str, str, str | None, str | None] | None:
        """``(kind, status, started_at, wake_at)`` of a sleep's or wait's row, if any."""
        ...

    def start_pause(self, row: Sequence[Any]) -> None:
        """Write the row of a sleep or wait that starts, over the key's earlier row:
        ``(run, key, kind, status, fn, started_at, attempt, wake_at)``."""
        ...

    def finish_sleep(
        self, run_id: str, key: str, finished_at: str, duration_ms: float, attempt: int
    ) -> None:
        """Mark a sleep done."""
        ...

    def wait_ending(self, run_id: str, key: str) -> tuple[str, str | None, str | None] | None:
        """``(status, result, error)`` of a wait's row, if any."""
        ...

    def time_out_wait(
        self, run_id: str, key: str, error: str, finished_at: str, duration_ms: float
    ) -> None:
        """Mark a wait done with its timeout ``error``, unless a value came first."""
        ...

    def recorded_wait(self, handle: RowHandle) -> tuple[str | None, str | None] | None:
        """``(result, error)`` of a done wait's row, by its handle."""
        ...


class PauseStore(PauseRows, SealRows, Protocol):
    """A pause's row, and the run's seal a wait's value sent gets: what a sleep or wait uses."""
