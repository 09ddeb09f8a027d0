"""``lil gc``: runs idle for longer than a duration deleted with their rows, goals left
empty dropped, dead lock files swept and the file vacuumed (:func:`gc_runs`).

A work queue's run goes by the same rules, with its entry once the entry ended; a run
whose entry is still queued or claimed is never removed (a worker runs it, or takes it
over), nor a child run whose parent run has not ended (the parent reads its result
later), and an entry that ended with no run (cancelled while queued) goes when it is
as old.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from ..errors import LetItLoopError, RunHeldError
from ..inspection import STATES, Inspector, RunInfo, as_inspector
from ..inspection.inspector_queues import QueueEntries
from ..inspection.queue_listing import queue_entries
from ..primitives.clock import utc_iso
from ..queueing.queue_records import ENDED
from ..stores.sqlite.store import Store
from .holding import holding_run

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
    queue_entries_removed: list[str] = field(default_factory=list)
    """Ended work-queue entries removed: those of the runs removed, and those that ended
    before a worker started a run (cancelled while queued) as long ago."""
    skipped_queued: list[RunInfo] = field(default_factory=list)
    """Old runs left alone because their queue entry is still queued or claimed (a worker
    runs them again; a crashed one is taken over), or because they are a queue's child
    runs whose parent run has not ended (it has still to read their result)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "removed": [r.as_dict() for r in self.removed],
            "skipped_live": [r.as_dict() for r in self.skipped_live],
            "rows_deleted": self.rows_deleted,
            "supervisor_events_deleted": self.supervisor_events_deleted,
            "goals_removed": self.goals_removed,
            "queue_entries_removed": self.queue_entries_removed,
            "skipped_queued": [r.as_dict() for r in self.skipped_queued],
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
            "dry_run": self.dry_run,
        }


def _cutoff(older_than: timedelta, now: float | None) -> str:
    """The ``updated_at`` text before which a run is older than ``older_than``."""
    try:
        return utc_iso((now if now is not None else time.time()) - older_than.total_seconds())
    except (OverflowError, ValueError, OSError):
        return "0001-01-01T00:00:00.000000+00:00"  # before year 1: nothing is that old


def gc_candidates(
    inspector: Inspector | Store,
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
    infos = as_inspector(inspector).runs_updated_before(cutoff)
    wanted = None if status is None else ({status} if isinstance(status, str) else set(status))
    if wanted is not None and wanted - set(STATES):
        raise LetItLoopError(
            f"unknown run status {sorted(wanted - set(STATES))[0]!r}; expected one of "
            f"{', '.join(STATES)}"
        )
    live = [i for i in infos if i.state == "running"]
    removable = [i for i in infos if i.state != "running" and (wanted is None or i.state in wanted)]
    return removable, live


def _queued_runs(journal: QueueEntries, runs: list[RunInfo]) -> set[str]:
    """The ids of ``runs`` whose queue entry is still queued or claimed: never gc's."""
    return {
        e.run_id
        for e in queue_entries(journal, run_ids=[r.id for r in runs])
        if e.run_id is not None and e.status in ("queued", "claimed")
    }


def _waited_children(journal: Inspector, runs: list[RunInfo]) -> set[str]:
    """The ids of ``runs`` that are a queue's child runs whose parent run has not ended (it
    runs, or is suspended waiting for them): never gc's, so the parent still reads the
    result. The parent is the entry's ``parent_run``, else the child's run name's prefix
    (``<parent run id>:<step key>``: a file recorded before the link was)."""
    entries = queue_entries(journal, run_ids=[r.id for r in runs])
    if not entries:
        return set()
    linked = journal.queue_parents([e.run_id for e in entries if e.run_id is not None])
    parents: dict[str, str] = {}
    for e in entries:
        if e.run_id is None:
            continue
        parent = linked.get(e.run_id)
        if parent is None and ":" in e.run_name:
            parent = e.run_name.split(":", 1)[0]
        if parent is not None:
            parents[e.run_id] = parent
    kept = set()
    states: dict[str, str | None] = {}
    for child, parent in parents.items():
        if parent not in states:
            found = journal.run(parent)
            states[parent] = None if found is None else found.state
        if states[parent] not in (None, "completed", "failed", "cancelled"):
            kept.add(child)
    return kept


def _ended_entries(
    journal: QueueEntries, removed: list[RunInfo], cutoff: str, wanted: set[str] | None
) -> list[str]:
    """The queue entries gc removes: the ended ones of the runs it removes, and the ones that
    ended with no run (cancelled while queued) before ``cutoff``, of a state ``wanted``."""
    ids = [
        e.id for e in queue_entries(journal, run_ids=[r.id for r in removed]) if e.status in ENDED
    ]
    ids += [
        e.id
        for e in queue_entries(journal, unstarted=True)
        if e.status in ENDED
        and (e.finished_at or e.enqueued_at) < cutoff
        and (wanted is None or e.state in wanted)
    ]
    return ids


def gc_runs(
    inspector: Inspector | Store,
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
    journal = as_inspector(inspector)
    removable, live = gc_candidates(journal, older_than, status=status, now=now)
    queued = _queued_runs(journal, removable)
    queued |= _waited_children(journal, [r for r in removable if r.id not in queued])
    kept = [r for r in removable if r.id in queued]
    removable = [r for r in removable if r.id not in queued]
    wanted = None if status is None else ({status} if isinstance(status, str) else set(status))
    before = journal.size()
    cutoff = _cutoff(older_than, now)
    if dry_run:
        events = 0
        if status is None:
            events = journal.supervisor_events_before(cutoff, {r.id for r in removable})
        return GcResult(
            removable,
            live,
            sum(r.steps_done + r.steps_failed + r.markers for r in removable),
            events,
            before,
            before,
            True,
            journal.empty_goals({r.id for r in removable}),
            _ended_entries(journal, removable, cutoff, wanted),
            kept,
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
                    held.enter_context(holding_run(journal, run, "delete"))
                except RunHeldError:
                    live.append(run)  # opened since we looked: leave it
                    continue
                batch.append(run)
            rows_deleted += journal.delete_runs(batch)
            removed.extend(batch)
    entries = _ended_entries(journal, removed, cutoff, wanted)
    journal.delete_queue_entries(entries)
    goals_removed = journal.drop_empty_goals()
    if status is None:
        events_deleted = journal.delete_supervisor_events(cutoff)
    removable = removed
    # Locks of holders that died (a run or marker whose process was killed inside
    # it) are not removed by anyone else: reclaim every one not held now.
    journal.sweep_locks()
    if vacuum and (removable or events_deleted or goals_removed or entries):
        journal.compact()
    return GcResult(
        removable,
        live,
        rows_deleted,
        events_deleted,
        before,
        journal.size(),
        False,
        goals_removed,
        entries,
        kept,
    )
