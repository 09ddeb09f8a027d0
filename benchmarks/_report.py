"""Shared output for the benchmarks: a markdown table on stdout and in results/<name>.md."""

from __future__ import annotations

import os
import platform
import sqlite3
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def environment() -> str:
    """One line naming the machine and the versions the figures depend on."""
    from letitloop import __version__

    return (
        f"letitloop {__version__}, Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )


def median_of(repeats: int, fn: Callable[[], float]) -> float:
    """The median of ``repeats`` calls of ``fn``."""
    return statistics.median(fn() for _ in range(repeats))


def us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f} µs"


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A markdown table with aligned columns."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(cells[0], widths, strict=True)) + " |"]
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in cells[1:]:
        lines.append("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
    return "\n".join(lines)


def publish(name: str, title: str, command: str, body: str) -> None:
    """Print the report and write it to ``benchmarks/results/<name>.md``."""
    text = f"# {title}\n\n{environment()}\n\n`{command}`\n\n{body.rstrip()}\n"
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.md").write_text(text, encoding="utf-8")
