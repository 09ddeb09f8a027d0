"""Time that skips, for tests: :class:`SkippingClock`, and the clock journals use by default.

A journal reads the time from its clock (``Journal(clock=...)``; given none,
:func:`default_clock`). Every pause of a run (a durable sleep, a wait's
timeout, a retry's backoff) waits until a time of that clock
(letitloop/primitives/timers.py); with a :class:`SkippingClock` it does not wait: the
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

import os
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


#: The environment variable that gives schedulers a test's clock: the path of a file
#: holding the time as seconds since the epoch (:class:`FileClock`). Read only by
#: ``scheduler.py`` (never by journals), and only when set: a test sets it for the
#: processes it starts, so that they all see the time it sets.
TEST_CLOCK_ENV = "LETITLOOP_TEST_CLOCK"


class FileClock:
    """A clock that many processes share: the time written in a file, frozen until rewritten.

    A test writes the time it wants (``FileClock.set(path, t)``, an atomic
    replace) and every process reading the file sees it: schedulers started
    with ``LETITLOOP_TEST_CLOCK=path`` tick on the test's time, not the
    real one. Reading a missing or unreadable file raises OSError/ValueError.
    """

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self) -> float:
        with open(self.path, encoding="ascii") as f:
            return float(f.read())

    @staticmethod
    def set(path: str, when: float) -> None:
        """Write ``when`` (seconds since the epoch) as the time of the clock at ``path``."""
        fresh = f"{path}.{os.getpid()}.tmp"
        with open(fresh, "w", encoding="ascii") as f:
            f.write(repr(float(when)))
        os.replace(fresh, path)  # readers see the old time or the new, never half of one

    def __repr__(self) -> str:
        return f"FileClock({self.path!r})"


def env_clock() -> Clock | None:
    """The clock ``LETITLOOP_TEST_CLOCK`` names (a :class:`FileClock`), or None when unset."""
    path = os.environ.get(TEST_CLOCK_ENV)
    return FileClock(path) if path else None
