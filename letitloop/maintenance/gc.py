"""``lil gc``: runs idle for longer than a duration deleted with their rows, goals left
empty dropped, dead lock files swept and the file vacuumed (:func:`gc_runs`).
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from .. import locks
from ..clock import utc_iso
from ..errors import LetItLoopError, RunHeldError
from ..goals import drop_goal_tables, refresh_journal_rows
from ..inspection import RunInfo
from ..inspection.state import RUN_COLUMNS, STATES, run_infos
from ..store import Store
from .holding import holding_run
from .reset import delete_runs

#: Runs gc deletes per transaction (holding each one's lock file meanwhile).
GC_BATCH = 200


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
        f"SELECT {RUN_COLUMNS} FROM runs r JOIN goals g ON g.goal = r.goal "
        "WHERE r.updated_at < ? ORDER BY r.id",
        (cutoff,),
    )
    infos = run_infos(store, rows)
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
                    held.enter_context(holding_run(store, run, "delete"))
                except RunHeldError:
                    live.append(run)  # opened since we looked: leave it
                    continue
                batch.append(run)
            by_table: dict[str, list[str]] = {}
            for run in batch:
                by_table.setdefault(run.journal_table, []).append(run.id)
            with store.write() as c:
                for table, ids in by_table.items():
                    rows_deleted += delete_runs(c, table, ids)
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
                from ..sqlerrors import explain

                raise explain(exc, store.path) from None
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
        drop_goal_tables(c, table)
    if gone:
        refresh_journal_rows(c)  # the browsing view must not name a dropped table
    return gone
