"""``RunHistory``, ``SealReads``, ``ScheduleReads`` and ``StreamReads``: what is recorded of
one run (``lil show``, ``lil ui``, ``lil verify``, a stream's readers) and of the
journal's schedules (parts of :class:`~letitloop.inspection.inspector.Inspector`). No I/O.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..stores.storage_schedules import ScheduleRow, TickRow
from ..stores.storage_streams import ChunkRow
from .records import AttemptInfo, ReservationInfo, RowInfo, RunInfo, TryInfo


class RunHistory(Protocol):
    """One run in detail (``lil show``): its rows, attempts, tries, replays and watchers."""

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


class SealReads(Protocol):
    """A run as ``lil verify`` reads it: its sealed chain and its rows."""

    def seal_chain(self, run: RunInfo) -> tuple[list[Any], list[Any]]:
        """The run's chain entries (in order; none for a run never sealed) and its rows, as
        ``lil verify`` reads them: ``(key, kind, status, fn, args_fp, result, error,
        wake_at)`` each (:func:`~letitloop.inspection.images.row_digests`)."""
        ...


class ScheduleReads(Protocol):
    """The journal's schedules and their ticks (``lil schedules``)."""

    def schedule_rows(self) -> tuple[list[ScheduleRow], list[TickRow]]:
        """Every schedule's row, by name, and every tick's, by schedule then newest first
        (``storage_schedules.py``); none in a journal no scheduler has used."""
        ...


class StreamReads(Protocol):
    """A run's streamed steps and their chunks (``lil show --follow``, streams/reading.py)."""

    def stream_keys(self, run_id: str) -> list[str]:
        """The keys of the run's streamed steps (``storage_streams.py``), in key order;
        none in a journal no stream has used."""
        ...

    def stream_chunks(self, run_id: str, key: str, after: int = -1) -> list[ChunkRow]:
        """The chunks of the run's stream ``key`` whose offset is greater than ``after``,
        in order; none for a stream not journaled (yet)."""
        ...
