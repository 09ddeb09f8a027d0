"""``Storage``: everything the journal needs from whatever keeps its runs and steps.

A typed protocol, no I/O, implemented by ``sqlite_storage.SqliteStorage`` (a journal file;
the default), ``postgres_storage.PostgresStorage`` and ``memory_storage.MemoryStorage``, one
chosen from ``path=`` by ``schemes.py``; the journal and its primitives speak only to it:

- **runs**: find or start the run an opener gets (a name's generations), claim it, end it;
- **steps**: the recorded steps a replay needs, their results, step rows;
- **markers**: a marker's record, claimed and finished in one transaction;
- **the run's primitives**: steps in flight, cancel requests, sleeps and waits, failed tries,
  usage, replays, an attempt's span (OpenTelemetry), paid calls' reservations
  (``storage_reservations.ReservationRows``), a sealed run's chain (``storage_seals.SealRows``);
- **holding**: a run or a marker held by one holder at a time, across processes, released
  when the holder dies (:class:`Hold`; SQLite: a lock file), whether a run is held, and by
  whom (``run_holder``, ``marker``);
- **change notices**: a number that moves when someone else committed (``changes``;
  SQLite: ``PRAGMA data_version``), for pauses that wait for a value sent or a cancel;
- **identity**: which file or database, whatever path or URL reached it; ``close``.

Step rows are positional tuples, replay handles SQLite's rowids (architecture.md, "Adding a store").
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, NewType, Protocol, TypeAlias

from .storage_reservations import ReservationRows
from .storage_schedules import ScheduleRows
from .storage_seals import SealRows

if TYPE_CHECKING:
    from pathlib import Path

#: How a storage keys a run's rows (SQLite: ``runs.num``), opaque to the journal (run_key).
RunKey = NewType("RunKey", int)

#: How a storage names a step's function in its rows (SQLite: ``functions.id``, or
#: the name itself while it could not be added without waiting); opaque to the
#: journal, which gets it from ``Storage.function_key``.
FunctionKey: TypeAlias = "int | str"

#: Where a recorded step's row is, to read its result later (SQLite: the row's
#: rowid); opaque to the journal, which only keeps it and hands it back to
#: ``results`` and ``recorded_wait``. Ascending handles are the journal's order.
#: An alias, not a NewType: the journal keeps handles as plain ints (keys.Recorded).
RowHandle: TypeAlias = int

#: Bytes of result texts ``Storage.results`` reads at once (a larger row alone, whole):
#: a replay's memory (benchmarks/replay_memory.py), whatever the rows' number and size.
RESULT_BYTES = 4 << 20


# The records below are NamedTuples made by the functional form, with their fields' types
# as objects: the class form, in a module of ``from __future__ import annotations``, has
# typing compile each field's annotation text (a ForwardRef), twice the cost of the
# record itself: 7.0 M instructions for this module against 3.75 M (issue 30).

#: One finished step's row, as ``Storage.write_step`` commits it: a plain tuple to
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
#: What a fresh step writes (``Storage.write_done``): SQLite binds it as it is.
DoneRow: TypeAlias = tuple[RunKey, str, str, FunctionKey, str, int, int, int, str, int]


def step_row_of(done: DoneRow) -> StepRow:
    """The ``StepRow`` that ``done`` is, its empty columns None."""
    return tuple.__new__(StepRow, (*done[:8], None, None, done[8], None, None, None, None, done[9]))


#: What an opener does with the run it found (see ``opening.decide``): look
#: again, refuse it as cancelled, resume it as a new attempt, or replay it whole.
RunDecision = Literal["again", "cancel", "resume", "replay"]

#: What an opener reads of a run before it claims it.
RunState = NamedTuple(  # noqa: UP014 (see above)
    "RunState",
    [
        ("status", str),
        ("attempts", int),
        ("result", str | None),
        ("name", str | None),
        ("cancel_requested_at", str | None),
        ("cancel_reason", str | None),
    ],
)

#: Where a marker's record lives: its scope, its run, its name, and the goal that takes it.
#:
#: ``run`` is the run id (scope ``"run"``), ``"*"`` (``"goal"``: shared by
#: every run of the goal) or ``""`` (``"global"``: one per journal).
MarkerAt = NamedTuple(  # noqa: UP014 (see above)
    "MarkerAt", [("scope", str), ("run", str), ("name", str), ("goal", str)]
)

#: A marker's record; ``kind`` is ``"marker"`` unless a step holds the name.
MarkerRecord = NamedTuple(  # noqa: UP014 (see above)
    "MarkerRecord",
    [
        ("kind", str),
        ("status", str),
        ("claims", int | None),
        ("crashes", int | None),
        ("holder_pid", int | None),
        ("holder_host", str | None),
        ("holder_run", str | None),
        ("started_at", str | None),
        ("holder_token", str | None),
    ],
)


#: What ``claim_marker`` found or did: offered, with the counts after the claim.
MarkerClaim = NamedTuple(  # noqa: UP014 (see above)
    "MarkerClaim",
    [
        # ``"marker"``, or the kind of the row that holds the name (nothing was written).
        ("kind", str),
        ("offered", bool),
        ("claims", int),
        ("crashes", int),
    ],
)


class Hold(Protocol):
    """One holder's claim on a run or a marker, against every other holder in any process.

    Made by ``Storage.run_hold``/``marker_hold``, not taken yet. Taken and
    released by any thread (an ``async with`` takes it in a worker thread and
    releases it on the loop's); not reentrant: one object is one holder. A
    holder that dies releases it: SQLite's lock file is dropped by the kernel
    with the process.
    """

    @property
    def where(self) -> str:
        """What is held, for messages and debugging (SQLite: the lock file)."""
        ...

    def acquire(self, timeout: float) -> bool:
        """Take it within ``timeout`` seconds (-1: wait forever); False if it timed out."""
        ...

    def release(self) -> None:
        """Let go of it; nothing if not held."""
        ...


class Storage(ReservationRows, SealRows, ScheduleRows, Protocol):
    """One goal's runs and steps, as one opener of the goal sees them.

    Made for one journal when it opens: ``find_or_start_run`` (the goal's room for steps)
    before any run's operation; each operation one transaction, times in epoch seconds.
    """

    @property
    def path(self) -> Path:
        """Where the runs are kept (the journal file), for messages and thread names."""
        ...

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

    # -- identity, holding, change notices, closing ----------------------------------

    @property
    def identity(self) -> Hashable:
        """Which file or database this is, whatever path or URL reached it: the runs this
        process holds and its markers' in-process locks are keyed by it."""
        ...

    def run_hold(self, run_id: str) -> Hold:
        """The hold an opener takes on ``run_id`` while it has the run open."""
        ...

    def marker_hold(self, name: str) -> Hold:
        """The hold of marker ``name`` (scope, owner and name, NUL-separated: markers.py)."""
        ...

    def is_run_held(self, run_id: str) -> bool:
        """Whether a live holder has ``run_id``'s hold; takes and writes nothing."""
        ...

    def changes(self, *, wait: bool = True) -> int | None:
        """A number that moves when another connection or process commits (not on this
        storage's own commits); None when it cannot be read now without waiting (``wait``
        False and the store busy with another thread)."""
        ...

    def if_free(self) -> contextlib.AbstractContextManager[bool]:
        """A block in which this thread may read without waiting for another thread of the
        journal (True), or False at once when it would have to wait (the event loop's pauses)."""
        ...

    def close(self) -> None:
        """Give back what the journal used (SQLite: its connection, kept for the file's next
        journal). Holds are released by their holders before."""
        ...

    # -- runs ------------------------------------------------------------------------

    def find_or_start_run(
        self,
        goal: str,
        name: str | None,
        input_fp: str | None,
        input_text: str | None,
        now: float,
        hold: Callable[[str], None],
        *,
        version: str | None = None,
    ) -> tuple[str, bool]:
        """``(run id, started)``: the run an opener of ``goal`` gets, or a new one.

        A new run's first attempt records ``version``, the version of the code
        it runs (versions.py; None: unknown).

        A named opener gets the run of that name; an unnamed one the goal's
        newest unnamed run opened for ``input_fp`` that is running, failed or
        waiting and not asked to cancel. Else a new run is started with its
        first attempt, ``hold(run_id)`` called before its row is written (if
        it raises, nothing is left behind).
        """
        ...

    def claim_run(
        self,
        run_id: str,
        now: float,
        decide: Callable[[RunState | None], RunDecision],
        *,
        version: str | None = None,
    ) -> tuple[RunDecision, RunState | None]:
        """Read the run, ask ``decide``, and do what it says, in one transaction.

        ``"cancel"`` marks the run cancelled; ``"resume"`` records a new
        attempt held by this process, running code of ``version``; ``"again"``
        and ``"replay"`` write nothing.
        """
        ...

    def generation_rows(self, goal: str, name: str, prefix: str) -> list[tuple[str, str, Any]]:
        """``(name, status, finished_at)`` of goal's runs named name or prefix… (generations.py)."""
        ...

    def run_holder(self, run_id: str) -> tuple[int | None, str | None, str | None] | None:
        """``(pid, host, since)`` of the run's last holder, None when there is no run."""
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

    def complete_run(self, run_id: str, now: float, result: str | None) -> None:
        """Mark the run completed with its result text."""
        ...

    def fail_run(self, run_id: str, now: float, error: str) -> None:
        """Mark the run failed with its error text (the next opener resumes it)."""
        ...

    def cancel_run(self, run_id: str, now: float, error: str) -> None:
        """Mark the run cancelled, as its holder learnt."""
        ...

    def leave_waiting(self, run_id: str, now: float) -> None:
        """Mark the run waiting for a value from outside."""
        ...

    # -- markers (markers.py) --------------------------------------------------

    def marker(self, at: MarkerAt) -> MarkerRecord | None:
        """The marker's record, None when it has none."""
        ...

    def claim_marker(
        self, at: MarkerAt, holder: tuple[int, str, str, str], now: float, attempt: int
    ) -> MarkerClaim:
        """In one transaction: nothing if the marker is done (or the name is a step's),
        else write ``holder`` (pid, host, run, token) as its claim, ``pending``; a
        ``pending`` record found counts as a crash of its holder."""
        ...

    def finish_marker(
        self,
        at: MarkerAt,
        token: str,
        now: float,
        duration_ms: float,
        failure: tuple[str, str, int] | None,
    ) -> tuple[bool, MarkerRecord | None]:
        """Mark the marker done (``failure`` None) or failed with ``(error, traceback,
        interrupted)``, only where it is still ``pending`` under ``token``.

        ``(lost, record)``: ``lost`` when the claim was no longer this holder's,
        then the record as it is now.
        """
        ...

    # -- the run's primitives: a cancel request, sleeps and waits, step tries ------

    def write_running(self, rows: Sequence[Sequence[Any]]) -> None:
        """Show steps in flight: ``(run, key, fn, started_at, duration_ms, attempt, args_fp)``
        as ``running`` rows, never over a row of a finished step (inflight.py)."""
        ...

    def cancel_request(self, run_id: str) -> tuple[str | None, str | None] | None:
        """``(requested_at, reason)`` of the run's cancel request (``requested_at``
        None: none was made); None when there is no such run."""
        ...

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

    def step_tries(self, run_id: str) -> list[tuple[str, int, str | None, str]]:
        """``(key, try, next_at, ended)`` of every recorded try of the run, by key, then
        try; ``ended`` is ``'failed'``, or ``'crashed'`` for a call its process did not
        survive (kept for its usage)."""
        ...

    def record_try(self, try_row: Sequence[Any], retrying_row: Sequence[Any] | None) -> None:
        """In one transaction: a failed try (columns of ``step_tries``) and, when
        another try follows, the step's ``retrying`` row."""
        ...

    # -- what the run consumed and replayed --------------------------------------

    def record_usage(self, row: Sequence[Any]) -> None:
        """What a call in flight reported so far, on its step's ``running`` row:
        ``(run, key, fn, started_at, attempt, args_fp, input_tokens, output_tokens,
        cost, model)``. Never over a ``done`` row. A new attempt's claim keeps the
        usage of such a row (its process died) as a ``crashed`` try."""
        ...

    def keep_left_usage(self, run_id: str, now: float, prefix: str) -> None:
        """Move the usage of the run's ``failed`` and ``running`` rows whose keys start
        with ``prefix`` to ``step_tries`` (as a new attempt's claim does for the whole
        run), before a parent's next try calls those children again."""
        ...

    def run_spend(self, run_id: str) -> list[tuple[str, int | None, int | None, float | None]]:
        """``(key, input_tokens, output_tokens, cost)`` the run's calls reported, summed per
        step key over its rows and its tries (``step_tries``: failed and crashed calls),
        each None where none reported any; steps that reported nothing are left out."""
        ...

    def record_replays(self, run_id: str, attempt: int, keys: Sequence[str]) -> None:
        """The steps attempt ``attempt`` got back from the journal (saved by replay),
        one entry per replay, written as one record."""
        ...

    def usage_of(
        self, run_id: str, keys: Sequence[str]
    ) -> tuple[int | None, int | None, float | None]:
        """``(input_tokens, output_tokens, cost)`` summed over the run's rows ``keys`` (None
        where no row reported it): what replayed steps had cost (otel.py)."""
        ...

    # -- tracing (otel.py) -------------------------------------------------------

    def trace_attempt(self, run_id: str, attempt: int, trace: str) -> str | None:
        """Record ``trace`` (a W3C ``traceparent``) as the attempt's span, and return the one
        the latest earlier attempt of the run recorded (None: none did), in one transaction."""
        ...
