"""A stored value as a web page shows it: text with its control characters visible
(:func:`shown`), codec JSON decoded and indented (:func:`pretty`, :func:`full`), and cut to
a size a browser shows at once (:class:`Value`, :data:`PREVIEW_CHARS`). No HTML here: the
templates escape everything."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..inspection import decode_result
from ..runtext import render

#: The most characters of one value (a result, an input, a traceback) a page shows inline;
#: the rest is one click away on the step's own page. A 5 MB result would otherwise make a
#: 10 MB page the browser lays out before anything else can be read.
PREVIEW_CHARS = 4_000


def shown(value: Any) -> str:
    """Recorded text made safe to show: control characters, lone surrogates and bidi controls
    as visible escapes (:func:`letitloop.runtext.render.safe`), newlines kept. HTML escaping is the
    templates' (autoescape); this is the other half, so every value gets both."""
    return render.safe(value if isinstance(value, str) else str(value), block=True)


@dataclass
class Value:
    """A value as a page shows it: its text (pretty JSON, or what is wrong with it), cut."""

    text: str
    cut: int = 0
    """Characters left out (0: whole)."""
    damaged: str | None = None


def pretty(stored: str | None) -> Value | None:
    """A stored codec JSON text decoded and indented, cut to :data:`PREVIEW_CHARS`."""
    if stored is None:
        return None
    if len(stored) > 4 * PREVIEW_CHARS:
        # Decoding and indenting 5 MB to show its first 4 KB is wasted work: show the stored
        # text's start instead, as stored (still the journal's JSON).
        return Value(stored[:PREVIEW_CHARS], len(stored) - PREVIEW_CHARS)
    value, damage = decode_result(stored)
    if damage is not None:
        return Value(stored[:PREVIEW_CHARS], max(0, len(stored) - PREVIEW_CHARS), damage)
    return clipped(render.json_text(value))


def full(stored: str | None) -> Value | None:
    """A stored value decoded and indented, whole (a step's own page)."""
    if stored is None:
        return None
    value, damage = decode_result(stored)
    if damage is not None:
        return Value(stored, 0, damage)
    return Value(render.json_text(value))


def clipped(text: str, limit: int = PREVIEW_CHARS) -> Value:
    if len(text) <= limit:
        return Value(text)
    return Value(text[:limit], len(text) - limit)
