"""Step retries: :class:`RetryPolicy`, and every failed try recorded so a backoff survives a crash.

``j.step(name, fn, *args, retry=RetryPolicy(...))`` (or a journal's default
``Journal(..., retry=...)``) calls ``fn`` again when it raises, after an
exponential backoff with jitter, up to ``max_attempts`` tries. Each failed
try is a row of ``step_tries`` (its number, error, start, failure and the
time its next try is due), written in the same transaction as the step's
own row, which says ``retrying`` with ``wake_at`` = the next try's time.
So a process killed during the backoff resumes it where it was: the next
attempt waits only what remains of it, then makes the next try, and counts
the tries already made.

Every paid call counts (see costs.py): a failed try keeps its usage on its
``step_tries`` row, with its error and traceback. So does a call that raised
without a retry policy: it is one try (``record_raised``), written when it
raised, so a later attempt's ``done`` row over the step's ``failed`` one hides
nothing. A call cut short by a crash that had reported usage keeps it on its
row until the next attempt claims the run, which moves it to ``step_tries``
(``ended`` ``'crashed'``; ``'failed'`` for a ``failed`` row of a file from
before migration 0019) before a new call overwrites the row.

Tries are numbered over the step's whole life in the run (``1, 2, 3, …``):
a key never depends on timing. A series of tries ends when one succeeds,
or when a failure is not retried (the budget is spent, or the exception is
not one to retry): that last failure has no next time, the step raises, and
a later attempt of the run starts a new series with a full budget. A try cut
short by a crash is not a failed try: it does not count against the budget,
and is recorded (as ``crashed``) only when it reported usage.

This module is the one owner of ``Journal._tries``, the run's recorded tries
as this attempt knows them (:data:`Tries`): read once per attempt by the
first step with a retry policy (:func:`history`; none to read for a run the
attempt created), then updated by each failed try. Thread rules: written by
the thread or task that holds the step's key (a try of one key is never
recorded by two threads at once), read by any; the ``dict`` is updated one
key at a time, with no lock (atomic under the GIL). Two threads reading the
history at once read it twice, and keep one.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..errors import LetItLoopError, error_text, traceback_text
from ..identity.keys import NEST
from ..primitives import timers
from ..primitives.clock import utc_iso
from ..primitives.costs import NO_USAGE
from . import replay
from .ownership import refusal

if TYPE_CHECKING:
    from ..stores.storage import Storage
    from ..stores.storage_calls import CallRows
    from .journal import Journal

ExceptionTypes = type[BaseException] | tuple[type[BaseException], ...]


@dataclass(frozen=True)
class RetryPolicy:
    """How a step that raises is tried again: ``j.step(name, fn, ..., retry=RetryPolicy(...))``.

    The defaults try 3 times in all, waiting about 1 s, then 2 s. The backoff
    before try ``n + 1`` is ``initial_backoff * multiplier ** (n - 1)``, at
    most ``max_backoff``, spread by ``jitter`` (0.1: ±10 %). An exception is
    retried if it is an instance of ``retry_on`` and not of ``never_retry``;
    letitloop's own errors (a cancel, a mismatch, a full disk) never are.
    ``max_attempts=None`` tries until the step succeeds. Raises LetItLoopError
    at construction for a setting out of range.
    """

    #: Tries in all, the first one included (1: no retry); None for no limit.
    max_attempts: int | None = 3
    #: Seconds before the second try.
    initial_backoff: float = 1.0
    #: The longest backoff, whatever the multiplier says.
    max_backoff: float = 60.0
    #: Each backoff is this many times the one before.
    multiplier: float = 2.0
    #: Random spread of each backoff, as a fraction (0.1 = ±10 %): retries of many
    #: runs that failed together do not all come back at the same instant.
    jitter: float = 0.1
    #: Exception types that are retried.
    retry_on: ExceptionTypes = (Exception,)
    #: Exception types that are never retried, even when ``retry_on`` matches them.
    never_retry: ExceptionTypes = ()

    def __post_init__(self) -> None:
        def bad(name: str, expected: str, value: object) -> LetItLoopError:
            return LetItLoopError(f"RetryPolicy({name}=...) must be {expected}, got {value!r}")

        n = self.max_attempts
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise bad("max_attempts", "a whole number >= 1, or None for no limit", n)
        for name in ("initial_backoff", "max_backoff"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise bad(name, "a number of seconds >= 0", value)
            if not 0 <= value < math.inf:
                raise bad(name, "a finite number of seconds >= 0", value)
        m = self.multiplier
        if isinstance(m, bool) or not isinstance(m, (int, float)) or not 1 <= m < math.inf:
            raise bad("multiplier", "a number >= 1", m)
        j = self.jitter
        if isinstance(j, bool) or not isinstance(j, (int, float)) or not 0 <= j <= 1:
            raise bad("jitter", "a fraction between 0 and 1", j)
        for name in ("retry_on", "never_retry"):
            value = getattr(self, name)
            types = value if isinstance(value, tuple) else (value,)
            if not all(isinstance(t, type) and issubclass(t, BaseException) for t in types):
                raise bad(name, "an exception class or a tuple of them", value)
            object.__setattr__(self, name, types)

    def retries(self, exc: BaseException) -> bool:
        """Whether ``exc`` is one to try again (its type; not the budget)."""
        if isinstance(exc, LetItLoopError):
            return False
        return isinstance(exc, self.retry_on) and not isinstance(exc, self.never_retry)

    def backoff(self, failed: int, rng: Callable[[], float] | None = None) -> float:
        """Seconds to wait after the ``failed``-th failed try of a series (1-based)."""
        try:
            delay = self.initial_backoff * self.multiplier ** (failed - 1)
        except OverflowError:
            delay = self.max_backoff
        delay = min(delay, self.max_backoff)
        if self.jitter and delay:
            if rng is None:
                import random  # only when a jittered backoff is due

                rng = random.random
            delay = max(0.0, delay * (1 + self.jitter * (2 * rng() - 1)))
        return delay


# -- the step's tries, in the file ------------------------------------------------

#: Per step key of the run: (the last try's number, failed tries of the current
#: series, when its next try is due or None when the series ended).
History = dict[str, tuple[int, int, float | None]]

#: ``Journal._tries``: the History and the (run id, attempt) it was read for.
Tries = tuple[str, int, History]


def _parse(iso: str | None) -> float | None:
    if iso is None:
        return None
    try:
        return datetime.fromisoformat(iso).timestamp()
    except (TypeError, ValueError):
        return None


#: What a step does when one of its tries failed (``budgets.release``: the try's calls'
#: reservations settled): handed down by the step, called with its journal, key and error.
TryEnded = Callable[["Journal", str, BaseException | None], None]


def held(j: Journal, store: Storage) -> Storage:
    """``store``, the one the step was handed, while ``j`` still writes through it; else the
    refusal of a journal closed meanwhile, or of a forked child's copy (ownership.py)."""
    if j.store is not store:
        raise refusal(j)
    return store


def history(j: Journal, store: Storage) -> History:
    """The run's recorded tries, read once per attempt (none to read for a run just made)."""
    known = j._tries
    if known is not None and known[0] == j.run_id and known[1] == j.attempt:
        return known[2]
    out: History = {}
    recorded = [] if j._opened.created else held(j, store).step_tries(j.run_id)
    for key, n, next_at, ended in recorded:
        _, failed, due = out.get(key, (0, 0, None))
        if ended == "crashed":
            # A call its process did not survive (kept for its usage) takes a
            # number, but is no failed try: the series goes on as it was.
            out[key] = (n, failed, due)
            continue
        due = _parse(next_at)
        # A try without a next time ended its series: the next try starts a new one.
        out[key] = (n, failed + 1 if due is not None else 0, due)
    j._tries = (j.run_id, j.attempt, out)
    return out


class _Tries:
    """One step's tries in this attempt: what was recorded before, and each new failure."""

    def __init__(
        self,
        j: Journal,
        store: Storage,
        key: str,
        fn_name: str,
        fp: str,
        first: bool = False,
        ended: TryEnded | None = None,
    ) -> None:
        self.j, self.store, self.key, self.fn_name, self.fp = j, store, key, fn_name, fp
        self.ended = ended
        # Refused when closed, or in a forked child's copy of its parent's journal.
        self.storage: CallRows = held(j, store)
        self.tries = history(j, store)
        self.last, self.failed, self.due = self.tries.get(key, (0, 0, None))
        #: When the try in progress began: for the step's first try of this
        #: attempt (``first``), when the step began (its in-flight entry).
        flight = j._flight.calls.get(key) if first else None
        self.started = flight[0] if flight is not None else j.clock()

    def begin(self) -> None:
        """A try starts now: the in-flight watcher shows it as running after a second."""
        self.started = self.j.clock()
        self.j._flight.begin(self.key, self.started, self.fn_name, self.fp)

    def failed_try(self, exc: Exception, policy: RetryPolicy) -> float | None:
        """Record the failed try; return when the next one is due, or None: raise ``exc``."""
        j = self.j
        self.last += 1
        self.failed += 1
        again = policy.retries(exc) and (
            policy.max_attempts is None or self.failed < policy.max_attempts
        )
        now = j.clock()
        due = now + policy.backoff(self.failed) if again else None
        u = j._flight.take_usage(self.key) if j._flight.usage else None
        spent = u.columns() if u is not None else NO_USAGE
        if self.ended is not None:  # the try's reservations settled (the step's budgets.py)
            self.ended(j, self.key, exc)
        error, tb = error_text(exc), traceback_text(exc)
        if j._cipher is not None:  # encryption at rest (letitloop/integrity/encryption.py)
            error = j._cipher.seal(error, j.run_id, self.key, "error")
            tb = j._cipher.seal(tb, j.run_id, self.key, "traceback")
        try_row = (
            j.run_id,
            self.key,
            self.last,
            j.attempt,
            utc_iso(self.started),
            utc_iso(now),
            error,
            None if due is None else utc_iso(due),
            *spent,
            tb,
        )
        retrying = None
        if due is not None:
            retrying = (
                j.run_id,
                self.key,
                self.fn_name,
                utc_iso(self.started),
                utc_iso(now),
                (now - self.started) * 1000.0,
                j.attempt,
                error,
                tb,
                self.fp,
                utc_iso(due),
            )
        self.storage.record_try(try_row, retrying)
        self.tries[self.key] = (self.last, self.failed if due is not None else 0, due)
        if due is not None:
            # No 'running' row over the 'retrying' one while the backoff lasts.
            j._flight.end(self.key)
        return due


def call(
    j: Journal,
    store: Storage,
    key: str,
    fn_name: str,
    fp: str,
    policy: RetryPolicy,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    ended: TryEnded | None = None,
) -> Any:
    """``fn(*args, **kwargs)`` tried as ``policy`` says; the last failure propagates.

    A backoff left by an earlier attempt is waited out first (what remains of
    it). A cancel during a backoff raises RunCancelledError. Until a try
    fails, this costs a dict lookup: nothing is read or written. Everything
    a try needs is handed down by the step: its ``store`` (refused once the
    journal no longer writes through it) and what it does when a try failed
    (``ended``).
    """
    t = _resumed(j, store, key, fn_name, fp, ended)
    if t is not None and t.due is not None:
        j._flight.end(key)
        timers.pause(j, store, t.due)
        t.begin()
    while True:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            if t is None:
                t = _Tries(j, store, key, fn_name, fp, True, ended)
            due = t.failed_try(exc, policy)
            if due is None:
                raise
        timers.pause(j, store, due)
        reopen_children(j, store, key)
        t.begin()


#: How a step without a retry policy is tried: once (its failure is a try all the same).
ONCE = RetryPolicy(max_attempts=1)


def record_raised(
    j: Journal, store: Storage, key: str, fn_name: str, fp: str, exc: Exception
) -> None:
    """A step without a retry policy raised: its call is a failed try (error, traceback,
    usage), as a retry policy's last one is, so a later attempt's ``done`` row over the
    step's ``failed`` one hides nothing. Written before the ``failed`` row, which then
    carries no usage (the try does). The step's end settles its reservations (steps.py)."""
    _Tries(j, store, key, fn_name, fp, True).failed_try(exc, ONCE)


async def async_record_raised(
    j: Journal, store: Storage, key: str, fn_name: str, fp: str, exc: Exception
) -> None:
    """:func:`record_raised` for ``async_step``: the try read on the loop, written in a
    worker thread (the loop never waits for a write lock)."""
    import asyncio

    t = _Tries(j, store, key, fn_name, fp, True)
    await asyncio.to_thread(t.failed_try, exc, ONCE)


def reopen_children(j: Journal, store: Storage, key: str) -> None:
    """Before step ``key`` is tried again: its children meet the journal as after a crash
    (``replay.reopen_children``); a child that failed is called again under its key, and
    its call's usage is kept (moved to its tries)."""
    storage = held(j, store)
    storage.keep_left_usage(j.run_id, j.clock(), key + NEST)
    replay.reopen_children(j, storage, key)


def _resumed(
    j: Journal, store: Storage, key: str, fn_name: str, fp: str, ended: TryEnded | None
) -> _Tries | None:
    """The step's tries when earlier attempts recorded some; None (the common case) if not."""
    return _Tries(j, store, key, fn_name, fp, False, ended) if key in history(j, store) else None


async def async_call(
    j: Journal,
    store: Storage,
    key: str,
    fn_name: str,
    fp: str,
    policy: RetryPolicy,
    invoke: Callable[[], Awaitable[Any]],
    ended: TryEnded | None = None,
) -> Any:
    """:func:`call` for ``async_step``: ``invoke()`` makes one try; backoffs on the loop.

    A failed try's rows are written in a worker thread (the loop never waits
    for a write lock); the tries already recorded are read on the loop, once.
    """
    import asyncio

    t = _resumed(j, store, key, fn_name, fp, ended)
    if t is not None and t.due is not None:
        j._flight.end(key)
        await timers.async_pause(j, store, t.due)
        t.begin()
    while True:
        try:
            return await invoke()
        except Exception as exc:
            if t is None:
                t = _Tries(j, store, key, fn_name, fp, True, ended)
            due = await asyncio.to_thread(t.failed_try, exc, policy)
            if due is None:
                raise
        await timers.async_pause(j, store, due)
        reopen_children(j, store, key)
        t.begin()
