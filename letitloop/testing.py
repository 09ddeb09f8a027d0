"""Time that skips, for tests: :class:`SkippingClock`, and the clock journals use by default.

A journal reads the time from its clock (``Journal(clock=...)``; given none,
:func:`default_clock`). Every pause of a run (a durable sleep, a wait's
timeout, a retry's backoff) waits until a time of that clock
(letitloop/timers.py); with a :class:`SkippingClock` it does not wait: the
clock jumps to the pause's end at once. So a pipeline that sleeps an hour is
tested in milliseconds, and the journal records the hour (its ``wake_at``, its
durations) as if it had passed. The pytest plugin's ``letitloop_clock``
fixture makes one the default for a test (:func:`using_clock`).

A wait with no timeout still waits for a value sent (by ``lil send``, another
thread); a wait with a timeout times out at once unless its value is already
there: time skips when the run has nothing else to do, as in Temporal's
time-skipping test environment.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Clock = Callable[[], float]

#: The clock a Journal given none uses: ``time.time``, or a test's (:func:`using_clock`).
_default: list[Clock] = [time.time]


def default_clock() -> Clock:
    """The clock a ``Journal`` opened without ``clock=`` reads (``time.time`` but in a test)."""
    return _default[0]


@contextmanager
def using_clock(clock: Clock) -> Iterator[Clock]:
    """Make ``clock`` the default of the journals opened inside the block (and restore it)."""
    before = _default[0]
    _default[0] = clock
    try:
        yield clock
    finally:
        _default[0] = before


class SkippingClock:
    """Seconds since the epoch: the real time plus every pause skipped so far.

    Call it for the time. :meth:`skip_to` (what a pause calls) and
    :meth:`advance` move it forward; it never moves back, and between two
    skips it runs at the real rate. Thread-safe.
    """

    def __init__(self, start: float | None = None) -> None:
        #: Seconds added to the real time: the skips, and where ``start`` put it.
        self._offset = 0.0 if start is None else start - time.time()
        #: Seconds skipped by pauses and :meth:`advance`, in total.
        self.skipped = 0.0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return time.time() + self._offset

    def skip_to(self, when: float) -> None:
        """Move the clock to ``when`` if that is later; a pause that would wait until ``when``
        calls it instead of waiting."""
        with self._lock:
            ahead = when - (time.time() + self._offset)
            if ahead > 0:
                self._offset += ahead
                self.skipped += ahead

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward (a test's own jump; ``seconds`` >= 0)."""
        if not seconds >= 0:
            raise ValueError(f"advance() takes seconds >= 0, got {seconds!r}")
        with self._lock:
            self._offset += seconds
            self.skipped += seconds

    def __repr__(self) -> str:
        return f"SkippingClock(skipped={self.skipped:.3f}s)"
