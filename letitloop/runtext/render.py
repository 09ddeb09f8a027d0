"""Text for people: aligned tables that fit the terminal, local times, durations, colours.

Used by the ``lil`` commands. Text recorded in a journal (errors, tracebacks,
names, keys, results) comes from the user's code and from third parties (an
HTTP body inside an exception), so it may hold terminal control sequences:
:func:`safe` is the one place that makes text safe to print, and every line a
command prints passes through it (:func:`echo`, :func:`json_text`), whatever
was put into the line. Colour is therefore not written as escape codes while
a line is built: :func:`colour` leaves marks that only :func:`echo` turns into
``click.style`` codes, after the line was made safe; ``click.echo`` strips
them again when the output is not a terminal.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import click

from ..inspection import parse_utc

_BREAKS = re.compile(r"\s*[\r\n]+\s*")

#: Characters never printed as they are: the C0 controls (``\x00``-``\x1f``,
#: ESC among them), DEL and the C1 controls (``\x7f``-``\x9f``; U+009B is a
#: one-character CSI to many terminals), lone surrogates (not text: they
#: cannot even be written as UTF-8), the Unicode line and paragraph
#: separators (line breaks to some viewers, invisible to others) and the
#: bidirectional controls (they reorder what is shown: "Trojan Source").
_OTHERS = r"\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_UNSAFE_IN_LINE = re.compile(rf"[\x00-\x1f{_OTHERS}]")
#: The same, but newline and tab pass: for a block printed as several lines on purpose.
_UNSAFE_IN_BLOCK = re.compile(rf"[\x00-\x08\x0b-\x1f{_OTHERS}]")
_NAMED = {"\n": r"\n", "\t": r"\t", "\r": r"\r"}


def _visible(m: re.Match[str]) -> str:
    ch = m.group()
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x20 else f"\\u{code:04x}"


def safe(text: str, *, block: bool = False) -> str:
    """``text`` with every unsafe character as a visible escape: the one gate to a terminal.

    ESC becomes ``\\x1b``, U+009B ``\\u009b``, a newline ``\\n``; with
    ``block=True`` (a traceback, an indented JSON document printed on
    purpose) newline and tab stay. A C0 control is spelled ``\\xHH`` (or
    ``\\n``, ``\\t``, ``\\r``) and every other one ``\\uXXXX``, which is also
    a JSON escape: JSON text from :func:`json.dumps` (which escapes C0
    itself) stays valid JSON after this. A backslash already in the text is
    left alone, so ``\\x1b`` may have been four characters to begin with;
    what matters is that no control reaches the terminal. Idempotent.
    """
    if text.isprintable():  # no Cc, Cf, Cs, Zl or Zp: none of the above (C speed)
        return text
    return (_UNSAFE_IN_BLOCK if block else _UNSAFE_IN_LINE).sub(_visible, text)


#: Width assumed on a terminal whose size cannot be read.
DEFAULT_WIDTH = 80

#: Colour of each run state and row status.
COLOURS = {
    "running": "blue",
    "crashed": "yellow",
    "pending": "cyan",
    "completed": "green",
    "done": "green",
    "failed": "red",
    "waiting": "cyan",
    "sleeping": "cyan",
    "retrying": "yellow",
    "cancelled": "magenta",
}


def width() -> int | None:
    """Columns to fit on a terminal (``COLUMNS`` if set, else its real width); None off one.

    Off a terminal (a pipe, a file) nothing is cut: every value is printed
    whole, so that ``grep`` finds it and a key can be copied into the next
    command. On a terminal only previews (of results, errors) are cut to fit.
    """
    if sys.stdout.isatty():
        import shutil  # with bz2 and lzma: on a terminal only (~8 ms at every lil's start)

        return max(40, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)
    return None


#: Colour marks: a private-use character, a token drawn afresh by each process,
#: a style name. Only :func:`echo` turns them into escape codes, after the line
#: was made safe; recorded text cannot forge one, as it cannot know the token.
_TOKEN = os.urandom(8).hex()  # secrets.token_hex(8), without loading OpenSSL (~10 ms)
_MARK = re.compile("\ue000" + _TOKEN + r"(\w*)\ue001")
_END = f"\ue000{_TOKEN}\ue001"
_BOLD = "bold"


def colour(text: str, state: str) -> str:
    """``text`` marked to take the colour of ``state`` when :func:`echo` prints it."""
    if state not in COLOURS and state != _BOLD:
        return text
    return f"\ue000{_TOKEN}{state}\ue001{text}{_END}"


def _styled(m: re.Match[str]) -> str:
    name = m.group(1)
    if not name:
        return "\x1b[0m"
    if name == _BOLD:
        return click.style("", bold=True, reset=False)
    return click.style("", fg=COLOURS[name], reset=False)


def echo(lines: str | Iterable[str], *, err: bool = False) -> None:
    """Print lines for people, each made safe by :func:`safe`, then coloured where marked.

    A newline inside a line is printed as ``\\n``: print a multi-line text
    on purpose as :func:`block` lines. Colour codes are stripped again by
    ``click.echo`` when the stream (stdout, or stderr with ``err``) is not a
    terminal.
    """
    if isinstance(lines, str):
        lines = [lines]
    # One pass over the joined text; a line holding a newline or a tab is made
    # safe on its own first, so those escape too (safe is idempotent).
    text = safe("\n".join(safe(ln) if "\n" in ln or "\t" in ln else ln for ln in lines), block=True)
    click.echo(_MARK.sub(_styled, text) if "\ue000" in text else text, err=err)


def block(text: str) -> list[str]:
    """A multi-line text (a traceback, indented JSON) as lines for :func:`echo`, tabs expanded."""
    if "\r" not in text and "\t" not in text:
        return text.split("\n")  # indented JSON always, most tracebacks
    return [ln.expandtabs() for ln in re.split(r"\r?\n", text)]


def json_text(data: Any, *, indent: int | None = 2) -> str:
    """``data`` as strict JSON text that is safe to print (see :func:`safe`).

    Ints too long for decimal text and non-finite floats are tagged as the
    journal stores them (:func:`letitloop.inspection.json_ready`), so the text
    parses with any strict JSON reader; non-ASCII text stays as it is, but
    the characters :func:`safe` escapes are written as ``\\uXXXX``.
    """
    from ..inspection import json_ready

    try:  # most data is ready already (export_run's is): no walk over it then
        text = json.dumps(data, indent=indent, ensure_ascii=False, allow_nan=False, default=str)
    except ValueError:  # a nan, an infinity or an int too long for decimal text
        text = json.dumps(
            json_ready(data), indent=indent, ensure_ascii=False, allow_nan=False, default=str
        )
    return safe(text, block=True)


def echo_json(data: Any) -> None:
    """Print ``data`` as one indented JSON document (``--json``)."""
    click.echo(json_text(data))


def echo_jsonl(records: Iterable[Any]) -> None:
    """Print each record as JSON on a line of its own (``--jsonl``)."""
    for record in records:
        click.echo(json_text(record, indent=None))


def local_time(iso: str | None, *, short: bool = False) -> str:
    """An ISO UTC timestamp in the local zone: ``2026-11-30 08:12:03 CET`` or ``11-30 08:12``."""
    if not iso:
        return "-"
    try:
        t = parse_utc(iso).astimezone()
    except (TypeError, ValueError, OverflowError):
        return str(iso)  # not a timestamp (a hand-edited file): shown as it is, made safe

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


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 step``, ``2 steps``, ``0 steps``: a count with its noun in the right number."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def tokens(n: int | None) -> str:
    """``9,120 tokens``, or ``-`` when none were reported."""
    return "-" if n is None else f"{n:,} tokens"


def money(cost: float | None) -> str:
    """``$0.16`` (``$0.0012`` below a cent), or ``-`` when none was reported.

    The currency sign is only a sign: letitloop records whatever number the
    step reported, in whatever currency its caller uses.
    """
    if cost is None:
        return "-"
    if cost != 0 and abs(cost) < 0.01:
        return f"${cost:.4f}"
    return f"${cost:,.2f}"


def one_line(text: str) -> str:
    """``text`` with its line breaks and tabs folded into spaces: a preview's first step."""
    return _BREAKS.sub(" ", text).replace("\t", " ").strip()


def clip(text: str, n: int | None) -> str:
    """A preview of ``text``: on one line, made safe, cut to ``n`` characters with an ellipsis.

    ``n`` None (off a terminal: :func:`width`) cuts nothing.
    """
    return _cut(safe(one_line(text)), n)


def fit(text: str, used: int = 0) -> str:
    """:func:`clip` to what is left of the terminal's width after ``used`` columns."""
    w = width()
    return clip(text, None if w is None else max(10, w - used))


def _cut(text: str, n: int | None) -> str:
    if n is None:
        return text
    if n <= 0:
        return ""
    return text if len(text) <= n else text[: max(0, n - 1)] + "…"


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

    ``total`` defaults to :func:`width`: off a terminal (None) nothing is cut
    and each column is as wide as its widest cell. ``right`` lists
    right-aligned columns; ``flex`` lists ``(column, minimum)`` in the order
    they give up width when the table is too wide (their cells are cut with
    an ellipsis): list only previews there, never identifiers a user copies
    into the next command. ``colours[r][c]`` names a state whose colour a
    cell takes. A cell is printed as :func:`safe` makes it: a newline in a key
    shows as ``\\n``; fold a preview with :func:`one_line` first.
    """
    limit = total if total is not None else width()
    # Cells are made safe first, so the widths are those of what is printed.
    rows = [[safe(cell) for cell in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    gap = 2
    over = 0 if limit is None else sum(widths) + gap * (len(widths) - 1) - limit
    for col, minimum in flex:
        if over <= 0:
            break
        give = min(over, max(0, widths[col] - max(minimum, len(headers[col]))))
        widths[col] -= give
        over -= give

    def line(cells: Sequence[str], tint: Sequence[str | None] | None) -> str:
        out = []
        for i, cell in enumerate(cells):
            text = _cut(cell, widths[i])
            last = i == len(cells) - 1
            if i in right:
                text = text.rjust(widths[i])
            elif not last:  # no trailing padding: lines end where their text does
                text = text.ljust(widths[i])
            if tint and tint[i]:
                text = colour(text, tint[i] or "")
            out.append(text)
        return (" " * gap).join(out).rstrip()

    lines = [colour(line(headers, None), _BOLD)]
    for r, row in enumerate(rows):
        lines.append(line(row, colours[r] if colours else None))
    return lines
