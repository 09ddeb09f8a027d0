"""What ``lil show --follow`` prints while it watches a run: a line per change, how it ended."""

from __future__ import annotations

from datetime import datetime

from .. import render
from ..inspection import RunDetail


def follow_line(detail: RunDetail) -> str:
    """One line of ``lil show --follow`` off a terminal: the time, the run, where it is."""
    r = detail.run
    of = f"/{detail.previous_steps}" if detail.previous_steps else ""
    done = [row.key for row in detail.rows if row.status == "done"]
    bits = [
        datetime.now().strftime("%H:%M:%S"),
        r.id,
        render.colour(r.state, r.state),
        f"{r.steps_done}{of} steps",
        f"last: {done[-1] if done else '-'}",
    ]
    live = [f for f in r.in_flight if f.live]
    if live:
        now = (f"{f.key} (since {render.local_time(f.started_at)})" for f in live)
        bits.append("now: " + ", ".join(now))
    for p in r.pauses:
        bits.append(f"{p.status}: {p.key} (until {render.local_time(p.until)})")
    return "  ".join(bits)
