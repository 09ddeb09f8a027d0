"""Forgetting runs: which run ``lil reset`` means (:func:`reset_target`), forgetting it
(:func:`reset_run`), and deleting runs with their rows (:func:`delete_runs`, which gc uses too).
"""

from __future__ import annotations

import shlex
import sqlite3

from ..errors import LetItLoopError, RunNotFoundError
from ..goals import delete_run_rows
from ..inspection import RunInfo, find_run, resumable_run
from ..inspection.listing import known_goals, no_goal
from ..store import Store
from .holding import holding_run


def reset_target(store: Store, ref: str, run: str | None = None) -> RunInfo:
    """The run :func:`reset_run` would forget. Raises RunNotFoundError.

    ``ref`` is a run id, a unique id prefix or a run name — that run — or a
    goal: the run ``Journal(goal)`` would resume (its newest unfinished
    unnamed run), or with ``run`` (an id, id prefix or name) that run of the
    goal. A word that is both is taken as a run id first, then as a goal.
    """
    exact = store.query("SELECT 1 FROM runs WHERE id = ?", (ref,))
    if store.goal_table(ref) is None or exact:
        if run is not None:
            if exact:
                raise LetItLoopError(
                    f"{ref!r} is a run id; pass --run only with a goal (lil reset GOAL --run "
                    f"RUN), or the run alone (lil reset RUN)"
                )
            raise RunNotFoundError(no_goal(store, ref))
        try:
            return find_run(store, ref)
        except RunNotFoundError as exc:
            if "several" in str(exc):
                raise  # an ambiguous prefix or name says so itself
            raise RunNotFoundError(
                f"no goal, run id, run id prefix or run name {ref!r} in {store.path}; "
                f"{known_goals(store)}; 'lil runs' lists the runs",
                run=ref,
            ) from None
    if run is not None:
        return find_run(store, run, goal=ref)
    target = resumable_run(store, ref)
    if target is None:
        # Runs opened for arguments (a @durable call's) are each that call's:
        # Journal(goal) never resumes them, so they are named by their id.
        called = store.query(
            "SELECT id, input FROM runs WHERE goal = ? AND name IS NULL AND input_fp IS NOT "
            "NULL AND status IN ('running', 'failed', 'waiting') AND cancel_requested_at IS "
            "NULL ORDER BY rowid DESC LIMIT 3",
            (ref,),
        )
        if called:
            shown = "; ".join(f"{rid} (input {render_input(text)})" for rid, text in called)
            raise RunNotFoundError(
                f"goal {ref!r} has no unfinished run that Journal({ref!r}) would resume; its "
                f"unfinished runs were opened for arguments (a @durable call's run is that "
                f"call's): {shown}; forget one by its id: lil reset {called[0][0]}"
            )
        raise RunNotFoundError(
            f"goal {ref!r} has no unfinished unnamed run to reset (the next Journal({ref!r}) "
            f"starts a new run anyway); to forget a named or completed run, or a @durable "
            f"call's run (opened for its arguments), pass it: lil reset RUN, or "
            f"lil reset {shlex.quote(ref)} --run RUN ('lil runs {shlex.quote(ref)}' lists them)"
        )
    return target


def render_input(text: str | None, limit: int = 60) -> str:
    """A run's recorded input as one short line for a message."""
    one = " ".join((text or "none").split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def reset_run(store: Store, ref: str, run: str | None = None) -> RunInfo:
    """Forget a run: delete its row, attempts, steps and run-scoped markers in one transaction.

    ``ref`` and ``run`` name the run as for :func:`reset_target`: a run id,
    prefix or name, or a goal (the run ``Journal(goal)`` would resume, or its
    run ``run``). The next ``Journal(goal)`` then resumes an older unfinished
    run if there is one, else starts a new run; a named run's name starts a
    new run. Returns the run as it was. Raises RunHeldError (nothing changed)
    for a run a live process holds.
    """
    target = reset_target(store, ref, run)
    with holding_run(store, target, "reset"), store.write() as c:
        delete_runs(c, target.journal_table, [target.id])
    return target


def delete_runs(c: sqlite3.Connection, table: str, ids: list[str]) -> int:
    deleted = 0
    for i in range(0, len(ids), 500):
        chunk = ids[i : i + 500]
        marks = ",".join("?" * len(chunk))
        deleted += delete_run_rows(c, table, chunk)
        c.execute(f"DELETE FROM step_tries WHERE run IN ({marks})", chunk)
        c.execute(f"DELETE FROM step_replays WHERE run IN ({marks})", chunk)
        c.execute(f"DELETE FROM attempts WHERE run IN ({marks})", chunk)
        c.execute(f"DELETE FROM runs WHERE id IN ({marks})", chunk)
    return deleted
