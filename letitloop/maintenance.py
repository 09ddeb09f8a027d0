"""Maintenance that changes a journal: forget a run (``lil reset``), fork it (``lil fork``), gc.

The read-only side (listing, showing, exporting, finding runs) is
:mod:`letitloop.inspection`; these functions take a store opened for writing
(``open_journal_file(path, write=True)``), hold each run's lock while they
change it (so no process opens it meanwhile; RunHeldError for a run a live
process holds) and change it in one transaction.
"""

from __future__ import annotations

import contextlib
import shlex
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from . import locks
from .errors import LetItLoopError, RunHeldError, RunNotFoundError
from .ids import new_run_id
from .inspection import RunInfo, find_run, get_run, resumable_run, run_rows
from .inspection.listing import _known_goals, _no_goal
from .inspection.state import _RUN_COLUMNS, STATES, _infos
from .journal import run_lock_path
from .store import Store, refresh_journal_rows, utc_iso

#: Runs gc deletes per transaction (holding each one's lock file meanwhile).
GC_BATCH = 200


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


@dataclass(frozen=True)
class GcResult:
    """What :func:`gc_runs` removed (or, with ``dry_run``, would remove)."""

    removed: list[RunInfo]
    skipped_live: list[RunInfo]
    """Old runs left alone because a live process holds them."""
    rows_deleted: int
    supervisor_events_deleted: int
    bytes_before: int
    bytes_after: int
    dry_run: bool
    goals_removed: list[str] = field(default_factory=list)
    """Goals left with no run and no row, removed with their journal tables."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "removed": [r.as_dict() for r in self.removed],
            "skipped_live": [r.as_dict() for r in self.skipped_live],
            "rows_deleted": self.rows_deleted,
            "supervisor_events_deleted": self.supervisor_events_deleted,
            "goals_removed": self.goals_removed,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
            "dry_run": self.dry_run,
        }


@contextlib.contextmanager
def _holding(store: Store, run: RunInfo, doing: str) -> Iterator[None]:
    """Hold ``run``'s lock (so no process opens it meanwhile); RunHeldError if a live one has it."""
    lock = locks.new_lock(run_lock_path(store, run.id))
    if not locks.acquire(lock, 0):
        raise RunHeldError(
            f"run {run.id} of goal {run.goal!r} is held by a live process (pid "
            f"{run.holder_pid} on {run.holder_host}); cannot {doing} it. Wait for it to "
            f"finish or stop that process, then try again",
            run_id=run.id,
            pid=run.holder_pid,
            host=run.holder_host,
        )
    try:
        yield
    finally:
        locks.release(lock)


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
            raise RunNotFoundError(_no_goal(store, ref))
        try:
            return find_run(store, ref)
        except RunNotFoundError as exc:
            if "several" in str(exc):
                raise  # an ambiguous prefix or name says so itself
            raise RunNotFoundError(
                f"no goal, run id, run id prefix or run name {ref!r} in {store.path}; "
                f"{_known_goals(store)}; 'lil runs' lists the runs",
                run=ref,
            ) from None
    if run is not None:
        return find_run(store, run, goal=ref)
    target = resumable_run(store, ref)
    if target is None:
        raise RunNotFoundError(
            f"goal {ref!r} has no unfinished unnamed run to reset (the next Journal({ref!r}) "
            f"starts a new run anyway); to forget a named or completed run pass it: "
            f"lil reset RUN, or lil reset {shlex.quote(ref)} --run RUN"
        )
    return target


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
    with _holding(store, target, "reset"), store.write() as c:
        _delete_runs(c, target.journal_table, [target.id])
    return target


def _delete_runs(c: sqlite3.Connection, table: str, ids: list[str]) -> int:
    deleted = 0
    for i in range(0, len(ids), 500):
        chunk = ids[i : i + 500]
        marks = ",".join("?" * len(chunk))
        deleted += c.execute(f'DELETE FROM "{table}" WHERE run IN ({marks})', chunk).rowcount
        c.execute(f"DELETE FROM step_tries WHERE run IN ({marks})", chunk)
        c.execute(f"DELETE FROM attempts WHERE run IN ({marks})", chunk)
        c.execute(f"DELETE FROM runs WHERE id IN ({marks})", chunk)
    return deleted


# -- fork ----------------------------------------------------------------------------


def fork_run(
    store: Store,
    run: RunInfo | str,
    from_step: str,
    *,
    clock: Callable[[], float] = time.time,
) -> ForkResult:
    """A new run of the same goal that keeps the source's rows before ``from_step``.

    The new run holds copies of the source's done steps and done markers that
    precede ``from_step`` in journal order (copied rows carry attempt 0);
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
    with _holding(store, source, "fork"), store.write() as c:
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
        c.execute(
            f'INSERT INTO "{table}" (run, key, kind, status, fn, result, started_at, '
            f"finished_at, duration_ms, attempt, error, traceback, wake_at, "
            f"input_tokens, output_tokens, cost, model) "
            f"SELECT ?, key, kind, status, fn, result, started_at, finished_at, duration_ms, "
            f"0, error, traceback, wake_at, input_tokens, output_tokens, cost, model "
            f'FROM "{table}" WHERE run = ? AND rowid < ? '
            f"AND status = 'done' ORDER BY rowid",
            (new_id, source.id, cut),
        )
    return ForkResult(get_run(store, new_id), get_run(store, source.id), copied, renamed)


# -- gc ------------------------------------------------------------------------------


def _file_bytes(store: Store) -> int:
    total = 0
    for suffix in ("", "-wal"):
        with contextlib.suppress(OSError):
            total += Path(str(store.path) + suffix).stat().st_size
    return total


def _cutoff(older_than: timedelta, now: float | None) -> str:
    """The ``updated_at`` text before which a run is older than ``older_than``."""
    try:
        return utc_iso((now if now is not None else time.time()) - older_than.total_seconds())
    except (OverflowError, ValueError, OSError):
        return "0001-01-01T00:00:00.000000+00:00"  # before year 1: nothing is that old


def gc_candidates(
    store: Store,
    older_than: timedelta,
    *,
    status: str | Iterable[str] | None = None,
    now: float | None = None,
) -> tuple[list[RunInfo], list[RunInfo]]:
    """(runs gc would remove, old runs it leaves because a live process holds them).

    A run is old when its last activity (``updated_at``) is older than
    ``older_than``. Without ``status``, old runs in every state but
    ``running`` are candidates; a live-held run never is.
    """
    cutoff = _cutoff(older_than, now)
    rows = store.query(
        f"SELECT {_RUN_COLUMNS} FROM runs r JOIN goals g ON g.goal = r.goal "
        "WHERE r.updated_at < ? ORDER BY r.id",
        (cutoff,),
    )
    infos = _infos(store, rows)
    wanted = None if status is None else ({status} if isinstance(status, str) else set(status))
    if wanted is not None and wanted - set(STATES):
        raise LetItLoopError(
            f"unknown run status {sorted(wanted - set(STATES))[0]!r}; expected one of "
            f"{', '.join(STATES)}"
        )
    live = [i for i in infos if i.state == "running"]
    removable = [i for i in infos if i.state != "running" and (wanted is None or i.state in wanted)]
    return removable, live


def gc_runs(
    store: Store,
    older_than: timedelta,
    *,
    status: str | Iterable[str] | None = None,
    dry_run: bool = False,
    vacuum: bool = True,
    now: float | None = None,
) -> GcResult:
    """Delete runs idle for longer than ``older_than`` with their rows, then VACUUM.

    Each removed run goes with its steps, markers and attempts, in one
    transaction; with no ``status`` filter, supervisor events older than the
    cutoff that no remaining attempt refers to go too. Then ``VACUUM`` (the
    journal does not use auto_vacuum, so incremental vacuum is not available)
    and a WAL checkpoint give the space back to the filesystem. ``dry_run``
    reports what would go and changes nothing.
    """
    removable, live = gc_candidates(store, older_than, status=status, now=now)
    before = _file_bytes(store)
    cutoff = _cutoff(older_than, now)
    if dry_run:
        events = 0
        if status is None:
            going = {r.id for r in removable}
            kept_watchers = {
                w
                for run, w in store.query(
                    "SELECT run, watch_id FROM attempts WHERE watch_id IS NOT NULL"
                )
                if run not in going
            }
            events = sum(
                1
                for (w,) in store.query(
                    "SELECT watch_id FROM supervisor_events WHERE at < ?", (cutoff,)
                )
                if w not in kept_watchers
            )
        return GcResult(
            removable,
            live,
            sum(r.steps_done + r.steps_failed + r.markers for r in removable),
            events,
            before,
            before,
            True,
            _empty_goals(store.conn, store, {r.id for r in removable}),
        )
    rows_deleted = events_deleted = 0
    removed: list[RunInfo] = []
    # Hold the runs' locks while deleting them, so no process opens one meanwhile;
    # in batches, so a large gc never has more lock files open than a batch.
    for i in range(0, len(removable), GC_BATCH):
        with contextlib.ExitStack() as held:
            batch = []
            for run in removable[i : i + GC_BATCH]:
                try:
                    held.enter_context(_holding(store, run, "delete"))
                except RunHeldError:
                    live.append(run)  # opened since we looked: leave it
                    continue
                batch.append(run)
            by_table: dict[str, list[str]] = {}
            for run in batch:
                by_table.setdefault(run.journal_table, []).append(run.id)
            with store.write() as c:
                for table, ids in by_table.items():
                    rows_deleted += _delete_runs(c, table, ids)
            removed.extend(batch)
    with store.write() as c:
        goals_removed = _drop_empty_goals(c, store)
    if status is None:
        with store.write() as c:
            events_deleted = c.execute(
                "DELETE FROM supervisor_events WHERE at < ? AND watch_id NOT IN "
                "(SELECT watch_id FROM attempts WHERE watch_id IS NOT NULL)",
                (cutoff,),
            ).rowcount
    removable = removed
    # Lock files of holders that died (a run or marker whose process was killed
    # inside it) are not removed by anyone else: reclaim every one not held now.
    locks.sweep(store.lock_folder)
    if vacuum and (removable or events_deleted or goals_removed):
        with store.lock:
            try:
                # VACUUM rewrites the file without the freed pages; in WAL mode the new
                # pages land in the -wal file, and the checkpoint moves them into the
                # database and truncates the WAL, so the file really shrinks.
                store.conn.execute("VACUUM")
                store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as exc:
                from .store import _explain

                raise _explain(exc, store.path) from None
    return GcResult(
        removable,
        live,
        rows_deleted,
        events_deleted,
        before,
        _file_bytes(store),
        False,
        goals_removed,
    )


def _empty_goals(conn: sqlite3.Connection, store: Store, going: set[str]) -> list[str]:
    """Goals that have no run but those in ``going`` and no row of another run (in order).

    A goal's table may hold rows of no run: goal-scoped markers (run ``*``),
    which guard side effects across runs; such a goal is never empty.
    """
    with store.lock:
        try:
            goals = conn.execute("SELECT goal, journal_table FROM goals ORDER BY goal").fetchall()
            empty = []
            for goal, table in goals:
                runs = {r for (r,) in conn.execute("SELECT id FROM runs WHERE goal = ?", (goal,))}
                if runs - going:
                    continue
                marks = ",".join("?" * len(runs))
                other = conn.execute(
                    f'SELECT 1 FROM "{table}" WHERE run NOT IN ({marks}) LIMIT 1', sorted(runs)
                ).fetchone()
                if other is None:
                    empty.append(str(goal))
            return empty
        except sqlite3.Error as exc:
            raise store.explain(exc) from None


def _drop_empty_goals(c: sqlite3.Connection, store: Store) -> list[str]:
    """Inside a write transaction: remove goals with no run and no row, and their tables."""

    gone = _empty_goals(c, store, set())
    for goal in gone:
        (table,) = c.execute("SELECT journal_table FROM goals WHERE goal = ?", (goal,)).fetchone()
        c.execute("DELETE FROM goals WHERE goal = ?", (goal,))
        c.execute(f'DROP TABLE IF EXISTS "{table}"')
    if gone:
        refresh_journal_rows(c)  # the browsing view must not name a dropped table
    return gone


__all__ = [
    "GC_BATCH",
    "ForkResult",
    "GcResult",
    "fork_run",
    "gc_candidates",
    "gc_runs",
    "reset_run",
    "reset_target",
]
