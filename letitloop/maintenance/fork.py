"""``lil fork``: a new run of a goal that keeps a run's rows before a step, so the step and
everything after it run again (:func:`fork_run`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import RunNotFoundError
from ..identity.ids import new_run_id
from ..inspection import Inspector, RunInfo, as_inspector, find_run, get_run
from ..primitives.clock import utc_iso
from ..stores.sqlite.store import Store
from .holding import holding_run


@dataclass(frozen=True)
class ForkResult:
    """What :func:`fork_run` made."""

    run: RunInfo
    """The new run (state ``pending`` until a process opens it)."""
    source: RunInfo
    copied: list[str]
    """Keys of the rows copied from the source, in journal order."""
    source_renamed_to: str | None
    """For a named source: the name it now carries (the fork took over its name)."""


def fork_run(
    inspector: Inspector | Store,
    run: RunInfo | str,
    from_step: str,
    *,
    clock: Callable[[], float] = time.time,
) -> ForkResult:
    """A new run of the same goal that keeps the source's rows before ``from_step``.

    The new run holds copies of the source's done steps and done markers that
    precede ``from_step`` in journal order (copied rows carry attempt 0, and
    each step's argument fingerprint, so a replay in the fork is refused for
    other arguments as it would be in the source; not the usage the source
    paid for, which stays counted once, on the source's rows, and which the
    fork's budget counts all the same: ``budgets.carried``);
    ``from_step`` and everything after it are not copied, so they run again.
    It is the goal's newest unfinished run, so the next ``Journal(goal)``
    resumes it. For a named source the fork takes over the name (so
    ``Journal(goal, run=name)`` resumes the fork) and the source is renamed
    ``name@SOURCE_ID``. The fork records its source and ``from_step``
    (``runs.forked_from``, ``runs.forked_at``) and keeps the source's input,
    so an opener called with the same arguments resumes it. The source is
    otherwise unchanged.

    Raises RunNotFoundError for an unknown run or a key the run never
    recorded, RunHeldError when a live process holds the source.
    """
    journal = as_inspector(inspector)
    source = find_run(journal, run) if isinstance(run, str) else run
    rows = journal.rows(source)
    keys = [r.key for r in rows]
    if from_step not in keys:
        shown = ", ".join(keys[:8]) + (", …" if len(keys) > 8 else "")
        raise RunNotFoundError(
            f"run {source.id} of goal {source.goal!r} recorded no step {from_step!r}; "
            f"expected one of its keys ({shown or 'it recorded none'}); 'lil show "
            f"{source.id}' lists them",
            run=source.id,
            key=from_step,
        )
    cut = next(r.seq for r in rows if r.key == from_step)
    copied = [r.key for r in rows if r.seq < cut and r.status == "done"]
    now = clock()
    new_id = new_run_id(now)
    renamed = None if source.name is None else f"{source.name}@{source.id}"
    with holding_run(journal, source, "fork"):
        journal.fork(source, new_id, utc_iso(now), from_step, cut, renamed)
    return ForkResult(get_run(journal, new_id), get_run(journal, source.id), copied, renamed)
