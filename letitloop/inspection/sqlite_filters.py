"""What a :class:`~letitloop.inspection.inspector.RunFilter` means in a journal file's SQL:
conditions on ``runs r`` (:func:`run_conditions`, the recorded input's keys read by
``json_extract``), and the patterns of a prefix (:func:`like_prefix`, :func:`glob_prefix`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..errors import LetItLoopError
from .inspector_runs import RunFilter


def glob_prefix(text: str) -> str:
    """A GLOB pattern for what starts with ``text`` (its ``*?[`` matched as themselves)."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text) + "*"


def like_prefix(text: str) -> str:
    """A LIKE pattern for what starts with ``text`` (``\\`` escapes)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def run_conditions(where: RunFilter) -> tuple[list[str], list[Any]]:
    """``where`` as SQL conditions on ``runs r`` and their parameters."""
    conditions: list[str] = []
    params: list[Any] = []
    if where.goal is not None:
        conditions.append("r.goal = ?")
        params.append(where.goal)
    if where.statuses is not None:
        conditions.append(f"r.status IN ({','.join('?' * len(where.statuses))})")
        params.extend(where.statuses)
    if where.since is not None:
        conditions.append("r.started_at >= ?")
        params.append(where.since)
    if where.until is not None:
        conditions.append("r.started_at < ?")
        params.append(where.until)
    if where.name is not None:
        conditions.append("r.name GLOB ?")
        params.append(where.name)
    if where.version is not None:
        conditions.append(
            "(SELECT a.version FROM attempts a WHERE a.run = r.id AND a.attempt = r.attempts) "
            "GLOB ?"
        )
        params.append(glob_prefix(where.version))
    for parts, value in where.inputs:
        cond, cond_params = _input_condition(parts, value)
        conditions.append(cond)
        params.extend(cond_params)
    return conditions, params


def _input_condition(parts: tuple[str, ...], value: str) -> tuple[str, list[Any]]:
    """SQL matching runs whose recorded input has ``value`` at ``parts`` (see
    :attr:`RunFilter.inputs`)."""
    try:
        wanted: Any = json.loads(value)
    except ValueError:
        wanted = value
    if not parts:  # the caller checks the key; an empty path would name the whole input
        raise LetItLoopError("an input condition needs a key")
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


#: ``lil reset`` of a queue's run: its entry put back in its queue (its attempt kept, so a
#: holder of an earlier claim still writes nothing). ``%s`` marks the parameters (entry id,
#: run id); a file's statement has ``?`` instead.
REQUEUE = (
    "UPDATE {table} SET status = 'queued', run_id = NULL, result = NULL, error = NULL, "
    "finished_at = NULL, cancel_requested_at = NULL WHERE id = %s AND run_id = %s "
    # a dedup key admits one active entry: another one active keeps this one ended
    "AND (dedup_key IS NULL OR NOT EXISTS (SELECT 1 FROM {table} o WHERE o.queue = "
    "{table}.queue AND o.dedup_key = {table}.dedup_key AND o.id <> {table}.id AND "
    "o.status IN ('queued', 'claimed')))"
)


def queue_conditions(
    queue: str | None,
    ids: Sequence[str] | None,
    run_ids: Sequence[str] | None,
    run_names: Sequence[str] | None,
    unstarted: bool,
    mark: str,
    status: str | None = None,
) -> tuple[list[str] | None, list[Any]]:
    """Which queue entries (``Inspector.queue_rows``) as SQL conditions and their parameters,
    ``mark`` the placeholder (``?`` for a file, ``%s`` for PostgreSQL); (None, []) when a
    list given is empty: no entry can match."""
    conditions: list[str] = []
    params: list[Any] = []
    if queue is not None:
        conditions.append(f"queue = {mark}")
        params.append(queue)
    for column, values in (("id", ids), ("run_id", run_ids), ("run_name", run_names)):
        if values is None:
            continue
        if not values:
            return None, []
        conditions.append(f"{column} IN ({', '.join([mark] * len(values))})")
        params.extend(values)
    if unstarted:
        conditions.append("run_id IS NULL")
    if status is not None:
        conditions.append(f"status = {mark}")
        params.append(status)
    return conditions, params


#: ``lil queues``: each queue's entries counted per recorded status, those queued and not
#: due yet apart (``delayed``), and the earliest due of each group: (now, [queue]), ``%s``
#: marks. Read from the ``queue_entries_ready`` index alone (queue, status, ..., not_before).
QUEUE_COUNTS = (
    "SELECT queue, status, status = 'queued' AND not_before > %s AS delayed, count(*), "
    "min(not_before) FROM {table}{where} GROUP BY queue, status, delayed"
)


#: The order of a queue's entries, newest first, both stores: when each was enqueued, then
#: its id (ids of one millisecond sort in no particular order, their enqueue times do).
NEWEST_ENTRIES = "enqueued_at DESC, id DESC"

#: ``lil cancel`` of an entry no worker took: (finished_at, error, entry id), ``%s`` marks.
CANCEL_ENTRY = (
    "UPDATE {table} SET status = 'cancelled', finished_at = %s, error = %s "
    "WHERE id = %s AND status = 'queued' AND run_id IS NULL"
)
