"""The words every part of ``lil``'s output shares about a run: times, steps in flight, pauses.

How long ago and how long until, a step in flight (``in step 'k' for 12.0s``),
a sleep, wait or retry, what a run spent, how an attempt ended, and a
command line to paste.
"""

from __future__ import annotations

import shlex
from datetime import datetime, timezone

from ..inspection import AttemptInfo, InFlight, Pause, RunInfo, UsageTotals, parse_utc
from . import render


def since(iso: str | None) -> float | None:
    """Seconds from ``iso`` to now; None when it is not a timestamp."""
    try:
        return (datetime.now(timezone.utc) - parse_utc(str(iso))).total_seconds()
    except (ValueError, OverflowError):
        return None


def at_least(seconds: float | None) -> str:
    """``after at least 3.0s`` (the heartbeat's figure is a lower bound)."""
    return f"after at least {render.duration(seconds)}" if seconds is not None else ""


def in_flight(f: InFlight) -> str:
    """``in step 'k' for 12.0s`` (live), ``in step 'k' after at least 3.0s`` (ended)."""
    if f.live:
        return f"in step {f.key!r} for {render.duration(since(f.started_at))}"
    return f"in step {f.key!r} {at_least(f.ran_s)}".rstrip()


def until(iso: str | None) -> float | None:
    """Seconds from now to ``iso``; None when it is not a timestamp."""
    left = since(iso)
    return None if left is None else -left


def paused_in(p: Pause) -> str:
    """``in sleep 'nap'``, ``between tries of 'fetch'``, ``in wait 'approval'``."""
    if p.status == "retrying":
        return f"between tries of {p.key!r}"
    return f"in {p.kind} {p.key!r}"


def resumes_then(p: Pause) -> str:
    """What the next attempt of a crashed run does with the pause its process died in."""
    due = render.local_time(p.until)
    overdue = (until(p.until) or 0.0) <= 0
    if p.status == "sleeping" and overdue:
        return f"its wake-up time {due} has passed; the next attempt goes on at once"
    if p.status == "sleeping":
        return f"it wakes at {due}; the next attempt sleeps only what remains"
    if p.status == "retrying":
        return f"next try due at {due}, made once the run resumes"
    return f"since {render.local_time(p.since)}"


def stopped_in(p: Pause) -> str:
    """Where a run whose process died was paused: ``in sleep 'nap' (it wakes at …; …)``."""
    return f"{paused_in(p)} ({resumes_then(p)})"


def pause_text(p: Pause, run: RunInfo) -> str:
    """``sleeping in 'nap' until 12:00:03 (1m02s left)``, ``waiting for 'approval' since …``."""
    if run.state == "crashed" and p.status == "sleeping":
        return f"sleeping in {p.key!r}, its process died: {resumes_then(p)}"
    if run.state == "crashed" and p.status == "retrying":
        error = f" ({render.one_line(p.error)})" if p.error else ""
        return f"retrying {p.key!r}: a try failed{error}; {resumes_then(p)} (its process died)"
    if p.status == "sleeping":
        return (
            f"sleeping in {p.key!r} until {render.local_time(p.until)} "
            f"({render.duration(until(p.until))} left)"
        )
    if p.status == "waiting":
        text = f"waiting for {p.key!r} since {render.local_time(p.since)}"
        left = until(p.until)
        if p.until and left is not None and left <= 0:
            return text + (
                f"; timed out at {render.local_time(p.until)}: it takes no value now, "
                f"and the run gets WaitTimeoutError there when it goes on"
            )
        if p.until:
            text += f" (times out at {render.local_time(p.until)})"
        return text + f"; send it: {quoted('lil', 'send', run.id, p.key)} VALUE"
    error = f" ({render.one_line(p.error)})" if p.error else ""
    return (
        f"retrying {p.key!r}: a try failed{error}; next try at {render.local_time(p.until)} "
        f"(in {render.duration(until(p.until))})"
    )


def usage_text(u: UsageTotals) -> str:
    """``12,345 tokens (9,000 in, 3,345 out), $0.42``; ``-`` when nothing was reported."""
    bits = []
    if u.tokens is not None:
        bits.append(
            f"{render.tokens(u.tokens)} ({u.input_tokens or 0:,} in, {u.output_tokens or 0:,} out)"
        )
    if u.cost is not None:
        bits.append(render.money(u.cost))
    return ", ".join(bits) or "-"


def watch_label(a: AttemptInfo) -> str:
    """``attempt 3 of lil watch 01J…`` for an attempt that ``lil watch`` started, else ''."""
    if not a.watch_id:
        return ""
    if a.watch_attempt is not None:
        return f"attempt {a.watch_attempt} of lil watch {a.watch_id}"
    return f"lil watch {a.watch_id}"


def versions_text(attempts: list[AttemptInfo]) -> str | None:
    """``attempt 3 ran version b7e1…, attempts 1–2 ran 41c0…`` (newest first) when the run's
    attempts ran more than one version of the code; None when they all ran one (or none)."""
    spans: list[tuple[int, int, str | None]] = []
    for a in attempts:
        if spans and spans[-1][2] == a.version and spans[-1][1] == a.attempt - 1:
            spans[-1] = (spans[-1][0], a.attempt, a.version)
        else:
            spans.append((a.attempt, a.attempt, a.version))
    if len({v for _, _, v in spans}) < 2:
        return None
    parts = []
    for first, last, version in reversed(spans):
        which = f"attempt {first}" if first == last else f"attempts {first}\u2013{last}"
        ran = f"ran version {version}" if version is not None else "ran an unknown version"
        parts.append(f"{which} {ran}")
    return ", ".join(parts)


def ending(a: AttemptInfo) -> str:
    """How an attempt ended, in words (see :class:`letitloop.inspection.AttemptInfo`)."""
    step = f" in step {a.step!r}" if a.step else ""
    if a.outcome == "running":
        text = "running" + (f"{step} for {render.duration(a.step_s)}" if a.step else "")
    elif a.outcome == "completed":
        text = "completed"
    elif a.outcome == "failed":
        text = f"failed{step}" + (f": {render.one_line(a.error)}" if a.error else "")
    elif a.outcome == "died":
        text = "died" + (f"{step} {at_least(a.step_s)}".rstrip() if a.step else "")
    elif a.outcome == "interrupted":
        text = f"interrupted{step} {at_least(a.step_s)}".rstrip()
    elif a.outcome == "cancelled":
        text = "cancelled" + (f": {render.one_line(a.error)}" if a.error else "")
    elif a.outcome == "waiting":
        text = "stopped to wait" + (f" for {a.step!r}" if a.step else "")
    elif a.outcome == "resumed":
        text = (
            "ended without closing the run, which the next attempt resumed "
            "(a kill leaves no record of its own)"
        )
    else:
        text = "ending not recorded"
    if a.exit_code is not None or a.signal:
        how = f"exit {a.exit_code}" if a.exit_code is not None else ""
        if a.signal:
            how = f"{how} ({a.signal})" if how else str(a.signal)
        text += f"; lil watch saw {how}"
    return text


def quoted(*words: str) -> str:
    """A command line to paste: each word shell-quoted."""
    return " ".join(shlex.quote(w) for w in words)
