"""Time as ``lil`` reads it: the journal's timestamps (:func:`parse_utc`), and the
durations and points in time given on the command line (:func:`parse_duration`,
:func:`parse_since`).
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone
from typing import Any

from ..primitives.clock import utc_iso

#: The longest duration ``lil`` takes (``gc --older-than``, ``runs --since``).
#: No journal holds runs older than that, and it keeps "now minus the
#: duration" a date that Python's datetime can hold (it ends at year 1).
MAX_DURATION = timedelta(days=36_500)

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_utc(text: str) -> datetime:
    """An ISO-8601 timestamp as written by the journal, as an aware datetime."""
    t = datetime.fromisoformat(text)
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


class _OutOfRange(ValueError):
    """A duration or date of the right form, outside the range ``lil`` accepts."""


def parse_duration(text: str) -> timedelta:
    """``"30d"``, ``"12h"``, ``"1h30m"``, ``"90s"``, ``"2w"`` as a timedelta.

    Raises ValueError saying what was expected for anything else, or the
    accepted range for a duration over :data:`MAX_DURATION`.
    """
    s = text.strip().lower()
    pos, total = 0, 0.0
    for m in _DURATION_PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    if not s or pos != len(s):
        raise ValueError(
            f"expected a duration such as 30d, 12h, 1h30m, 90s or 2w "
            f"(units s, m, h, d, w), got {text!r}"
        )
    if total > MAX_DURATION.total_seconds():  # inf for "1e400" digits too
        raise _OutOfRange(
            f"expected a duration of at most {MAX_DURATION.days}d (100 years), got {text!r}"
        )
    return timedelta(seconds=total)


def parse_since(text: str, now: float | None = None) -> datetime:
    """A point in time: a duration ago (``"2h"``), or an ISO date/time (local if no zone).

    Raises ValueError saying what was expected, and the accepted range for a
    duration (:data:`MAX_DURATION`) or a date (years 1 to 9999) out of it.
    """
    try:
        ago: timedelta | None = parse_duration(text)
    except _OutOfRange:
        raise
    except ValueError:
        ago = None
    if ago is not None:
        return datetime.fromtimestamp(now if now is not None else time.time(), timezone.utc) - ago
    try:
        t = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"expected a duration ago (2h, 7d) or a date/time (2026-11-30, "
            f"2026-11-30T08:00), got {text!r}"
        ) from None
    try:
        t = (t if t.tzinfo else t.astimezone()).astimezone(timezone.utc)
        utc_iso(t.timestamp())  # the text the runs are compared with must exist too
    except (OverflowError, ValueError, OSError):
        raise _OutOfRange(
            f"expected a date/time between 0001-01-02 and 9999-12-30, got {text!r}"
        ) from None
    return t


def later(a: str | None, b: str | None) -> str | None:
    """The later of two ISO timestamps (one that is not a timestamp loses)."""
    try:
        return a if b is None or (a is not None and parse_utc(a) >= parse_utc(b)) else b
    except (TypeError, ValueError, OverflowError):
        return a if b is None else b


def plus_ms(iso: str | None, ms: Any) -> str | None:
    try:
        return utc_iso(parse_utc(str(iso)).timestamp() + float(ms) / 1000.0)
    except (TypeError, ValueError, OverflowError, OSError):
        return None
