"""One run in detail (:func:`show_run`): its rows in journal order, its failed tries, its
attempts and how each ended, what it consumed and replayed, and the ``lil watch`` that will
resume it (:func:`resumer`).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from ..errors import JournalFileError
from ..sqlerrors import DRIVER_ERRORS
from ..store import Store
from .listing import get_run
from .records import AttemptInfo, RowInfo, RunDetail, RunInfo, TryInfo, UsageTotals
from .state import plus, run_counts
from .times import parse_utc

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
        except DRIVER_ERRORS as exc:
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
    # The previous completed run of the same work: the same input (a @durable call's
    # arguments), so that a run for other arguments does not set the count to reach.
    prev = store.query(
        "SELECT id FROM runs WHERE goal = ? AND status = 'completed' AND id < ? "
        "AND input IS ? ORDER BY id DESC LIMIT 1",
        (info.goal, info.id, info.input_json),
    )
    previous_steps = None
    if prev:
        counts = run_counts(store, info.journal_table, [prev[0][0]])
        previous_steps = counts.get(prev[0][0], (0, 0, 0, None))[0]
    result = store.query("SELECT result FROM runs WHERE id = ?", (info.id,))
    tries = [
        TryInfo(*t)
        for t in store.query(
            "SELECT key, try, attempt, started_at, failed_at, error, next_at, input_tokens, "
            "output_tokens, cost, model, ended FROM step_tries WHERE run = ? "
            "ORDER BY failed_at, try",
            (info.id,),
        )
    ]
    spent = _totals([*rows, *tries])
    # Saved by replay: the rows some attempt really got back (step_replays), once each
    # time it did; not every row recorded before the last attempt.
    by_key = {r.key: r for r in rows if r.kind == "step"}
    got_back: list[RowInfo] = []
    for (keys,) in store.query("SELECT keys FROM step_replays WHERE run = ?", (info.id,)):
        with contextlib.suppress(ValueError, TypeError):  # a damaged record counts nothing
            got_back.extend(by_key[k] for k in json.loads(keys) if k in by_key)
    replayed = _totals(got_back)
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
