"""``Inspector``: what ``lil`` and the library need from a store to see and change runs from
outside them, as the union of the narrow protocols each caller asks for, so that
``lil runs/show/export/reset/fork/gc/send/cancel/copy`` work on every store. No I/O.

The public functions (:mod:`letitloop.inspection`, :mod:`letitloop.maintenance`,
:mod:`letitloop.supervision.control`) hold the rules and the words: which run a reference
names, which runs gc may take, when a wait takes a value, every error. An
inspector answers plain questions about what is recorded and makes the changes
it is asked for, each change in one transaction. The SQLite one is
:class:`~letitloop.inspection.sqlite_inspector.SqliteInspector`, whose modules
(``sqlite_*.py``) are the only ones of these packages that speak SQL;
:func:`~letitloop.inspection.open_inspector` chooses one for a path.

The parts, each small enough to read on one screen; a caller names the ones it uses:

- ``inspector_runs.JournalHolds``: where the journal is, its runs' locks, closing;
  ``RunListing`` (and ``RunFilter``): goals and runs listed, completed;
  ``RunFinding``: the run a reference names;
- ``inspector_detail.RunHistory``: one run in detail; ``SealReads``: its chain
  (``lil verify``); ``ScheduleReads``; ``StreamReads``: streamed steps' chunks;
- ``inspector_queues.QueueEntries``: work-queue entries;
- ``inspector_changes.RunControl`` (and ``WaitAnswer``): a value sent, a cancel;
  ``RunChanges``: reset and fork; ``Collecting``: gc;
- ``images.Copying``: runs read whole and written (``lil copy``).

A journal file's inspector is a :class:`FileInspector` too: ``images.FixtureCopies``
(``lil fixture``) and ``inspector_changes.Rekeying`` (``lil rekey``), which the other
stores do not offer (their callers check with ``isinstance``, both being runtime-checkable).

Times are ISO-8601 UTC text, as in the records. A :class:`RunInfo` is made
by :func:`~letitloop.inspection.state.run_infos` from what the inspector read,
so every store tells a run's state by the same rule.
"""

from __future__ import annotations

from typing import Protocol

from .images import Copying, FixtureCopies
from .inspector_changes import Collecting, Rekeying, RunChanges, RunControl
from .inspector_detail import RunHistory, ScheduleReads, SealReads, StreamReads
from .inspector_queues import QueueEntries
from .inspector_runs import JournalHolds, RunFinding, RunListing

__all__ = ["FileInspector", "Inspector"]


class Inspector(
    JournalHolds,
    RunListing,
    RunFinding,
    RunHistory,
    SealReads,
    ScheduleReads,
    StreamReads,
    QueueEntries,
    RunControl,
    RunChanges,
    Collecting,
    Copying,
    Protocol,
):
    """A journal seen and changed from outside its runs (see the module's docstring): every
    part. Reads never write. Each change is one transaction: all of it or nothing."""


class FileInspector(Inspector, FixtureCopies, Rekeying, Protocol):
    """A journal file's inspector (:class:`~letitloop.inspection.sqlite_inspector.SqliteInspector`):
    every part, and the file's own (``lil fixture``, ``lil rekey``)."""
