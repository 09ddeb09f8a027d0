"""``lil show --follow``'s loop: the run's state, its live steps, its streams' text as it
grows, until the run ends (or is left waiting, or crashed with no watcher)."""

from __future__ import annotations

import sys
import time
from typing import Any

import click


def follow_run(journal: Any, ref: str, run: Any, interval: float, as_json: bool) -> int:
    """``lil show --follow``: its exit status (0 completed, 1 failed or left crashed)."""
    from ..inspection import find_run, resumer, show_run
    from ..runtext import render
    from ..runtext.detail import show_lines
    from ..runtext.follow import StreamText, end_line, follow_line, follow_record, watcher_text

    tty = sys.stdout.isatty() and not as_json
    last: Any = None
    told: Any = None
    streams = StreamText(journal, as_json)
    try:
        while True:
            # Following a goal follows its newest run (a restart keeps the same run).
            run = find_run(journal, run.id if ref == run.id else ref)
            detail = show_run(journal, run)
            r = detail.run
            watcher = resumer(journal, r) if r.state in ("crashed", "pending") else None
            waiting = watcher_text(watcher) if watcher is not None else None
            if tty:
                lines = show_lines(detail, False) + ([waiting] if waiting else [])
                lines += streams.lines(r.id)
                if lines != last:  # redraw only what changed
                    last = lines
                    click.clear()
                    render.echo(lines)
            else:
                streams.poll(r.id)  # the streams' text as it grows, then what changed
                live = tuple(f.key for f in r.in_flight if f.live)
                paused = tuple((p.key, p.status) for p in r.pauses)
                seen = (
                    r.id,
                    r.state,
                    r.steps_done,
                    r.steps_failed,
                    r.markers,
                    live,
                    waiting,
                    paused,
                )
                if seen != last:
                    last = seen
                    streams.end_line()
                    if as_json:
                        click.echo(render.json_text(follow_record(detail, watcher), indent=None))
                    else:
                        render.echo(follow_line(detail))
                        if waiting and waiting != told:
                            told = waiting
                            render.echo(f"{r.id}  {waiting}")
            if r.state == "completed":
                return 0
            if r.state in ("failed", "cancelled", "waiting") or (
                r.state in ("crashed", "pending") and watcher is None
            ):
                if not as_json:
                    streams.end_line()
                    render.echo(end_line(r))
                return 1
            time.sleep(interval)
    except KeyboardInterrupt:
        return 130
