"""``SpendRows``: what a run's paid calls spent and reserved (``budgets.py``, ``reservations.py``).

Implemented by ``sqlite_spend.SqliteSpendRows``, ``memory_spend.MemorySpendRows`` and
``postgres_spend.PostgresSpendRows``: the usage the run's rows and tries hold,
summed; the reservations a paid call commits before it starts and settles
after it (SQLite's table ``reservations``, migration 0018; PostgreSQL's
``ll_reservations``; the memory store's ``reservations``); and where a forked
run's spend began.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class SpendRows(Protocol):
    """A run's spend: what its calls reported, and reservations committed before each call."""

    def run_spend(self, run_id: str) -> list[tuple[str, int | None, int | None, float | None]]:
        """``(key, input_tokens, output_tokens, cost)`` the run's calls reported, summed per
        step key over its rows and its tries (``step_tries``: failed and crashed calls),
        each None where none reported any; steps that reported nothing are left out."""
        ...

    def usage_of(
        self, run_id: str, keys: Sequence[str]
    ) -> tuple[int | None, int | None, float | None]:
        """``(input_tokens, output_tokens, cost)`` summed over the run's rows ``keys`` (None
        where no row reported it): what replayed steps had cost (otel.py)."""
        ...

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
        none), and ``usage_row`` (as ``CallRows.record_usage``) written if given."""
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
