"""See runs without changing them: the read-only library under ``lil runs/show/export``.

Every function takes an open :class:`~letitloop.store.Store` (see
:func:`open_journal_file`) and deals in runs and rows; the ``lil`` commands
only parse arguments and print. A run's steps and markers come in journal
order: the rowid order of its goal's journal table (the order in which
their rows were first written). What changes a journal (reset, fork, gc) is
:mod:`letitloop.maintenance`.

Its modules, bottom up (each imports only the ones before it): ``times``
(timestamps, durations), ``results`` (a stored result as JSON-ready values),
``records`` (what the queries return), ``journalfile`` (:func:`open_journal_file`),
``state`` (a run's row as a :class:`RunInfo`, live or not from its lock),
``listing`` (which runs), ``detail`` (one run in detail), ``export``.
"""

from __future__ import annotations

from .detail import resumer, run_rows, show_run
from .export import export_records, export_run
from .journalfile import open_journal_file
from .listing import MIN_PREFIX, find_run, get_run, list_runs, resumable_run
from .records import (
    AttemptInfo,
    InFlight,
    Pause,
    RowInfo,
    RunDetail,
    RunInfo,
    TryInfo,
    UsageTotals,
)
from .results import MAX_PLAIN_INT_BITS, decode_result, decoded, json_ready
from .state import PAUSED, STATES, is_run_held
from .times import MAX_DURATION, parse_duration, parse_since, parse_utc

__all__ = [
    "MAX_DURATION",
    "MAX_PLAIN_INT_BITS",
    "MIN_PREFIX",
    "PAUSED",
    "STATES",
    "AttemptInfo",
    "InFlight",
    "Pause",
    "RowInfo",
    "RunDetail",
    "RunInfo",
    "TryInfo",
    "UsageTotals",
    "decode_result",
    "decoded",
    "export_records",
    "export_run",
    "find_run",
    "get_run",
    "is_run_held",
    "json_ready",
    "list_runs",
    "open_journal_file",
    "parse_duration",
    "parse_since",
    "parse_utc",
    "resumable_run",
    "resumer",
    "run_rows",
    "show_run",
]
