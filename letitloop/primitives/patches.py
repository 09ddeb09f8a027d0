"""``patched(name)``: change the code under runs in flight (issue 37).

``if j.patched("new-prompt"): new path else: old path`` lets a run recorded
under the old code finish the old way while new runs take the new way.

The decision is True when the run reaches this point for the first time
with nothing recorded past it (a new run, or a resumed run whose recorded
steps have all been met again by this attempt), False when the run had
recorded steps past this point under the old code: a done row, under this
point's parent step (the whole run at the top level), that this attempt
has not met yet. It is journaled as a step row keyed ``patched:<name>``
(numbered ``patched:<name>#2`` … when called again, under its parent as
``outer/patched:<name>``: the identity rules of steps, under threads and
tasks too), so every later resume gets the same answer back without
deciding again. The row's value is the decision; ``lil show`` lists it
with the run's steps.

A replay-only journal (``replay_only=True``: ``lil check``, a test from a
recording) writes nothing: a decision it has not recorded is decided by the
same rule, kept in memory for this attempt only, so the replay follows the
path the run would take. :data:`decisions` collects the decisions a
replay-only journal took, for ``lil check``.
"""

from __future__ import annotations

from contextvars import ContextVar
from functools import partial
from typing import TYPE_CHECKING

from ..errors import PatchDeprecatedError, UnrecordedStepError
from ..identity.keys import NEST
from ..identity.names import check_name
from ..identity.step_names import Named
from ..run.steps import parent_step

if TYPE_CHECKING:
    from .runs import PatchedRun

#: The prefix of a patch decision's step key: ``patched:new-prompt``.
PREFIX = "patched:"

#: Where replay-only journals of this context note each patch decision they take
#: (``(patch name, decision)``, replayed or decided in memory); None: nowhere.
#: ``lil check`` sets it around a replay (deploycheck.py).
decisions: ContextVar[list[tuple[str, bool]] | None] = ContextVar(
    "letitloop_patch_decisions", default=None
)


def decide(j: PatchedRun, prefix: str) -> bool:
    """The patch decision's step function: run only when no decision was recorded.

    True unless a done row under ``prefix`` (this point's parent step) was
    recorded and not yet met this attempt. A replayed decision costs no scan.
    """
    return not j._opened.keys.recorded_unclaimed(prefix)


def point(j: PatchedRun, name: str) -> tuple[str, Named[[], bool]]:
    """``(step name, step function)`` of a call of ``patched(name)`` here."""
    check_name("patch", name)
    parent = parent_step.get()
    prefix = f"{parent[1]}{NEST}" if parent is not None and parent[0] is j else ""
    return PREFIX + name, Named("letitloop:patch", partial(decide, j, prefix))


def patched(j: PatchedRun, name: str) -> bool:
    """Whether this run takes the new path of patch ``name`` (see the module's docstring)."""
    step_name, fn = point(j, name)
    if not j.replay_only:
        return bool(j.step(step_name, fn))
    try:
        decision = bool(j.step(step_name, fn))
    except UnrecordedStepError:
        decision = fn()  # its key is taken (steps.py claims it before refusing): decide here
    return noted(name, decision)


async def async_patched(j: PatchedRun, name: str) -> bool:
    """:func:`patched` for async code (the decision is written without blocking the loop)."""
    step_name, fn = point(j, name)
    if not j.replay_only:
        return bool(await j.async_step(step_name, fn))
    try:
        decision = bool(await j.async_step(step_name, fn))
    except UnrecordedStepError:
        decision = fn()
    return noted(name, decision)


def noted(name: str, decision: bool) -> bool:
    """``decision``, noted in :data:`decisions` when someone collects them."""
    found = decisions.get()
    if found is not None:
        found.append((name, decision))
    return decision


def deprecated(j: PatchedRun, name: str, took_new_path: bool) -> None:
    """Raise PatchDeprecatedError if the run took the old path of patch ``name``."""
    if not took_new_path:
        raise PatchDeprecatedError(
            f"patch {name!r} (run {j.run_id} of goal {j.goal!r}) is deprecated in this code, "
            f"which has only its new path, but this run took the old path (it had recorded "
            f"steps past this point under the old code); deploy code that still has "
            f"'if patched({name!r}): ... else: ...' until no unfinished run took the old path, "
            f"or reset/fork this run (lil reset, lil fork)"
        )


def deprecate_patch(j: PatchedRun, name: str) -> None:
    """Mark patch ``name`` as always taken: its old path is gone from the code.

    A run that took the old path (a False decision recorded, or recorded
    steps past this point) cannot go on under this code: PatchDeprecatedError.
    Any other run records (or replays) the decision True and goes on.
    """
    deprecated(j, name, patched(j, name))


async def async_deprecate_patch(j: PatchedRun, name: str) -> None:
    """:func:`deprecate_patch` for async code."""
    deprecated(j, name, await async_patched(j, name))
