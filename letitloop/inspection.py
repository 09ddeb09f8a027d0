"""See, fix and replay runs: the library under ``lil runs/show/reset/fork/gc/export``.

Every function takes an open :class:`~letitloop.store.Store` (see
:func:`open_journal_file`) and deals in runs and rows; the ``lil`` commands
only parse arguments and print. A run's steps and markers come in journal
order: the rowid order of its goal's journal table (the order in which
their rows were first written).

Whether a run is *live* is read from its lock, not from the ``status``
column: a process holding a run holds its lock file
(:func:`letitloop.journal.run_lock_path`), and a process that died released
it. So a run recorded as ``running`` whose lock is free has *crashed* (or,
with no attempt yet, is a *pending* fork).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shlex
import socket
import sqlite3
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import msgspec

from . import codec, locks
from .errors import (
    DecodeError,
    JournalFileError,
    LetItLoopError,
    RunNotFoundError,
)
from .journal import run_lock_path
from .store import Store, resolve_path, utc_iso

#: The states a run can be in, as ``lil runs`` shows them. ``running``: held
#: by a live process; ``crashed``: recorded as running, but no process holds
#: it; ``pending``: a fork (or a run) that no process has opened yet;
#: ``waiting``: stopped to wait for outside input (``wait_for(stop_after=)``);
#: ``cancelled``: cancelled, or asked to be and left by its process.
STATES = ("running", "crashed", "pending", "waiting", "completed", "failed", "cancelled")

#: The shortest unique prefix of a run id ``lil`` accepts: shorter ones are
#: almost always a typo, and a ULID's first characters are only its time.
MIN_PREFIX = 6


#: The longest duration ``lil`` takes (``gc --older-than``, ``runs --since``).
#: No journal holds runs older than that, and it keeps "now minus the
#: duration" a date that Python's datetime can hold (it ends at year 1).
MAX_DURATION = timedelta(days=36_500)

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


# -- what the functions return ----------------------------------------------------


@dataclass(frozen=True)
class InFlight:
    """A step with a ``running`` row: in flight now, or in flight when its attempt ended.

    A step running for more than about a second gets such a row (see
    letitloop/inflight.py); its own final row replaces it when it finishes.
    """

    key: str
    started_at: str | None
    attempt: int
    """The attempt that was running it."""
    ran_s: float | None
    """Seconds it had run when its row was last written (at most 2 s ago if it is live)."""
    live: bool
    """True when the process running it is alive and still in this attempt."""


@dataclass(frozen=True)
class Pause:
    """A sleep, a wait for outside input or a step between two tries: in progress, or left so.

    A row whose status is ``sleeping``, ``waiting`` or ``retrying`` (see
    docs/primitives.md): a live run is in it now; a run no process holds
    resumes it where it was.
    """

    key: str
    kind: str
    """``sleep``, ``wait`` or ``step`` (a step's retry)."""
    status: str
    """``sleeping``, ``waiting`` or ``retrying``."""
    since: str | None
    """When it started (for a retry: when the failed try started)."""
    until: str | None
    """When it ends: the wake-up time, the wait's deadline (None: none), the next try."""
    attempt: int
    error: str | None = None
    """For a retry: the failed try's error."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RunInfo:
    """One run as ``lil runs`` lists it. Timestamps are ISO-8601 UTC text."""

    id: str
    goal: str
    name: str | None
    status: str
    """As recorded in ``runs.status``: running, completed or failed."""
    state: str
    """What it is now (one of :data:`STATES`), from the status and the run's lock."""
    attempts: int
    steps_done: int
    steps_failed: int
    markers: int
    started_at: str
    updated_at: str
    finished_at: str | None
    error: str | None
    """The error of the last attempt that failed; for a run that is running, crashed or
    pending again, that was an earlier attempt (see :attr:`error_is_earlier`)."""
    holder_pid: int | None
    holder_host: str | None
    journal_table: str
    input_json: str | None = None
    """What the run was opened for (``runs.input``: codec JSON text), None if nothing."""
    forked_from: str | None = None
    """The run ``lil fork`` made this one from, and the step it re-executes from."""
    forked_at: str | None = None
    last_seen_at: str | None = None
    """The last sign of life: the latest of its own update, a row finished, a heartbeat."""
    in_flight: tuple[InFlight, ...] = ()
    """Steps with a ``running`` row, in journal order."""
    pauses: tuple[Pause, ...] = ()
    """Sleeps, waits and retries in progress (or left so), in journal order."""
    cancel_requested_at: str | None = None
    """When ``lil cancel`` asked the run to stop, and who asked (and why)."""
    cancel_reason: str | None = None
    input_tokens: int | None = None
    """What the run's steps reported consuming (their rows and their failed tries)."""
    output_tokens: int | None = None
    cost: float | None = None

    @property
    def error_is_earlier(self) -> bool:
        """Whether :attr:`error` ended an earlier attempt, not the run's state now."""
        return self.error is not None and self.status in ("running", "waiting")

    @property
    def died_in(self) -> InFlight | None:
        """For a crashed run: the step its last attempt was in when its process died."""
        if self.state != "crashed":
            return None
        return next((f for f in self.in_flight if f.attempt == self.attempts), None)

    @property
    def duration_s(self) -> float | None:
        """Seconds from the start to the finish: to now for a live run, else to the last sign
        of life. None when a timestamp is not one (a hand-edited file).
        """
        try:
            start = parse_utc(self.started_at)
            if self.finished_at:
                end = parse_utc(self.finished_at)
            elif self.state == "running":
                end = datetime.now(timezone.utc)
            else:
                end = parse_utc(self.last_seen_at or self.updated_at)
            return (end - start).total_seconds()
        except (TypeError, ValueError, OverflowError):
            return None

    def as_dict(self) -> dict[str, Any]:
        """The run as plain JSON-ready values (UTC timestamps); ``input`` decoded."""
        took = self.duration_s
        out = asdict(self)
        out["in_flight"] = [asdict(f) for f in self.in_flight]
        out["pauses"] = [p.as_dict() for p in self.pauses]
        out["input"], _ = decode_result(out.pop("input_json"))
        out["input_json"] = self.input_json
        out["error_is_earlier"] = self.error_is_earlier
        return {**out, "duration_s": None if took is None else round(took, 6)}


@dataclass(frozen=True)
class RowInfo:
    """One step or marker row of a run, in journal order (``seq`` is its rowid)."""

    seq: int
    key: str
    kind: str
    status: str
    fn: str | None
    result: str | None
    """The result as stored: JSON text written by the codec."""
    started_at: str | None
    finished_at: str | None
    duration_ms: float | None
    attempt: int
    """The attempt that wrote the row; 0 for a row a fork copied from its source."""
    error: str | None
    traceback: str | None
    wake_at: str | None = None
    """A sleep's wake-up time, a wait's deadline, a retrying step's next try."""
    input_tokens: int | None = None
    """What the step's function reported consuming (``letitloop.usage``)."""
    output_tokens: int | None = None
    cost: float | None = None
    model: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TryInfo:
    """One failed try of a step with a retry policy (a row of ``step_tries``)."""

    key: str
    number: int
    """1, 2, … over the step's life in the run."""
    attempt: int
    started_at: str
    failed_at: str
    error: str
    next_at: str | None
    """When the next try was due; None: none (the step gave up and raised)."""
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost: float | None = None
    model: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class UsageTotals:
    """Tokens and cost summed over rows; ``None`` where nothing was reported."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cost: float | None = None
    steps: int = 0
    """How many rows reported usage."""

    @property
    def tokens(self) -> int | None:
        if self.input_tokens is None and self.output_tokens is None:
            return None
        return (self.input_tokens or 0) + (self.output_tokens or 0)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "tokens": self.tokens}


@dataclass(frozen=True)
class AttemptInfo:
    """One process's pass over a run, and how it ended as far as the file tells.

    The file records when an attempt started, not when or how it ended: the
    ending is read from what it left (its ``running`` and ``failed`` rows, the
    run's own status for the last attempt) and from the ``exit`` event ``lil
    watch`` recorded for its process.
    """

    attempt: int
    pid: int
    host: str
    watch_id: str | None
    """The ``lil watch`` session that started the process, if any."""
    started_at: str
    watch_attempt: int | None = None
    """That session's count of starts: ``lil watch``'s attempt 3 (LETITLOOP_ATTEMPT)."""
    outcome: str | None = None
    """``running``, ``completed``, ``failed`` (an exception left the run), ``died`` (its
    process is gone with the run unfinished), ``interrupted`` (it left a step unfinished),
    ``cancelled``, ``waiting`` (it stopped to wait for outside input), or None when the file
    does not say."""
    error: str | None = None
    """The error that failed it, when known."""
    step: str | None = None
    """The step it is in (running), was in when it ended, or that failed."""
    step_s: float | None = None
    """Seconds it had been in that step, at least (None: a failed step, or unknown)."""
    exit_code: int | None = None
    """Its process's exit status as ``lil watch`` saw it (128+N for signal N)."""
    signal: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RunDetail:
    """One run with its rows, attempts and the supervisor's events around it."""

    run: RunInfo
    rows: list[RowInfo]
    attempts: list[AttemptInfo]
    supervisor_events: list[dict[str, Any]]
    """Rows of ``supervisor_events`` of every watcher that started an attempt of the run."""
    previous_steps: int | None
    """Steps done by the goal's previous completed run, None when there is none."""
    result_json: str | None = None
    """The run's result as stored (``runs.result``: what ``@durable`` returned)."""
    tries: list[TryInfo] = field(default_factory=list)
    """Failed tries of its steps with a retry policy, in the order they were made."""
    usage: UsageTotals = field(default_factory=UsageTotals)
    """What its steps and failed tries reported consuming."""
    replayed: UsageTotals = field(default_factory=UsageTotals)
    """Of that, what results recorded by earlier attempts (or copied by a fork) hold: what
    the last attempt got back by replay instead of spending it again."""

    def as_dict(self) -> dict[str, Any]:
        """The recorded columns as they are (results as stored text; see :func:`export_run`)."""
        return {
            "run": self.run.as_dict(),
            "rows": [r.as_dict() for r in self.rows],
            "attempts": [a.as_dict() for a in self.attempts],
            "supervisor_events": self.supervisor_events,
            "previous_steps": self.previous_steps,
            "tries": [t.as_dict() for t in self.tries],
            "usage": {**self.usage.as_dict(), "replayed": self.replayed.as_dict()},
        }


# -- small parsers ---------------------------------------------------------------


def parse_utc(text: str) -> datetime:
    """An ISO-8601 timestamp as written by the journal, as an aware datetime."""
    t = datetime.fromisoformat(text)
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


class _OutOfRange(ValueError):
    """A duration or date of the right form, outside the range ``lil`` accepts."""


def parse_duration(text: str) -> timedelta:
    """``"30d"``, ``"12h"``, ``"1h30m"``, ``"90s"``, ``"2w"`` as a timedelta.

    Raises ValueError saying what was expected for anything else, or the
    accepted range for a duration over :data:`MAX_DURATION`.
    """
    s = text.strip().lower()
    pos, total = 0, 0.0
    for m in _DURATION_PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    if not s or pos != len(s):
        raise ValueError(
            f"expected a duration such as 30d, 12h, 1h30m, 90s or 2w "
            f"(units s, m, h, d, w), got {text!r}"
        )
    if total > MAX_DURATION.total_seconds():  # inf for "1e400" digits too
        raise _OutOfRange(
            f"expected a duration of at most {MAX_DURATION.days}d (100 years), got {text!r}"
        )
    return timedelta(seconds=total)


def parse_since(text: str, now: float | None = None) -> datetime:
    """A point in time: a duration ago (``"2h"``), or an ISO date/time (local if no zone).

    Raises ValueError saying what was expected, and the accepted range for a
    duration (:data:`MAX_DURATION`) or a date (years 1 to 9999) out of it.
    """
    try:
        ago: timedelta | None = parse_duration(text)
    except _OutOfRange:
        raise
    except ValueError:
        ago = None
    if ago is not None:
        return datetime.fromtimestamp(now if now is not None else time.time(), timezone.utc) - ago
    try:
        t = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"expected a duration ago (2h, 7d) or a date/time (2026-11-30, "
            f"2026-11-30T08:00), got {text!r}"
        ) from None
    try:
        t = (t if t.tzinfo else t.astimezone()).astimezone(timezone.utc)
        utc_iso(t.timestamp())  # the text the runs are compared with must exist too
    except (OverflowError, ValueError, OSError):
        raise _OutOfRange(
            f"expected a date/time between 0001-01-02 and 9999-12-30, got {text!r}"
        ) from None
    return t


# -- opening the file --------------------------------------------------------------


def open_journal_file(
    path: str | Path | None = None, *, write: bool = False, live: bool = False
) -> Store:
    """Open an existing journal: for reading (the default) or for maintenance (``write``).

    Unlike ``Journal``, this never creates a file, and refuses an SQLite file
    that is not a letitloop journal rather than adding tables to it. A reader
    (``lil runs``, ``show``, ``export``) opens the file read-only and never
    changes it: no migration, no lock file, no checkpoint; a file written by
    an older letitloop is refused with the way to upgrade it (``live``: the
    reader watches a file others are writing, as ``--follow`` does). ``write=True``
    (``reset``, ``fork``, ``gc``, ``upgrade``) opens it writable and upgrades
    an older schema first. Raises JournalFileError saying what was found.
    """
    p = resolve_path(path)
    if not p.exists():
        raise JournalFileError(
            f"{p}: no journal file here; expected the file a Journal wrote (pass --db PATH "
            f"or set LETITLOOP_DB; the default is .letitloop/journal.db under the current "
            f"folder)",
            path=str(p),
        )
    if p.is_dir():
        raise JournalFileError(
            f"{p}: expected a journal file, found a folder; pass the file's path to --db",
            path=str(p),
        )
    try:
        # Read as it is when closed cleanly (no -wal): nothing is created beside it.
        quiet = "&immutable=1" if not Path(f"{p}-wal").exists() else ""
        probe = sqlite3.connect(f"{p.resolve().as_uri()}?mode=ro{quiet}", uri=True)
        try:
            names = {
                r[0]
                for r in probe.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' "
                    "AND name IN ('goals', 'runs')"
                )
            }
        finally:
            probe.close()
    except sqlite3.Error as exc:
        from .store import _explain

        raise _explain(exc, p) from None
    if names != {"goals", "runs"}:
        raise JournalFileError(
            f"{p}: expected a letitloop journal, found an SQLite file without letitloop's "
            f"tables (goals, runs); pass the journal's path to --db. The file was not changed.",
            path=str(p),
        )
    return Store(p) if write else Store(p, readonly=True, live=live)


# -- liveness ------------------------------------------------------------------------


def is_run_held(store: Store, run_id: str) -> bool:
    """True when a live process (this one included) holds ``run_id`` right now; writes nothing."""
    return locks.is_held(run_lock_path(store, run_id))


def _state(
    store: Store, status: str, attempts: int, run_id: str, cancel_at: str | None = None
) -> str:
    if status != "running":
        return status
    if is_run_held(store, run_id):
        return "running"
    if cancel_at is not None:
        return "cancelled"  # asked to stop, and its process is gone: no opener resumes it
    return "crashed" if attempts else "pending"


# -- listing -------------------------------------------------------------------------

_RUN_COLUMNS = (
    "r.id, r.goal, r.name, r.status, r.attempts, r.started_at, r.updated_at, r.finished_at, "
    "r.error, r.holder_pid, r.holder_host, g.journal_table, r.input, r.forked_from, r.forked_at, "
    "r.cancel_requested_at, r.cancel_reason"
)

#: Per run: steps done, steps failed, markers, the latest finished_at, then its
#: usage: input tokens, output tokens, cost (None where none was reported).
_Counts = tuple[int, int, int, "str | None", "int | None", "int | None", "float | None"]

#: The statuses of rows that are paused, not running (see :class:`Pause`).
PAUSED = ("sleeping", "waiting", "retrying")


def _counts(store: Store, table: str, run_ids: list[str]) -> dict[str, _Counts]:
    out: dict[str, _Counts] = {}
    # SQLite allows at most 999 bound parameters in old builds; stay well below.
    for i in range(0, len(run_ids), 500):
        chunk = run_ids[i : i + 500]
        marks = ",".join("?" * len(chunk))
        for run, done, failed, markers, last, inp, outp, cost in store.query(
            f"SELECT run, sum(kind = 'step' AND status = 'done'), "
            f"sum(kind = 'step' AND status = 'failed'), sum(kind = 'marker'), max(finished_at), "
            f"sum(input_tokens), sum(output_tokens), sum(cost) "
            f'FROM "{table}" WHERE run IN ({marks}) GROUP BY run',
            chunk,
        ):
            out[run] = (int(done or 0), int(failed or 0), int(markers or 0), last, inp, outp, cost)
        for run, inp, outp, cost in store.query(
            f"SELECT run, sum(input_tokens), sum(output_tokens), sum(cost) FROM step_tries "
            f"WHERE run IN ({marks}) AND (input_tokens IS NOT NULL OR output_tokens IS NOT NULL "
            f"OR cost IS NOT NULL) GROUP BY run",
            chunk,
        ):
            c = out.get(run, (0, 0, 0, None, None, None, None))
            out[run] = (*c[:4], _plus(c[4], inp), _plus(c[5], outp), _plus(c[6], cost))
    return out


def _plus(a: Any, b: Any) -> Any:
    """``a + b`` where None means nothing reported."""
    if a is None:
        return b
    return a if b is None else a + b


def _running_rows(store: Store, table: str, run_ids: list[str]) -> dict[str, list[Any]]:
    """Per run: ``(key, kind, status, started_at, duration_ms, attempt, wake_at, error)`` of its
    ``running`` rows and its paused ones (:data:`PAUSED`)."""
    out: dict[str, list[Any]] = {}
    for i in range(0, len(run_ids), 500):
        chunk = run_ids[i : i + 500]
        marks = ",".join("?" * len(chunk))
        for run, *row in store.query(
            f"SELECT run, key, kind, status, started_at, duration_ms, attempt, wake_at, error "
            f'FROM "{table}" WHERE run IN ({marks}) AND status IN '
            f"('running', 'sleeping', 'waiting', 'retrying') AND kind != 'marker' ORDER BY rowid",
            chunk,
        ):
            out.setdefault(run, []).append(row)
    return out


def _later(a: str | None, b: str | None) -> str | None:
    """The later of two ISO timestamps (one that is not a timestamp loses)."""
    try:
        return a if b is None or (a is not None and parse_utc(a) >= parse_utc(b)) else b
    except (TypeError, ValueError, OverflowError):
        return a if b is None else b


def _plus_ms(iso: str | None, ms: Any) -> str | None:
    try:
        return utc_iso(parse_utc(str(iso)).timestamp() + float(ms) / 1000.0)
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def _infos(store: Store, rows: list[Any]) -> list[RunInfo]:
    by_table: dict[str, list[str]] = {}
    for row in rows:
        by_table.setdefault(row[11], []).append(row[0])
    counts: dict[str, _Counts] = {}
    running: dict[str, list[Any]] = {}
    for table, ids in by_table.items():
        counts.update(_counts(store, table, ids))
        running.update(_running_rows(store, table, ids))
    out = []
    for row in rows:
        rid, goal, name, status, attempts, started, updated, finished, error, pid, host = row[:11]
        table, input_json, forked_from, forked_at, cancel_at, cancel_reason = row[11:17]
        done, failed, markers, last, inp, outp, cost = counts.get(
            rid, (0, 0, 0, None, None, None, None)
        )
        state = _state(store, status, attempts, rid, cancel_at)
        seen = _later(updated, last)
        flight = []
        pauses = []
        for key, kind, f_status, f_started, f_ms, f_attempt, wake_at, f_error in running.get(
            rid, ()
        ):
            if f_status != "running":
                if state not in ("completed", "cancelled"):  # else nothing waits any more
                    pauses.append(
                        Pause(key, kind, f_status, f_started, wake_at, f_attempt, f_error)
                    )
                continue
            seen = _later(seen, _plus_ms(f_started, f_ms or 0))
            flight.append(
                InFlight(
                    key=key,
                    started_at=f_started,
                    attempt=f_attempt,
                    ran_s=f_ms / 1000 if isinstance(f_ms, (int, float)) else None,
                    live=state == "running" and f_attempt == attempts,
                )
            )
        out.append(
            RunInfo(
                id=rid,
                goal=goal,
                name=name,
                status=status,
                state=state,
                attempts=attempts,
                steps_done=done,
                steps_failed=failed,
                markers=markers,
                started_at=started,
                updated_at=updated,
                finished_at=finished,
                error=error,
                holder_pid=pid,
                holder_host=host,
                journal_table=table,
                input_json=input_json,
                forked_from=forked_from,
                forked_at=forked_at,
                last_seen_at=seen,
                in_flight=tuple(flight),
                pauses=tuple(pauses),
                cancel_requested_at=cancel_at,
                cancel_reason=cancel_reason,
                input_tokens=inp,
                output_tokens=outp,
                cost=cost,
            )
        )
    return out


def _input_condition(key: str, value: str) -> tuple[str, list[Any]]:
    """SQL matching runs whose recorded input has ``value`` at ``key`` (dotted for nesting).

    ``value`` is read as JSON when it is JSON (``7``, ``true``, ``"7"``,
    ``[1, 2]``), else as text. It matches the recorded value, or a value the
    codec tagged (``{"!date": "2026-11-30"}`` matches ``2026-11-30``). The
    input may be wrapped as the codec wraps a dict with typed values
    (``{"!dict": {…}}``). A stored input that is not JSON matches nothing.
    """
    try:
        wanted: Any = json.loads(value)
    except ValueError:
        wanted = value
    parts = [p for p in key.split(".") if p]
    if not parts:
        raise LetItLoopError(
            f"--input expects KEY=VALUE with a KEY such as 'user_id' or 'user.id', got {key!r}"
        )
    quoted = "".join('."' + p.replace('"', '""') + '"' for p in parts)
    if isinstance(wanted, (dict, list)):
        same, bound = "= json(?)", json.dumps(wanted)
    else:
        same, bound = "= ?", wanted
    arms, params = [], []
    for path in ("$" + quoted, '$."!dict"' + quoted):
        arms.append(
            f"json_extract(r.input, ?) {same} OR (json_type(r.input, ?) = 'object' AND EXISTS "
            f"(SELECT 1 FROM json_each(r.input, ?) WHERE key LIKE '!%' AND value {same}))"
        )
        params += [path, bound, path, path, bound]
    return f"(CASE WHEN json_valid(r.input) THEN ({' OR '.join(arms)}) ELSE 0 END)", params


def list_runs(
    store: Store,
    goal: str | None = None,
    *,
    status: str | Iterable[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    name: str | None = None,
    inputs: Iterable[tuple[str, str]] = (),
    limit: int | None = None,
    offset: int = 0,
) -> list[RunInfo]:
    """Runs newest first, optionally of one goal, in some states, started in a time range.

    ``status`` takes the states of :data:`STATES` (``crashed`` and ``running``
    are told apart by the run's lock). ``since`` and ``until`` bound the start
    time (``since`` included, ``until`` not). ``name`` is a glob (``user-*``,
    case-sensitive) on the run's name; an unnamed run never matches it.
    ``inputs`` are ``(key, value)`` pairs the recorded input must all hold
    (see :func:`_input_condition`). ``offset`` skips that many matching runs
    first, for paging. An empty list means no run matched; an unknown goal
    raises RunNotFoundError.
    """
    where, params = [], []
    if goal is not None:
        if store.goal_table(goal) is None:
            raise RunNotFoundError(_no_goal(store, goal))
        where.append("r.goal = ?")
        params.append(goal)
    wanted: set[str] | None = None
    if status is not None:
        wanted = {status} if isinstance(status, str) else set(status)
        unknown = wanted - set(STATES)
        if unknown:
            raise LetItLoopError(
                f"unknown run status {sorted(unknown)[0]!r}; expected one of {', '.join(STATES)}"
            )
        recorded = {"running" if s in ("running", "crashed", "pending") else s for s in wanted} | (
            {"running"} if "cancelled" in wanted else set()
        )
        where.append(f"r.status IN ({','.join('?' * len(recorded))})")
        params.extend(sorted(recorded))
    if since is not None:
        where.append("r.started_at >= ?")
        params.append(utc_iso(since.timestamp()))
    if until is not None:
        where.append("r.started_at < ?")
        params.append(utc_iso(until.timestamp()))
    if name is not None:
        where.append("r.name GLOB ?")
        params.append(name)
    for key, value in inputs:
        cond, cond_params = _input_condition(key, value)
        where.append(cond)
        params.extend(cond_params)
    sql = f"SELECT {_RUN_COLUMNS} FROM runs r JOIN goals g ON g.goal = r.goal"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY r.rowid DESC"  # newest made first (ids of one millisecond: any order)
    if wanted is None:
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        if offset:
            sql += f"{'' if limit is not None else ' LIMIT -1'} OFFSET {int(offset)}"
        return _infos(store, store.query(sql, params))
    # running, crashed and pending differ by their locks: filter after reading them,
    # in pages, so a large journal is not read whole for the newest few.
    out: list[RunInfo] = []
    skip = offset
    page, at = max(100, (limit or 0) + offset), 0
    while True:
        batch = store.query(f"{sql} LIMIT {page} OFFSET {at}", params)
        at += len(batch)
        for info in _infos(store, batch):
            if info.state not in wanted:
                continue
            if skip:
                skip -= 1
                continue
            out.append(info)
            if limit is not None and len(out) >= limit:
                return out
        if len(batch) < page:
            return out


def _known_goals(store: Store) -> str:
    known = [r[0] for r in store.query("SELECT goal FROM goals ORDER BY goal LIMIT 6")]
    if not known:
        return "the journal has no goals"
    return f"known goals: {', '.join(known[:5])}{', …' if len(known) > 5 else ''}"


def _no_goal(store: Store, goal: str) -> str:
    return f"no goal {goal!r} in {store.path} ({_known_goals(store)})"


def get_run(store: Store, run_id: str) -> RunInfo:
    """The run with exactly this id. Raises RunNotFoundError."""
    rows = store.query(
        f"SELECT {_RUN_COLUMNS} FROM runs r JOIN goals g ON g.goal = r.goal WHERE r.id = ?",
        (run_id,),
    )
    if not rows:
        raise RunNotFoundError(
            f"no run {run_id!r} in {store.path}; 'lil runs' lists the runs", run=run_id
        )
    return _infos(store, rows)[0]


def _prefix_range(ref: str) -> tuple[str, str]:
    """``(low, high)``: run ids starting with ``ref`` are ``low <= id < high``.

    A range on the primary key, which the index answers directly (a LIKE is
    case-insensitive, so SQLite scans the whole table for it). Ids are
    upper-case Crockford base32, so the prefix is upper-cased first.
    """
    low = ref.upper()
    return low, low[:-1] + chr(ord(low[-1]) + 1)


def find_run(store: Store, ref: str, goal: str | None = None) -> RunInfo:
    """The run ``ref`` names: a run id, a goal (its newest run), a run name, or an id prefix.

    With ``goal``, ``ref`` is looked up among that goal's runs only (by id or
    name, or id prefix). Raises RunNotFoundError when nothing matches, or a
    prefix or name is ambiguous.
    """
    q = f"SELECT {_RUN_COLUMNS} FROM runs r JOIN goals g ON g.goal = r.goal WHERE "
    if goal is not None:
        if store.goal_table(goal) is None:
            raise RunNotFoundError(_no_goal(store, goal))
        rows = store.query(q + "r.goal = ? AND (r.id = ? OR r.name = ?)", (goal, ref, ref))
        if not rows and len(ref) >= MIN_PREFIX:
            rows = store.query(
                q + "r.goal = ? AND r.id >= ? AND r.id < ? ORDER BY r.id DESC LIMIT 3",
                (goal, *_prefix_range(ref)),
            )
            if len(rows) > 1:
                raise RunNotFoundError(
                    f"run id prefix {ref!r} matches several runs of goal {goal!r} "
                    f"({rows[0][0]}, {rows[1][0]}, …); give more characters",
                    run=ref,
                )
        if not rows:
            raise RunNotFoundError(
                f"goal {goal!r} has no run with id, id prefix or name {ref!r}; "
                f"list its runs with: lil runs {shlex.quote(goal)}",
                run=ref,
            )
        return _infos(store, rows[:1])[0]
    rows = store.query(q + "r.id = ?", (ref,))
    if not rows:
        rows = store.query(q + "r.goal = ? ORDER BY r.rowid DESC LIMIT 1", (ref,))
    if not rows:
        rows = store.query(q + "r.name = ? ORDER BY r.id DESC", (ref,))
        if len(rows) > 1:
            goals = ", ".join(sorted({r[1] for r in rows}))
            raise RunNotFoundError(
                f"run name {ref!r} belongs to several goals ({goals}); pass the run id "
                f"('lil runs' lists them)",
                run=ref,
            )
    if not rows and len(ref) >= MIN_PREFIX:
        rows = store.query(
            q + "r.id >= ? AND r.id < ? ORDER BY r.id DESC LIMIT 3", _prefix_range(ref)
        )
        if len(rows) > 1:
            raise RunNotFoundError(
                f"run id prefix {ref!r} matches several runs ({rows[0][0]}, {rows[1][0]}, …); "
                f"give more characters",
                run=ref,
            )
    if not rows:
        raise RunNotFoundError(
            f"no run or goal {ref!r} in {store.path}; expected a run id, a goal or a run "
            f"name; 'lil runs' lists them",
            run=ref,
        )
    return _infos(store, rows[:1])[0]


# -- one run -------------------------------------------------------------------------

_ROW_COLUMNS = (
    "rowid, key, kind, status, fn, result, started_at, finished_at, duration_ms, attempt, "
    "error, traceback, wake_at, input_tokens, output_tokens, cost, model"
)


def run_rows(store: Store, run: RunInfo) -> list[RowInfo]:
    """The run's steps and markers in journal order."""
    return [
        RowInfo(*r)
        for r in store.query(
            f'SELECT {_ROW_COLUMNS} FROM "{run.journal_table}" WHERE run = ? ORDER BY rowid',
            (run.id,),
        )
    ]


def _dicts(store: Store, sql: str, params: tuple[Any, ...]) -> list[dict[str, Any]]:
    with store.lock:
        try:
            cur = store.conn.execute(sql, params)
            names = [d[0] for d in cur.description]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
        except sqlite3.Error as exc:
            raise JournalFileError(f"{store.path}: SQLite error: {exc}") from None


def show_run(store: Store, run: RunInfo | str) -> RunDetail:
    """The run (an id or a RunInfo) with its rows, attempts and supervisor events."""
    info = get_run(store, run) if isinstance(run, str) else run
    rows = run_rows(store, info)
    events = _dicts(
        store,
        "SELECT * FROM supervisor_events WHERE watch_id IN "
        "(SELECT watch_id FROM attempts WHERE run = ? AND watch_id IS NOT NULL) ORDER BY id",
        (info.id,),
    )
    exits = {(e["watch_id"], e["child_pid"]): e for e in events if e.get("event") == "exit"}
    attempts = []
    for a in store.query(
        "SELECT attempt, pid, host, watch_id, started_at, watch_attempt FROM attempts "
        "WHERE run = ? ORDER BY attempt",
        (info.id,),
    ):
        attempt = AttemptInfo(*a)
        ended = exits.get((attempt.watch_id, attempt.pid)) if attempt.watch_id else None
        attempts.append(_with_ending(info, rows, attempt, ended))
    prev = store.query(
        "SELECT id FROM runs WHERE goal = ? AND status = 'completed' AND id < ? "
        "ORDER BY id DESC LIMIT 1",
        (info.goal, info.id),
    )
    previous_steps = None
    if prev:
        counts = _counts(store, info.journal_table, [prev[0][0]])
        previous_steps = counts.get(prev[0][0], (0, 0, 0, None))[0]
    result = store.query("SELECT result FROM runs WHERE id = ?", (info.id,))
    tries = [
        TryInfo(*t)
        for t in store.query(
            "SELECT key, try, attempt, started_at, failed_at, error, next_at, input_tokens, "
            "output_tokens, cost, model FROM step_tries WHERE run = ? ORDER BY failed_at, try",
            (info.id,),
        )
    ]
    spent = _totals([*rows, *tries])
    replayed = _totals([r for r in rows if r.status == "done" and r.attempt < info.attempts])
    return RunDetail(
        info,
        rows,
        attempts,
        events,
        previous_steps,
        result[0][0] if result else None,
        tries,
        spent,
        replayed,
    )


def _totals(items: Iterable[RowInfo | TryInfo]) -> UsageTotals:
    """The usage of ``items`` summed (None where none reported any)."""
    inp = outp = cost = None
    steps = 0
    for r in items:
        if r.input_tokens is None and r.output_tokens is None and r.cost is None:
            continue
        steps += 1
        inp, outp, cost = (
            _plus(inp, r.input_tokens),
            _plus(outp, r.output_tokens),
            _plus(cost, r.cost),
        )
    return UsageTotals(inp, outp, cost, steps)


def _with_ending(
    run: RunInfo, rows: list[RowInfo], a: AttemptInfo, exit_event: dict[str, Any] | None
) -> AttemptInfo:
    """``a`` with what the file tells of how it ended (see :class:`AttemptInfo`)."""
    flight = next((f for f in run.in_flight if f.attempt == a.attempt), None)
    failed = [
        r for r in rows if r.kind == "step" and r.status == "failed" and r.attempt == a.attempt
    ]
    outcome = error = step = None
    step_s: float | None = None
    if flight is not None:
        step, step_s = flight.key, flight.ran_s
    last = a.attempt == run.attempts
    if last and run.state in ("running", "completed"):
        outcome = run.state
        if flight is not None and flight.live:
            with contextlib.suppress(ValueError, OverflowError):
                began = parse_utc(str(flight.started_at))
                step_s = (datetime.now(timezone.utc) - began).total_seconds()
        elif run.state == "completed":
            step = step_s = None
    elif last and run.state == "failed":
        outcome, error = "failed", run.error
        culprit = next((r for r in failed if r.error == run.error), None)
        if flight is None and culprit is not None:
            step = culprit.key
    elif last and run.state == "crashed":
        outcome = "died"
    elif last and run.state == "cancelled":
        # Cancelled by its holder or by lil cancel; or asked to stop, and then it died.
        outcome = "cancelled" if run.status == "cancelled" else "died"
        error = run.error if run.status == "cancelled" else None
    elif last and run.state == "waiting":
        outcome = "waiting"
        step = next((p.key for p in run.pauses if p.status == "waiting"), None)
    elif run.error_is_earlier and run.attempts == 2:
        outcome, error = "failed", run.error  # the only earlier attempt: the run's error is its
    elif flight is not None:
        outcome = "interrupted"
    elif failed:
        outcome, error, step = "failed", failed[-1].error, failed[-1].key
    return AttemptInfo(
        a.attempt,
        a.pid,
        a.host,
        a.watch_id,
        a.started_at,
        a.watch_attempt,
        outcome,
        error,
        step,
        step_s,
        exit_event.get("exit_code") if exit_event else None,
        exit_event.get("signal") if exit_event else None,
    )


def resumer(store: Store, run: RunInfo) -> dict[str, Any] | None:
    """The ``lil watch`` that will restart a crashed run, or None when nothing will.

    A watcher session that started one of the run's attempts, whose last
    event is not a stop or a give-up (so it is starting the child, or waiting
    to restart it), and whose process is alive on this host (or on another
    host, where it cannot be checked): its last ``supervisor_events`` row.
    """
    rows = _dicts(
        store,
        "SELECT e.* FROM supervisor_events e WHERE e.id = (SELECT max(id) FROM supervisor_events "
        "WHERE watch_id = (SELECT watch_id FROM attempts WHERE run = ? AND watch_id IS NOT NULL "
        "ORDER BY attempt DESC LIMIT 1))",
        (run.id,),
    )
    if not rows or rows[0].get("event") in ("stop", "give_up"):
        return None
    last = rows[0]
    if last.get("host") == socket.gethostname():
        try:
            os.kill(int(last["watcher_pid"]), 0)
        except ProcessLookupError:
            return None
        except (PermissionError, TypeError, ValueError):
            pass  # alive, but another user's; or a damaged row: say what it says
    return last


# -- reset ---------------------------------------------------------------------------


def resumable_run(store: Store, goal: str) -> RunInfo | None:
    """The goal's newest unfinished unnamed run (whatever its input), or None.

    Named runs are reached by their name only: an unnamed opener never takes
    one, and neither does ``lil reset GOAL``.
    """
    if store.goal_table(goal) is None:
        raise RunNotFoundError(_no_goal(store, goal))
    rows = store.query(
        f"SELECT {_RUN_COLUMNS} FROM runs r JOIN goals g ON g.goal = r.goal "
        "WHERE r.goal = ? AND r.name IS NULL AND r.status IN ('running', 'failed', 'waiting') "
        "AND r.cancel_requested_at IS NULL ORDER BY r.rowid DESC LIMIT 1",
        (goal,),
    )
    return _infos(store, rows)[0] if rows else None


# -- export --------------------------------------------------------------------------


#: Ints longer than this many bits are exported as ``{"!int": "0x…"}``, as the
#: codec stores them: Python refuses to write an int of more than 4300 digits
#: as decimal text (a denial-of-service guard), hex text has no such limit.
#: The same bound as the codec's, so an int is tagged in export where it is
#: tagged in the file.
MAX_PLAIN_INT_BITS = 13_000


#: A strict encoder, used only to ask whether a value needs tagging: in C, it
#: raises ValueError at a nan, an infinity or an int too long for decimal text.
_STRICT = json.JSONEncoder(ensure_ascii=False, allow_nan=False, check_circular=False)


def json_ready(value: Any) -> Any:
    """``value`` (JSON builtins) with what strict JSON cannot hold tagged as the journal tags it.

    An int longer than :data:`MAX_PLAIN_INT_BITS` becomes ``{"!int": "0x…"}``
    and a nan or an infinity ``{"!float": "nan"}`` (``"inf"``, ``"-inf"``),
    so ``json.dumps(..., allow_nan=False)`` always succeeds and any strict
    reader (``jq``) parses the text. Everything else is returned as it is
    (the same object when there is nothing to tag).
    """
    try:
        _STRICT.encode(value)  # the common case: nothing to tag, found at C speed
    except (ValueError, TypeError, RecursionError):
        return _tagged(value)
    return value


def _tagged(value: Any) -> Any:
    t = type(value)
    if t is int:
        return {"!int": hex(value)} if value.bit_length() > MAX_PLAIN_INT_BITS else value
    if t is float:
        if math.isfinite(value):
            return value
        return {"!float": "nan" if value != value else ("inf" if value > 0 else "-inf")}
    if t is dict:
        return {k: _tagged(v) for k, v in value.items()}
    if t is list or t is tuple:
        return [_tagged(v) for v in value]
    return value


def decode_result(
    text: object, registry: codec.CodecRegistry | None = None
) -> tuple[Any, str | None]:
    """A stored result as ``(value, None)``, or ``(None, why)`` when the stored text is damaged.

    The value is decoded by the codec into plain JSON-ready values
    (:func:`json_ready`): types JSON has no word for (datetimes, UUIDs, sets,
    …) take their JSON form (msgspec's ``to_builtins``), an object it cannot
    convert its ``repr``. A result the codec cannot decode (a type this
    program has not registered) comes back as the stored JSON, tags and all.
    A text that is not JSON at all (a hand-edited or damaged row) is not a
    value: ``why`` says what is wrong with it, and the stored text is left
    for the caller to show as it is.
    """
    if text is None:
        return None, None
    if not isinstance(text, str):
        return None, f"the stored result is not JSON text but {type(text).__name__}"
    try:
        value = codec.decode(text, registry)
        tree = msgspec.to_builtins(value, enc_hook=repr, str_keys=True)
    except (DecodeError, TypeError, ValueError, RecursionError):
        try:
            tree = msgspec.json.decode(text)
        except (msgspec.DecodeError, RecursionError) as exc:
            return None, f"the stored result is not valid JSON ({exc})"
    return json_ready(tree), None


def decoded(text: object, registry: codec.CodecRegistry | None = None) -> Any:
    """:func:`decode_result`'s value: the stored result as JSON-ready values, None if damaged."""
    return decode_result(text, registry)[0]


def export_run(
    store: Store, run: RunDetail | RunInfo | str, registry: codec.CodecRegistry | None = None
) -> dict[str, Any]:
    """The run, its rows (results decoded), attempts and supervisor events as one dict.

    Each row (and the run) keeps the stored JSON text as ``result_json``
    beside the decoded ``result``; ``result_error`` is None, or says why a
    damaged stored text could not be decoded (``result`` is then None). The
    run's ``input`` is decoded the same way (``input_json``, ``input_error``).
    The dict is JSON-ready for a strict writer (:func:`json_ready`).
    """
    detail = run if isinstance(run, RunDetail) else show_run(store, run)
    # The recorded columns first (a REAL column may hold an infinity), then the
    # results, which decode_result has made JSON-ready already.
    out: dict[str, Any] = json_ready(detail.as_dict())
    stored = detail.result_json
    out["run"]["result"], out["run"]["result_error"] = decode_result(stored, registry)
    out["run"]["result_json"] = stored
    out["run"]["input"], out["run"]["input_error"] = decode_result(detail.run.input_json, registry)
    for r, d in zip(detail.rows, out["rows"], strict=True):
        d["result_json"] = d.pop("result")
        d["result"], d["result_error"] = decode_result(r.result, registry)
    return out


def export_records(
    store: Store, run: RunDetail | RunInfo | str, registry: codec.CodecRegistry | None = None
) -> Iterator[dict[str, Any]]:
    """:func:`export_run` as a stream of records, one per line of ``--format ndjson``.

    Each record has ``record``: ``run`` first, then a ``row`` per step/marker in
    journal order, an ``attempt`` each, a ``supervisor_event`` each.
    """
    data = export_run(store, run, registry)
    yield {"record": "run", **data["run"], "previous_steps": data["previous_steps"]}
    for kind, items in (
        ("row", data["rows"]),
        ("attempt", data["attempts"]),
        ("supervisor_event", data["supervisor_events"]),
    ):
        for item in items:
            yield {"record": kind, **item}


__all__ = [
    "STATES",
    "AttemptInfo",
    "RowInfo",
    "RunDetail",
    "RunInfo",
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
    "resumable_run",
    "run_rows",
    "show_run",
]
