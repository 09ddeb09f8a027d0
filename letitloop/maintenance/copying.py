"""``lil copy FROM TO``: runs moved from one store to another (a journal file to PostgreSQL,
one file to another), everything each run owns, verified in the target afterwards.

The rules and the words; the reading and writing are the inspectors'
(``run_image``, ``add_runs``: :mod:`letitloop.inspection.images`). In order:

- which runs: all of the source's, or those of one goal (``goal``), or only
  the finished (completed or cancelled) or the unfinished ones (``only``),
  copied oldest first, so the target's "newest unfinished run" is the
  source's;
- a run the target has already (the same id, or the same name in its goal)
  refuses the whole copy before anything is written, unless
  ``skip_existing``: then it is left as the target has it, and reported;
- a run held by a live process in the source refuses the copy before
  anything is written (its holder is still writing it; copy it once it
  ends); each run is held while it is read, so no process opens it meanwhile;
- the runs are written in batches of :data:`BATCH` (fewer when they hold
  :data:`BATCH_ROWS` rows), each batch one
  transaction of the target: a copy stopped half-way (a kill, a full disk)
  leaves whole runs, and the same copy with ``skip_existing`` finishes it;
- a run's streamed steps' chunks (``letitloop.streams``) go with it: a stream
  journaled to its end replays them, one cut by a kill is recovered from them;
- a work queue's entries go with their runs (and those no worker started a
  run for yet: they wait in the target's queue); an entry the target has is
  left as it is;
- afterwards each copied run is read back from the target as ``lil verify``
  reads it: its chain's entries and its rows' digests must be the source's,
  and with ``LETITLOOP_SEAL_KEY`` set its chain is checked with the key, as
  ``lil verify`` checks it. A difference raises; nothing is deleted.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import LetItLoopError, RunHeldError
from ..inspection import Inspector, RunFilter, open_inspector
from ..inspection.images import RunImage, row_digests
from ..inspection.inspector_queues import QueueEntries
from ..inspection.journalfile import create_journal_file
from ..inspection.verify import chain_of, check_chain
from ..integrity.seals import env_seal_key
from ..stores import schemes
from .holding import holding_run

#: Runs per transaction of the target: big enough that a commit is paid rarely, small
#: enough that a copy stopped half-way loses little and the batch's memory stays bounded.
BATCH = 200

#: Rows per transaction at most (a batch ends early at this many): what a batch holds in
#: memory stays bounded however long its runs are.
BATCH_ROWS = 50_000

#: What ``only`` selects, by the statuses a run records.
ONLY = {
    "finished": ("completed", "cancelled"),
    "unfinished": ("running", "failed", "waiting"),
}


@dataclass
class CopyResult:
    """What :func:`copy_runs` did."""

    source: str
    target: str
    copied: list[str] = field(default_factory=list)
    """The ids of the runs copied, oldest first."""
    skipped: list[str] = field(default_factory=list)
    """The ids of the runs the target had already (``skip_existing``)."""
    rows: int = 0
    """Steps, markers, sleeps and waits copied."""
    sealed: int = 0
    """Copied runs whose chain was checked with ``LETITLOOP_SEAL_KEY``: every link holds."""
    unchecked: int = 0
    """Copied runs with a chain that was not checked with the key (none was set); their
    entries and rows were compared with the source's all the same."""
    queue_entries: int = 0
    """Work-queue entries copied: those of the runs copied (or the target had), and those
    no worker started a run for yet."""


def same_journal(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether two locations name one journal: one file (by identity when both exist), or
    the same URL."""
    url_a, url_b = schemes.scheme_of(str(a)), schemes.scheme_of(str(b))
    if url_a is not None or url_b is not None:
        return str(a) == str(b)
    pa, pb = Path(a), Path(b)
    if pa.exists() and pb.exists():
        return os.path.samefile(pa, pb)
    return pa.resolve() == pb.resolve()


def open_ends(
    source: str, target: str, *, separate_process: bool = True
) -> tuple[Inspector, Inspector]:
    """The two journals of ``lil copy``: the source read-only (it must exist), the target
    for writing (a new journal file made when none is there; a PostgreSQL schema gets its
    tables at the first write). LetItLoopError, nothing made, when both name one journal;
    what :func:`~letitloop.inspection.open_inspector` raises for a missing source, a file
    of a newer letitloop, or (``separate_process``, as for ``lil``) a ``memory://`` store,
    which lives in another process's memory."""
    if same_journal(source, target):
        raise LetItLoopError(
            f"{target} is the journal the runs are copied from; name another file or database"
        )
    reader = open_inspector(source, separate_process=separate_process)
    try:
        if schemes.scheme_of(target) is None and not Path(target).exists():
            create_journal_file(target)
        writer = open_inspector(target, write=True, separate_process=separate_process)
    except BaseException:
        reader.close()
        raise
    return reader, writer


def copy_runs(
    source: Inspector,
    target: Inspector,
    *,
    goal: str | None = None,
    only: str | None = None,
    skip_existing: bool = False,
) -> CopyResult:
    """Copy the runs of ``source`` into ``target`` (opened for writing) and verify them.

    See the module's docstring for the rules. Raises LetItLoopError (one line,
    nothing written) for a run the target has already without
    ``skip_existing``, RunHeldError for a run a live process holds, and
    LetItLoopError for a copy that does not read back as its source (the
    runs written stay written).
    """
    if goal is not None and not source.has_goal(goal):
        raise LetItLoopError(f"{source.path} has no goal {goal!r}; nothing was copied")
    if only is not None and only not in ONLY:
        raise LetItLoopError(f"only= takes {' or '.join(ONLY)}, not {only!r}")
    where = RunFilter(goal=goal, statuses=ONLY[only] if only else None)
    runs = source.runs(where, limit=None)[::-1]  # oldest first
    result = CopyResult(str(source.path), str(target.path))
    there = target.runs(RunFilter(), limit=None)  # read once: a snapshot, on PostgreSQL
    ids = {r.id for r in there}
    names = {(r.goal, r.name): r.id for r in there if r.name is not None}
    todo = []
    for run in runs:
        other = names.get((run.goal, run.name)) if run.name is not None else None
        if run.id not in ids and other is None:
            todo.append(run)
            continue
        if skip_existing:
            result.skipped.append(run.id)
            continue
        why = "the same run id" if run.id in ids else f"run {other} is named {run.name!r} there"
        raise LetItLoopError(
            f"run {run.id} of goal {run.goal!r} is in {target.path} already ({why}); "
            f"nothing was copied. Pass --skip-existing to copy only the runs it lacks"
        )
    for run in todo:
        if source.is_held(run.id):
            raise RunHeldError(
                f"run {run.id} of goal {run.goal!r} is held by a live process (pid "
                f"{run.holder_pid} on {run.holder_host}), which is still writing it; nothing "
                f"was copied. Let it finish (or stop it), then copy again",
                run_id=run.id,
                pid=run.holder_pid,
                host=run.holder_host,
            )
    secret = env_seal_key()
    images: list[RunImage] = []
    for n, run in enumerate(todo, 1):
        with holding_run(source, run, "copy"):
            images.append(source.run_image(run))
        if len(images) == BATCH or sum(len(i.rows) for i in images) >= BATCH_ROWS or n == len(todo):
            target.add_runs(images)
            for image in images:
                _verify(target, image, secret, result)
                result.copied.append(image.id)
                result.rows += len(image.rows)
            images = []
    result.queue_entries = _copy_entries(source, target, goal, only, ids | set(result.copied))
    return result


#: Which entries ``only`` selects, by their recorded status.
_ONLY_ENTRIES = {
    "finished": ("completed", "cancelled"),
    "unfinished": ("queued", "claimed", "failed"),
}


def _copy_entries(
    source: QueueEntries, target: QueueEntries, goal: str | None, only: str | None, there: set[str]
) -> int:
    """Copy the source's work-queue entries whose run the target has now (or that have no
    run yet), of ``goal``'s task and the statuses ``only`` selects; an entry the target has
    already is left as it is. A claimed entry keeps its claim: its holder's lock is not
    copied, so the target's first worker takes it over."""
    rows = [
        r
        for r in source.queue_rows()
        if (r["run_id"] is None or r["run_id"] in there)
        and (goal is None or r["task"] == goal)
        and (only is None or r["status"] in _ONLY_ENTRIES[only])
    ]
    return target.add_queue_rows(rows[::-1]) if rows else 0


def _chain_rows(rows: Sequence[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (
            r["key"],
            r["kind"],
            r["status"],
            r["fn"],
            r["args_fp"],
            r["result"],
            r["error"],
            r["wake_at"],
        )
        for r in rows
    ]


def _verify(target: Inspector, image: RunImage, secret: bytes | None, result: CopyResult) -> None:
    """Read the copy of ``image`` back from the target as ``lil verify`` reads it."""
    copied = target.run(image.id)
    if copied is None:
        raise LetItLoopError(
            f"run {image.id} was written to {target.path} but cannot be read back; check the "
            f"target (lil runs --db …)"
        )
    entries, rows = chain_of(target, copied)
    differs = None
    if [tuple(e) for e in entries] != [tuple(e) for e in image.seals]:
        differs = "its sealed chain"
    else:
        want, got = row_digests(_chain_rows(image.rows)), row_digests(rows)
        for key in sorted(want.keys() | got.keys()):
            if want.get(key) != got.get(key):
                differs = f"row {key!r}"
                break
    streams = Counter(str(c[0]) for c in image.chunks)
    for key, n in sorted(streams.items()):
        if differs is None and len(target.stream_chunks(image.id, key)) != n:
            differs = f"the chunks of stream {key!r}"
    if differs is not None:
        raise LetItLoopError(
            f"run {image.id} of goal {image.goal!r} does not read back from {target.path} as "
            f"it is in the source: {differs} differs. The copy stays; remove it (lil reset "
            f"{image.id} --db …) and report this as a bug"
        )
    if not entries:
        return
    if secret is None:
        result.unchecked += 1
        return
    found = check_chain(image.id, image.goal, entries, rows, secret)
    if found.state != "sealed":
        raise LetItLoopError(
            f"run {image.id} of goal {image.goal!r}: its chain in {target.path} does not "
            f"verify with LETITLOOP_SEAL_KEY: {found.broken}; check the source with lil "
            f"verify, and that the key is the one the run was sealed with"
        )
    result.sealed += 1
