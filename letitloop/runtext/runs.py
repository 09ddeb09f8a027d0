"""What ``lil runs`` prints: the table of runs, and the note under each run that needs one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..inspection import RunInfo
from . import render
from .words import in_flight, pause_text, stopped_in


def run_note(r: RunInfo) -> str | None:
    """The line under a run in ``lil runs``: what it is doing, how it stopped, where from."""
    bits: list[str] = []
    live = [f for f in r.in_flight if f.live]
    if r.queue is not None and r.attempts == 0:
        pass  # a queue's entry no run was opened for yet: queue_text says all
    elif r.state == "running" and live:
        bits.append(", ".join(in_flight(f) for f in live))
    elif r.state in ("running", "waiting") and r.pauses:
        bits.append(", ".join(pause_text(p, r) for p in r.pauses))
    elif r.state == "cancelled" and r.status != "cancelled":
        bits.append(
            f"asked to stop at {render.local_time(r.cancel_requested_at)}; its process died"
        )
    elif r.state == "crashed":
        died = r.died_in
        if died:
            bits.append(f"attempt {r.attempts} died {in_flight(died)}")
        elif r.pauses:
            bits.append(f"attempt {r.attempts} died {stopped_in(r.pauses[0])}")
        else:
            bits.append(f"attempt {r.attempts} died")
    elif r.state == "pending":
        bits.append("no process has opened it yet")
    if r.queue is not None:
        bits.insert(0, queue_text(r))
    if r.forked_from and r.state in ("pending", "running", "crashed"):
        bits.append(f"forked from {r.forked_from} at step {r.forked_at!r}")
    text = "; ".join(bits)
    if r.error and r.state != "completed":
        first = r.error.split("\n")[0]
        lead = "an earlier attempt failed: " if r.error_is_earlier else ""
        head = f"{text}; {lead}" if text else lead
        return "  └ " + head + render.fit(first, 4 + len(head))
    return "  └ " + text if text else None


def queue_text(r: RunInfo) -> str:
    """What ``lil runs`` says of a run's queue entry (``r.queue``)."""
    q = r.queue
    assert q is not None
    on = f"queue {q.queue}, priority {q.priority}, entry {q.entry}"
    if r.attempts > 0 and q.state in ("queued", "delayed"):  # given back to its queue
        why = f": {q.reason}" if q.reason else ""
        if q.state == "delayed":  # until then (a rate limit's reset, its child's end)
            return f"back in {on}: due {render.local_time(q.not_before)}{why}"
        return f"back in {on}: the next worker resumes it{why}"  # a drain, a child's end
    if r.state == "queued":
        return f"queued on {on}: no worker took it yet"
    if r.state == "delayed":
        return f"delayed on {on}: due {render.local_time(q.not_before)}"
    if r.attempts == 0 and r.state == "cancelled":
        return f"cancelled on {on} before a worker took it"
    if r.attempts == 0 and r.state == "crashed":
        return f"{on}: its worker died before it started; the next worker takes it over"
    if r.attempts == 0:
        return f"{on}: a worker took it, starting"
    return f"from {on}"


def _took(r: RunInfo) -> str:
    """The TOOK cell: ``-`` before any attempt; for a crashed run, a lower bound (``≥2ms``):
    the file tells when its process was last seen, not when it died."""
    if r.state in ("pending", "queued", "delayed") or (r.queue and r.attempts == 0):
        return "-"
    if r.state == "crashed":
        return "≥" + render.duration(r.duration_s)
    return render.duration(r.duration_s)


def runs_lines(found: list[RunInfo], more: str | None) -> list[str]:
    """``lil runs``: a table, a note under the runs that need one, and what was left out."""
    headers = ["RUN", "GOAL", "NAME", "STATE", "STEPS", "ATT", "VERSION", "STARTED", "TOOK", "COST"]
    rows = [
        [
            r.id,
            r.goal,
            r.name if r.name is not None else "-",
            r.state,
            str(r.steps_done),
            str(r.attempts),
            r.version if r.version is not None else "-",
            render.local_time(r.started_at, short=True),
            _took(r),
            render.money(r.cost),
        ]
        for r in found
    ]
    tints = [[None, None, None, r.state, None, None, None, None, None, None] for r in found]
    lines = render.table(headers, rows, right=(4, 5, 8, 9), colours=tints)
    out = [lines[0]]
    for r, text in zip(found, lines[1:], strict=True):
        out.append(text)
        note = run_note(r)
        if note:
            out.append(render.colour(note, "failed") if r.state == "failed" else note)
    if more:
        out.append(more)
    return out


def more_text(shown: int, offset: int, limit: int) -> str:
    """What ``lil runs`` left out when more runs match than ``--limit``, and how to see them."""
    return (
        f"(more runs match: {shown} shown from run {offset + 1}; "
        f"--offset {offset + limit} for the next page, --limit 0 for all)"
    )


def journal_line(path: Any) -> str:
    """The last line of ``lil runs``: which journal it read (an absolute path, or a store's URL)."""
    if isinstance(path, str) and "://" in path:
        return f"journal: {path}"
    return f"journal: {Path(path).absolute()}"


def no_runs_line(goal: str | None, path: Any) -> str:
    """``lil runs`` when no run matches."""
    return f"no runs{' of ' + goal if goal else ''} matching that in {path}"
