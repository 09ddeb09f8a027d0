"""Which names letitloop accepts for goals, runs, steps and markers (:func:`check_name`)."""

from __future__ import annotations

import re

from ..errors import InvalidNameError

#: C0 and C1 control characters and DEL: they move terminals' cursors, set
#: window titles and clipboards (OSC 52); none belongs in a name. Patterns, not
#: compiled ones: a printable ASCII name (most) holds neither, and is let through
#: without them, so no program compiles them at import (issue 30).
_CONTROL = r"[\x00-\x1f\x7f-\x9f]"
#: Lone surrogates (what os.fsdecode makes of undecodable bytes): not text
#: SQLite can store as UTF-8.
_SURROGATE = r"[\ud800-\udfff]"
#: Goal and run names longer than this are almost certainly a bug (a payload
#: passed where a name was meant); the limit keeps tables and listings sane.
MAX_NAME_LENGTH = 512


def check_name(kind: str, name: object) -> str:
    """Return ``name`` if it is usable as a goal/run/step/marker name, else raise."""
    if not isinstance(name, str):
        raise InvalidNameError(
            f"{kind} name must be a string, got {type(name).__name__} {name!r}; "
            f"pass a text name such as 'customer_sync'"
        )
    if not name.strip():
        raise InvalidNameError(
            f"{kind} name must not be empty or blank, got {name!r}; pass a text name"
        )
    printable_ascii = name.isascii() and name.isprintable()  # no control, no surrogate
    if not printable_ascii and re.search(_CONTROL, name):
        raise InvalidNameError(
            f"{kind} name must not contain control characters, got {name!r}; "
            f"remove newlines, tabs, NUL, escape and other control characters from the name"
        )
    if not printable_ascii and re.search(_SURROGATE, name):
        raise InvalidNameError(
            f"{kind} name must be valid Unicode text, got {name!r} with a lone surrogate "
            f"(what os.fsdecode makes of bytes that are not UTF-8); decode the bytes it "
            f"came from with an explicit encoding, or use another name"
        )
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidNameError(
            f"{kind} name must be at most {MAX_NAME_LENGTH} characters, got {len(name)} "
            f"({name[:40]!r}…); use a shorter name"
        )
    return name
