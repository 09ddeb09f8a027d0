"""Which runs: :func:`list_runs` (by goal, state, time, name, input), and one run by what
names it (:func:`get_run`, :func:`find_run`; :func:`resumable_run`, the one a goal's next
opener resumes); whether a live process holds one (:func:`is_run_held`).

Each takes an :class:`~letitloop.inspection.inspector.Inspector` (or a journal file's
:class:`~letitloop.stores.sqlite.store.Store`, read through a ``SqliteInspector``) and asks it only.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from datetime import datetime

from ..errors import LetItLoopError, RunNotFoundError
from ..primitives.clock import utc_iso
from ..run.generations import is_generation, number_of
from ..runtext.previews import preview
from ..stores.sqlite.store import Store
from .inspector import Inspector
from .inspector_runs import JournalHolds, RunFilter, RunFinding, RunListing
from .records import RunInfo
from .sqlite_inspector import as_inspector
from .state import STATES

#: The shortest unique prefix of a run id ``lil`` accepts: shorter ones are
#: almost always a typo, and a ULID's first characters are only its time.
MIN_PREFIX = 6


def _input_path(key: str) -> tuple[str, ...]:
    """``key`` (dotted for nesting) as the parts of a path into the recorded input."""
    parts = tuple(p for p in key.split(".") if p)
    if not parts:
        raise LetItLoopError(
            f"--input expects KEY=VALUE with a KEY such as 'user_id' or 'user.id', "
            f"got {preview(key)}"
        )
    return parts


def is_run_held(inspector: JournalHolds | Store, run_id: str) -> bool:
    """True when a live process (this one included) holds ``run_id`` right now; writes nothing."""
    return as_inspector(inspector).is_held(run_id)


def list_runs(
    inspector: Inspector | Store,
    goal: str | None = None,
    *,
    status: str | Iterable[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    name: str | None = None,
    inputs: Iterable[tuple[str, str]] = (),
    limit: int | None = None,
    offset: int = 0,
    version: str | None = None,
) -> list[RunInfo]:
    """Runs newest first, optionally of one goal, in some states, started in a time range.

    ``status`` takes the states of :data:`STATES` (``crashed`` and ``running``
    are told apart by the run's lock). ``since`` and ``until`` bound the start
    time (``since`` included, ``until`` not). ``name`` is a glob (``user-*``,
    case-sensitive) on the run's name; an unnamed run never matches it.
    ``inputs`` are ``(key, value)`` pairs the recorded input must all hold
    (see :attr:`RunFilter.inputs`; a key is dotted for nesting). ``version``
    keeps the runs whose latest attempt ran a version of the code starting
    with it (:attr:`RunFilter.version`). ``offset``
    skips that many matching runs first, for paging. An empty list means no
    run matched; an unknown goal raises RunNotFoundError.
    """
    journal = as_inspector(inspector)
    if goal is not None and not journal.has_goal(goal):
        raise RunNotFoundError(no_goal(journal, goal))
    wanted: set[str] | None = None
    recorded: tuple[str, ...] | None = None
    if status is not None:
        wanted = {status} if isinstance(status, str) else set(status)
        unknown = wanted - set(STATES)
        if unknown:
            raise LetItLoopError(
                f"unknown run status {sorted(unknown)[0]!r}; expected one of {', '.join(STATES)}"
            )
        recorded = tuple(
            sorted(
                {"running" if s in ("running", "crashed", "pending") else s for s in wanted}
                | ({"running"} if "cancelled" in wanted else set())
            )
        )
    where = RunFilter(
        goal=goal,
        statuses=recorded,
        since=None if since is None else utc_iso(since.timestamp()),
        until=None if until is None else utc_iso(until.timestamp()),
        name=name,
        inputs=tuple((_input_path(key), value) for key, value in inputs),
        version=version,
    )
    if wanted is None:
        return journal.runs(where, limit=limit, offset=offset)
    # running, crashed and pending differ by their locks: filter after reading them,
    # in pages, so a large journal is not read whole for the newest few.
    out: list[RunInfo] = []
    skip = offset
    page, at = max(100, (limit or 0) + offset), 0
    while True:
        batch = journal.runs(where, limit=page, offset=at)
        at += len(batch)
        for info in batch:
            if info.state not in wanted:
                continue
            if skip:
                skip -= 1
                continue
            out.append(info)
            if limit is not None and len(out) >= limit:
                return out
        if len(batch) < page:
            return out


def known_goals(inspector: Inspector | Store) -> str:
    known = as_inspector(inspector).goal_names(limit=6)
    if not known:
        return "the journal has no goals"
    return f"known goals: {', '.join(known[:5])}{', …' if len(known) > 5 else ''}"


def no_goal(inspector: Inspector | Store, goal: str) -> str:
    journal = as_inspector(inspector)
    return f"no goal {preview(goal)} in {journal.path} ({known_goals(journal)})"


def get_run(inspector: Inspector | Store, run_id: str) -> RunInfo:
    """The run with exactly this id. Raises RunNotFoundError."""
    journal = as_inspector(inspector)
    run = journal.run(run_id)
    if run is None:
        raise RunNotFoundError(
            f"no run {run_id!r} in {journal.path}; 'lil runs' lists the runs", run=run_id
        )
    return run


def _by_prefix(journal: RunFinding, ref: str, goal: str | None) -> list[RunInfo]:
    """The runs (of ``goal``, if given) whose id starts with ``ref``: at most one, or
    RunNotFoundError naming two of them."""
    runs = journal.runs_with_prefix(ref, goal, 3)
    if len(runs) > 1:
        of = f" of goal {preview(goal)}" if goal is not None else ""
        raise RunNotFoundError(
            f"run id prefix {preview(ref)} matches several runs{of} "
            f"({runs[0].id}, {runs[1].id}, …); give more characters",
            run=ref,
        )
    return runs


#: How many runs whose names start like a run name's later generations ``lil`` reads to
#: find the newest one (newest made first: the newest generation is among the first).
_GENERATIONS_READ = 200


def _current(journal: RunListing, found: RunInfo, ref: str) -> RunInfo:
    """The newest generation of the run name ``ref`` that ``found`` (its first) has.

    A run name means its newest generation (letitloop/run/generations.py: ``name``,
    then ``name~2``, ``name~3`` ...), as an opener of the name would get it;
    ``name~2`` itself names that generation only.
    """
    if found.name != ref or is_generation(ref):
        return found
    best: tuple[int, str] | None = None
    for r in journal.run_refs(ref + "~", _GENERATIONS_READ):
        n = None if r.goal != found.goal or r.name is None else number_of(r.name, ref)
        if n is not None and (best is None or n > best[0]):
            best = (n, r.id)
    if best is None:
        return found
    return journal.run(best[1]) or found


def find_run(inspector: Inspector | Store, ref: str, goal: str | None = None) -> RunInfo:
    """The run ``ref`` names: a run id, a goal (its newest run), a run name (its newest
    generation), or an id prefix.

    With ``goal``, ``ref`` is looked up among that goal's runs only (by id or
    name, or id prefix). Raises RunNotFoundError when nothing matches, or a
    prefix or name is ambiguous.
    """
    journal = as_inspector(inspector)
    if goal is not None:
        if not journal.has_goal(goal):
            raise RunNotFoundError(no_goal(journal, goal))
        found = journal.run_of_goal(goal, ref)
        if found is None and len(ref) >= MIN_PREFIX:
            found = next(iter(_by_prefix(journal, ref, goal)), None)
        if found is None:
            raise RunNotFoundError(
                f"goal {preview(goal)} has no run with id, id prefix or name {preview(ref)}; "
                f"list its runs with: lil runs {shlex.quote(goal)}",
                run=ref,
            )
        return _current(journal, found, ref)
    found = journal.run(ref)
    if found is None:
        found = journal.newest_run(ref)
    if found is None:
        named = journal.runs_named(ref)
        if len(named) > 1:
            goals = ", ".join(sorted({r.goal for r in named}))
            raise RunNotFoundError(
                f"run name {preview(ref)} belongs to several goals ({goals}); pass the run id "
                f"('lil runs' lists them)",
                run=ref,
            )
        found = next(iter(named), None)
        if found is not None:
            found = _current(journal, found, ref)
    if found is None and len(ref) >= MIN_PREFIX:
        found = next(iter(_by_prefix(journal, ref, None)), None)
    if found is None:
        raise RunNotFoundError(
            f"no run or goal {preview(ref)} in {journal.path}; expected a run id, a goal or a run "
            f"name; 'lil runs' lists them",
            run=ref,
        )
    return found


def resumable_run(inspector: Inspector | Store, goal: str) -> RunInfo | None:
    """The run ``Journal(goal)`` resumes (its newest unfinished unnamed run opened
    without arguments), or None when it would start a new one.

    The opener's own rule (``sqlite_storage.resumable_run_id``), so ``lil reset
    GOAL`` forgets, and ``lil reset`` announces, the run the next opener would
    take. Named runs are reached by their name only, and a ``@durable`` call's
    run (opened for its arguments) by its id or name.
    """
    journal = as_inspector(inspector)
    if not journal.has_goal(goal):
        raise RunNotFoundError(no_goal(journal, goal))
    run_id = journal.resumable_run_id(goal)
    return None if run_id is None else get_run(journal, run_id)
