"""``CallRows``: a step's call in flight and its failed tries (``inflight.py``, ``retry.py``).

Implemented by ``sqlite_calls.SqliteCallRows``, ``memory_calls.MemoryCallRows`` and
``postgres_calls.PostgresCallRows``: the ``running`` row a call shows while it
runs (and the usage it reports on it, ``durable.usage``), the ``retrying`` row
between two tries, the tries themselves (``step_tries``), and the usage a dead
or failed call left, kept as a try before its key is called again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class CallRows(Protocol):
    """Calls in flight (their ``running`` rows and the usage they report) and their tries."""

    def write_running(self, rows: Sequence[Sequence[Any]]) -> None:
        """Show steps in flight: ``(run, key, fn, started_at, duration_ms, attempt, args_fp)``
        as ``running`` rows, never over a row of a finished step (inflight.py)."""
        ...

    def record_usage(self, row: Sequence[Any]) -> None:
        """What a call in flight reported so far, on its step's ``running`` row:
        ``(run, key, fn, started_at, attempt, args_fp, input_tokens, output_tokens,
        cost, model)``. Never over a ``done`` row. A new attempt's claim keeps the
        usage of such a row (its process died) as a ``crashed`` try."""
        ...

    def step_tries(self, run_id: str) -> list[tuple[str, int, str | None, str]]:
        """``(key, try, next_at, ended)`` of every recorded try of the run, by key, then
        try; ``ended`` is ``'failed'``, or ``'crashed'`` for a call its process did not
        survive (kept for its usage)."""
        ...

    def record_try(self, try_row: Sequence[Any], retrying_row: Sequence[Any] | None) -> None:
        """In one transaction: a failed try (columns of ``step_tries``) and, when
        another try follows, the step's ``retrying`` row."""
        ...

    def keep_left_usage(self, run_id: str, now: float, prefix: str) -> None:
        """Move the usage of the run's ``failed`` and ``running`` rows whose keys start
        with ``prefix`` to ``step_tries`` (as a new attempt's claim does for the whole
        run), before a parent's next try calls those children again."""
        ...
