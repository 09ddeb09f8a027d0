"""Forgetting runs: which run ``lil reset`` means (:func:`reset_target`), forgetting it
(:func:`reset_run`), and deleting runs with their rows (:func:`delete_runs`, which gc uses too).
"""

from __future__ import annotations

import shlex

from ..errors import LetItLoopError, RunNotFoundError
from ..inspection import Inspector, RunInfo, as_inspector, find_run, resumable_run
from ..inspection.listing import known_goals, no_goal
from ..inspection.queue_listing import find_entry, queue_entries

# Deleting runs inside a transaction is the SQLite inspector's: named here too for the
# tests that call it under the name they always used.
from ..inspection.sqlite_changes import delete_runs as delete_runs
from ..runtext.previews import preview
from ..stores.sqlite.store import Store
from .holding import holding_run


def reset_target(inspector: Inspector | Store, ref: str, run: str | None = None) -> RunInfo:
    """The run :func:`reset_run` would forget. Raises RunNotFoundError.

    ``ref`` is a run id, a unique id prefix or a run name — that run — or a
    goal: the run ``Journal(goal)`` would resume (its newest unfinished
    unnamed run), or with ``run`` (an id, id prefix or name) that run of the
    goal. A word that is both is taken as a run id first, then as a goal.
    """
    journal = as_inspector(inspector)
    exact = journal.has_run(ref)
    if not journal.has_goal(ref) or exact:
        if run is not None:
            if exact:
                raise LetItLoopError(
                    f"{preview(ref)} is a run id; pass --run only with a goal (lil reset "
                    f"GOAL --run RUN), or the run alone (lil reset RUN)"
                )
            raise RunNotFoundError(no_goal(journal, ref))
        try:
            return find_run(journal, ref)
        except RunNotFoundError as exc:
            if "several" in str(exc):
                raise  # an ambiguous prefix or name says so itself
            _refuse_waiting_entry(journal, ref)
            raise RunNotFoundError(
                f"no goal, run id, run id prefix or run name {preview(ref)} in {journal.path}; "
                f"{known_goals(journal)}; 'lil runs' lists the runs",
                run=ref,
            ) from None
    if run is not None:
        return find_run(journal, run, goal=ref)
    target = resumable_run(journal, ref)
    if target is None:
        # Runs opened for arguments (a @durable call's) are each that call's:
        # Journal(goal) never resumes them, so they are named by their id.
        called = journal.argument_runs(ref, 3)
        if called:
            shown = "; ".join(f"{r.id} (input {render_input(r.input_json)})" for r in called)
            raise RunNotFoundError(
                f"goal {preview(ref)} has no unfinished run that Journal({preview(ref)}) "
                f"would resume; its unfinished runs were opened for arguments (a @durable "
                f"call's run is that call's): {shown}; forget one by its id: "
                f"lil reset {called[0].id}"
            )
        raise RunNotFoundError(
            f"goal {preview(ref)} has no unfinished unnamed run to reset (the next "
            f"Journal({preview(ref)}) starts a new run anyway); to forget a named or "
            f"completed run, or a @durable call's run (opened for its arguments), pass it: "
            f"lil reset RUN, or "
            f"lil reset {shlex.quote(ref)} --run RUN ('lil runs {shlex.quote(ref)}' lists them)"
        )
    return target


def render_input(text: str | None, limit: int = 60) -> str:
    """A run's recorded input as one short line for a message."""
    one = " ".join((text or "none").split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def reset_run(inspector: Inspector | Store, ref: str, run: str | None = None) -> RunInfo:
    """Forget a run: delete its row, attempts, steps and run-scoped markers in one transaction.

    ``ref`` and ``run`` name the run as for :func:`reset_target`: a run id,
    prefix or name, or a goal (the run ``Journal(goal)`` would resume, or its
    run ``run``). The next ``Journal(goal)`` then resumes an older unfinished
    run if there is one, else starts a new run; a named run's name starts a
    new run. A work queue's run has its entry put back in its queue
    (``queued``, its result forgotten): a worker runs it again from its first
    step (unless another entry with its dedup key is active: then the entry
    keeps its ending). Returns the run as it was. Raises RunHeldError
    (nothing changed) for a run a live process holds.
    """
    journal = as_inspector(inspector)
    target = reset_target(journal, ref, run)
    with holding_run(journal, target, "reset"):
        journal.delete_runs([target])
    for entry in queue_entries(journal, run_ids=[target.id]):
        # A queue's run: its entry goes back to its queue, and a worker runs it afresh.
        journal.requeue_entry(entry.id, target.id)
    return target


def _refuse_waiting_entry(journal: Inspector, ref: str) -> None:
    """A queue entry no worker started a run for has nothing to forget: say so."""
    try:
        entry = find_entry(journal, ref)
    except RunNotFoundError:
        return
    if entry.run_id is None:
        raise LetItLoopError(
            f"{preview(ref)} is queue {entry.queue!r}'s entry {entry.id}, {entry.state}: no "
            f"worker started its run yet, so there is nothing to reset; to keep it from "
            f"starting, cancel it: lil cancel {entry.id}"
        )
