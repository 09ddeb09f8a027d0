"""The decorators and the free functions that use the current journal.

``@durable(goal_id=...)`` opens a ``Journal`` around each call of the
function; inside it, ``step()`` is ``Journal.step`` of the innermost open
journal. ``@durable_async`` and ``async_step()`` are the same for
``async def`` functions. ``sleep()``, ``wait_for()`` (and their async
twins) are the journal's durable sleep and wait for outside input, and
``usage()`` records what the step whose function calls it consumed.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

from ..codec import CodecRegistry
from ..errors import LetItLoopError, NoJournalError
from ..identity.versions import check_version, source_version
from ..primitives import budgets
from ..primitives.clock import utc_iso
from ..stores.sqlite.pragmas import Durability
from . import ownership
from .decoration import (
    Durable,
    Options,
    check_reuse,
    checked_keys,
    goal_of,
    journal_for,
    run_async_call,
    run_call,
)
from .journal import DEFAULT_TIMEOUT, Journal, current_journal
from .opening import open_journals
from .steps import parent_step

if TYPE_CHECKING:
    from datetime import timedelta

    from ..primitives.budgets import Budget
    from ..primitives.costs import Usage
    from ..primitives.markers import AtomicMarker, Scope
    from .retry import RetryPolicy

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


def current(caller: str = "step()") -> Journal:
    """The journal that the free functions use.

    The innermost journal opened in this context (thread or task); in a thread
    that opened none (a worker of a thread pool), the one journal open in this
    process. Raises NoJournalError when there is none, or several and none in
    this context; ForkedJournalError in a child forked while its parent had one
    open (ownership.py).
    """
    journal = current_journal.get()
    if journal is not None:
        if journal.is_open:
            return journal
        if journal._opener.disowned:  # inherited from the parent this process was forked from
            raise ownership.error(journal, caller)
    journals = open_journals()
    if len(journals) == 1:
        return journals[0]
    if not journals:
        inherited = ownership.inherited_journal()
        if inherited is not None:
            raise ownership.error(inherited, caller)
        raise NoJournalError(
            f"{caller} was called with no open journal; call it inside a function decorated "
            "with @durable(goal_id=...) or a 'with Journal(goal) as j:' block (or use the "
            "journal's method, j.step / j.atomic_marker)"
        )
    raise NoJournalError(
        f"{caller} was called in a thread with no journal of its own while {len(journals)} "
        f"journals are open in this process, so which one is meant is unclear; "
        f"call the method (j.step, j.atomic_marker) on the journal you mean"
    )


def step(name: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``Journal.step`` on the current journal (see :func:`current`)."""
    return current().step(name, fn, *args, **kwargs)


def atomic_marker(name: str, *, scope: Scope = "run", timeout: float | None = None) -> AtomicMarker:
    """``Journal.atomic_marker`` on the current journal (see :func:`current`)."""
    return current("atomic_marker()").atomic_marker(name, scope=scope, timeout=timeout)


def sleep(name: str, seconds: float) -> None:
    """``Journal.sleep`` on the current journal: a durable sleep (see :func:`current`)."""
    current("sleep()").sleep(name, seconds)


async def async_sleep(name: str, seconds: float) -> None:
    """``Journal.async_sleep`` on the current journal (see :func:`current`)."""
    await current("async_sleep()").async_sleep(name, seconds)


def wait_for(name: str, *, timeout: float | None = None, stop_after: float | None = None) -> Any:
    """``Journal.wait_for`` on the current journal: a value sent from outside."""
    return current("wait_for()").wait_for(name, timeout=timeout, stop_after=stop_after)


async def async_wait_for(
    name: str, *, timeout: float | None = None, stop_after: float | None = None
) -> Any:
    """``Journal.async_wait_for`` on the current journal (see :func:`current`)."""
    return await current("async_wait_for()").async_wait_for(
        name, timeout=timeout, stop_after=stop_after
    )


def patched(name: str) -> bool:
    """``Journal.patched`` on the current journal: ``if patched(name): new path``."""
    return current("patched()").patched(name)


async def async_patched(name: str) -> bool:
    """``Journal.async_patched`` on the current journal (see :func:`current`)."""
    return await current("async_patched()").async_patched(name)


def deprecate_patch(name: str) -> None:
    """``Journal.deprecate_patch`` on the current journal (see :func:`current`)."""
    current("deprecate_patch()").deprecate_patch(name)


async def async_deprecate_patch(name: str) -> None:
    """``Journal.async_deprecate_patch`` on the current journal (see :func:`current`)."""
    await current("async_deprecate_patch()").async_deprecate_patch(name)


def usage(
    source: Any = None,
    /,
    *,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    cost: float | None = None,
    model: str | None = None,
) -> None:
    """Record what the step whose function is running consumed: tokens, cost, model.

    Call it inside a step's function, once per model call or once for all:
    reports add up, and are stored on the step's row when it is recorded
    (``input_tokens``, ``output_tokens``, ``cost``, ``model``). Each report is
    also committed at once (one small write, on the step's ``running`` row), so
    a process killed after a paid call loses none of what it reported: the
    next attempt keeps it as a ``crashed`` try (``step_tries``). ``source`` may
    be a response or usage object (OpenAI, Anthropic, Gemini, LangChain; see
    letitloop.primitives.costs.reported); keywords override it. ``cost`` is in your
    currency: letitloop keeps no prices. Raises NoJournalError outside a
    step's function, LetItLoopError for counts that are not counts (and
    JournalFileError when the journal cannot be written, as a step would).
    """
    parent = parent_step.get()
    if parent is None:
        raise NoJournalError(
            "usage() was called outside a step's function; call it inside the function a "
            "step runs (j.step('ask', ask_model, ...)), where it is recorded on that step's row"
        )
    journal, key = parent
    from ..primitives.costs import reported  # loaded by programs that report usage only

    spent = reported(
        source, input_tokens=input_tokens, output_tokens=output_tokens, cost=cost, model=model
    )
    total = journal._flight.report(key, spent)
    if journal._budget is None or not budgets.settled(journal, key, spent, total):
        keep_reported(journal, key, total)


def keep_reported(journal: Journal, key: str, spent: Usage) -> None:
    """Commit ``spent``, all that step ``key``'s call in flight reported so far, on its row.

    Nothing when the call is not in flight in an open journal (its row is being
    written, or the journal was closed under it): its row carries the usage then.
    """
    flight = journal._flight.calls.get(key)
    storage = journal._opened.storage
    if flight is None or storage is None:
        return
    started, fn_name, fp = flight
    storage.record_usage(
        (journal.run_id, key, fn_name, utc_iso(started), journal.attempt, fp, *spent.columns())
    )


def durable(
    goal_id: str | None = None,
    *,
    goal: str | None = None,
    run: str | Callable[..., str] | None = None,
    reuse: float | timedelta | None = None,
    fresh: bool = False,
    path: str | os.PathLike[str] | None = None,
    durability: Durability = "process",
    timeout: float = DEFAULT_TIMEOUT,
    registry: CodecRegistry | None = None,
    retry: RetryPolicy | None = None,
    budget: Budget | Mapping[str, Any] | None = None,
    version: str | None = None,
    seal: str | bytes | None = None,
    encryption_key: str | bytes | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Run the decorated function as a durable run of ``goal_id``.

    Each call opens ``Journal(goal_id, run=..., input=<the call's arguments>)``:
    it resumes the goal's newest unfinished run **called with the same
    arguments**, or starts a new one; the function's return value is recorded
    as the run's result. ``run`` names the run, or is a callable of the
    function's arguments that returns the name
    (``run=lambda user_id: f"user-{user_id}"``). Calling the function for a
    completed named run returns the recorded result without running the body;
    ``reuse=`` (seconds or a ``timedelta``) and ``fresh=True`` are ``Journal``'s:
    a named run that completed longer ago than ``reuse`` (with ``fresh``: at
    all) runs again as the name's next generation.
    ``retry`` is the RetryPolicy of every step of the run that passes none.
    ``budget`` (``Budget(tokens=..., cost=...)`` or a dict) limits what the
    run may spend over all its attempts (see ``Journal``).
    ``goal=`` is accepted for ``goal_id=`` (``Journal``'s word). A bare
    ``@durable`` (no parentheses, no goal) raises MisuseError at import.
    Without ``run``, an argument holding a value letitloop cannot tell apart
    from another (no encoding, no registered fingerprint) raises
    FingerprintError: pass ``run=``, register a fingerprint
    (``letitloop.register_fingerprint``) or wrap it in ``unchecked()``.
    ``version`` is the version of the code each attempt records; by default
    a hash of the decorated function's source file, read at decoration
    (letitloop/identity/versions.py). ``seal=key`` and ``encryption_key=key`` are
    ``Journal``'s (docs/audit.md; None: ``LETITLOOP_SEAL_KEY`` and
    ``LETITLOOP_ENCRYPTION_KEY``, read at each call); a key that cannot be
    used is refused at decoration. The wrapper's ``__letitloop__`` is its
    :class:`Durable` (what ``lil check`` replays runs with).
    """
    goal_id = goal_of(goal_id, goal, "durable")
    check_reuse(goal_id, run, reuse, fresh, "durable")
    version = None if version is None else check_version(version)
    seal, encryption_key = checked_keys(seal, encryption_key)

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        import inspect  # at decoration, not at `import letitloop`

        signature = inspect.signature(fn)
        code = version or source_version(fn.__code__.co_filename)
        options = Options(
            path,
            durability,
            timeout,
            registry,
            retry,
            budget,
            code,
            seal,
            encryption_key,
            reuse,
            fresh,
        )

        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            journal = journal_for(goal_id, run, signature, args, kwargs, options)
            return run_call(journal, fn, args, kwargs)

        wrapper.__letitloop__ = Durable(  # type: ignore[attr-defined]
            goal_id, run, fn, signature, path, registry, code, False, options
        )
        return wrapper

    return decorate


@overload
async def async_step(
    name: str, fn: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any
) -> T: ...


@overload
async def async_step(name: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T: ...


async def async_step(name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """``Journal.async_step`` on the current journal (see :func:`current`).

    Tasks started inside a ``@durable_async`` function (``asyncio.gather``,
    ``TaskGroup``) inherit its journal through their context.
    """
    return await current("async_step()").async_step(name, fn, *args, **kwargs)


def durable_async(
    goal_id: str | None = None,
    *,
    goal: str | None = None,
    run: str | Callable[..., str] | None = None,
    reuse: float | timedelta | None = None,
    fresh: bool = False,
    path: str | os.PathLike[str] | None = None,
    durability: Durability = "process",
    timeout: float = DEFAULT_TIMEOUT,
    registry: CodecRegistry | None = None,
    retry: RetryPolicy | None = None,
    budget: Budget | Mapping[str, Any] | None = None,
    version: str | None = None,
    seal: str | bytes | None = None,
    encryption_key: str | bytes | None = None,
) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Coroutine[Any, Any, R]]]:
    """Run the decorated ``async def`` function as a durable run of ``goal_id``.

    The same as :func:`durable`, awaited: each call opens the journal with
    ``async with`` (a run held by another process is waited for in a worker
    thread, so the event loop keeps running), resumes the newest unfinished
    run called with the same arguments or starts one, and records the
    function's return value as the run's result. Calling it for a completed
    named run returns the recorded result without running the body.
    """
    goal_id = goal_of(goal_id, goal, "durable_async")
    check_reuse(goal_id, run, reuse, fresh, "durable_async")
    version = None if version is None else check_version(version)
    seal, encryption_key = checked_keys(seal, encryption_key)

    def decorate(fn: Callable[P, Awaitable[R]]) -> Callable[P, Coroutine[Any, Any, R]]:
        import inspect

        if not inspect.iscoroutinefunction(fn):
            raise LetItLoopError(
                f"@durable_async expects an 'async def' function, got "
                f"{getattr(fn, '__qualname__', fn)!r}, which is not one; decorate plain "
                f"functions with @durable(goal_id={goal_id!r}) instead"
            )

        signature = inspect.signature(fn)
        code = version or source_version(fn.__code__.co_filename)
        options = Options(
            path,
            durability,
            timeout,
            registry,
            retry,
            budget,
            code,
            seal,
            encryption_key,
            reuse,
            fresh,
        )

        @functools.wraps(fn)
        async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            journal = journal_for(goal_id, run, signature, args, kwargs, options)
            return await run_async_call(journal, fn, args, kwargs)

        wrapper.__letitloop__ = Durable(  # type: ignore[attr-defined]
            goal_id, run, fn, signature, path, registry, code, True, options
        )
        return wrapper

    return decorate
