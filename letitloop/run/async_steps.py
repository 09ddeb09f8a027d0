"""The async step: ``fn`` awaited (or run in a worker thread), its row committed from the loop.

Bound as ``Journal.async_step`` like ``steps.step``; its rows go through the
loop's group commit (``commits.py``) on the journal's storage.

This module is the one owner of ``Journal._loop_commits``, the group commit
of the event loop the journal's async steps last committed from
(:func:`loop_commits_for` makes it, :func:`drop_loop_commits` lets it go when
the journal closes). Thread rules: it is written on an event loop's thread
(a step's, or ``async with``'s exit), read there, without a lock; a journal
whose async steps run on two loops at once replaces it at each switch, and
each ``LoopCommits`` stays its own loop's (its rows are never mixed).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from inspect import CO_COROUTINE
from types import FunctionType
from typing import TYPE_CHECKING, Any, TypeVar, overload

from ..errors import FingerprintError, LetItLoopError
from ..identity.fingerprint import UNCHECKED
from ..identity.step_names import Named
from ..identity.unchecked import unwrap
from ..primitives import budgets
from . import cancellation
from .ownership import require_open, require_storage
from .replay import flush_replays, mismatch, replay
from .step_rows import done_row, failure_row
from .steps import (
    ended,
    function_name,
    key_for,
    name_missing,
    owner,
    parent_step,
    retry_policy_in,
    unidentifiable,
    unrecorded,
    watch_flight,
)

if TYPE_CHECKING:
    import asyncio

    from ..stores.storage_holding import Holding
    from ..stores.storage_steps import StepRow
    from .commits import LoopCommits
    from .journal import Journal

T = TypeVar("T")


@overload
async def async_step(
    j: Journal, name: str, fn: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any
) -> T: ...


@overload
async def async_step(
    j: Journal, name: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any
) -> T: ...


async def async_step(
    j: Journal, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
) -> Any:
    """Await ``fn(*args, **kwargs)``, recorded once for this run and replayed ever after.

    ``fn`` may be a coroutine function (awaited on this loop) or a plain
    function (run in a worker thread with ``asyncio.to_thread``, so the loop
    is not blocked). Keys, replay, mismatch detection and failure records are
    those of :meth:`step`; the result is committed before this returns: at
    once on the loop, or with the other steps that finished in the same loop
    pass, or in a worker thread when the commit would wait (see
    ``letitloop/run/commits.py``). A step cancelled while ``fn`` runs
    (``asyncio.CancelledError``: a timeout, a failed task group) is not
    recorded and runs again on the next attempt; the cancellation propagates.
    A cancellation that arrives after ``fn`` returned, while its result waits
    to be committed, does not stop that commit: the step is recorded and replays.
    Raises ConcurrentStepError when another task uses ``name`` in this
    attempt (see letitloop.identity.keys). ``retry=`` is taken as for :meth:`step`.
    Once the run is cancelled this raises RunCancelledError, also from inside
    the await of a step in flight (its task is cancelled; see cancellation.py).
    """
    store = require_open(j)
    if j._cancel.reason is not None:
        raise cancellation.error(j)
    policy = j.retry
    if kwargs and "retry" in kwargs and retry_policy_in(kwargs):
        policy = kwargs.pop("retry")
    fn_name = function_name(fn, name, args, kwargs, "await j.async_step")
    if type(fn) is Named:  # the library's own step: its function awaited directly
        fn = fn.fn
    if type(name) is not str:
        missing = name_missing("await j.async_step", name, fn, args, kwargs)
        if missing is not None:
            raise missing
    who = owner(j)
    try:
        fp = j._fingerprints.call(args, kwargs)
    except FingerprintError as exc:
        raise unidentifiable(j, name, exc) from None
    call_args, call_kwargs = args, kwargs  # what the function gets, if it runs
    if UNCHECKED in fp:  # unchecked() taken off; a mismatch shows the call as made
        call_args, call_kwargs = unwrap(args, kwargs)
    full, key, recorded, differs = key_for(j, name, fp, who)
    if differs is not None:
        raise mismatch(j, key, fn_name, fp, differs, (args, kwargs))
    if recorded is not None:
        return replay(j, key, fn_name, recorded)
    flight = j._flight
    try:
        if j.replay_only:
            raise unrecorded(j, key, fn_name)
        if j._replayed:  # the replays before this fresh step: "saved by replay"
            import asyncio

            await asyncio.to_thread(flush_replays, j)
        if j._budget is not None:  # a run over its budget starts no step (budgets.py)
            budgets.check(j, key)
        started = j.clock()
        flight.begin(key, started, fn_name, fp)
        if flight.watched is None:
            watch_flight(j, store)
        parent = parent_step.set((j, key))
        if type(who) is not int:
            j._cancel.awaiting(who, key)  # a cancel of the run interrupts its await
        try:
            if j._trace is not None:  # OpenTelemetry spans (otel.py)
                value = await j._trace.async_step(
                    j,
                    store,
                    name,
                    key,
                    fn_name,
                    fp,
                    policy,
                    partial(_call, fn, call_args, call_kwargs),
                    ended(j),
                )
            elif policy is not None:
                from . import retry as retries  # loaded with the RetryPolicy it was given

                value = await retries.async_call(
                    j,
                    store,
                    key,
                    fn_name,
                    fp,
                    policy,
                    partial(_call, fn, call_args, call_kwargs),
                    ended(j),
                )
            elif type(fn) is FunctionType and fn.__code__.co_flags & CO_COROUTINE:
                # An ``async def`` function (what inspect.iscoroutinefunction answers for
                # it, without its unwrapping): awaited here. Anything else: _call.
                value = await fn(*call_args, **call_kwargs)
            else:
                value = await _call(fn, call_args, call_kwargs)
        except Exception as exc:
            if j.store is store:
                # The step's own exception matters more than its failed record.
                with contextlib.suppress(LetItLoopError):
                    if policy is None:  # a retry policy recorded its tries (retry.py)
                        from .retry import async_record_raised  # loaded by a failed step

                        await async_record_raised(j, store, key, fn_name, fp, exc)
                    failed = commit_from_loop(
                        j, store, failure_row(j, key, fn_name, fp, started, exc)
                    )
                    if failed is not None:
                        await failed
            raise
        except BaseException as exc:
            stopped = cancellation.converted(j, exc)
            if stopped is not None:
                raise stopped from None
            raise
        finally:
            parent_step.reset(parent)
            if type(who) is not int:
                j._cancel.done(who)
        committing = commit_from_loop(
            j, store, done_row(j, store, key, fn_name, fp, started, value)
        )
        if committing is not None:
            await committing
        return value
    finally:
        flight.end(key)
        j._opened.keys.release(full, who)
        if j._budget is not None and j._budget.open:  # reservations left (budgets.py)
            budgets.release(j, key, sys.exc_info()[1])


async def _call(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """One call of an async step's function: awaited, or run in a worker thread."""
    import inspect  # loaded by programs that use async steps only

    if inspect.iscoroutinefunction(fn):
        return await fn(*args, **kwargs)
    import asyncio

    value = await asyncio.to_thread(fn, *args, **kwargs)
    if inspect.isawaitable(value):  # a plain function that returned a coroutine
        value = await value
    return value


def commit_from_loop(j: Journal, store: Holding, row: StepRow) -> asyncio.Future[None] | None:
    """Commit one step row from the loop, at once (None) or in a group commit (a future).

    See ``letitloop/run/commits.py``. The future resolves once the row is
    committed; the row is committed with its batch even if the awaiting task
    was cancelled meanwhile (a later open replays it from the journal).
    """
    commits = loop_commits_for(j, store)
    if commits.closed:
        raise LetItLoopError(
            f"step {row[1]!r} (run {j.run_id} of goal {j.goal!r}) returned while its "
            f"journal was closing, so its result was not recorded and it runs again next "
            f"attempt; await every step before leaving the journal's 'with' block"
        )
    return commits.commit(row)


def loop_commits_for(j: Journal, store: Holding) -> LoopCommits:
    """The group commit of the running loop for ``store`` (made on first use)."""
    commits = j._loop_commits
    if commits is None or commits.store is not store or not commits.on_this_loop():
        from .commits import LoopCommits

        commits = j._loop_commits = LoopCommits(
            store,
            require_storage(j),
            inline=j.durability == "process",
        )
    return commits


def drop_loop_commits(j: Journal, commits: LoopCommits | None) -> None:
    """The journal closed: let go of ``commits`` if it is still the journal's group commit."""
    if j._loop_commits is commits:
        j._loop_commits = None
