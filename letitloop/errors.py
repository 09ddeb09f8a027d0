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

    #: The journal file (or the folder beside it) the error is about, when known.
    path: str | None = None
    #: True when the file was deleted, replaced or moved away while a journal had it open
    #: (files.check_unmoved): nothing more is written to it.
    moved: bool = False


class SchemaVersionError(JournalFileError):
    """The journal file was written by a newer letitloop; it is left untouched."""


class UnknownStoreError(LetItLoopError):
    """A path looks like a URL (``scheme://…``) whose store this installation does not have.

    Such a path is never taken for a file name (``letitloop/stores/schemes.py``); nothing
    was created.
    """

    #: The path or URL as given, and its scheme (lower case).
    location: str | None = None
    scheme: str | None = None


class EncodeError(LetItLoopError):
    """A step's result cannot be encoded; nothing was written."""

    #: The step whose result it was, when the value was a step's result.
    key: str | None = None
    #: Where in the value the offending part sits: ``$``, ``$.items[3].when``.
    path: str = "$"


class DamagedRowError(JournalFileError):
    """A recorded row fails its checksum: the file was damaged or edited; it is not replayed."""

    run_id: str | None = None
    #: The damaged row's key in its run.
    key: str | None = None


class ForgedRowError(DamagedRowError):
    """A row of a sealed run does not match its seal (edited, inserted or written without
    the key, or its chain altered); it is not replayed (letitloop/integrity/chains.py)."""


class SealKeyError(LetItLoopError):
    """A seal key that cannot be used: too short, or not the key the run's chain was
    sealed with (letitloop/integrity/seals.py)."""

    run_id: str | None = None


class EncryptionKeyError(LetItLoopError):
    """An encrypted value that cannot be read: no key, another key, or a ciphertext moved from
    another row (letitloop/integrity/encryption.py); or an encryption key that cannot be used."""

    run_id: str | None = None
    key: str | None = None


class DecodeError(LetItLoopError):
    """A recorded result cannot be decoded into the types this program knows."""


class StepMismatchError(LetItLoopError):
    """The step recorded under a key was made by another function, or with other arguments."""

    run_id: str | None = None
    #: The step's key in its run (``fetch``, ``fetch#2``, ``outer/fetch``).
    key: str | None = None
    #: The function that recorded the step, and the one called now.
    recorded: str | None = None
    called: str | None = None
    #: What differs between the recorded call's arguments and this call's.
    differences: str | None = None
    #: The recorded and the new fingerprints: one digest per argument (``name=digest``
    #: for a keyword), as ``args_fp`` stores them.
    recorded_fp: str | None = None
    called_fp: str | None = None
    #: The new call's arguments as short texts, by position (``"0"``) or name
    #: (``"limit="``); None when not known. The journal keeps only digests of the
    #: recorded ones.
    arguments: dict[str, str] | None = None


class UnrecordedStepError(LetItLoopError):
    """A replay-only journal met a step (or run) its recording does not have; nothing was called.

    Raised by ``Journal(..., replay_only=True)`` (or ``LETITLOOP_REPLAY=only``)
    instead of calling the step's function: a replay-only run replays every
    step from the journal and writes nothing to it.
    """

    run_id: str | None = None
    #: The step's key in its run (``fetch``, ``fetch#2``, ``outer/fetch``); None when the
    #: journal holds no recorded run to replay at all.
    key: str | None = None
    #: The function the step would have called (``module.qualname``), not called.
    function: str | None = None


def unrecorded_step(
    run_id: str, goal: str, path: object, key: str, function: str
) -> UnrecordedStepError:
    """The error for a step (sleep, wait, marker) a replay-only journal has not recorded."""
    return UnrecordedStepError(
        f"replay-only: step {key!r} ({function}) is not recorded in run {run_id} of goal "
        f"{goal!r} in {path}, so it was not called; a step was added or renamed since "
        f"the recording, or is called in another order: record the run again (open the "
        f"journal without replay_only), or fix the pipeline",
        run_id=run_id,
        key=key,
        function=function,
    )


class InvalidNameError(LetItLoopError):
    """A goal, run, step or marker name is unusable (empty, not text, control characters)."""


class ConcurrentStepError(LetItLoopError):
    """Two concurrent calls used one step name, so their keys cannot be ordered."""

    run_id: str | None = None
    #: The step name two concurrent calls used.
    name: str | None = None


class RunHeldError(LetItLoopError):
    """The run is held by another live process (or another journal in this one)."""

    run_id: str | None = None
    #: The holder's process id and host name, when known.
    pid: int | None = None
    host: str | None = None


class ForkedJournalError(LetItLoopError):
    """A forked child used a journal its parent opened (or the file its parent had open)."""

    goal: str | None = None
    run_id: str | None = None
    #: The process that opened the journal, and the one that was refused.
    opener_pid: int | None = None
    pid: int | None = None


class MisuseError(LetItLoopError, TypeError):
    """letitloop was called the wrong way: a value where a function goes, a bare decorator.

    Raised where the mistake is made (``@durable`` without its goal fails at
    import), before anything is written; the message shows the right form.
    A TypeError too, as Python's own error for the same slip would be.
    """


class NoJournalError(LetItLoopError):
    """A free function such as ``step()`` was called with no open journal."""

    goal_id: str | None = None


class RunNotFoundError(LetItLoopError):
    """A run or goal named on the command line or in a library call does not exist."""

    #: What was looked for: a run id, prefix or name, and a step key.
    run: str | None = None
    key: str | None = None


class SupervisorError(LetItLoopError):
    """Supervision cannot start: nothing to re-run (a notebook), a bad setting or target."""


class MarkerHeldError(LetItLoopError):
    """Another holder stayed inside a marker's block longer than the wait's timeout."""

    #: The marker's name, and the holder's run, process id and host.
    name: str | None = None
    run_id: str | None = None
    pid: int | None = None
    host: str | None = None


class MarkerLostError(LetItLoopError):
    """A marker's holder lost its claim before it could commit; the side effect may repeat."""

    name: str | None = None
    idempotency_key: str | None = None


class RunCancelledError(LetItLoopError):
    """The run was cancelled (``lil cancel``, ``letitloop.cancel``); its holder stops here."""

    run_id: str | None = None
    #: The reason given to ``lil cancel --reason`` or ``cancel(reason=...)``.
    reason: str | None = None


class RunReleasedError(RunCancelledError):
    """A queue's worker let go of the run it was running (it is draining, SIGTERM): the run
    stops at its next step, is not marked failed, and another worker resumes it."""


class QueueError(LetItLoopError):
    """A work queue was misused: an unknown task, bad limits, a handle's run that failed."""


class RateLimited(LetItLoopError):
    """A call was refused for a rate limit (an HTTP 429): it may be made again after
    ``retry_after`` seconds.

    Raise it from a step (``raise RateLimited(retry_after=30)``; an adapter may raise it
    from the reset time its service sent). A queued run it leaves is suspended until
    then, its queue slot freed (docs/queues.md); anywhere else it fails the run as any
    error does.
    """

    #: Seconds from when it was raised until the call may be made again.
    retry_after: float = 1.0

    def __init__(self, message: str | None = None, *, retry_after: object = 1.0) -> None:
        from datetime import timedelta

        seconds = retry_after.total_seconds() if isinstance(retry_after, timedelta) else None
        if seconds is None and isinstance(retry_after, (int, float)):
            seconds = float(retry_after)
        if seconds is None or not 0 <= seconds < float("inf"):
            raise MisuseError(
                f"RateLimited: retry_after must be the seconds until the call may be made "
                f"again (a number 0 or more, or a timedelta), got {retry_after!r}"
            )
        super().__init__(message or f"rate limited: retry after {seconds:g} s")
        self.retry_after = seconds


class WaitTimeoutError(LetItLoopError, TimeoutError):
    """``wait_for`` got no value within its timeout; recorded, so a replay raises it again."""

    run_id: str | None = None
    key: str | None = None


class NotWaitingError(LetItLoopError):
    """A value was sent to a run that is not waiting for that name (or already got one)."""

    run_id: str | None = None
    key: str | None = None


class FingerprintError(LetItLoopError):
    """An argument (or a run's input) holds a value letitloop cannot tell apart from others.

    Raised before anything runs or is written: a value of a type with no
    encoding and no registered fingerprint (``letitloop.register_fingerprint``),
    or an ``unchecked()`` placed where it cannot be unwrapped.
    """

    #: Where the value sits: ``$[1].items[2]`` (a step's argument), ``$.order`` (an input).
    path: str = "$"
    #: The value's type, as ``module.QualName``.
    type_name: str | None = None


# -- recording other code's errors ------------------------------------------------


def storable(text: str) -> str:
    """``text`` as SQLite can store it: lone surrogates (from undecodable bytes) escaped."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


#: At most this many of an exception group's errors are named in its text, each message
#: clipped to :data:`GROUP_MESSAGE_CHARS`: the text stays one readable line.
GROUP_ERRORS_SHOWN = 5
GROUP_MESSAGE_CHARS = 200


def error_text(exc: BaseException) -> str:
    """``Type: message`` of an exception, storable whatever its message holds.

    An exception group (``ExceptionGroup``, as anyio's task groups and so the
    MCP SDK raise) is told by the errors inside it, not by its own ``unhandled
    errors in a TaskGroup (1 sub-exception)``: a group of one error, or groups
    nested around one, give that error's ``Type: message``; a group of several
    names each (``ExceptionGroup: 2 errors: OSError: …; ValueError: …``), at
    most :data:`GROUP_ERRORS_SHOWN`, each message clipped.
    """
    leaves = _leaves(exc)
    if len(leaves) == 1:
        return storable(_one_text(leaves[0]))
    shown = "; ".join(_one_text(e, GROUP_MESSAGE_CHARS) for e in leaves[:GROUP_ERRORS_SHOWN])
    more = len(leaves) - GROUP_ERRORS_SHOWN
    tail = f"; and {more} more" if more > 0 else ""
    return storable(f"{type(exc).__qualname__}: {len(leaves)} errors: {shown}{tail}")


def _one_text(exc: BaseException, clip: int | None = None) -> str:
    try:
        message = str(exc)
    except Exception as failed:  # a __str__ that raises must not hide the exception itself
        message = f"<str() of the exception failed: {type(failed).__qualname__}>"
    if clip is not None and len(message) > clip:
        message = message[: clip - 1] + "…"
    return f"{type(exc).__qualname__}: {message}"


def _leaves(exc: BaseException) -> list[BaseException]:
    """The errors inside ``exc``, groups opened at any depth (``[exc]`` when it is none)."""
    if not _is_group(exc):
        return [exc]
    found: list[BaseException] = []
    for e in getattr(exc, "exceptions", ()):
        found.extend(_leaves(e))
    return found or [exc]


def _is_group(exc: BaseException) -> bool:
    """Whether ``exc`` is an exception group: Python 3.11's ``BaseExceptionGroup``, or on
    3.10 the ``exceptiongroup`` backport's, when a library loaded it (never imported here)."""
    import builtins
    import sys

    native = getattr(builtins, "BaseExceptionGroup", None)
    if native is not None and isinstance(exc, native):
        return True
    backport = sys.modules.get("exceptiongroup")
    group = getattr(backport, "BaseExceptionGroup", None)
    return isinstance(group, type) and isinstance(exc, group)


def traceback_text(exc: BaseException) -> str:
    import traceback  # loaded when a failure is recorded, not by `import letitloop`

    try:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    except Exception:
        text = error_text(exc)
    return storable(text)


class PatchDeprecatedError(LetItLoopError):
    """``deprecate_patch(name)`` in a run that took the old path of patch ``name``."""


class BudgetExceededError(LetItLoopError):
    """A run's recorded spend reached its budget (``Journal(..., budget=...)``) before a step,
    or a paid call's reservation (``letitloop.reserve``) would pass it.

    The step was not started (or its paid call not made). Attributes:
    ``run_id``, ``key`` (the step), ``tokens`` and ``cost`` (the run's spend,
    every attempt's), ``reserved_tokens`` and ``reserved_cost`` (reserved by
    calls not settled: in flight, or cut short by a dead process), ``budget``
    (``{"tokens": …, "cost": …}``) and ``steps``, the steps that spent it as
    ``(key, tokens, cost)``, most first.
    """

    run_id: str | None = None
    key: str | None = None
    tokens: int = 0
    cost: float = 0.0
    budget: dict[str, Any] | None = None
    steps: list[tuple[str, int, float]] | None = None
    reserved_tokens: int = 0
    reserved_cost: float = 0.0
