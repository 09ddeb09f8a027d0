"""Which runs: :func:`list_runs` (by goal, state, time, name, input), and one run by what
names it (:func:`get_run`, :func:`find_run`; :func:`resumable_run`, the one a goal's next
opener resumes).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from ..clock import utc_iso
from ..errors import LetItLoopError, RunNotFoundError
from ..sqlite_storage import resumable_run_id
from ..store import Store
from .records import RunInfo
from .state import RUN_COLUMNS, STATES, run_infos

#: The shortest unique prefix of a run id ``lil`` accepts: shorter ones are
#: almost always a typo, and a ULID's first characters are only its time.
MIN_PREFIX = 6


def _input_condition(key: str, value: str) -> tuple[str, list[Any]]:
    """SQL matching runs whose recorded input has ``value`` at ``key`` (dotted for nesting).

    ``value`` is read as JSON when it is JSON (``7``, ``true``, ``"7"``,
    ``[1, 2]``), else as text. It matches the recorded value, or a value the
    codec tagged (``{"!date": "2026-11-30"}`` matches ``2026-11-30``). The
    input may be wrapped as the codec wraps a dict with typed values
    (``{"!dict": {…}}``). A stored input that is not JSON matches nothing.
    """
    try:
        wanted: Any = json.loads(value)
    except ValueError:
        wanted = value
    parts = [p for p in key.split(".") if p]
    if not parts:
        raise LetItLoopError(
            f"--input expects KEY=VALUE with a KEY such as 'user_id' or 'user.id', got {key!r}"
        )
    quoted = "".join('."' + p.replace('"', '""') + '"' for p in parts)
    if isinstance(wanted, (dict, list)):
        same, bound = "= json(?)", json.dumps(wanted)
    else:
        same, bound = "= ?", wanted
    arms, params = [], []
    for path in ("$" + quoted, '$."!dict"' + quoted):
        arms.append(
            f"json_extract(r.input, ?) {same} OR (json_type(r.input, ?) = 'object' AND EXISTS "
            f"(SELECT 1 FROM json_each(r.input, ?) WHERE key LIKE '!%' AND value {same}))"
        )
        params += [path, bound, path, path, bound]
    return f"(CASE WHEN json_valid(r.input) THEN ({' OR '.join(arms)}) ELSE 0 END)", params


def list_runs(
    store: Store,
    goal: str | None = None,
    *,
    status: str | Iterable[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    name: str | None = None,
    inputs: Iterable[tuple[str, str]] = (),
    limit: int | None = None,
    offset: int = 0,
) -> list[RunInfo]:
    """Runs newest first, optionally of one goal, in some states, started in a time range.

    ``status`` takes the states of :data:`STATES` (``crashed`` and ``running``
    are told apart by the run's lock). ``since`` and ``until`` bound the start
    time (``since`` included, ``until`` not). ``name`` is a glob (``user-*``,
    case-sensitive) on the run's name; an unnamed run never matches it.
    ``inputs`` are ``(key, value)`` pairs the recorded input must all hold
    (see :func:`_input_condition`). ``offset`` skips that many matching runs
    first, for paging. An empty list means no run matched; an unknown goal
    raises RunNotFoundError.
    """
    where, params = [], []
    if goal is not None:
        if store.goal_table(goal) is None:
            raise RunNotFoundError(no_goal(store, goal))
        where.append("r.goal = ?")
        params.append(goal)
    wanted: set[str] | None = None
    if status is not None:
        wanted = {status} if isinstance(status, str) else set(status)
        unknown = wanted - set(STATES)
        if unknown:
            raise LetItLoopError(
                f"unknown run status {sorted(unknown)[0]!r}; expected one of {', '.join(STATES)}"
            )
        recorded = {"running" if s in ("running", "crashed", "pending") else s for s in wanted} | (
            {"running"} if "cancelled" in wanted else set()
        )
        where.append(f"r.status IN ({','.join('?' * len(recorded))})")
        params.extend(sorted(recorded))
    if since is not None:
        where.append("r.started_at >= ?")
        params.append(utc_iso(since.timestamp()))
    if until is not None:
        where.append("r.started_at < ?")
        params.append(utc_iso(until.timestamp()))
    if name is not None:
        where.append("r.name GLOB ?")
        params.append(name)
    for key, value in inputs:
        cond, cond_params = _input_condition(key, value)
        where.append(cond)
        params.extend(cond_params)
    sql = f"SELECT {RUN_COLUMNS} FROM runs r JOIN goals g ON g.goal = r.goal"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY r.rowid DESC"  # newest made first (ids of one millisecond: any order)
    if wanted is None:
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        if offset:
            sql += f"{'' if limit is not None else ' LIMIT -1'} OFFSET {int(offset)}"
        return run_infos(store, store.query(sql, params))
    # running, crashed and pending differ by their locks: filter after reading them,
    # in pages, so a large journal is not read whole for the newest few.
    out: list[RunInfo] = []
    skip = offset
    page, at = max(100, (limit or 0) + offset), 0
    while True:
        batch = store.query(f"{sql} LIMIT {page} OFFSET {at}", params)
        at += len(batch)
        for info in run_infos(store, batch):
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


def known_goals(store: Store) -> str:
    known = [r[0] for r in store.query("SELECT goal FROM goals ORDER BY goal LIMIT 6")]
    if not known:
        return "the journal has no goals"
    return f"known goals: {', '.join(known[:5])}{', …' if len(known) > 5 else ''}"


def no_goal(store: Store, goal: str) -> str:
    return f"no goal {goal!r} in {store.path} ({known_goals(store)})"


def get_run(store: Store, run_id: str) -> RunInfo:
    """The run with exactly this id. Raises RunNotFoundError."""
    rows = store.query(
        f"SELECT {RUN_COLUMNS} FROM runs r JOIN goals g ON g.goal = r.goal WHERE r.id = ?",
        (run_id,),
    )
    if not rows:
        raise RunNotFoundError(
            f"no run {run_id!r} in {store.path}; 'lil runs' lists the runs", run=run_id
        )
    return run_infos(store, rows)[0]


def _prefix_range(ref: str) -> tuple[str, str]:
    """``(low, high)``: run ids starting with ``ref`` are ``low <= id < high``.

    A range on the primary key, which the index answers directly (a LIKE is
    case-insensitive, so SQLite scans the whole table for it). Ids are
    upper-case Crockford base32, so the prefix is upper-cased first.
    """
    low = ref.upper()
    return low, low[:-1] + chr(ord(low[-1]) + 1)


def _by_prefix(store: Store, q: str, ref: str, goal: str | None) -> list[Any]:
    """The runs (of ``goal``, if given) whose id starts with ``ref``: at most one, or
    RunNotFoundError naming two of them."""
    where, params = ("r.goal = ? AND ", (goal,)) if goal is not None else ("", ())
    rows = store.query(
        q + where + "r.id >= ? AND r.id < ? ORDER BY r.id DESC LIMIT 3",
        (*params, *_prefix_range(ref)),
    )
    if len(rows) > 1:
        of = f" of goal {goal!r}" if goal is not None else ""
        raise RunNotFoundError(
            f"run id prefix {ref!r} matches several runs{of} "
            f"({rows[0][0]}, {rows[1][0]}, …); give more characters",
            run=ref,
        )
    return rows


def find_run(store: Store, ref: str, goal: str | None = None) -> RunInfo:
    """The run ``ref`` names: a run id, a goal (its newest run), a run name, or an id prefix.

    With ``goal``, ``ref`` is looked up among that goal's runs only (by id or
    name, or id prefix). Raises RunNotFoundError when nothing matches, or a
    prefix or name is ambiguous.
    """
    q = f"SELECT {RUN_COLUMNS} FROM runs r JOIN goals g ON g.goal = r.goal WHERE "
    if goal is not None:
        if store.goal_table(goal) is None:
            raise RunNotFoundError(no_goal(store, goal))
        rows = store.query(q + "r.goal = ? AND (r.id = ? OR r.name = ?)", (goal, ref, ref))
        if not rows and len(ref) >= MIN_PREFIX:
            rows = _by_prefix(store, q, ref, goal)
        if not rows:
            raise RunNotFoundError(
                f"goal {goal!r} has no run with id, id prefix or name {ref!r}; "
                f"list its runs with: lil runs {shlex.quote(goal)}",
                run=ref,
            )
        return run_infos(store, rows[:1])[0]
    rows = store.query(q + "r.id = ?", (ref,))
    if not rows:
        rows = store.query(q + "r.goal = ? ORDER BY r.rowid DESC LIMIT 1", (ref,))
    if not rows:
        rows = store.query(q + "r.name = ? ORDER BY r.id DESC", (ref,))
        if len(rows) > 1:
            goals = ", ".join(sorted({r[1] for r in rows}))
            raise RunNotFoundError(
                f"run name {ref!r} belongs to several goals ({goals}); pass the run id "
                f"('lil runs' lists them)",
                run=ref,
            )
    if not rows and len(ref) >= MIN_PREFIX:
        rows = _by_prefix(store, q, ref, None)
    if not rows:
        raise RunNotFoundError(
            f"no run or goal {ref!r} in {store.path}; expected a run id, a goal or a run "
            f"name; 'lil runs' lists them",
            run=ref,
        )
    return run_infos(store, rows[:1])[0]


def resumable_run(store: Store, goal: str) -> RunInfo | None:
    """The run ``Journal(goal)`` resumes (its newest unfinished unnamed run opened
    without arguments), or None when it would start a new one.

    The opener's own rule (``sqlite_storage.resumable_run_id``), so ``lil reset
    GOAL`` forgets, and ``lil reset`` announces, the run the next opener would
    take. Named runs are reached by their name only, and a ``@durable`` call's
    run (opened for its arguments) by its id or name.
    """
    if store.goal_table(goal) is None:
        raise RunNotFoundError(no_goal(store, goal))
    run_id = resumable_run_id(store.query, goal, None)
    return None if run_id is None else get_run(store, run_id)
