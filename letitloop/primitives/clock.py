"""The time as the journal writes it: the default clock, integer microseconds, ISO-8601 UTC text.

A step's row holds its start as integer microseconds since the epoch
(:func:`utc_us`) and its duration; the goal's view shows them as the text
:func:`utc_iso` writes (goals.iso_sql), which runs and markers still store.
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


def utc_us(t: float) -> int:
    """Seconds since the epoch as integer microseconds, rounded as :func:`utc_iso` rounds.

    ``goals.iso_sql(utc_us(t))`` is exactly ``utc_iso(t)``.
    """
    # int(t) and round(x), by the methods they call: a step computes two of these,
    # and the builtins' dispatch is most of their cost (0.1 µs each).
    second = t.__trunc__()
    return second * 1_000_000 + ((t - second) * 1_000_000).__round__()


def iso_us(text: str) -> int:
    """ISO-8601 text with a UTC offset (what :func:`utc_iso` writes) as integer microseconds.

    Exact: ``iso_us(utc_iso(t)) == utc_us(t)``. Raises ValueError for text that is
    not such a time.
    """
    when = datetime.fromisoformat(text)
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    whole = when.replace(microsecond=0).timestamp()
    return int(whole) * 1_000_000 + when.microsecond


def now() -> float:
    """The default clock: seconds since the epoch."""
    return time.time()
