"""One step: its key, then a replay, or a call whose result (or failure) is committed as its row.

Functions of a ``Journal`` (``j``), bound as its methods (``Journal.step =
steps.step``), so a step costs no call beyond the journal's own. The async
step is ``async_steps.py``; a finished step's row is built in ``step_rows.py``
and written by the storage (``storage.py``).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from contextvars import ContextVar
from functools import partial
from threading import get_ident
from types import CoroutineType, FrameType, FunctionType
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import (
    FingerprintError,
    InvalidNameError,
    MisuseError,
    UnrecordedStepError,
    unrecorded_step,
)
from ..identity.fingerprint import UNCHECKED
from ..identity.keys import NEST, REPEAT_SUFFIX, Recorded
from ..identity.names import MAX_NAME_LENGTH, check_name
from ..identity.step_names import Named
from ..identity.unchecked import unwrap
from ..primitives import budgets
from ..stores.storage_steps import StepRow
from . import cancellation
from .ownership import require_open
from .replay import flush_replays, mismatch, replay
from .step_rows import done_fields, record_failure

if TYPE_CHECKING:
    from ..stores.storage_holding import Holding
    from .journal import Journal

T = TypeVar("T")


def retry_policy_in(kwargs: dict[str, Any]) -> bool:
    """Whether ``kwargs`` holds ``retry=RetryPolicy(...)``, which the journal takes.

    retry.py is not imported for this: while it is not loaded, no RetryPolicy
    exists to be passed, and a step without one does not pay for loading it.
    """
    retry = sys.modules.get("letitloop.run.retry")
    return retry is not None and isinstance(kwargs["retry"], retry.RetryPolicy)


#: The step whose function is running in this context, as (journal, key): a
#: step called inside it is keyed under it (``outer/inner``).
parent_step: ContextVar[tuple[Journal, str] | None] = ContextVar(
    "letitloop_parent_step", default=None
)


def function_name(
    fn: Callable[..., Any],
    step: str,
    args: tuple[Any, ...] = (),
    kwargs: dict[str, Any] | None = None,
    call: str = "j.step",
) -> str:
    """``module.qualname`` of a step's function (the code identity checked on replay);
    the library's own steps' functions (a ``step_names.Named``) their stable name.

    Raises MisuseError when ``fn`` is not callable (``step`` names the step):
    a value passed where the function goes was computed outside the journal;
    InvalidNameError when ``step`` is itself a function (the name forgotten:
    ``call(fetch, 1)``; ``args``/``kwargs`` are the rest of that call, shown
    in the right one).
    """
    if type(fn) is FunctionType:  # the common case, without the lookups below
        return f"{fn.__module__}.{fn.__qualname__}"
    if type(fn) is Named:
        return fn.name
    if not callable(fn):
        raise name_missing(call, step, fn, args, kwargs) or not_a_function(step, fn)
    while isinstance(fn, partial):
        fn = fn.func
    fn = getattr(fn, "__func__", fn)  # bound methods: their function
    qualname = getattr(fn, "__qualname__", None)
    if qualname is None:  # a callable object
        qualname = type(fn).__qualname__
        module = type(fn).__module__
    else:
        module = getattr(fn, "__module__", None) or "?"
    return f"{module}.{qualname}"


def owner(j: Journal) -> object:
    """Who is calling: the running asyncio task, else the thread.

    Concurrent calls of one step name from two owners are refused; a task
    is its own owner, so steps gathered on one event loop thread are told
    apart (see letitloop.identity.keys).
    """
    # asyncio is imported only by programs that use it (it is slow to import):
    # if it is not loaded, no event loop can be running.
    aio = sys.modules.get("asyncio")
    if aio is not None and aio._get_running_loop() is not None:
        task = aio.current_task()
        if task is not None:
            return task
    return threading.get_ident()


def key_for(
    j: Journal, name: str, fp: str, owner: object
) -> tuple[str, str, Recorded | None, Recorded | None]:
    """``(full name, key, replay, mismatch)`` of a call of step ``name``
    (see letitloop.identity.keys).

    The name is checked before anything else happens, so a call with an
    unusable name never runs its function.
    """
    # The common case in one cheap test; check_repeat explains anything else.
    if not (
        type(name) is str
        and 0 < len(name) <= MAX_NAME_LENGTH
        and name.isprintable()
        and not name.isspace()
        and "#" not in name
    ):
        check_repeat(name)
    parent = parent_step.get()
    if parent is not None and parent[0] is j:
        name = f"{parent[1]}{NEST}{name}"
    key, replay, mismatch = j._opened.keys.claim(name, fp, owner)
    return name, key, replay, mismatch


def check_repeat(name: str) -> None:
    """Raise InvalidNameError for a step name a journal cannot key (see names.check_name),
    or one that ends in ``#<number>``, the suffix of repeated calls; a name with ``#``
    elsewhere passes."""
    check_name("step", name)
    if REPEAT_SUFFIX.search(name):
        raise InvalidNameError(
            f"step name {name!r} ends in '#<number>', which letitloop uses to number "
            f"repeated calls of one name ('fetch', 'fetch#2', …); rename the step"
        )


def unidentifiable(j: Journal, name: str, exc: FingerprintError) -> FingerprintError:
    """``exc`` (an argument with no fingerprint) with the step and run it was refused for."""
    return FingerprintError(
        f"step {name!r} (run {j.run_id} of goal {j.goal!r}): {exc}",
        path=exc.path,
        type_name=exc.type_name,
    )


def unrecorded(j: Journal, key: str, fn_name: str) -> UnrecordedStepError:
    """The error for a step a replay-only journal has not recorded; its function is not called."""
    return unrecorded_step(j.run_id, j.goal, j.path, key, fn_name)


def name_missing(
    call: str, name: object, fn: object, args: tuple[Any, ...], kwargs: dict[str, Any] | None
) -> InvalidNameError | None:
    """The error for ``j.step(fetch, 1)`` (``call`` is ``j.step`` or ``await j.async_step``;
    the free ``step()``/``async_step()`` when the call came through them): a function passed
    where the step's name goes, so the name is missing; None when ``name`` is not a
    function. The message shows the call as it should be: ``j.step("fetch", fetch, 1)``."""
    if type(name) is str or not callable(name):
        return None
    import reprlib  # only on this mistake

    frame: FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").startswith("letitloop."):
        if frame.f_globals["__name__"] == "letitloop.run.durable":  # the free step(), async_step()
            call = call.replace("j.", "", 1)
            break
        frame = frame.f_back

    def shown(value: object) -> str:  # a function by its name, as the reader wrote it
        label = getattr(value, "__name__", None) if callable(value) else None
        return label if type(label) is str and label.isidentifier() else reprlib.repr(value)

    label = shown(name)
    if not label.isidentifier():
        label = type(name).__name__
    rest = [shown(a) for a in (fn, *args)]
    rest += [f"{k}={shown(v)}" for k, v in (kwargs or {}).items()]
    given = ", ".join([label, *rest])
    return InvalidNameError(
        f"{call}({given}): the step's name is missing (the function {label} was passed "
        f'where the name goes); name the step first: {call}("{label}", {given})'
    )


def not_a_function(name: str, value: object) -> MisuseError:
    """The error for ``j.step(name, fetch(1))``: the call ran before the step, unrecorded."""
    import reprlib  # only on this mistake

    shown = f"{name!r}"
    if isinstance(value, CoroutineType):
        made = value.__qualname__
        value.close()  # never awaited, and never will be: no "never awaited" warning
        return MisuseError(
            f"step {shown}: expected the function to call and its arguments, got a coroutine "
            f"that {made}(...) returned; pass the function and its arguments instead: await "
            f"j.async_step({shown}, {made}, ...), not await j.async_step({shown}, {made}(...))"
        )
    return MisuseError(
        f"step {shown}: expected the function to call and its arguments, got "
        f"{type(value).__name__} {reprlib.repr(value)}: the call that made this value already "
        f"ran, outside the journal (not recorded, so it runs again on every attempt); pass "
        f"the function and its arguments instead: j.step({shown}, fn, arg), "
        f"not j.step({shown}, fn(arg))"
    )


def step(j: Journal, name: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Return ``fn(*args, **kwargs)``, recorded once for this run and replayed ever after.

    On replay the recorded result comes back without calling ``fn``: the
    result recorded for this very call (same name, same function, same
    arguments; see letitloop.identity.keys). A fresh result is committed to the
    journal file before this returns. If ``fn`` raises, the failure is
    recorded (for inspection) and re-raised; the step runs again on the
    next attempt. A step called inside ``fn`` is keyed under this one
    (``name/inner``). Raises StepMismatchError when the key was recorded
    by another function or for other arguments, EncodeError (nothing
    written) when the result cannot be encoded, ConcurrentStepError when
    another thread is running a step of the same name.

    ``retry=RetryPolicy(...)`` among the keyword arguments is taken by the
    journal, not passed to ``fn`` (any other ``retry=`` value is passed on):
    ``fn`` is tried again as the policy says, each failed try recorded
    (letitloop/run/retry.py); the journal's own ``retry`` applies otherwise.
    Raises RunCancelledError, before anything runs, once the run was cancelled.
    """
    store = j.store
    if store is None:
        store = require_open(j)  # raises: the journal is closed, or a forked child's copy
    if j._cancel.reason is not None:
        raise cancellation.error(j)
    opened = j._opened  # the attempt's keys and step-row writer (attempt.Attempt)
    policy = j.retry
    if kwargs and "retry" in kwargs and retry_policy_in(kwargs):
        policy = kwargs.pop("retry")
    # The usual function and the usual owner inline, without a call each (function_name
    # and owner say the rest): a replayed step is a few calls in all.
    if type(fn) is FunctionType:
        fn_name = f"{fn.__module__}.{fn.__qualname__}"
    else:
        fn_name = function_name(fn, name, args, kwargs)
        if type(fn) is Named:  # the library's own step: its function called directly
            fn = fn.fn
    aio = sys.modules.get("asyncio")
    who = owner(j) if aio is not None and aio._get_running_loop() is not None else get_ident()
    call_args, call_kwargs = args, kwargs  # what the function gets, if it runs
    if args or kwargs:
        try:
            fp = j._fingerprints.call(args, kwargs)
        except FingerprintError as exc:
            missing = name_missing("j.step", name, fn, args, kwargs)  # the name forgotten?
            raise missing or unidentifiable(j, name, exc) from None
        if UNCHECKED in fp:  # unchecked() taken off; a mismatch shows the call as made
            call_args, call_kwargs = unwrap(args, kwargs)
    else:
        fp = ""  # Fingerprinter.call of no arguments
    # key_for(), inline: the name checked, then keyed under its parent step, then claimed.
    if not (
        type(name) is str
        and 0 < len(name) <= MAX_NAME_LENGTH
        and name.isprintable()
        and not name.isspace()
        and "#" not in name
    ):
        missing = name_missing("j.step", name, fn, args, kwargs)
        if missing is not None:
            raise missing
        check_repeat(name)
    full = name
    outer = parent_step.get()
    if outer is not None and outer[0] is j:
        full = f"{outer[1]}{NEST}{name}"
    key, recorded, differs = opened.keys.claim(full, fp, who)
    if differs is not None:
        raise mismatch(j, key, fn_name, fp, differs, (args, kwargs))
    if recorded is not None:
        replayed: T = replay(j, key, fn_name, recorded)
        return replayed
    flight = j._flight
    try:
        if j.replay_only:
            raise unrecorded(j, key, fn_name)
        if j._replayed:  # the replays before this fresh step: "saved by replay"
            flush_replays(j)
        if j._budget is not None:  # a run over its budget starts no step (budgets.py)
            budgets.check(j, key)
        started = j.clock()
        flight.begin(key, started, fn_name, fp)
        if flight.watched is None:
            watch_flight(j, store)
        parent = parent_step.set((j, key))
        try:
            if j._trace is not None:  # OpenTelemetry spans (otel.py)
                value = j._trace.step(
                    j, store, name, key, fn_name, fp, policy, fn, call_args, call_kwargs, ended(j)
                )
            elif policy is None:
                value = fn(*call_args, **call_kwargs)
            else:
                from . import retry as retries  # loaded with the RetryPolicy it was given

                value = retries.call(
                    j, store, key, fn_name, fp, policy, fn, call_args, call_kwargs, ended(j)
                )
        except Exception as exc:
            record_failure(j, store, key, fn_name, fp, started, exc, policy is not None)
            raise
        finally:
            parent_step.reset(parent)
        done = done_fields(j, store, key, fn_name, fp, started, value)
        if isinstance(done, StepRow):  # usage reported, or encryption
            opened.write_step(done)
        else:  # the usual row
            store.write_done(done)
        return value
    finally:
        flight.end(key)
        opened.keys.release(full, who)
        if j._budget is not None and j._budget.open:  # reservations left (budgets.py)
            budgets.release(j, key, sys.exc_info()[1])


def ended(j: Journal) -> Callable[[Journal, str, BaseException | None], None] | None:
    """What a step hands its retry policy to do when a try failed (retry.py): settle the
    try's reservations (``budgets.release``); None for a run without a budget."""
    return budgets.release if j._budget is not None else None


def watch_flight(j: Journal, store: Holding) -> None:
    """Have the process's watcher make this journal's long steps visible (inflight.py)."""
    storage = j._opened.storage
    if storage is None:
        return  # closed meanwhile: nothing to show
    j._flight.watch(
        lambda: j.store is store,
        storage,
        j.run_id,
        j.attempt,
        j.clock,
        partial(cancellation.poll, j),  # a cancel is noticed between steps
    )
