"""``lil fork``: a new run of a goal that keeps a run's rows before a step, so the step and
everything after it run again (:func:`fork_run`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ..clock import utc_iso
from ..errors import RunNotFoundError
from ..ids import new_run_id
from ..inspection import RunInfo, find_run, get_run, run_rows
from ..store import Store
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
    store: Store,
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
    paid for, which stays counted once, on the source's rows);
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
    source = find_run(store, run) if isinstance(run, str) else run
    rows = run_rows(store, source)
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
    renamed: str | None = None
    table = source.journal_table
    with holding_run(store, source, "fork"), store.write() as c:
        if source.name is not None:
            renamed = f"{source.name}@{source.id}"
            c.execute("UPDATE runs SET name = ? WHERE id = ?", (renamed, source.id))
        # The fork is a re-run of the same call: it keeps the source's input (so an
        # opener called with the same arguments resumes it) and records its lineage.
        c.execute(
            "INSERT INTO runs (id, goal, name, status, attempts, started_at, updated_at, input, "
            "input_fp, forked_from, forked_at) SELECT ?, goal, ?, 'running', 0, ?, ?, input, "
            "input_fp, id, ? FROM runs WHERE id = ?",
            (new_id, source.name, utc_iso(now), utc_iso(now), from_step, source.id),
        )
        # Each copied row keeps its arguments' fingerprint (a replay must match it, or
        # the fork would hand a result to a call with any arguments) and its model,
        # but not its tokens or cost: that money was spent once, by the source run,
        # where it stays counted (a sum over the journal table counts it once).
        c.execute(
            f'INSERT INTO "{table}" (run, key, kind, status, fn, result, started_at, '
            f"finished_at, duration_ms, attempt, error, traceback, wake_at, args_fp, model) "
            f"SELECT ?, key, kind, status, fn, result, started_at, finished_at, duration_ms, "
            f"0, error, traceback, wake_at, args_fp, model "
            f'FROM "{table}" WHERE run = ? AND rowid < ? '
            f"AND status = 'done' ORDER BY rowid",
            (new_id, source.id, cut),
        )
    return ForkResult(get_run(store, new_id), get_run(store, source.id), copied, renamed)
