"""``StepRows``: a run's step rows, written by a step and read by a replay, and their records.

What ``steps.py``, ``step_rows.py`` and ``commits.py`` write (a finished step's
row: ``StepRow``, ``DoneRow``) and what ``replay.py`` and the opener read back
(the run's recorded steps and their results). Implemented by
``sqlite_steps.SqliteStepRows``, ``memory_steps.MemoryStepRows`` and
``postgres_steps.PostgresStepRows``. Step rows are positional tuples, replay handles
SQLite's rowids (architecture.md, "Adding a store").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, NewType, Protocol, TypeAlias

#: How a storage keys a run's rows (SQLite: ``runs.num``), opaque to the journal (run_key).
RunKey = NewType("RunKey", int)

#: How a storage names a step's function in its rows (SQLite: ``functions.id``, or
#: the name itself while it could not be added without waiting); opaque to the
#: journal, which gets it from ``StepRows.function_key``.
FunctionKey: TypeAlias = "int | str"

#: Where a recorded step's row is, to read its result later (SQLite: the row's
#: rowid); opaque to the journal, which only keeps it and hands it back to
#: ``results`` and ``recorded_wait``. Ascending handles are the journal's order.
#: An alias, not a NewType: the journal keeps handles as plain ints (keys.Recorded).
RowHandle: TypeAlias = int

#: Bytes of result texts ``StepRows.results`` reads at once (a larger row alone, whole):
#: a replay's memory (benchmarks/replay_memory.py), whatever the rows' number and size.
RESULT_BYTES = 4 << 20


# The records below are NamedTuples made by the functional form, with their fields' types
# as objects: the class form, in a module of ``from __future__ import annotations``, has
# typing compile each field's annotation text (a ForwardRef), twice the cost of the
# record itself: 7.0 M instructions for this module against 3.75 M (issue 30).

#: One finished step's row, as ``StepRows.write_step`` commits it: a plain tuple to
#: sqlite3, which binds it as it is. Build it positionally with ``tuple.__new__(StepRow,
#: (...))``: a NamedTuple's ``__new__`` is a Python call (0.86 µs against 0.24 µs).
StepRow = NamedTuple(  # noqa: UP014 (see above)
    "StepRow",
    [
        ("run", RunKey),
        ("key", str),
        # ``done`` or ``failed``.
        ("status", str),
        ("fn", int | str),  # FunctionKey
        # The result as JSON text (codec), None for a failure.
        ("result", str | None),
        # Microseconds since the epoch (``clock.utc_us``).
        ("started", int),
        # Microseconds from start to finish.
        ("duration", int),
        ("attempt", int),
        ("error", str | None),
        ("traceback", str | None),
        ("args_fp", str),
        ("input_tokens", int | None),
        ("output_tokens", int | None),
        ("cost", float | None),
        ("model", str | None),
        # ``checksums.step_sum`` of the row (its run's id and function's name, not
        # their keys): checked when the row is replayed; None in rows from before it.
        ("checksum", int | None),
    ],
)

#: A returned step's row without its columns that are then empty (error, traceback,
#: usage): run, key, status, fn, result, started, duration, attempt, args_fp, checksum.
#: What a fresh step writes (``StepRows.write_done``): SQLite binds it as it is.
DoneRow: TypeAlias = tuple[RunKey, str, str, FunctionKey, str, int, int, int, str, int]


def step_row_of(done: DoneRow) -> StepRow:
    """The ``StepRow`` that ``done`` is, its empty columns None."""
    return tuple.__new__(StepRow, (*done[:8], None, None, done[8], None, None, None, None, done[9]))


class StepRows(Protocol):
    """The goal's step rows for the run the opener found: written one by one or in a batch,
    read back in journal order with their results."""

    #: Where the goal's steps are kept (SQLite: its journal table), named in messages.
    table: str
    #: The key of the run the last ``find_or_start_run`` returned, for its StepRows.
    run_key: RunKey

    def function_key(self, name: str) -> FunctionKey:
        """The key of the function named ``name`` (``module.qualname``) in StepRows,
        made the first time the name is seen (SQLite: one small commit per new name).
        Never waits for a lock (a fresh step may be on an event loop)."""
        ...

    @property
    def max_text(self) -> int:
        """The longest text one value may hold, in UTF-8 bytes (a result over it is refused)."""
        ...

    def write_step(self, row: StepRow) -> None:
        """Commit one step row (a new key, or over the key's earlier row)."""
        ...

    def write_done(self, done: DoneRow) -> None:
        """Commit a returned step's row, exactly as ``write_step(step_row_of(done))``.

        The fresh step's write: no row with empty columns is built and taken apart.
        """
        ...

    def write_steps(self, rows: Sequence[StepRow]) -> None:
        """Commit ``rows`` in one transaction, waiting for the write lock."""
        ...

    def try_write_steps(self, rows: Sequence[StepRow]) -> bool:
        """Commit ``rows`` in one transaction if that needs no wait; False otherwise."""
        ...

    def recorded_steps(
        self, run_id: str
    ) -> tuple[list[tuple[str, str, str | None, RowHandle, int | None]], set[str]]:
        """The run's done steps, sleeps and waits as ``(key, fn, args_fp, handle, checksum)``
        in journal order (``checksum`` as written in its StepRow, None for a sleep, a wait or
        a row from before checksums), and the keys of its run-scoped markers."""
        ...

    def recorded_under(
        self, run_id: str, prefix: str
    ) -> list[tuple[str, str, str | None, RowHandle, int | None]]:
        """``(key, fn, args_fp, handle, checksum)`` of the run's done steps whose keys start with
        ``prefix`` (a parent step's children: ``parent/``), in journal order."""
        ...

    def results(self, handles: Sequence[RowHandle]) -> dict[RowHandle, str | None]:
        """The texts of the rows ``handles`` (ascending) that exist, from the first on until
        they reach ``RESULT_BYTES``; the caller asks again from the first row it lacks."""
        ...

    def record_replays(self, run_id: str, attempt: int, keys: Sequence[str]) -> None:
        """The steps attempt ``attempt`` got back from the journal (saved by replay),
        one entry per replay, written as one record."""
        ...
