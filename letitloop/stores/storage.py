"""``Storage``: everything the journal needs from whatever keeps its runs and steps, as the
union of the narrow protocols each caller asks for.

A typed protocol, no I/O, implemented by ``sqlite_storage.SqliteStorage`` (a
journal file; the default), ``postgres_storage.PostgresStorage`` and
``memory_storage.MemoryStorage``, one chosen from ``path=`` by ``schemes.py``.
The opener (``opening.py``) holds the whole of it; every other caller types
its storage as the part it uses, each small enough to read on one screen:

- ``storage_holding.Holding`` (and ``Hold``): which store, a run or a marker
  held by one holder at a time across processes, change notices, closing;
- ``storage_runs.RunRows``: a run found or started, claimed, the
  goal's key check, the attempt's span; ``RunEnds``: its end and cancel request;
- ``storage_steps.StepRows`` (and the records ``StepRow``, ``DoneRow``):
  step rows written, and read back for a replay;
- ``storage_markers.MarkerRows`` (and ``MarkerAt``, ``MarkerRecord``,
  ``MarkerClaim``): a marker's record;
- ``storage_pauses.PauseRows``: sleeps' and waits' rows;
- ``storage_calls.CallRows``: calls in flight, their usage and tries;
- ``storage_spend.SpendRows``: a run's spend and its paid calls' reservations;
- ``storage_seals.SealRows``: a sealed run's chain;
- ``storage_schedules.ScheduleRows`` (and ``TickRow``): schedules and their ticks;
- ``storage_streams.StreamRows`` (and ``ChunkRow``): streamed steps' chunks.

Each store implements each part in one class of its own (``sqlite_runs.SqliteRunRows``,
``memory_runs.MemoryRunRows``, …), and its storage class is their list
(tests/test_architecture.py, ``TestTheStorageBoundary``). Each operation is its
own transaction; times are seconds since the epoch.
"""

from __future__ import annotations

from typing import Protocol

from .storage_calls import CallRows
from .storage_holding import Holding
from .storage_markers import MarkerRows
from .storage_pauses import PauseRows
from .storage_runs import RecordedRuns, RunEnds, RunRows
from .storage_schedules import ScheduleRows
from .storage_seals import SealRows
from .storage_spend import SpendRows
from .storage_steps import StepRows
from .storage_streams import StreamRows

__all__ = ["ReplayStorage", "Storage"]


class Storage(
    Holding,
    RunRows,
    RunEnds,
    StepRows,
    MarkerRows,
    PauseRows,
    CallRows,
    SpendRows,
    SealRows,
    ScheduleRows,
    StreamRows,
    Protocol,
):
    """One goal's runs and steps, as one opener of the goal sees them: every part."""


class ReplayStorage(Storage, RecordedRuns, Protocol):
    """What a replay-only journal opens (``schemes.open_readonly_storage``): a journal file
    read without writing, which also finds the recorded run to replay."""
