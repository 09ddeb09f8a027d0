"""What a ``@durable``/``@durable_async`` decorator was given, and the journal of each call.

``durable.py`` holds the decorators; this module checks their arguments at
decoration (so at import: ``goal_of``, ``checked_keys``, ``check_reuse``),
keeps them (``Durable``, a wrapper's ``__letitloop__``; ``Options``, what each
call's ``Journal`` is opened with), makes one call's journal
(``journal_for``) and runs the call in it (``run_call``, ``run_async_call``;
``call_as_run``, a call as the run of a given name: a schedule's tick).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from ..codec import CodecRegistry
from ..errors import MisuseError
from ..identity.unchecked import unwrap
from ..stores.sqlite.pragmas import Durability
from .generations import reuse_seconds
from .journal import Journal

R = TypeVar("R")

if TYPE_CHECKING:
    import inspect
    from datetime import timedelta

    from ..primitives.budgets import Budget
    from .retry import RetryPolicy


# Both records are NamedTuples made by the functional form, their fields' types as
# objects (the few only named when type checking as text): the class form, in a module
# of ``from __future__ import annotations``, has typing compile each field's annotation
# text: 3.1 M instructions for this module against 1.8 M (storage.py, issue 30).

#: What every call's ``Journal`` of one decorated function is opened with besides its
#: goal, run and input: given once, at decoration, for the sync and async decorators.
Options = NamedTuple(  # noqa: UP014 (see above)
    "Options",
    [
        ("path", str | os.PathLike[str] | None),
        ("durability", Durability),
        ("timeout", float),
        ("registry", CodecRegistry | None),
        ("retry", "RetryPolicy | None"),
        ("budget", "Budget | Mapping[str, Any] | None"),
        ("version", str | None),
        ("seal", str | bytes | None),
        ("encryption_key", str | bytes | None),
        # How long a completed named run is handed back (Journal's reuse=/fresh=).
        ("reuse", "float | timedelta | None"),
        ("fresh", bool),
    ],
)


#: What a ``@durable``/``@durable_async`` function was decorated with: its ``__letitloop__``.
Durable = NamedTuple(  # noqa: UP014 (see above)
    "Durable",
    [
        ("goal", str),
        ("run", str | Callable[..., str] | None),
        # The function itself (undecorated).
        ("fn", Callable[..., Any]),
        ("signature", "inspect.Signature"),
        ("path", str | os.PathLike[str] | None),
        ("registry", CodecRegistry | None),
        # The version its attempts record (given, or its source file's hash; None: unknown).
        ("version", str | None),
        ("is_async", bool),
        # What each call's Journal is opened with (a schedule opens its ticks' runs so).
        ("options", Options),
    ],
)


def checked_keys(
    seal: str | bytes | None, encryption_key: str | bytes | None
) -> tuple[str | bytes | None, str | bytes | None]:
    """``seal=`` and ``encryption_key=`` of a decorator, refused at decoration (so at import)
    when unusable: shorter than 16 bytes, or no ``cryptography`` package (SealKeyError,
    EncryptionKeyError)."""
    if seal is not None:
        from ..integrity.seals import seal_key

        seal_key(seal)
    if encryption_key is not None:
        from ..integrity.encryption import make_cipher

        make_cipher(encryption_key)
    return seal, encryption_key


def check_reuse(
    goal_id: str,
    run: str | Callable[..., str] | None,
    reuse: float | timedelta | None,
    fresh: bool,
    decorator: str,
) -> None:
    """``reuse=`` and ``fresh=`` of a decorator, refused at decoration (MisuseError) when
    unusable, or ``reuse=`` without ``run=`` (a call without a run name never replays a
    completed run: it starts a new one)."""
    reuse_seconds(reuse, fresh)
    if reuse is not None and run is None:
        raise MisuseError(
            f"@{decorator}(goal_id={goal_id!r}, reuse={reuse!r}) without run=: a call "
            f"without a run name never replays a completed run, it starts a new one; name "
            f"the run (run=lambda order_id: f'order-{{order_id}}') for reuse= to apply"
        )


def journal_for(
    goal_id: str,
    run: str | Callable[..., str] | None,
    signature: inspect.Signature,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    options: Options,
) -> Journal:
    """The journal of one call of a decorated function (``run`` may name it from the args).

    The run's input is the call's arguments by parameter name, defaults
    applied, so ``f(1)`` and ``f(uid=1)`` are the same call; an
    ``unchecked()`` part of them is left out of the input's fingerprint (the
    function receives the value: see ``unwrap``). Arguments that do not fit
    the signature raise the TypeError the call itself would raise, before
    any journal is opened. An unnamed run's input holding a value with no
    fingerprint raises FingerprintError when the journal opens (the input
    could not tell this call's run from another's).
    """
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    if callable(run):
        plain_args, plain_kwargs = unwrap(args, kwargs)  # run= sees values, not unchecked()
        run_name: str | None = run(*plain_args, **plain_kwargs)
    else:
        run_name = run
    return Journal(goal_id, run=run_name, input=dict(bound.arguments), **options._asdict())


def goal_of(goal_id: object, goal: str | None, decorator: str) -> str:
    """The goal a decorator was given: ``goal_id``, or ``goal`` (``Journal``'s word for it).

    Raises MisuseError at decoration, so at import: for a bare ``@durable``
    (the function itself arrives as ``goal_id``), for no goal, or for two.
    """
    if callable(goal_id):
        name = getattr(goal_id, "__name__", "fn")
        raise MisuseError(
            f"@{decorator} needs a goal name, found @{decorator} without parentheses above "
            f"def {name}: write @{decorator}(goal_id={name!r}) (the goal names this job's "
            f"runs in the journal and in lil, so that a renamed function keeps them)"
        )
    if goal_id is None and goal is None:
        raise MisuseError(
            f"@{decorator}() needs a goal name, found none: write @{decorator}(goal_id='sync')"
        )
    if goal_id is not None and goal is not None and goal_id != goal:
        raise MisuseError(
            f"@{decorator} got two goal names, goal_id={goal_id!r} and goal={goal!r}: "
            f"give one (goal= is another spelling of goal_id=)"
        )
    found = goal_id if goal_id is not None else goal
    if not isinstance(found, str):
        raise MisuseError(
            f"@{decorator} expects the goal's name as text, found {type(found).__name__} "
            f"{found!r}: write @{decorator}(goal_id='sync')"
        )
    return found


def run_call(journal: Journal, fn: Callable[..., R], args: Any, kwargs: Any) -> R:
    """One call of a ``@durable`` function inside ``journal``: a completed run's recorded
    result, else ``fn``'s value, recorded as the run's result."""
    with journal:
        if journal.was_completed and not journal.replay_only:
            result: R = journal.recorded_result()
            return result
        call_args, call_kwargs = unwrap(args, kwargs)
        value = fn(*call_args, **call_kwargs)
        journal.set_result(value)
        return value


async def run_async_call(
    journal: Journal, fn: Callable[..., Awaitable[R]], args: Any, kwargs: Any
) -> R:
    """:func:`run_call` for a ``@durable_async`` function (its journal opened with
    ``async with``)."""
    async with journal:
        if journal.was_completed and not journal.replay_only:
            result: R = journal.recorded_result()
            return result
        call_args, call_kwargs = unwrap(args, kwargs)
        value = await fn(*call_args, **call_kwargs)
        journal.set_result(value)
        return value


def call_as_run(
    fn: Callable[..., Any],
    run_name: str,
    path: str | os.PathLike[str] | None,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """Call the ``@durable``/``@durable_async`` function ``fn`` as its goal's run ``run_name``.

    Whatever its ``run=``: a schedule names each tick's run so. ``path`` is
    the journal when the decorator gave none. An async function's call
    returns its coroutine. Raises MisuseError for a function that is not
    durable.
    """
    info = durable_of(fn)
    options = info.options
    if path is not None and options.path is None:
        options = options._replace(path=path)
    journal = journal_for(info.goal, run_name, info.signature, args, kwargs, options)
    if info.is_async:
        return run_async_call(journal, info.fn, args, kwargs)
    return run_call(journal, info.fn, args, kwargs)


def durable_of(fn: object) -> Durable:
    """What ``fn`` was decorated with by ``@durable``/``@durable_async``; MisuseError if not."""
    info = getattr(fn, "__letitloop__", None)
    if not isinstance(info, Durable):
        raise MisuseError(
            f"expected a function decorated with @durable(goal_id=...) or @durable_async, got "
            f"{getattr(fn, '__qualname__', fn)!r}; put @durable(goal_id='…') under the "
            f"decorator that needs it"
        )
    return info
