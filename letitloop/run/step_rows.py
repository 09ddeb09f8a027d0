"""A finished step's row: its result encoded (or refused) and checked, or its failure; the
row a journal's storage writes.

Functions of a ``Journal`` (``j``) that ``steps.step`` and ``async_steps.async_step``
call once their function has returned or raised: ``done_fields`` (the usual row as
the plain tuple ``StepRows.write_done`` writes), ``done_row`` and ``failure_row``
(a ``StepRow``), ``record_failure`` (a failure committed).
"""

from __future__ import annotations

import contextlib
from time import time as _time
from typing import TYPE_CHECKING, Any

from .. import codec
from ..errors import EncodeError, LetItLoopError, error_text, traceback_text
from ..integrity.checksums import done_sum, step_sum
from ..primitives.clock import utc_us
from ..stores.storage_steps import DoneRow, StepRow, StepRows, step_row_of
from . import ownership

if TYPE_CHECKING:
    from .journal import Journal

#: Builds a StepRow from one tuple without NamedTuple's own ``__new__``, a Python
#: call: 0.24 µs against 0.86 µs (a plain tuple 0.11 µs; benchmarks/README.md).
_row = tuple.__new__

#: costs.NO_USAGE (the usage columns of a row that reported nothing), without
#: importing costs.py on the step path: it is loaded by the first usage() report.
NO_USAGE: tuple[None, None, None, None] = (None, None, None, None)


def done_row(
    j: Journal, store: StepRows, key: str, fn_name: str, fp: str, started: float, value: Any
) -> StepRow:
    """The journal row of a step that returned ``value``; raises EncodeError for a value that
    cannot be stored, before its result is written (see :func:`refused`)."""
    done = done_fields(j, store, key, fn_name, fp, started, value)
    return done if isinstance(done, StepRow) else step_row_of(done)


def done_fields(
    j: Journal, store: StepRows, key: str, fn_name: str, fp: str, started: float, value: Any
) -> StepRow | DoneRow:
    """:func:`done_row`, as the ``DoneRow`` that ``StepRows.write_done`` writes when the row
    has no usage and no encryption (the usual row: a plain tuple), else its ``StepRow``."""
    try:
        text = codec.encode(value, j.registry)
    except EncodeError as exc:
        raise refused(j, store, key, fn_name, fp, started, f"{exc}", exc.path) from None
    if len(text) > store.max_text // 4 and len(text.encode("utf-8")) > store.max_text:
        raise refused(
            j,
            store,
            key,
            fn_name,
            fp,
            started,
            f"the encoded result is {len(text.encode('utf-8')):,} bytes, over the "
            f"{store.max_text:,} bytes SQLite stores in one value (store large data in a "
            f"file and return its path)",
            "$",
        )
    if j.store is not store:
        if j._opener.disowned:  # the step began in the parent; the child forked from it returns
            raise ownership.error(j, f"recording step {key!r}")
        raise LetItLoopError(
            f"step {key!r} (run {j.run_id} of goal {j.goal!r}) returned after its "
            f"journal was closed, so its result was not recorded and it runs again next "
            f"attempt; await every step before leaving the journal's 'with' block"
        )
    if j._flight.usage or j._cipher is not None:
        return step_row(j, key, "done", fn_name, fp, started, text, None, None)
    # step_row() of the usual row (no usage reported, no encryption), without its call.
    if j.clock is _time:
        # The default clock, rounded by float.__round__ (a quarter of utc_us's cost): it
        # may differ from utc_us by a microsecond, which no reader of a real clock sees.
        begun = (started * 1_000_000).__round__()
        duration = (_time() * 1_000_000).__round__() - begun
    else:  # a test's clock: exactly what utc_iso shows of it
        finished = j.clock()
        begun = utc_us(started)
        duration = utc_us(finished) - begun
    storage: StepRows = j._opened.storage  # type: ignore[assignment]  # open: see step_row
    return (
        storage.run_key,
        key,
        "done",
        storage.function_key(fn_name),
        text,
        begun,
        duration,
        j.attempt,
        fp,
        done_sum(j.run_id, key, fn_name, fp, text),
    )


def refused(
    j: Journal,
    store: StepRows,
    key: str,
    fn_name: str,
    fp: str,
    started: float,
    why: str,
    path: str,
) -> EncodeError:
    """The EncodeError for a result that cannot be stored; no result is written.

    A step whose function reported usage (``usage()``) is recorded ``failed``
    with that error and that usage, so that what the call spent is counted
    (the paid call ran); it runs again on the next attempt, as any failed
    step. Otherwise nothing is written.
    """
    if key not in j._flight.usage:
        return EncodeError(
            f"step {key!r} (run {j.run_id}): {why}; nothing was recorded", path=path, key=key
        )
    error = EncodeError(
        f"step {key!r} (run {j.run_id}): {why}; its result was not recorded, only its failure "
        f"with the usage it reported (so what the call spent is counted): it runs again on "
        f"the next attempt",
        path=path,
        key=key,
    )
    record_failure(j, store, key, fn_name, fp, started, error)
    return error


def record_failure(
    j: Journal,
    store: StepRows,
    key: str,
    fn_name: str,
    fp: str,
    started: float,
    exc: BaseException,
    tried: bool = False,
) -> None:
    """Commit step ``key``'s failure with ``exc``, unless the journal was closed meanwhile;
    and, unless a retry policy recorded it already (``tried``), the call as a failed try
    (``retry.record_raised``), which a later attempt's ``done`` row leaves in place."""
    if j.store is not store:
        return  # the journal was closed while the step ran: nothing to write to
    # The step's own exception matters more than its failed record.
    with contextlib.suppress(LetItLoopError):
        if not tried and isinstance(exc, Exception):
            from .retry import record_raised  # loaded by a step that failed

            record_raised(j, store, key, fn_name, fp, exc)
        j._opened.write_step(failure_row(j, key, fn_name, fp, started, exc))


def failure_row(
    j: Journal, key: str, fn_name: str, fp: str, started: float, exc: BaseException
) -> StepRow:
    """The journal row of a step whose function raised ``exc``."""
    return step_row(
        j, key, "failed", fn_name, fp, started, None, error_text(exc), traceback_text(exc)
    )


def step_row(
    j: Journal,
    key: str,
    status: str,
    fn_name: str,
    fp: str,
    started: float,
    result: str | None,
    error: str | None,
    traceback: str | None,
) -> StepRow:
    """A finished step's row (a ``StepRow``), keyed as the journal's storage keys it.

    It finishes now (by the journal's clock), and carries the usage its
    function reported, if any, and its checksum (letitloop/integrity/checksums.py).
    """
    finished = j.clock()
    spent = j._flight.take_usage(key) if j._flight.usage else None
    # Only called while the journal is open (its steps hold a store): storage is set.
    storage: StepRows = j._opened.storage  # type: ignore[assignment]
    begun = utc_us(started)
    if j._cipher is not None:  # encryption at rest: the checksum is of what is stored
        result, error, traceback = j._cipher.seal_row(j.run_id, key, result, error, traceback)
    return _row(
        StepRow,
        (
            storage.run_key,
            key,
            status,
            storage.function_key(fn_name),
            result,
            begun,
            utc_us(finished) - begun,
            j.attempt,
            error,
            traceback,
            fp,
            *(NO_USAGE if spent is None else spent.columns()),
            step_sum(j.run_id, key, status, fn_name, fp, result, error),
        ),
    )
