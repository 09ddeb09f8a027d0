"""Work queues seen from outside (docs/queues.md): their entries with the state each is in
(:func:`queue_entries`), ``lil runs`` with the entries that have no run yet
(:func:`list_runs_and_entries`), one entry by what names it (:func:`find_entry`), and each
queue's counts (:func:`queue_stats`).

A queue's entry is a run to be: until a worker claims it there is no run, only the entry
(its task is the run's goal, its run's name is known). ``lil runs`` lists such an entry
as a row of its own, its state ``queued`` or ``delayed`` (or ``cancelled``, cancelled
before it started), and says of each run that has an entry which queue it came from
(:attr:`RunInfo.queue`). Every store's inspector answers the same questions
(``queue_rows``, ``queue_held``); a journal no queue used has no entry.
"""

from __future__ import annotations

import fnmatch
import heapq
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from ..errors import RunNotFoundError
from ..primitives.clock import utc_iso
from ..runtext.previews import preview
from ..stores.sqlite.store import Store
from .entries import ENTRY_STATES, QueueEntry
from .inspector import Inspector
from .inspector_queues import QueueEntries
from .listing import MIN_PREFIX, list_runs
from .records import RunInfo
from .sqlite_inspector import as_inspector
from .state import STATES

#: The states only an entry without a run has (``lil runs --status queued``).
WAITING = ("queued", "delayed")

#: Run ids asked of an inspector at once (a statement's parameters are bounded).
_CHUNK = 500


def entry_state(row: dict[str, Any], held: bool, now: str) -> str:
    """An entry's state (:data:`ENTRY_STATES`) from its recorded row: ``held`` says whether
    a live worker holds it (asked of claimed entries only), ``now`` is ISO-8601 UTC."""
    status = str(row["status"])
    if status == "queued":
        return "delayed" if str(row["not_before"]) > now else "queued"
    if status == "claimed":
        return "running" if held else "crashed"
    return status


def entries_of(
    journal: QueueEntries, rows: list[dict[str, Any]], now: float | None = None
) -> list[QueueEntry]:
    """The :class:`QueueEntry` of each recorded row, in order, its state told."""
    claimed = [str(r["id"]) for r in rows if r["status"] == "claimed"]
    held = journal.queue_held(claimed) if claimed else set()
    at = utc_iso(time.time() if now is None else now)
    return [
        QueueEntry(
            id=str(r["id"]),
            queue=str(r["queue"]),
            task=str(r["task"]),
            run_name=str(r["run_name"]),
            run_id=r["run_id"],
            priority=int(r["priority"]),
            dedup_key=r["dedup_key"],
            status=str(r["status"]),
            state=entry_state(r, str(r["id"]) in held, at),
            not_before=str(r["not_before"]),
            attempt=int(r["attempt"]),
            holder_pid=r["holder_pid"],
            holder_host=r["holder_host"],
            enqueued_at=str(r["enqueued_at"]),
            claimed_at=r["claimed_at"],
            finished_at=r["finished_at"],
            error=r["error"],
            cancel_requested_at=r["cancel_requested_at"],
        )
        for r in rows
    ]


def queue_entries(
    inspector: QueueEntries | Store,
    queue: str | None = None,
    *,
    ids: Sequence[str] | None = None,
    run_ids: Sequence[str] | None = None,
    run_names: Sequence[str] | None = None,
    unstarted: bool = False,
    limit: int | None = None,
) -> list[QueueEntry]:
    """The entries every condition given selects (``QueueEntries.queue_rows``), newest first."""
    journal = as_inspector(inspector)
    if run_ids is not None and len(run_ids) > _CHUNK:
        rows: list[dict[str, Any]] = []
        for i in range(0, len(run_ids), _CHUNK):
            rows += journal.queue_rows(
                queue, ids=ids, run_ids=run_ids[i : i + _CHUNK], run_names=run_names,
                unstarted=unstarted,
            )  # fmt: skip
        rows.sort(key=lambda r: (str(r["enqueued_at"]), str(r["id"])), reverse=True)
    else:
        rows = journal.queue_rows(
            queue, ids=ids, run_ids=run_ids, run_names=run_names, unstarted=unstarted,
            limit=limit,
        )  # fmt: skip
    return entries_of(journal, rows)


def entry_run(entry: QueueEntry) -> RunInfo:
    """The row ``lil runs`` shows for an entry no worker started a run for yet: its id the
    entry's, its goal the task, its name the run's, its state the entry's."""
    return RunInfo(
        id=entry.id,
        goal=entry.task,
        name=entry.run_name,
        status={"claimed": "running"}.get(entry.status, entry.status),
        state=entry.state,
        attempts=0,
        steps_done=0,
        steps_failed=0,
        markers=0,
        started_at=entry.enqueued_at,
        updated_at=entry.finished_at or entry.claimed_at or entry.enqueued_at,
        finished_at=entry.finished_at,
        error=entry.error,
        holder_pid=entry.holder_pid if entry.state == "running" else None,
        holder_host=entry.holder_host if entry.state == "running" else None,
        journal_table="",
        queue=entry.tag,
    )


def tagged(inspector: Inspector | Store, runs: list[RunInfo]) -> list[RunInfo]:
    """``runs`` in order, each run a queue's entry started given that entry (``queue``)."""
    if not runs:
        return runs
    journal = as_inspector(inspector)
    by_run = {e.run_id: e for e in queue_entries(journal, run_ids=[r.id for r in runs]) if e.run_id}
    return [with_entry(r, by_run[r.id]) if r.id in by_run else r for r in runs]


def with_entry(run: RunInfo, entry: QueueEntry) -> RunInfo:
    """``run`` told with its queue ``entry``: a run its worker gave back to the queue
    (suspended by a rate limit or for its child, or let go of by a drain) is in the
    entry's state, ``queued`` or ``delayed``, not ``crashed``: nobody holds it, by design."""
    if run.state == "crashed" and entry.state in WAITING:
        return replace(run, queue=entry.tag, state=entry.state)
    return replace(run, queue=entry.tag)


def _selects(
    entry: QueueEntry,
    goal: str | None,
    states: set[str] | None,
    since: str | None,
    until: str | None,
    name: str | None,
) -> bool:
    return (
        (goal is None or entry.task == goal)
        and (states is None or entry.state in states)
        and (since is None or entry.enqueued_at >= since)
        and (until is None or entry.enqueued_at < until)
        and (name is None or fnmatch.fnmatchcase(entry.run_name, name))
    )


def list_runs_and_entries(
    inspector: Inspector | Store,
    goal: str | None = None,
    *,
    status: Iterable[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    name: str | None = None,
    inputs: Sequence[tuple[str, str]] = (),
    limit: int | None = None,
    offset: int = 0,
    version: str | None = None,
    queue: str | None = None,
) -> list[RunInfo]:
    """``lil runs``: :func:`~letitloop.inspection.listing.list_runs`'s runs, each a queue's
    run tagged with its entry (``queue``), and the entries no worker started a run for yet
    among them, newest first (an entry by when it was enqueued).

    ``status`` takes the run states and ``queued`` and ``delayed`` (entries that wait).
    ``queue`` keeps the runs and entries of that queue only. ``inputs`` and ``version``
    are a run's: an entry without a run has neither, and none matches them.
    """
    journal = as_inspector(inspector)
    wanted = None if status is None else set(status)
    if wanted is not None:
        unknown = wanted - set(STATES) - set(WAITING)
        if unknown:
            raise RunNotFoundError(
                f"unknown run status {sorted(unknown)[0]!r}; expected one of "
                f"{', '.join(STATES + WAITING)}"
            )
    since_at = None if since is None else utc_iso(since.timestamp())
    until_at = None if until is None else utc_iso(until.timestamp())
    want = None if limit is None else limit + offset
    if queue is not None:
        return _of_queue(
            journal, queue, goal, wanted, since_at, until_at, name, inputs, version, want
        )[offset:]
    found: list[RunInfo] = []
    unknown_goal: RunNotFoundError | None = None
    run_states = None if wanted is None else wanted - set(WAITING)
    if run_states is not None and wanted is not None and wanted & set(WAITING):
        run_states.add("crashed")  # a run given back to its queue: told as its entry
    if run_states is None or run_states:
        try:
            found = list_runs(
                journal, goal, status=run_states, since=since, until=until, name=name,
                inputs=inputs, limit=want, version=version,
            )  # fmt: skip
        except RunNotFoundError as exc:
            unknown_goal = exc  # unless the goal is a task whose entries wait: no run yet
        found = tagged(journal, found)
        if wanted is not None:
            found = [r for r in found if r.state in wanted]
    waiting: list[RunInfo] = []
    if not inputs and version is None:
        # The newest ``want`` are enough unless a condition is checked here, after reading.
        plain = goal is None and wanted is None and since is None and until is None and not name
        waiting = [
            entry_run(e)
            for e in queue_entries(journal, unstarted=True, limit=want if plain else None)
            if _selects(e, goal, wanted, since_at, until_at, name)
        ]
    if unknown_goal is not None and not waiting:
        raise unknown_goal
    if waiting:
        # Merged, not sorted: each list keeps its own order (the runs by when they were made,
        # the entries by when they were enqueued), and the first n merged depend only on
        # the first n of each, so the pages of one listing (limit, offset) hold each row once.
        found = list(heapq.merge(found, waiting, key=lambda r: r.started_at, reverse=True))
    return found[offset : None if want is None else want]


def _of_queue(
    journal: Inspector,
    queue: str,
    goal: str | None,
    wanted: set[str] | None,
    since: str | None,
    until: str | None,
    name: str | None,
    inputs: Sequence[tuple[str, str]],
    version: str | None,
    want: int | None,
) -> list[RunInfo]:
    """``lil runs --queue NAME``: the queue's entries newest first, each as its run (once
    a worker started one) or as itself, at most ``want`` of them."""
    allowed: set[str] | None = None
    if inputs or version is not None:
        allowed = {
            r.id for r in list_runs(journal, goal, inputs=inputs, version=version, limit=None)
        }
    out: list[RunInfo] = []
    for entry in queue_entries(journal, queue):
        if not _selects(entry, goal, None, since, until, name):
            continue
        run = journal.run(entry.run_id) if entry.run_id else None
        if run is None:
            if allowed is not None:
                continue
            shown = entry_run(entry)
        else:
            if allowed is not None and run.id not in allowed:
                continue
            shown = with_entry(run, entry)
        if wanted is not None and shown.state not in wanted:
            continue
        out.append(shown)
        if want is not None and len(out) >= want:
            break
    return out


def find_entry(inspector: Inspector | Store, ref: str) -> QueueEntry:
    """The queue entry ``ref`` names: its id, an id prefix (:data:`MIN_PREFIX` characters or
    more), or its run's name (the newest entry of that name). RunNotFoundError when none."""
    journal = as_inspector(inspector)
    found = queue_entries(journal, ids=[ref]) or queue_entries(journal, run_names=[ref])
    if not found and len(ref) >= MIN_PREFIX:
        upper = ref.upper()
        found = [e for e in queue_entries(journal) if e.id.startswith(upper)]
        if len(found) > 1:
            raise RunNotFoundError(
                f"id prefix {preview(ref)} matches several queue entries ({found[0].id}, "
                f"{found[1].id}, …); give more characters",
                run=ref,
            )
    if not found:
        raise RunNotFoundError(
            f"no run or queue entry {preview(ref)} in {journal.path}; 'lil runs' lists them",
            run=ref,
        )
    return found[0]


@dataclass(frozen=True)
class QueueStats:
    """One queue as ``lil queues`` shows it: its entries counted by state, the longest
    wait of a due entry, and the workers that hold its running entries."""

    queue: str
    counts: dict[str, int]
    """Entries per state (:data:`ENTRY_STATES`), every state present."""
    oldest_waiting: str | None
    """When the due entry that has waited longest became due (ISO-8601 UTC); None: none."""
    workers: list[str]
    """``pid@host`` of each worker process holding a running entry, sorted."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "queue": self.queue,
            **self.counts,
            "oldest_waiting": self.oldest_waiting,
            "workers": self.workers,
        }


def queue_stats(inspector: QueueEntries | Store, queue: str | None = None) -> list[QueueStats]:
    """Each queue of the journal (or ``queue`` alone), by name: counted by the store
    (``GROUP BY``, from the entries' index), the claimed entries alone read one by one
    (whether a live worker holds each)."""
    journal = as_inspector(inspector)
    now = utc_iso(time.time())
    counts: dict[str, dict[str, int]] = {}
    due: dict[str, str] = {}
    claimed: set[str] = set()
    for name, status, delayed, n, earliest in journal.queue_counts(queue, now):
        of = counts.setdefault(name, dict.fromkeys(ENTRY_STATES, 0))
        if status == "claimed":
            claimed.add(name)
            continue
        state = "delayed" if delayed else status
        of[state] = of.get(state, 0) + n
        if state == "queued":  # not_before: never before it was enqueued
            due[name] = min(due.get(name, earliest), earliest)
    workers: dict[str, set[str]] = {}
    for name in sorted(claimed):
        for e in entries_of(journal, journal.queue_rows(name, status="claimed")):
            counts[name][e.state] = counts[name].get(e.state, 0) + 1
            if e.state == "running":
                workers.setdefault(name, set()).add(f"{e.holder_pid}@{e.holder_host}")
    return [
        QueueStats(name, counts[name], due.get(name), sorted(workers.get(name, ())))
        for name in sorted(counts)
    ]
