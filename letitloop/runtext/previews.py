"""``preview``: a value a user gave, echoed in an error as a short preview, never whole.

An error names what it was given (``no run or goal 'x' in …``); a value can be
megabytes (an MCP client's argument, a run name made from a request), and an
error that echoes it whole is that size too. Every error that echoes a value
from outside goes through :func:`preview`.
"""

from __future__ import annotations

__all__ = ["PREVIEW_CHARS", "clip", "preview"]

#: How many characters of a value an error echoes: enough to recognise it.
PREVIEW_CHARS = 80


def preview(value: object, limit: int = PREVIEW_CHARS) -> str:
    """``repr(value)``, its first ``limit`` characters and its length when longer."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} characters)"


def clip(text: str, limit: int) -> str:
    """``text`` itself, or its first ``limit`` characters and how many there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} characters in all)"
