"""One run in detail (:func:`show_run`): its rows in journal order, its failed tries, its
attempts and how each ended, what it consumed and replayed, and the ``lil watch`` that will
resume it (:func:`resumer`).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from ..stores.sqlite.store import Store
from .inspector import Inspector
from .inspector_detail import RunHistory
from .listing import get_run
from .records import AttemptInfo, RowInfo, RunDetail, RunInfo, TryInfo, UsageTotals
from .sqlite_inspector import as_inspector
from .state import plus
from .times import parse_utc


def run_rows(inspector: RunHistory | Store, run: RunInfo) -> list[RowInfo]:
    """The run's steps and markers in journal order."""
    return as_inspector(inspector).rows(run)


def show_run(inspector: Inspector | Store, run: RunInfo | str) -> RunDetail:
    """The run (an id or a RunInfo) with its rows, attempts and supervisor events."""
    journal = as_inspector(inspector)
    info = get_run(journal, run) if isinstance(run, str) else run
    rows = journal.rows(info)
    events = journal.supervisor_events(info.id)
    exits = {(e["watch_id"], e["child_pid"]): e for e in events if e.get("event") == "exit"}
    tries = journal.tries(info.id)
    attempts = []
    for attempt in journal.attempts(info.id):
        ended = exits.get((attempt.watch_id, attempt.pid)) if attempt.watch_id else None
        attempts.append(_with_ending(info, rows, tries, attempt, ended))
    previous_steps = journal.previous_steps(info)
    result = journal.result_json(info.id)
    spent = _totals([*rows, *tries])
    # Saved by replay: the rows some attempt really got back (step_replays), once each
    # time it did; not every row recorded before the last attempt.
    by_key = {r.key: r for r in rows if r.kind == "step"}
    got_back: list[RowInfo] = []
    for keys in journal.replays(info.id):
        with contextlib.suppress(ValueError, TypeError):  # a damaged record counts nothing
            got_back.extend(by_key[k] for k in keys if k in by_key)
    replayed = _totals(got_back)
    return RunDetail(
        info,
        rows,
        attempts,
        events,
        previous_steps,
        result,
        tries,
        spent,
        replayed,
        journal.reservations(info.id),
    )


def _totals(items: Iterable[RowInfo | TryInfo]) -> UsageTotals:
    """The usage of ``items`` summed (None where none reported any).

    ``steps`` counts the steps that reported some, once each however many of
    their tries did (a step's failed tries are items of their own).
    """
    inp = outp = cost = None
    keys = set()
    for r in items:
        if r.input_tokens is None and r.output_tokens is None and r.cost is None:
            continue
        keys.add(r.key)
        inp, outp, cost = (
            plus(inp, r.input_tokens),
            plus(outp, r.output_tokens),
            plus(cost, r.cost),
        )
    return UsageTotals(inp, outp, cost, len(keys))


def _with_ending(
    run: RunInfo,
    rows: list[RowInfo],
    tries: list[TryInfo],
    a: AttemptInfo,
    exit_event: dict[str, Any] | None,
) -> AttemptInfo:
    """``a`` with what the file tells of how it ended (see :class:`AttemptInfo`): what it
    recorded when it closed the run, else what it left."""
    flight = next((f for f in run.in_flight if f.attempt == a.attempt), None)
    failed = [
        r for r in rows if r.kind == "step" and r.status == "failed" and r.attempt == a.attempt
    ]
    outcome = error = step = None
    step_s: float | None = None
    if flight is not None:
        step, step_s = flight.key, flight.ran_s
    last = a.attempt == run.attempts
    if a.recorded:
        # How it closed the run, as it was known then (migration 0019); the step that
        # failed it: its failed row, or its failed try (a later attempt ran it again).
        outcome, error = a.outcome, a.error
        if outcome == "failed":
            failures: list[RowInfo | TryInfo] = [
                *failed,
                *(t for t in tries if t.attempt == a.attempt),
            ]
            culprit = next((f for f in failures if f.error == a.error), None)
            step = culprit.key if culprit is not None else None
        elif outcome == "waiting":
            step = _waited_for(run, rows, a, last)
        step_s = None
    elif last and run.state in ("running", "completed"):
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
    elif failures := [
        t for t in tries if t.attempt == a.attempt and t.ended == "failed" and t.next_at is None
    ]:
        # A step it failed in, which a later attempt ran again (its row is that one's).
        outcome, error, step = "failed", failures[-1].error, failures[-1].key
    elif not last:
        # A later attempt resumed the run and this one left no row that tells how it ended
        # (a SIGKILL writes nothing; its interrupted step's row was replaced when it ran
        # again): what is known is that it did not close the run.
        outcome = "resumed"
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
        a.version,
        a.ended_at,
        a.recorded,
    )


def _waited_for(run: RunInfo, rows: list[RowInfo], a: AttemptInfo, last: bool) -> str | None:
    """The wait attempt ``a`` stopped for (its outcome recorded ``waiting``): the run's wait
    in progress for its last attempt; for an earlier one, the first wait (in journal order)
    started before it ended and not answered by then (a run stops at its first wait with
    no value), else the last wait it started; None when its rows tell none."""
    if last:
        waiting = next((p.key for p in run.pauses if p.status == "waiting"), None)
        if waiting is not None:
            return waiting
    waits = [r for r in rows if r.kind == "wait"]
    with contextlib.suppress(ValueError, OverflowError, TypeError):
        ended = parse_utc(str(a.ended_at))
        for r in waits:
            began = r.started_at is not None and parse_utc(r.started_at) <= ended
            if began and (r.finished_at is None or parse_utc(r.finished_at) >= ended):
                return r.key
    return next((r.key for r in reversed(waits) if r.attempt == a.attempt), None)


def resumer(inspector: RunHistory | Store, run: RunInfo) -> dict[str, Any] | None:
    """The ``lil watch`` that will restart a crashed run, or None when nothing will.

    A watcher session that started one of the run's attempts, whose last
    event is not a stop or a give-up (so it is starting the child, or waiting
    to restart it), and whose process is alive on this host (or on another
    host, where it cannot be checked): its last ``supervisor_events`` row.
    """
    last = as_inspector(inspector).last_watcher_event(run.id)
    if last is None or last.get("event") in ("stop", "give_up"):
        return None
    if last.get("host") == socket.gethostname():
        try:
            os.kill(int(last["watcher_pid"]), 0)
        except ProcessLookupError:
            return None
        except (PermissionError, TypeError, ValueError):
            pass  # alive, but another user's; or a damaged row: say what it says
    return last
