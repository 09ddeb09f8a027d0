"""A named run's generations: which run a name means now, and when it means a new one.

A run name is a series of runs, its **generations**. The first is the run
named ``name`` itself, so every run recorded before generations existed keeps
its meaning; the later ones are named ``name~2``, ``name~3``, ... A named
opener (``Journal(goal, run=name)``) gets the name's newest generation:

- unfinished (running, crashed, failed, waiting): resumed, or waited for
  while its holder lives;
- completed: replayed, unless it completed longer than the opener's
  ``reuse`` window before the opener asked (``fresh=True``, or ``reuse=0``:
  completed at all when the opener looked). Then the opener starts the next
  generation, or, when another opener started it first, waits for that one
  and replays or resumes it.

Whether the newest generation is stale is judged from what the opener read
before waiting for any holder: an answer completed while it waited
(a second copy of the same request) is handed back, never started again.

A name that ends in ``~`` and digits names one generation exactly (``lil
show`` lists ``report~2``; ``Journal(run="report~2")`` reopens that one and
never moves on); ``reuse=`` and ``fresh=`` are refused with it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import timedelta

from ..errors import MisuseError
from ..primitives.clock import iso_us, utc_us

#: Between a run name and its generation's number: ``report~2``. Not a character a
#: name is likely to end with followed by digits (a version, ``v1.2``, is not cut).
SEPARATOR = "~"

#: A generation's name, status and ``finished_at`` (ISO text, None while unfinished).
Row = tuple[str, str, "str | None"]


def prefix(name: str) -> str:
    """What the names of ``name``'s later generations start with (``name~``)."""
    return name + SEPARATOR


def named(name: str, number: int) -> str:
    """The name of generation ``number`` of ``name`` (1: ``name`` itself)."""
    return name if number == 1 else f"{name}{SEPARATOR}{number}"


def number_of(candidate: str, name: str) -> int | None:
    """Which generation of ``name`` the run named ``candidate`` is; None: none of them."""
    if candidate == name:
        return 1
    if not candidate.startswith(name + SEPARATOR):
        return None
    digits = candidate[len(name) + 1 :]
    if not (digits.isascii() and digits.isdigit()) or digits[0] == "0" or digits == "1":
        return None
    return int(digits)


def is_generation(name: str) -> bool:
    """Whether ``name`` names one generation of another name (``report~2``)."""
    base, separator, _ = name.rpartition(SEPARATOR)
    return bool(base and separator) and number_of(name, base) not in (None, 1)


def newest(rows: Iterable[Row], name: str) -> tuple[int, Row] | None:
    """The newest generation of ``name`` among ``rows`` and its number; None: no run."""
    best: tuple[int, Row] | None = None
    for row in rows:
        n = number_of(row[0], name)
        if n is not None and (best is None or n > best[0]):
            best = (n, row)
    return best


def current(rows: Iterable[Row], name: str, asked: float, reuse: float | None) -> str:
    """The name of the generation an opener of ``name`` gets, from what it read.

    ``asked`` is when the opener asked (seconds since the epoch, on the
    journal's clock); ``reuse`` its window in seconds (None: a completed
    generation is replayed forever; 0: ``fresh=True``).
    """
    found = newest(rows, name)
    if found is None:
        return name
    number, (gen, status, finished_at) = found
    # Integer microseconds, as the journal writes its times (clock.py). A window of 0
    # refuses whatever completed when the opener looked, even in the same microsecond
    # (a test's frozen clock): the opener asked before it looked.
    if (
        status == "completed"
        and reuse is not None
        and finished_at is not None
        and (reuse == 0 or iso_us(finished_at) < utc_us(asked - reuse))
    ):
        return named(name, number + 1)
    return gen


def reuse_seconds(reuse: float | timedelta | None, fresh: bool) -> float | None:
    """The window a journal's ``reuse=``/``fresh=`` give, in seconds (None: forever).

    ``fresh=True`` is a window of 0: no answer completed before the opener
    asked. Raises MisuseError for a window that is not a number of seconds
    or a ``timedelta`` of zero or more, or for both given.
    """
    if fresh not in (True, False):
        raise MisuseError(f"fresh= must be True or False, got {fresh!r}")
    if fresh:
        if reuse is not None:
            raise MisuseError(
                f"fresh=True and reuse={reuse!r} were both given; fresh=True asks for a new "
                f"answer whatever the window: pass one of them"
            )
        return 0.0
    if reuse is None:
        return None
    if isinstance(reuse, timedelta):
        seconds = reuse.total_seconds()
    elif isinstance(reuse, (int, float)) and not isinstance(reuse, bool):
        seconds = float(reuse)
    else:
        raise MisuseError(
            f"reuse= must be seconds (a number) or a datetime.timedelta, got "
            f"{type(reuse).__name__} {reuse!r}; for example reuse=3600 or "
            f"reuse=timedelta(hours=1)"
        )
    if math.isnan(seconds) or seconds < 0:
        raise MisuseError(
            f"reuse= must be zero or more seconds, got {reuse!r}; pass reuse=0 (or "
            f"fresh=True) for a new answer every time"
        )
    return None if math.isinf(seconds) else seconds


def window(
    goal: str, run: str | None, reuse: float | timedelta | None, fresh: bool
) -> float | None:
    """``Journal``'s ``reuse=``/``fresh=`` for run ``run`` of ``goal``, in seconds
    (:func:`reuse_seconds`). Raises MisuseError for ``reuse=`` without a run name (an
    unnamed run that completed is never handed back) or with a generation's name."""
    seconds = reuse_seconds(reuse, fresh)
    if run is None and reuse is not None:
        raise MisuseError(
            f"Journal({goal!r}, reuse={reuse!r}) without run=: only a named run is handed "
            f"back when it completed (an unnamed run that completed is never resumed); "
            f"name the run, Journal({goal!r}, run='...', reuse={reuse!r})"
        )
    if run is not None and seconds is not None and is_generation(run):
        raise MisuseError(
            f"run {run!r} names one generation of a run (the name before '~' and digits), "
            f"which is always reopened as it is; pass reuse= and fresh= with the run's "
            f"own name instead"
        )
    return seconds
