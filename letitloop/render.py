"""Text for people: aligned tables that fit the terminal, local times, durations, colours.

Used by the ``lil`` commands. Colour is added with ``click.style`` and
``click.echo`` strips it when the output is not a terminal, so pipes and
files get plain text.
"""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Sequence
from datetime import datetime

import click

from .inspection import parse_utc

_BREAKS = re.compile(r"\s*[\r\n]+\s*")

#: Width used when the output is not a terminal (a pipe, a file, a test).
DEFAULT_WIDTH = 80

#: Colour of each run state and row status.
COLOURS = {
    "running": "blue",
    "crashed": "yellow",
    "pending": "cyan",
    "completed": "green",
    "done": "green",
    "failed": "red",
}


def width() -> int:
    """Columns to fit: the terminal's width, or 80 when stdout is not a terminal."""
    if sys.stdout.isatty():
        return max(40, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)
    return DEFAULT_WIDTH


def colour(text: str, state: str) -> str:
    """``text`` coloured for ``state`` (stripped again by click.echo off a terminal)."""
    fg = COLOURS.get(state)
    return click.style(text, fg=fg) if fg else text


def local_time(iso: str | None, *, short: bool = False) -> str:
    """An ISO UTC timestamp in the local zone: ``2026-11-30 08:12:03 CET`` or ``11-30 08:12``."""
    if not iso:
        return "-"
    t = parse_utc(iso).astimezone()
    if short:
        return (
            t.strftime("%m-%d %H:%M") if t.year == datetime.now().year else t.strftime("%Y-%m-%d")
        )
    return t.strftime("%Y-%m-%d %H:%M:%S %Z").rstrip()


def duration(seconds: float | None) -> str:
    """A short human duration: ``850µs``, ``12ms``, ``4.2s``, ``3m05s``, ``2h10m``, ``3d04h``."""
    if seconds is None:
        return "-"
    s = max(0.0, seconds)
    if s < 0.001:
        return f"{s * 1e6:.0f}µs"
    if s < 1:
        return f"{s * 1000:.0f}ms"
    if s < 60:
        return f"{s:.1f}s"
    if s < 3600:
        return f"{int(s // 60)}m{int(s % 60):02d}s"
    if s < 86400:
        return f"{int(s // 3600)}h{int(s % 3600 // 60):02d}m"
    return f"{int(s // 86400)}d{int(s % 86400 // 3600):02d}h"


def clip(text: str, n: int) -> str:
    """``text`` on one line, cut to ``n`` characters with an ellipsis."""
    one = _BREAKS.sub(" ", text).replace("\t", " ").strip()
    if n <= 0:
        return ""
    return one if len(one) <= n else one[: max(0, n - 1)] + "…"


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    right: Sequence[int] = (),
    flex: Sequence[tuple[int, int]] = (),
    total: int | None = None,
    colours: Sequence[Sequence[str | None]] | None = None,
) -> list[str]:
    """Rows aligned under ``headers``, two spaces apart, fitting ``total`` columns.

    ``right`` lists right-aligned columns; ``flex`` lists ``(column, minimum)``
    in the order they give up width when the table is too wide (their cells
    are cut with an ellipsis). ``colours[r][c]`` names a state whose colour a
    cell takes.
    """
    limit = total if total is not None else width()
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    gap = 2
    over = sum(widths) + gap * (len(widths) - 1) - limit
    for col, minimum in flex:
        if over <= 0:
            break
        give = min(over, max(0, widths[col] - max(minimum, len(headers[col]))))
        widths[col] -= give
        over -= give

    def line(cells: Sequence[str], tint: Sequence[str | None] | None) -> str:
        out = []
        for i, cell in enumerate(cells):
            text = clip(cell, widths[i])
            last = i == len(cells) - 1
            if i in right:
                text = text.rjust(widths[i])
            elif not last:  # no trailing padding: lines end where their text does
                text = text.ljust(widths[i])
            if tint and tint[i]:
                text = colour(text, tint[i] or "")
            out.append(text)
        return (" " * gap).join(out).rstrip()

    lines = [click.style(line(headers, None), bold=True)]
    for r, row in enumerate(rows):
        lines.append(line(row, colours[r] if colours else None))
    return lines
