"""A journal's sleeps, waits, patches and markers: ``Journal`` methods that load their module
on first use.

Functions of a ``Journal`` (``j``), bound as its methods (``Journal.sleep =
verbs.sleep``). Each imports its module (``sleeps.py``, ``waits.py``,
``patches.py``, ``markers.py``) when first called, so that ``import
letitloop`` loads only what a step needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import InvalidNameError
from . import cancellation

if TYPE_CHECKING:
    from ..primitives.expects import Expect
    from ..primitives.markers import AtomicMarker, Scope
    from .journal import Journal

__all__ = [
    "async_deprecate_patch",
    "async_patched",
    "async_sleep",
    "async_wait_for",
    "atomic_marker",
    "deprecate_patch",
    "patched",
    "sleep",
    "wait_for",
]


def sleep(j: Journal, name: str, seconds: float) -> None:
    """Sleep ``seconds``, durably: a restart sleeps only what remains; a done sleep replays.

    The sleep is a row keyed and numbered like a step (``name``, ``name#2``),
    written with its wake-up time when it starts; the wake-up time recorded
    first is kept, whatever ``seconds`` a later attempt passes. Raises
    RunCancelledError as soon as the run is cancelled.
    """
    from ..primitives import sleeps  # loaded by the first sleep

    sleeps.sleep(j, name, seconds)


async def async_sleep(j: Journal, name: str, seconds: float) -> None:
    """:meth:`sleep` for async code: the event loop runs meanwhile."""
    from ..primitives import sleeps

    await sleeps.async_sleep(j, name, seconds)


def wait_for(
    j: Journal,
    name: str,
    *,
    timeout: float | None = None,
    stop_after: float | None = None,
    expect: Expect | None = None,
) -> Any:
    """The value sent for ``name`` from outside (``lil send``, ``letitloop.send``).

    The value is recorded like a step's result: a resumed run gets the same
    value back without waiting. ``timeout``: seconds from the wait's first
    start after which WaitTimeoutError is raised (and recorded: a replay
    raises it again). ``stop_after``: seconds this process waits before it
    stops with RunWaiting (exit status 75), leaving the run ``waiting``;
    running the program again after a value was sent resumes the run.
    ``expect``: what the wait takes (``letitloop.primitives.expects.Expect``): a value sent
    that it does not take is refused by ``lil send``, writing nothing.
    Raises RunCancelledError as soon as the run is cancelled.
    """
    from ..primitives import waits  # loaded by the first wait

    return waits.wait_for(j, name, timeout, stop_after, expect)


async def async_wait_for(
    j: Journal,
    name: str,
    *,
    timeout: float | None = None,
    stop_after: float | None = None,
    expect: Expect | None = None,
) -> Any:
    """:meth:`wait_for` for async code: the event loop runs meanwhile."""
    from ..primitives import waits

    return await waits.async_wait_for(j, name, timeout, stop_after, expect)


def patched(j: Journal, name: str) -> bool:
    """Whether this run takes the new path of patch ``name``: ``if j.patched(name): new``.

    True when the run reaches this point with nothing recorded past it (a
    new run, or a resumed run that had recorded nothing past it), False
    when it had recorded steps past it under the old code. The decision is
    journaled as a step row ``patched:<name>``: every later resume gets
    the same answer.
    """
    from ..primitives import patches  # loaded by the first patch

    return patches.patched(j, name)


async def async_patched(j: Journal, name: str) -> bool:
    """:meth:`patched` for async code."""
    from ..primitives import patches

    return await patches.async_patched(j, name)


def deprecate_patch(j: Journal, name: str) -> None:
    """Patch ``name``'s old path is gone: PatchDeprecatedError if this run took it."""
    from ..primitives import patches

    patches.deprecate_patch(j, name)


async def async_deprecate_patch(j: Journal, name: str) -> None:
    """:meth:`deprecate_patch` for async code."""
    from ..primitives import patches

    await patches.async_deprecate_patch(j, name)


def atomic_marker(
    j: Journal, name: str, *, scope: Scope = "run", timeout: float | None = None
) -> AtomicMarker:
    """Guard a side effect once: ``with j.atomic_marker(name) as should_execute:``.

    Yields a truthy offer to one holder at a time until a block exits
    cleanly, then false to every later entry (see letitloop.primitives.markers).
    ``scope`` is ``"run"`` (default), ``"goal"`` or ``"global"``; a waiter
    gives up after ``timeout`` seconds (default: the journal's timeout)
    with MarkerHeldError naming the holder.
    """
    if j._cancel.reason is not None:
        raise cancellation.error(j)
    from ..primitives.markers import AtomicMarker

    marker = AtomicMarker(j, name, scope=scope, timeout=j.timeout if timeout is None else timeout)
    if scope == "run" and not j._opened.keys.claim_marker(name):
        raise InvalidNameError(
            f"marker {name!r} (run {j.run_id}): the name is already the key of "
            f"a step of this run; steps and run-scoped markers of a run share one "
            f"set of keys; rename the marker (e.g. {name + ':sent'!r}) or the step"
        )
    return marker
