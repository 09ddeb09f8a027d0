"""The errors letitloop raises: one base class, a few situations a user can act on.

Every message says what was expected, what was found and what to do. Every
error pickles with its attributes, because errors cross process boundaries
(a supervised child, a worker process).
"""

from __future__ import annotations

from typing import Any


class LetItLoopError(Exception):
    """Base class of every error letitloop raises on purpose."""

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        for name, value in details.items():
            setattr(self, name, value)
        # BaseException pickles as (class, args, __dict__): the message rebuilds
        # the error and the details (pid, key, …) come back as attributes.


class JournalFileError(LetItLoopError):
    """The journal file cannot be used: not SQLite, corrupt, unreadable, read-only or full."""


class SchemaVersionError(JournalFileError):
    """The journal file was written by a newer letitloop; it is left untouched."""


class EncodeError(LetItLoopError):
    """A step's result cannot be encoded; nothing was written."""

    #: Where in the value the offending part sits: ``$``, ``$.items[3].when``.
    path: str = "$"


class DecodeError(LetItLoopError):
    """A recorded result cannot be decoded into the types this program knows."""


class StepMismatchError(LetItLoopError):
    """The step recorded under a key was produced by a different function."""


class InvalidNameError(LetItLoopError):
    """A goal, run, step or marker name is unusable (empty, not text, control characters)."""


class ConcurrentStepError(LetItLoopError):
    """Two concurrent calls used one step name, so their keys cannot be ordered."""


class RunHeldError(LetItLoopError):
    """The run is held by another live process (or another journal in this one)."""


class NoJournalError(LetItLoopError):
    """A free function such as ``step()`` was called with no open journal."""


class RunNotFoundError(LetItLoopError):
    """A run or goal named on the command line or in a library call does not exist."""


class SupervisorError(LetItLoopError):
    """Supervision cannot start: nothing to re-run (a notebook), a bad setting or target."""


class MarkerHeldError(LetItLoopError):
    """Another holder stayed inside a marker's block longer than the wait's timeout."""


class MarkerLostError(LetItLoopError):
    """A marker's holder lost its claim before it could commit; the side effect may repeat."""


class RunCancelledError(LetItLoopError):
    """The run was cancelled (``lil cancel``, ``letitloop.cancel``); its holder stops here."""


class WaitTimeoutError(LetItLoopError, TimeoutError):
    """``wait_for`` got no value within its timeout; recorded, so a replay raises it again."""


class NotWaitingError(LetItLoopError):
    """A value was sent to a run that is not waiting for that name (or already got one)."""


# -- recording other code's errors ------------------------------------------------


def storable(text: str) -> str:
    """``text`` as SQLite can store it: lone surrogates (from undecodable bytes) escaped."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def error_text(exc: BaseException) -> str:
    """``Type: message`` of an exception, storable whatever its message holds."""
    try:
        message = str(exc)
    except Exception as failed:  # a __str__ that raises must not hide the exception itself
        message = f"<str() of the exception failed: {type(failed).__qualname__}>"
    return storable(f"{type(exc).__qualname__}: {message}")


def traceback_text(exc: BaseException) -> str:
    import traceback  # loaded when a failure is recorded, not by `import letitloop`

    try:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    except Exception:
        text = error_text(exc)
    return storable(text)
