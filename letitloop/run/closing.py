"""Ending a run: its result, its last status (completed, failed, waiting, cancelled), its release.

``close`` ends a run from sync code; ``aclose`` first settles the loop's
group commit (``commits.py``), so a run is never marked before the rows of
its returned steps are committed.

This module is the one owner of ``Journal._result_text``, the result the run
records when it completes: written by :func:`set_result` in the thread that
runs the journal's body (``@durable``'s), read by :func:`close` in the
thread that closes it, the same thread or one that follows it. What closing
clears of the attempt is cleared by its owners (``opening.closed``,
``Flight.forget``, ``async_steps.drop_loop_commits``).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, overload

from .. import codec
from ..errors import (
    DecodeError,
    EncodeError,
    JournalFileError,
    MisuseError,
    StepMismatchError,
    error_text,
)
from . import cancellation, opening, ownership
from .replay import flush_replays

if TYPE_CHECKING:
    import asyncio

    from .journal import Journal


def _run_waiting(exc: BaseException | None) -> Any:
    """The RunWaiting ``exc`` is or carries, else None; waits.py is not imported for
    this (while it is not loaded, no wait ran, so no RunWaiting exists).

    An adapter whose framework cannot let a ``SystemExit`` through its tasks
    carries it out as an ordinary exception with a ``run_waiting`` attribute
    (Pydantic AI's ``StoppedToWait``): the run is left waiting all the same.
    """
    waits = sys.modules.get("letitloop.primitives.waits")
    if waits is None or exc is None:
        return None
    if isinstance(exc, waits.RunWaiting):
        return exc
    carried = getattr(exc, "run_waiting", None)
    return carried if isinstance(carried, waits.RunWaiting) else None


def set_result(j: Journal, value: Any) -> None:
    """Record ``value`` as the run's result when the run completes (``runs.result``).

    ``@durable`` records its function's return value this way. Raises
    EncodeError at once (nothing written) for a value the codec cannot encode,
    ForkedJournalError in a child forked from the process that opened ``j``.
    On a run that had completed before this open (:attr:`was_completed`)
    nothing is recorded: the same result again is accepted, another one
    raises MisuseError (the recorded result stays; it would be lost silently).
    """
    if j._opener.disowned:
        raise ownership.error(j, "set_result()")
    try:
        text = codec.encode(value, j.registry)
    except EncodeError as exc:
        raise EncodeError(
            f"run {j.run_id} of goal {j.goal!r}: result: {exc}", path=exc.path
        ) from None
    if j.was_completed and text != j._opened.recorded_result and not _same_result(j, value):
        shown = j._opened.recorded_result if j._opened.recorded_result is not None else "no result"
        named = f" (named {j.run_name!r})" if j.run_name else ""
        raise MisuseError(
            f"run {j.run_id} of goal {j.goal!r}{named} "
            f"completed before with {_short(shown)}, which it keeps: set_result({_short(text)}) "
            f"on a completed run records nothing. Read the recorded one with "
            f"j.recorded_result(), or run 'lil fork {j.run_id} --from-step KEY' to record "
            f"a new run"
        )
    j._result_text = text


def _same_result(j: Journal, value: Any) -> bool:
    """Whether the completed run's recorded result equals ``value`` (a set's order may vary)."""
    try:
        return bool(recorded_result(j) == value)
    except Exception:  # not comparable, or not decodable: not the same
        return False


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def recorded_result(j: Journal) -> Any:
    """The result recorded when the run completed (None if it recorded none).

    Meaningful when :attr:`was_completed`: ``@durable`` returns it for a
    completed named run without running its body.
    """
    if j._opened.recorded_result is None:
        return None
    try:
        return codec.decode(j._opened.recorded_result, j.registry)
    except DecodeError as exc:
        raise DecodeError(f"run {j.run_id} of goal {j.goal!r}: result: {exc}") from None


def close(j: Journal, exc: BaseException | None = None) -> None:
    """Mark the run completed (``exc`` is None) or failed with ``exc``, and release it.

    ``sys.exit(0)`` (``SystemExit`` with code 0 or None) is a clean exit,
    not a failure: the run is completed. Any other exception, including
    KeyboardInterrupt and a non-zero SystemExit, marks it failed with its
    error, so the next open resumes it. Two endings are not failures:
    RunWaiting (``wait_for(..., stop_after=)``, or an exception carrying one as
    ``run_waiting``) leaves the run ``waiting``,
    and a run this process learnt was cancelled is marked ``cancelled``
    however the block ended.

    In a child forked from the process that opened ``j``, raises
    ForkedJournalError: the child marks nothing, releases nothing of its
    parent's and closes no connection (ownership.py).
    """
    store, storage = j.store, j._opened.storage
    if store is None or storage is None:
        if j._opener.disowned:
            raise ownership.error(j, "closing it (marking the run's end)")
        return
    if isinstance(exc, SystemExit) and exc.code in (0, None):
        exc = None
    # Replay-only: a recorded step this clean run never reached was removed from it.
    missing = unreplayed(j) if j.replay_only and exc is None else None
    # The run's end is written while the run is still held, and only then let go:
    # an opener waiting for its lock must find it ended, not resume it
    # (tests/test_lock_order.py).
    # What the attempt's span says (otel.py), as decided below.
    outcome = "completed" if exc is None else "failed"
    try:
        # Nothing is written to a file deleted or replaced under the journal (files.py):
        # its first write's error is the one the program sees.
        gone = getattr(exc, "moved", False)
        if j._replayed and not j.replay_only and not gone:  # replay-only writes nothing
            flush_replays(j)
        if not j.was_completed and not j.replay_only and not gone:
            now = j.clock()
            if j._cancel.released:  # let go of by a queue's worker: resumed by another
                outcome = "released"
            elif j._cancel.reason is not None:
                outcome = "cancelled"
                storage.cancel_run(j.run_id, now, _sealed(j, error_text(cancellation.error(j))))
            elif (waiting := _run_waiting(exc)) is not None and waiting.run_id == j.run_id:
                outcome = "waiting"
                storage.leave_waiting(j.run_id, now)
            elif exc is None:
                storage.complete_run(j.run_id, now, _sealed(j, j._result_text, "run result"))
            else:
                storage.fail_run(j.run_id, now, _sealed(j, error_text(exc)))
    finally:
        if j._trace is not None:
            j._trace.end(j, outcome, exc)
        j._flight.forget()  # nothing more is written for this run
        opening.release(j)
        store.close()
        opening.closed(j)
    if missing is not None:
        raise missing


def unreplayed(j: Journal) -> StepMismatchError | None:
    """Replay-only: the error naming the first recorded step this attempt did not replay.

    A step under a replayed parent counts as replayed (the parent's replay
    skipped it as a unit). None: every recorded step, sleep and wait replayed.
    """
    keys = j._opened.keys
    with keys.lock:
        claimed = set(keys.claimed)
        recorded = list(keys.recorded.values())
    parents = tuple(k + "/" for k in claimed)
    left = [r for r in recorded if r.key not in claimed and not r.key.startswith(parents)]
    if not left:
        return None
    first = min(left, key=lambda r: r.rowid)
    more = f" (and {len(left) - 1} more after it)" if len(left) > 1 else ""
    return StepMismatchError(
        f"replay-only: step {first.key!r} ({first.fn}) was recorded in run {j.run_id} of goal "
        f"{j.goal!r} in {j.path}, but this run ended without calling it{more}: a step was "
        f"removed or skipped since the recording; record the run again (open the journal "
        f"without replay_only), or fix the pipeline",
        run_id=j.run_id,
        key=first.key,
        recorded=first.fn,
        called=None,
        differences="not called",
    )


def close_if_opened(j: Journal, opening_: asyncio.Future[Journal]) -> None:
    """Close ``j`` once an open whose awaiting task was cancelled has finished."""
    import asyncio

    if not opening_.cancelled() and opening_.exception() is None:
        j.close(asyncio.CancelledError())


async def aclose(j: Journal, exc: BaseException | None) -> None:
    """Close like ``close``, once every returned step's row is committed.

    Rows still queued for the group commit or in its thread are committed
    first; the loop keeps running meanwhile, and a cancellation waits for
    them, then propagates. A commit that failed with no task left to hear
    of it (its task was cancelled while it waited) marks the run failed and
    is raised here as JournalFileError. With ``durability="power"`` the
    run's closing commit runs in the commit thread too: no fsync on the loop.
    """
    import asyncio

    from .async_steps import drop_loop_commits, loop_commits_for
    from .commits import wait_through_cancel

    store = j.store
    if store is None:
        if j._opener.disowned:
            raise ownership.error(j, "closing it (marking the run's end)")
        return
    commits = j._loop_commits
    if commits is not None and (commits.store is not store or not commits.on_this_loop()):
        commits = None  # another loop's: its thread ends when idle
    if commits is None and j.durability == "power" and not j.was_completed:
        commits = loop_commits_for(j, store)
    cancelled = False
    lost: JournalFileError | None = None
    try:
        if commits is not None:
            cancelled = await commits.settle()
            commits.closed = True  # a step returning from now on is not recorded
            for row, error in commits.unreported:
                if row[2] == "done":
                    lost = JournalFileError(
                        f"run {j.run_id} of goal {j.goal!r} was not marked completed: "
                        f"step {row[1]!r} returned, but its commit failed after its task "
                        f"was cancelled ({error}); the run is marked failed and the step "
                        f"runs again on the next attempt. Fix the cause and run again",
                        path=str(store.path),
                    )
                    break
        failure = exc if exc is not None else lost
        if commits is not None and not commits.inline:
            closing = commits.run_in_thread(j.close, failure)
            cancelled |= await wait_through_cancel(closing)
            closing.result()
        else:
            j.close(failure)
    finally:
        if commits is not None:
            commits.stop()
        drop_loop_commits(j, commits)
    if cancelled:
        raise asyncio.CancelledError
    if lost is not None and exc is None:
        raise lost


@overload
def _sealed(j: Journal, text: str, field: str = ...) -> str: ...
@overload
def _sealed(j: Journal, text: str | None, field: str = ...) -> str | None: ...
def _sealed(j: Journal, text: str | None, field: str = "run error") -> str | None:
    """``text`` as the run's row stores it: encrypted when the journal has a key."""
    return text if j._cipher is None else j._cipher.seal(text, j.run_id, "", field)
