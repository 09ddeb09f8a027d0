"""What ``lil show`` prints about one run: its state, input, steps, result, tries and attempts.

Also ``lil show --step``: one row with its full result, error and traceback.
"""

from __future__ import annotations

import json
from typing import Any

from ..inspection import RowInfo, RunDetail, RunInfo, UsageTotals, decode_result
from ..integrity.encryption import encrypted
from ..primitives.budgets import ROW_PREFIX
from . import render
from .previews import preview
from .words import (
    at_least,
    ending,
    in_flight,
    pause_text,
    paused_in,
    since,
    until,
    usage_text,
    versions_text,
    watch_label,
)


def _seconds(ms: Any) -> float | None:
    """A row's ``duration_ms`` in seconds; None when it is missing or not a number."""
    return ms / 1000 if isinstance(ms, (int, float)) else None


def value_lines(label: str, text: str | None, full: bool, registry: Any = None) -> list[str]:
    """A run's input or result: one line (a preview on a terminal), or a block with --full."""
    if text is None:
        return []
    value, damage = decode_result(text, registry)
    if damage is not None and encrypted(text):
        return [f"{label:<9} {damage}"]
    if damage is not None:
        return [f"{label:<9} " + render.colour(f"damaged: {damage}", "failed")]
    doc = render.json_text(value, indent=2 if full else None)
    if full and "\n" in doc:
        return [f"{label}"] + ["  " + ln for ln in render.block(doc)]
    return [f"{label:<9} " + render.fit(doc, 10)]


def result_lines(text: str | None, registry: Any) -> list[str]:
    """A stored result for people: its decoded JSON, or what is wrong with a damaged one."""
    value, damage = decode_result(text, registry)
    if damage is not None:
        return [
            render.colour(f"damaged: {damage}", "failed"),
            f"stored text: {text}",  # shown as it is, made safe by render.echo
        ]
    return render.block(render.json_text(value))


def _state_line(run: RunInfo) -> str:
    state = render.colour(run.state, run.state)
    if run.state == "running":
        state += f" — held by pid {run.holder_pid} on {run.holder_host}"
    elif run.state == "crashed":
        died = run.died_in
        where = f" {in_flight(died)}" if died else ""
        if not died and run.pauses:
            where = f" {paused_in(run.pauses[0])}"
        state += f" — its last process (pid {run.holder_pid} on {run.holder_host}) died{where}"
    elif run.state in ("queued", "delayed") and run.queue is not None:  # given back
        why = f" ({run.queue.reason})" if run.queue.reason else ""
        state += f" — back in its queue, due {render.local_time(run.queue.not_before)}{why}"
    elif run.state == "pending":
        state += " — no process has opened it yet"  # a fresh fork
    elif run.state == "waiting":
        state += " — it stopped to wait for outside input; no process holds it"
    elif run.state == "cancelled" and run.status != "cancelled":
        state += f" — asked to stop, and its last process (pid {run.holder_pid}) died"
    if run.cancel_requested_at and run.state == "running":
        state += f" (asked to stop at {render.local_time(run.cancel_requested_at)})"
    plural = "" if run.attempts == 1 else "s"
    return f"state     {state}; {run.attempts} attempt{plural}"


def budget_text(detail: RunDetail) -> str:
    """``300 tokens, $0.50 (reached: 330 tokens, $0.03 spent)``: the run's last recorded
    budget (its ``letitloop:budget:…`` row, letitloop/primitives/budgets.py) and how far it got; ''
    when the run has none. Reservations not settled (calls in flight, or cut short by a
    dead process) count as spent, and are named: ``…, 300 tokens reserved and not settled``.
    A budget shared by several runs (its row's ``shared``: LangGraph's request) is named,
    and what follows is this run's part: ``1,500 tokens for request 1 of thread 't1' (…),
    shared with its other runs (this run's part: 118 tokens spent)``."""
    rows = [r for r in detail.rows if r.key.startswith(ROW_PREFIX) and r.result]
    if not rows:
        return ""
    try:
        limit = json.loads(rows[-1].result or "")
        tokens, cost = limit.get("tokens"), limit.get("cost")
    except (ValueError, AttributeError):
        return "(damaged)"
    spent = detail.usage
    held = [r for r in detail.reservations if r.settled_at is None]
    held_tokens = sum(r.tokens or 0 for r in held)
    held_cost = sum(r.cost or 0.0 for r in held)
    parts, reached = [], False
    if isinstance(tokens, int):
        parts.append(render.tokens(tokens))
        reached = reached or (spent.tokens or 0) + held_tokens >= tokens
    if isinstance(cost, (int, float)):
        parts.append(render.money(cost))
        reached = reached or (spent.cost or 0) + held_cost >= cost
    state = "reached" if reached else "within"
    said = usage_text(spent) if spent.steps else "nothing"
    text = f"{', '.join(parts)} ({state}: {said} spent"
    shared = limit.get("shared")
    if isinstance(shared, str):  # the runs' spend together is not this run's
        scope = render.one_line(shared)
        text = f"{', '.join(parts)} for {scope}, shared with its other runs (this run's part: {said} spent"  # fmt: skip  # noqa: E501
    if held:
        amount = render.tokens(held_tokens) + (f", {render.money(held_cost)}" if held_cost else "")
        text += f", {amount} reserved and not settled by {render.counted(len(held), 'call')}"
    return text + ")"


def reservation_lines(detail: RunDetail) -> list[str]:
    """``lil show``'s reservations: a line for the settled ones, one per call not settled."""
    if not detail.reservations:
        return []
    settled = [r for r in detail.reservations if r.settled_at is not None]
    reserved = sum(r.tokens or 0 for r in settled)
    used = sum(r.settled_tokens or 0 for r in settled)
    out = [
        f"reserved  {render.counted(len(detail.reservations), 'paid call')}: "
        f"{len(settled)} settled ({render.tokens(reserved)} reserved, "
        f"{render.tokens(used)} reported)"
    ]
    live = {f.key for f in detail.run.in_flight if f.live}
    held = [r for r in detail.reservations if r.settled_at is None]
    for r in held[:5]:
        if r.settled_at is None:
            why = "in flight" if r.key in live else "cut short, counted as spent"
            money = f", {render.money(r.cost)}" if r.cost is not None else ""
            out.append(
                f"{'':<9} {r.key}: {render.tokens(r.tokens or 0)}{money} reserved in attempt "
                f"{r.attempt}, not settled ({why})"
            )
    if len(held) > 5:
        out.append(f"{'':<9} and {render.counted(len(held) - 5, 'more call')} not settled")
    return out


def _row_cells(r: RowInfo, run: RunInfo, i: int) -> tuple[list[str], list[str | None]]:
    took = _seconds(r.duration_ms)
    status = r.status
    if r.status == "running":
        live = next((f for f in run.in_flight if f.key == r.key and f.live), None)
        if live is not None:
            took_text = render.duration(since(r.started_at)) + "…"
        else:
            status, took_text = "interrupted", "≥" + render.duration(took)
    elif r.status in ("sleeping", "waiting", "retrying") and run.state == "cancelled":
        status, took_text = "cancelled", render.duration(took)  # nothing resumes it now
    else:
        took_text = render.duration(took)
    if r.damaged:
        status = "damaged"  # fails its checksum: replaying it raises DamagedRowError
    preview = r.error if r.status == "failed" else r.result
    if encrypted(preview):
        preview = "(encrypted)"
    cells = [str(i), r.key, r.kind, status, str(r.attempt), took_text]
    cells.append(render.one_line(preview) if preview else "-")
    tint = "failed" if status in ("failed", "interrupted", "damaged") else status
    return cells, [None, None, None, tint, None, None, "failed" if r.status == "failed" else None]


def show_lines(detail: RunDetail, full: bool, registry: Any = None) -> list[str]:
    """``lil show``: the run, its steps, attempts and the supervisor's events around it."""
    run = detail.run
    out = []
    name = f"  (name {run.name})" if run.name else ""
    out.append(f"run       {run.id}{name}")
    out.append(f"goal      {run.goal}")
    if run.forked_from:
        out.append(f"forked    from run {run.forked_from} at step {run.forked_at!r}")
    out.extend(value_lines("input", run.input_json, full, registry))
    out.append(_state_line(run))
    versions = versions_text(detail.attempts)
    if versions is not None:
        out.append(f"versions  {render.fit(versions, 10)}")
    elif run.version is not None:
        out.append(f"version   {render.one_line(run.version)}")
    for i, f in enumerate(f for f in run.in_flight if f.live):
        out.append(f"{'now' if i == 0 else '':<9} {in_flight(f)} (attempt {f.attempt})")
    for p in run.pauses:
        out.append(f"{p.status:<9} {pause_text(p, run).split(' ', 1)[1]}")
    if run.cancel_reason and run.state in ("cancelled", "running"):
        out.append(f"cancel    {render.fit(run.cancel_reason, 10)}")
    out.append(f"started   {render.local_time(run.started_at)}")
    if run.finished_at:
        out.append(
            f"finished  {render.local_time(run.finished_at)}  "
            f"(took {render.duration(run.duration_s)})"
        )
    elif run.state == "running":
        out.append(f"running   for {render.duration(run.duration_s)}")
    else:
        out.append(
            f"last seen {render.local_time(run.last_seen_at or run.updated_at)}  "
            f"({render.duration(run.duration_s)} after start)"
        )
    if detail.previous_steps:
        out.append(
            f"progress  {run.steps_done} of {render.counted(detail.previous_steps, 'step')} "
            f"(the count of the previous completed run with the same input)"
        )
    else:
        out.append(f"progress  {render.counted(run.steps_done, 'step')} done")
    if detail.usage.steps:
        out.append(
            f"usage     {usage_text(detail.usage)} reported by "
            f"{render.counted(detail.usage.steps, 'step')}"
        )
        if detail.replayed.steps:
            out.append(
                f"replayed  {usage_text(detail.replayed)} saved: results attempts got back "
                f"from the journal instead of spending them again"
            )
    limit = budget_text(detail)
    if limit:
        out.append(f"budget    {limit}")
    out.extend(reservation_lines(detail))
    if run.status == "completed":
        out.extend(value_lines("result", detail.result_json, full, registry))
    if run.error:
        label = "error     " + ("(an earlier attempt) " if run.error_is_earlier else "")
        out.append(label + render.colour(render.fit(run.error, len(label)), "failed"))
    out.append("")
    if detail.rows:
        cells = [_row_cells(r, run, i) for i, r in enumerate(detail.rows, 1)]
        headers = ["#", "KEY", "KIND", "STATUS", "ATT", "TOOK", "RESULT"]
        right: tuple[int, ...] = (0, 4, 5)
        flex = [(6, 12)]
        if detail.usage.steps:  # what each step spent, before its result
            headers[6:6] = ["TOKENS", "COST"]
            right, flex = (0, 4, 5, 6, 7), [(8, 12)]
            for r, (c, tint) in zip(detail.rows, cells, strict=True):
                u = UsageTotals(r.input_tokens, r.output_tokens, r.cost)
                c[6:6] = ["-" if u.tokens is None else f"{u.tokens:,}", render.money(r.cost)]
                tint[6:6] = [None, None]
        out.extend(
            render.table(
                headers,
                [c for c, _ in cells],
                right=right,
                flex=flex,
                colours=[t for _, t in cells],
            )
        )
        if any(r.attempt == 0 for r in detail.rows):
            out.append("(attempt 0: copied from the run this one was forked from)")
    else:
        out.append("no steps or markers recorded yet")
    for r in detail.rows:
        if full and r.result is not None:
            out.append("")
            out.append(f"── {r.key} ──")
            out.extend(result_lines(r.result, registry))
        if r.status == "failed":
            out.append("")
            first = (r.error or "").split("\n")[0]
            out.append(
                render.colour(f"step {r.key!r} failed in attempt {r.attempt}: {first}", "failed")
            )
            if r.traceback:
                out.extend("  " + ln for ln in render.block(r.traceback.rstrip()))
    if detail.tries:
        out.append("")
        out.append("failed tries (and calls cut short by a crash, kept for their usage)")
        for t in detail.tries:
            then = (
                f"next try at {render.local_time(t.next_at)}"
                if t.next_at
                else "its process died during it"
                if t.ended == "crashed"
                else "no next try: the step raised"
            )
            when = render.local_time(t.failed_at)
            head = f"  {t.key}  try {t.number}  attempt {t.attempt}  {when}  "
            out.append(head + render.fit(f"{then}; {render.one_line(t.error)}", len(head)))
    out.append("")
    out.append("attempts")
    if not detail.attempts:
        out.append("  none")
    for a in detail.attempts:
        watch = watch_label(a)
        version = f"  version {render.one_line(a.version)}" if a.version is not None else ""
        head = (
            f"  {a.attempt:>3}  {render.local_time(a.started_at)}  pid {a.pid} on {a.host}"
            f"{version}{'  (' + watch + ')' if watch else ''}  — "
        )
        out.append(head + render.fit(ending(a), len(head)))
    out.append("supervisor restarts")
    if not detail.supervisor_events:
        out.append("  none")
    for e in detail.supervisor_events:
        bits = [render.local_time(e.get("at")), str(e.get("event")), f"attempt {e.get('attempt')}"]
        if e.get("exit_code") is not None:
            bits.append(f"exit {e['exit_code']}")
        if e.get("signal"):
            bits.append(str(e["signal"]))
        if e.get("message"):
            bits.append(render.one_line(str(e["message"])))
        out.append("  " + "  ".join(bits))
    return out


def row_of(detail: RunDetail, key: str) -> RowInfo:
    """The row of step ``key``; a LetItLoopError naming the run's keys if it has none."""
    from ..errors import RunNotFoundError

    row = next((r for r in detail.rows if r.key == key), None)
    if row is None:
        keys = ", ".join(r.key for r in detail.rows[:8]) or "none"
        raise RunNotFoundError(
            f"run {detail.run.id} recorded no step {preview(key)}; its keys: {keys}",
            run=detail.run.id,
        )
    return row


def step_record(detail: RunDetail, key: str) -> dict[str, Any]:
    """``lil show --step --json``: the row of step ``key`` as ``lil export`` gives it."""
    row = row_of(detail, key)
    out: dict[str, Any] = {"run": detail.run.id, **row.as_dict()}
    out["result_json"] = out.pop("result")
    out["result"], out["result_error"] = decode_result(row.result)
    return out


def step_lines(detail: RunDetail, key: str, registry: Any = None) -> list[str]:
    """``lil show --step``: one row with its full result, error and traceback."""
    row = row_of(detail, key)
    took = _seconds(row.duration_ms)
    status = row.status
    finished = f"{render.local_time(row.finished_at)}  (took {render.duration(took)})"
    if row.status == "running":
        live = next((f for f in detail.run.in_flight if f.key == key and f.live), None)
        if live is not None:
            finished = f"not yet: running for {render.duration(since(row.started_at))}"
        else:
            status = "interrupted"
            finished = f"never: its attempt ended {at_least(took)}"
    out = [
        f"step      {row.key}  ({row.kind}, #{detail.rows.index(row) + 1} in run {detail.run.id})",
        f"status    {render.colour(status, 'failed' if status == 'interrupted' else status)}, "
        f"attempt {row.attempt}"
        + (", DAMAGED: the row fails its checksum (docs/audit.md)" if row.damaged else ""),
        f"function  {row.fn or '-'}",
        f"started   {render.local_time(row.started_at)}",
        f"finished  {finished}",
    ]
    if row.wake_at:
        what = {"sleep": "wakes", "wait": "times out"}.get(row.kind, "next try")
        left = until(row.wake_at)
        if row.kind == "wait" and row.status == "waiting" and left is not None and left <= 0:
            what = "timed out"
        out.append(f"{what:<9} {render.local_time(row.wake_at)}")
    spent = UsageTotals(row.input_tokens, row.output_tokens, row.cost)
    if spent.tokens is not None or spent.cost is not None or row.model:
        model = f" ({row.model})" if row.model else ""
        out.append(f"usage     {usage_text(spent)}{model}")
    for t in (t for t in detail.tries if t.key == key):
        then = f"next try at {render.local_time(t.next_at)}" if t.next_at else "no next try"
        how = "cut short" if t.ended == "crashed" else "failed"
        out.append(
            f"try {t.number:<5} {how} {render.local_time(t.failed_at)} (attempt {t.attempt}); "
            f"{then}: {render.one_line(t.error)}"
        )
    if row.error:
        first, *rest = render.block(row.error.rstrip())
        out.append(f"error     {first}")
        out.extend(f"          {ln}" for ln in rest)
    if row.traceback:
        out.extend("  " + ln for ln in render.block(row.traceback.rstrip()))
    out.append("result")
    out.extend(result_lines(row.result, registry))
    return out
