"""``Inspector``: what ``lil`` and the library need from a store to see and change runs from
outside them — a typed ``Protocol``, so that ``lil runs/show/export/reset/fork/gc/send/cancel``
work on every store. No I/O.

The public functions (:mod:`letitloop.inspection`, :mod:`letitloop.maintenance`,
:mod:`letitloop.supervision.control`) hold the rules and the words: which run a reference
names, which runs gc may take, when a wait takes a value, every error. An
inspector answers plain questions about what is recorded and makes the changes
it is asked for, each change in one transaction. The SQLite one is
:class:`~letitloop.inspection.sqlite_inspector.SqliteInspector`, whose modules
(``sqlite_*.py``) are the only ones of these packages that speak SQL;
:func:`~letitloop.inspection.open_inspector` chooses one for a path.

Times are ISO-8601 UTC text, as in the records. A :class:`RunInfo` is made
by :func:`~letitloop.inspection.state.run_infos` from what the inspector read,
so every store tells a run's state by the same rule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..stores.storage_schedules import ScheduleRow, TickRow
from ..stores.storage_streams import ChunkRow
from .records import AttemptInfo, ReservationInfo, RowInfo, RunInfo, RunRef, TryInfo, WaitRow


@dataclass(frozen=True)
class RunFilter:
    """Which runs :meth:`Inspector.runs` returns: every condition given must hold."""

    goal: str | None = None
    statuses: tuple[str, ...] | None = None
    """Recorded statuses (``runs.status``), not states: a state is told after reading."""
    since: str | None = None
    """Started at or after this time."""
    until: str | None = None
    """Started before this time."""
    name: str | None = None
    """A case-sensitive glob on the run's name (an unnamed run never matches)."""
    inputs: tuple[tuple[tuple[str, ...], str], ...] = ()
    """``(path, value)`` pairs: the recorded input holds ``value`` at the dotted ``path``
    (split into its parts). ``value`` is JSON when it parses (``7``, ``"7"``, ``[1]``),
    else text; it matches the recorded value, or a value the codec tagged
    (``{"!date": "2026-11-30"}`` matches ``2026-11-30``), in an input the codec may
    have wrapped (``{"!dict": {…}}``). An input that is not JSON matches nothing."""
    version: str | None = None
    """The version of the code the run's latest attempt ran starts with this text (a source
    hash's first digits are enough, as with git's)."""


@dataclass(frozen=True)
class WaitAnswer:
    """What :meth:`Inspector.answer_wait` writes into a wait's row: it becomes ``done``."""

    key: str
    result: str
    """The value, as codec JSON text."""
    finished_at: str
    duration_ms: float | None


class Inspector(Protocol):
    """A journal seen and changed from outside its runs (see the module's docstring).

    Reads never write. Each change is one transaction: all of it or nothing.
    """

    @property
    def path(self) -> Path | str:
        """Where the journal is, as messages name it (a file's path, or a store's URL)."""
        ...

    def close(self) -> None:
        """Let go of the journal; the inspector is not used afterwards."""
        ...

    # -- runs' locks ---------------------------------------------------------------------

    def is_held(self, run_id: str) -> bool:
        """True when a live process (this one included) holds the run now; writes nothing."""
        ...

    def hold(self, run_id: str) -> AbstractContextManager[bool]:
        """Hold the run while inside (so no process opens it): True; False, holding nothing,
        when a live process holds it. Never waits."""
        ...

    # -- goals and runs ------------------------------------------------------------------

    def has_goal(self, goal: str) -> bool:
        """Whether the journal has this goal."""
        ...

    def goal_names(self, prefix: str = "", limit: int | None = None) -> list[str]:
        """The goals starting with ``prefix``, sorted, at most ``limit``."""
        ...

    def has_run(self, run_id: str) -> bool:
        """Whether a run has exactly this id."""
        ...

    def runs(self, where: RunFilter, *, limit: int | None, offset: int = 0) -> list[RunInfo]:
        """The runs ``where`` selects, newest made first, ``offset`` of them skipped."""
        ...

    def run(self, run_id: str) -> RunInfo | None:
        """The run with exactly this id."""
        ...

    def run_of_goal(self, goal: str, ref: str) -> RunInfo | None:
        """A run of ``goal`` whose id or name is ``ref``."""
        ...

    def newest_run(self, goal: str) -> RunInfo | None:
        """The goal's newest run."""
        ...

    def runs_named(self, name: str) -> list[RunInfo]:
        """The runs with this name (of any goal), newest id first."""
        ...

    def runs_with_prefix(self, prefix: str, goal: str | None, limit: int) -> list[RunInfo]:
        """Runs (of ``goal``, if given) whose id starts with ``prefix`` (ids are upper case),
        newest id first, at most ``limit``."""
        ...

    def key_check(self, run: RunInfo) -> str | None:
        """The check value of the key ``run``'s goal is encrypted with (``key_checks``,
        docs/audit.md); ``""`` when none is recorded but the run holds encrypted values;
        None when its goal is not encrypted. ``lil send`` encrypts by it."""
        ...

    def resumable_run_id(self, goal: str) -> str | None:
        """The run ``Journal(goal)`` resumes (``sqlite_storage.resumable_run_id``'s rule), or
        None when it would start a new one."""
        ...

    def argument_runs(self, goal: str, limit: int) -> list[RunInfo]:
        """The goal's unfinished, uncancelled unnamed runs opened for arguments (a
        ``@durable`` call's), newest first, at most ``limit``."""
        ...

    def runs_updated_before(self, at: str) -> list[RunInfo]:
        """The runs last updated before ``at``, in id order."""
        ...

    def run_refs(self, prefix: str, limit: int) -> list[RunRef]:
        """Runs whose id starts with ``prefix`` (upper-cased) or whose name does, newest
        made first, at most ``limit``: quick, for completion."""
        ...

    def step_keys(self, ref: str, prefix: str) -> list[str]:
        """For completion: the keys starting with ``prefix`` of the run ``ref`` names (its
        id, its goal's newest run, its name, or an id prefix), in journal order."""
        ...

    # -- one run in detail ---------------------------------------------------------------

    def rows(self, run: RunInfo) -> list[RowInfo]:
        """The run's steps and markers in journal order."""
        ...

    def attempts(self, run_id: str) -> list[AttemptInfo]:
        """The run's attempts in order, as recorded (how each ended is told by the caller)."""
        ...

    def tries(self, run_id: str) -> list[TryInfo]:
        """The run's failed tries, in the order they ended."""
        ...

    def reservations(self, run_id: str) -> list[ReservationInfo]:
        """What the run's paid calls reserved (``reservations``), in order; [] for a file
        from before migration 0018."""
        ...

    def result_json(self, run_id: str) -> str | None:
        """The run's recorded result (codec JSON text), None if none."""
        ...

    def previous_steps(self, run: RunInfo) -> int | None:
        """Steps done by the goal's previous completed run opened for the same input; None
        when there is none."""
        ...

    def replays(self, run_id: str) -> list[Any]:
        """What each attempt of the run replayed: per record, the list of keys it got back
        (as recorded: a damaged record may hold anything)."""
        ...

    def attempt_replays(self, run_id: str) -> list[tuple[int, Any]]:
        """What each attempt of the run replayed: per record, ``(attempt, keys)``, the attempt
        that got the results back and the list of their keys (as :meth:`replays`)."""
        ...

    def supervisor_events(self, run_id: str) -> list[dict[str, Any]]:
        """The events of every ``lil watch`` that started an attempt of the run, in order."""
        ...

    def last_watcher_event(self, run_id: str) -> dict[str, Any] | None:
        """The last event of the ``lil watch`` that started the run's newest attempt."""
        ...

    def waits_in_progress(self, goal: str) -> list[tuple[str, str]]:
        """``(run id, key)`` of the goal's waits still ``waiting``, newest run first, then
        in journal order."""
        ...

    def schedule_rows(self) -> tuple[list[ScheduleRow], list[TickRow]]:
        """Every schedule's row, by name, and every tick's, by schedule then newest first
        (``storage_schedules.py``); none in a journal no scheduler has used."""
        ...

    def stream_keys(self, run_id: str) -> list[str]:
        """The keys of the run's streamed steps (``storage_streams.py``), in key order;
        none in a journal no stream has used."""
        ...

    def stream_chunks(self, run_id: str, key: str, after: int = -1) -> list[ChunkRow]:
        """The chunks of the run's stream ``key`` whose offset is greater than ``after``,
        in order; none for a stream not journaled (yet)."""
        ...

    # -- work queues (docs/queues.md) ----------------------------------------------------

    def queue_rows(
        self,
        queue: str | None = None,
        *,
        ids: Sequence[str] | None = None,
        run_ids: Sequence[str] | None = None,
        run_names: Sequence[str] | None = None,
        unstarted: bool = False,
        limit: int | None = None,
        status: str | None = None,
    ) -> list[dict[str, Any]]:
        """Queue entries as recorded (:data:`~.records.QUEUE_COLUMNS`), newest first: of
        ``queue``, with one of ``ids``, whose run is one of ``run_ids`` or is named one of
        ``run_names``, with no run yet (``unstarted``), recorded as ``status``: every
        condition given holds; at most ``limit`` (None: all). None
        in a journal no queue has used."""
        ...

    def queue_counts(self, queue: str | None, now: str) -> list[tuple[str, str, bool, int, str]]:
        """``(queue, recorded status, queued but not due at ``now``, how many, the earliest
        due)`` of each group of entries (of ``queue`` alone, if given), counted by the
        store (``lil queues``)."""
        ...

    def queue_parents(self, run_ids: Sequence[str]) -> dict[str, str]:
        """The run that enqueued the entry of each of these runs (a child's parent run id,
        ``parent_run``), by run id; none for an entry enqueued outside a run, or recorded
        before the link was (migration 0023)."""
        ...

    def queue_held(self, entry_ids: Sequence[str]) -> set[str]:
        """Which of these entries a live worker holds now (its lock); writes nothing."""
        ...

    def delete_queue_entries(self, entry_ids: Sequence[str]) -> int:
        """Delete these entries, the ended ones only (a queued or claimed one stays), with
        the rate-limit claims they left; how many went."""
        ...

    def cancel_entry(self, entry_id: str, at: str, error: str) -> bool:
        """Cancel an entry no worker took yet (``queued``, no run): ``cancelled`` at ``at``
        with ``error``; False (nothing changed) when it is not such an entry any more."""
        ...

    def requeue_entry(self, entry_id: str, run_id: str) -> bool:
        """The entry whose run ``run_id`` was forgotten (``lil reset``) put back in its
        queue: ``queued``, no run, no result, claimable at once; False (nothing changed)
        when it is not that run's any more or a live worker holds it."""
        ...

    def add_queue_rows(self, rows: Sequence[dict[str, Any]]) -> int:
        """Insert these entries (``lil copy``) in one transaction; an entry whose id is there
        already is left as it is. How many were inserted."""
        ...

    # -- changes: each one transaction ---------------------------------------------------

    def delete_runs(self, runs: list[RunInfo]) -> int:
        """Delete the runs with their rows, tries, replays and attempts; the rows deleted."""
        ...

    def fork(
        self,
        source: RunInfo,
        new_id: str,
        at: str,
        from_step: str,
        before_seq: int,
        rename_source: str | None,
    ) -> None:
        """Make run ``new_id`` of the source's goal, ``pending``, with its input, recording
        its lineage (``forked_from``, ``forked_at`` = ``from_step``), and a copy (attempt 0,
        no usage) of each of its ``done`` rows before row ``before_seq``; the new run takes
        the source's name, the source becoming ``rename_source`` when it is given."""
        ...

    def answer_wait(
        self, run: RunInfo, choose: Callable[[list[WaitRow]], WaitAnswer]
    ) -> WaitAnswer:
        """Read the run's waits (journal order) and write the value ``choose`` picks, in one
        transaction, so a deadline it read is never stale; what was written. ``choose``
        raises to write nothing."""
        ...

    def cancel_now(self, run_id: str, at: str, reason: str, error: str) -> None:
        """Mark an unfinished run ``cancelled`` (its first cancel request kept if any)."""
        ...

    def request_cancel(self, run_id: str, at: str, reason: str) -> None:
        """Ask an unfinished run's holder to cancel it (the first request is kept)."""
        ...

    # -- gc ------------------------------------------------------------------------------

    def supervisor_events_before(self, at: str, going: set[str]) -> int:
        """How many supervisor events before ``at`` no attempt of a run outside ``going``
        refers to (what :meth:`delete_supervisor_events` deletes once they are gone)."""
        ...

    def delete_supervisor_events(self, at: str) -> int:
        """Delete the supervisor events before ``at`` no attempt refers to; how many."""
        ...

    def empty_goals(self, going: set[str]) -> list[str]:
        """Goals with no run but those in ``going`` and no row of another run (a goal-scoped
        marker keeps its goal), sorted."""
        ...

    def drop_empty_goals(self) -> list[str]:
        """Remove the goals that have no run and no row, with their rows' storage."""
        ...

    def size(self) -> int:
        """The bytes the journal takes (for SQLite: the file and its -wal)."""
        ...

    def sweep_locks(self) -> None:
        """Remove the locks of holders that died (runs' and markers')."""
        ...

    def compact(self) -> None:
        """Give the space freed by deletions back (for SQLite: VACUUM, then a checkpoint)."""
        ...
