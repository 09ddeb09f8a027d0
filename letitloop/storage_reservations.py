"""The part of the storage protocol that keeps paid calls' reservations (``reservations.py``).

``Storage`` (``storage.py``) includes it; each store implements it beside
its usage (``sqlite_primitives.py``, ``memory_primitives.py``,
``postgres_primitives.py``): SQLite's table ``reservations`` (migration 0018),
PostgreSQL's ``ll_reservations``, the memory store's ``reservations``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class ReservationRows(Protocol):
    """A run's paid calls' reservations: committed before each call, settled after it."""

    def reserve(self, row: Sequence[Any]) -> None:
        """Commit a paid call's reservation before the call starts: ``(run, call, key,
        attempt, reserved_at, tokens, cost, model)``, ``call`` its number in the run."""
        ...

    def settle(
        self,
        run_id: str,
        calls: Sequence[int],
        settled_at: str,
        spent: tuple[int | None, float | None],
        usage_row: Sequence[Any] | None,
    ) -> None:
        """In one transaction: the reservations ``calls`` of the run settled at
        ``settled_at`` by ``spent`` (the tokens and cost their call reported; None where
        none), and ``usage_row`` (as :meth:`record_usage`) written if given."""
        ...

    def run_reservations(
        self, run_id: str
    ) -> tuple[int, list[tuple[str, int, int | None, float | None]]]:
        """The number of the run's last reservation (0: none) and its reservations never
        settled, as ``(key, call, tokens, cost)``: calls cut short by a dead process."""
        ...

    def fork_point(self, run_id: str) -> tuple[str, list[str]] | None:
        """For a run made by ``lil fork``: the run it was forked from and the keys of that
        run's rows before the step it was forked at, in journal order (what the fork
        copied, and the calls made on the way); None for a run that is not a fork."""
        ...
