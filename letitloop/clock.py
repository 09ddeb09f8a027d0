"""The time as the journal writes it: the default clock and ISO-8601 UTC text.

Every step writes two timestamps; :func:`utc_iso` formats them cheaply.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

#: The last whole second formatted by :func:`utc_iso`, and its text: every
#: step writes two timestamps, nearly always within the same second.
_iso_second: tuple[int, str] = (-1, "")


def utc_iso(t: float) -> str:
    """Seconds since the epoch as ISO-8601 UTC text with microseconds.

    The same text as ``datetime.fromtimestamp(t, timezone.utc).isoformat(
    timespec="microseconds")`` (``2026-11-30T08:12:03.123456+00:00``), at a
    fraction of the cost: the date and time of the second are formatted once
    per second, the microseconds each time.
    """
    global _iso_second
    second = int(t)
    micro = round((t - second) * 1_000_000)
    if micro >= 1_000_000 or t < 0:  # a carry into the next second, or before 1970
        return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="microseconds")
    cached = _iso_second
    if cached[0] != second:
        text = datetime.fromtimestamp(second, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
        cached = _iso_second = (second, text)
    return f"{cached[1]}.{micro:06d}+00:00"


def now() -> float:
    """The default clock: seconds since the epoch."""
    return time.time()
