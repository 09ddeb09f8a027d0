"""See runs without changing them: the read-only library under ``lil runs/show/export``, and
the :class:`Inspector` through which it, :mod:`letitloop.maintenance` and
:mod:`letitloop.supervision.control` reach a journal.

Every function takes an :class:`Inspector` (see :func:`open_inspector`; a
journal file's :class:`~letitloop.stores.sqlite.store.Store`, from :func:`open_journal_file`,
is read through a :class:`SqliteInspector`) and deals in runs and rows; the
``lil`` commands only parse arguments and print. A run's steps and markers
come in journal order: the order in which their rows were first written.
What changes a journal (reset, fork, gc) is :mod:`letitloop.maintenance`.

Its modules, bottom up (each imports only the ones before it): ``times``
(timestamps, durations), ``results`` (a stored result as JSON-ready values),
``records`` (what the queries return), ``inspector_runs``, ``inspector_detail``,
``inspector_queues`` and ``inspector_changes`` (the narrow protocols a caller names),
``inspector`` (the :class:`Inspector`, their union), ``journalfile``
(:func:`open_journal_file`), ``state`` (what an inspector read made into a
:class:`RunInfo`, live or not from its lock),
``sqlite_filters``, ``sqlite_changes``, ``sqlite_runs``, ``sqlite_detail``
and ``sqlite_inspector`` (the SQLite one: every statement), ``memory_filters``,
``memory_runs``, ``memory_detail`` and ``memory_inspector`` (the in-memory
store's, for ``memory://NAME`` in its process; loaded when one is opened),
``postgres_snapshots`` and ``postgres_inspector`` (PostgreSQL's),
``inspectors`` (:func:`open_inspector`, which chooses one by the path's
scheme), ``listing`` (which runs), ``detail`` (one run in detail), ``export``.
"""

from __future__ import annotations

from .detail import resumer, run_rows, show_run
from .export import export_records, export_run
from .inspector import FileInspector, Inspector
from .inspector_changes import WaitAnswer
from .inspector_runs import RunFilter
from .inspectors import open_inspector
from .journalfile import open_journal_file
from .listing import MIN_PREFIX, find_run, get_run, is_run_held, list_runs, resumable_run
from .records import (
    AttemptInfo,
    InFlight,
    Pause,
    ReservationInfo,
    RowInfo,
    RunDetail,
    RunInfo,
    RunRef,
    TryInfo,
    UsageTotals,
    WaitRow,
)
from .results import MAX_PLAIN_INT_BITS, decode_result, decoded, json_ready
from .sqlite_inspector import SqliteInspector, as_inspector
from .state import PAUSED, STATES
from .times import MAX_DURATION, parse_duration, parse_since, parse_utc

__all__ = [
    "MAX_DURATION",
    "MAX_PLAIN_INT_BITS",
    "MIN_PREFIX",
    "PAUSED",
    "STATES",
    "AttemptInfo",
    "FileInspector",
    "InFlight",
    "Inspector",
    "Pause",
    "ReservationInfo",
    "RowInfo",
    "RunDetail",
    "RunFilter",
    "RunInfo",
    "RunRef",
    "SqliteInspector",
    "TryInfo",
    "UsageTotals",
    "WaitAnswer",
    "WaitRow",
    "as_inspector",
    "decode_result",
    "decoded",
    "export_records",
    "export_run",
    "find_run",
    "get_run",
    "is_run_held",
    "json_ready",
    "list_runs",
    "open_inspector",
    "open_journal_file",
    "parse_duration",
    "parse_since",
    "parse_utc",
    "resumable_run",
    "resumer",
    "run_rows",
    "show_run",
]
