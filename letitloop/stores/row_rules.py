"""The rules of a journal row that the stores without SQL views share: what each write sets.

The in-memory store (``memory_storage.py``) and the
PostgreSQL store (``postgres_storage.py``) keep a journal row as named
columns (``ROW_COLUMNS``) and apply the same rules to it: what a marker's
claim and finish change, when a step in flight overwrites an older row, what
a pause, a failed try and a call's usage set, how usage left by an
interrupted call becomes a try. Each function reads a row as a mapping of
those columns and returns the columns to set; the store does the reading
and the writing, in one transaction of its own. So a rule is written once
and the contract suite checks it on both stores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..integrity.checksums import damaged_marker, marker_sum
from ..primitives.clock import utc_iso
from .storage_markers import MarkerAt, MarkerClaim, MarkerRecord
from .storage_steps import StepRow

__all__ = [
    "MAX_TEXT",
    "ROW_COLUMNS",
    "STEP_COLUMNS",
    "TRY_COLUMNS",
    "USAGE",
    "claim_marker",
    "finish_marker",
    "left_usage",
    "left_usage_try",
    "marker_record",
    "pause_values",
    "retrying_values",
    "running_values",
    "step_values",
    "try_values",
    "usage_values",
]

#: The longest text one value may hold: SQLite's default limit, so that a result
#: refused on one store is refused on the others.
MAX_TEXT = 1_000_000_000 - (1 << 20)

#: The columns of a step row (``storage.StepRow``), by name, in its order.
STEP_COLUMNS = (
    "run",
    "key",
    "status",
    "fn",
    "result",
    "started_at",
    "finished_at",
    "duration_ms",
    "attempt",
    "error",
    "traceback",
    "args_fp",
    "input_tokens",
    "output_tokens",
    "cost",
    "model",
    "checksum",
)
#: The usage columns of a row, moved to a try when a new call would overwrite them.
USAGE = ("input_tokens", "output_tokens", "cost", "model")
#: Every column of a journal row; a new row starts with them all None.
ROW_COLUMNS = (
    *STEP_COLUMNS,
    "kind",
    "wake_at",
    "claims",
    "crashes",
    "holder_pid",
    "holder_host",
    "holder_run",
    "holder_token",
    "holder_goal",
)
#: The columns of a failed try after its (run, key, try).
TRY_COLUMNS = (
    "attempt",
    "started_at",
    "failed_at",
    "error",
    "next_at",
    "ended",
    *USAGE,
    "traceback",
)


def step_values(row: StepRow, run_id: str) -> dict[str, Any]:
    """A step row of the protocol by its columns' names (the one place its fields are read):
    its run key given as the run's id, its µs times as ISO text and milliseconds, as a
    SQLite journal's view shows them."""
    started, duration = row.started, row.duration
    return {
        "run": run_id,
        "key": row.key,
        "status": row.status,
        "fn": str(row.fn),  # these stores' function keys are the names themselves
        "result": row.result,
        "started_at": utc_iso(started / 1e6),
        "finished_at": utc_iso((started + duration) / 1e6),
        "duration_ms": duration / 1000.0,
        "attempt": row.attempt,
        "error": row.error,
        "traceback": row.traceback,
        "args_fp": row.args_fp,
        "input_tokens": row.input_tokens,
        "output_tokens": row.output_tokens,
        "cost": row.cost,
        "model": row.model,
        "checksum": row.checksum,
    }


# -- markers ---------------------------------------------------------------------------


def marker_record(row: Mapping[str, Any]) -> MarkerRecord:
    """What the journal reads of a marker's row."""
    return MarkerRecord(
        kind=row["kind"],
        status=row["status"],
        claims=row["claims"],
        crashes=row["crashes"],
        holder_pid=row["holder_pid"],
        holder_host=row["holder_host"],
        holder_run=row["holder_run"],
        started_at=row["started_at"],
        holder_token=row["holder_token"],
    )


def claim_marker(
    row: Mapping[str, Any] | None,
    at: MarkerAt,
    holder: tuple[int, str, str, str],
    now: float,
    attempt: int,
) -> tuple[MarkerClaim, dict[str, Any] | None]:
    """A claim of the marker whose row is ``row`` (None: none yet), under both its holds.

    Returns the claim and the columns to write (None: refused, write nothing).
    DamagedRowError when the marker's row fails its checksum.
    """
    claims = crashes = 0
    if row is not None:
        claims, crashes = row["claims"] or 0, row["crashes"] or 0
        if (
            row["kind"] == "marker"
            and row["checksum"] is not None
            and row["checksum"] != marker_sum(at.run, at.name, row["status"])
        ):
            raise damaged_marker(at.name, at.run, at.goal, at.scope)
        if row["kind"] != "marker" or row["status"] == "done":
            return MarkerClaim(row["kind"], False, claims, crashes), None
        # 'pending' under both holds: its holder died inside the block.
        if row["status"] == "pending":
            crashes += 1
    pid, host, run, token = holder
    values: dict[str, Any] = dict(
        kind="marker",
        status="pending",
        started_at=utc_iso(now),
        finished_at=None,
        duration_ms=None,
        attempt=attempt,
        claims=claims + 1,
        crashes=crashes,
        holder_pid=pid,
        holder_host=host,
        holder_run=run,
        holder_token=token,
        error=None,
        traceback=None,
        checksum=marker_sum(at.run, at.name, "pending"),
    )
    if at.scope == "global":
        values["holder_goal"] = at.goal
    return MarkerClaim("marker", True, claims + 1, crashes), values


def finish_marker(
    row: Mapping[str, Any] | None,
    at: MarkerAt,
    token: str,
    now: float,
    duration_ms: float,
    failure: tuple[str, str, int] | None,
) -> dict[str, Any] | None:
    """The columns that end the marker's block (done, or failed with ``failure``), or None
    when ``row`` is no longer this holder's (``token``) pending claim: nothing to write."""
    if row is None or row["status"] != "pending" or row["holder_token"] != token:
        return None
    values: dict[str, Any] = dict(finished_at=utc_iso(now), duration_ms=duration_ms)
    if failure is None:
        values.update(status="done", checksum=marker_sum(at.run, at.name, "done"))
    else:
        error, traceback, interrupted = failure
        values.update(
            status="failed",
            error=error,
            traceback=traceback,
            crashes=(row["crashes"] or 0) + interrupted,
            checksum=marker_sum(at.run, at.name, "failed"),
        )
    return values


# -- the run's primitives ---------------------------------------------------------------


def _begun(
    kind: str, status: str, fn: str, started_at: str, attempt: int, args_fp: str
) -> dict[str, Any]:
    """The columns of a row whose call (or pause) began at ``started_at`` and has not ended."""
    return dict(
        kind=kind,
        status=status,
        fn=fn,
        result=None,
        started_at=started_at,
        finished_at=None,
        duration_ms=None,
        attempt=attempt,
        error=None,
        traceback=None,
        args_fp=args_fp,
    )


def running_values(old: Mapping[str, Any] | None, entry: Sequence[Any]) -> dict[str, Any] | None:
    """The columns of a step in flight (``entry`` as ``CallRows.write_running`` gives it), or
    None when ``old`` must stay: done, or written by as new an attempt that is not running."""
    _run, _key, fn, started_at, duration_ms, attempt, args_fp = entry
    if old is not None and not (
        old["status"] == "running"
        or (
            old["status"] != "done"
            and ((old["attempt"] or 0) < attempt or (old["started_at"] or "") < started_at)
        )
    ):
        return None
    kind = old["kind"] if old is not None else "step"
    return _begun(kind, "running", fn, started_at, attempt, args_fp) | {"duration_ms": duration_ms}


def pause_values(row: Sequence[Any]) -> dict[str, Any]:
    """The columns of a sleep or wait that begins (``row``: ``PauseRows.start_pause``'s)."""
    _run, _key, kind, status, fn, started_at, attempt, wake_at = row
    return _begun(kind, status, fn, started_at, attempt, "") | {"wake_at": wake_at}


def try_values(try_row: Sequence[Any]) -> tuple[tuple[str, str, int], dict[str, Any]]:
    """A failed try's place (run, key, try) and columns (``CallRows.record_try``'s ``try_row``)."""
    run, key, n, attempt, started_at, failed_at, error, next_at, *usage, traceback = try_row
    return (run, key, n), dict(
        attempt=attempt,
        started_at=started_at,
        failed_at=failed_at,
        error=error,
        next_at=next_at,
        ended="failed",
        **dict(zip(USAGE, usage, strict=True)),
        traceback=traceback,
    )


def retrying_values(retrying_row: Sequence[Any]) -> dict[str, Any]:
    """The columns of a step waiting for its next try (its usage moved to the try)."""
    _run, _key, fn, started, finished, duration, attempt, err, tb, fp, wake = retrying_row
    return dict(
        kind="step",
        status="retrying",
        fn=fn,
        result=None,
        started_at=started,
        finished_at=finished,
        duration_ms=duration,
        attempt=attempt,
        error=err,
        traceback=tb,
        args_fp=fp,
        wake_at=wake,
        **dict.fromkeys(USAGE),
    )


def usage_values(old: Mapping[str, Any] | None, row: Sequence[Any]) -> dict[str, Any] | None:
    """The columns of a call's usage (``CallRows.record_usage``'s ``row``) on its running step,
    or None when the step is done already (its usage was counted with it)."""
    _run, _key, fn, started_at, attempt, args_fp, *usage = row
    if old is not None and old["status"] == "done":
        return None
    values = _begun("step", "running", fn, started_at, attempt, args_fp)
    return values | {"wake_at": None, **dict(zip(USAGE, usage, strict=True))}


def left_usage(row: Mapping[str, Any], run_id: str, prefix: str | None) -> bool:
    """Whether ``row`` holds usage of a call that ended without a result (running or failed),
    of run ``run_id`` under ``prefix``: usage that :func:`left_usage_try` moves to a try."""
    return (
        row["run"] == run_id
        and row["status"] in ("running", "failed")
        and (prefix is None or row["key"].startswith(prefix))
        and any(row[c] is not None for c in ("input_tokens", "output_tokens", "cost"))
    )


def left_usage_try(row: Mapping[str, Any], stamp: str) -> dict[str, Any]:
    """The try's columns that keep ``row``'s left usage (the row's usage is then cleared)."""
    return dict(
        attempt=row["attempt"],
        started_at=row["started_at"] or stamp,
        failed_at=row["finished_at"] or stamp,
        error=row["error"]
        or (
            f"Interrupted: attempt {row['attempt']} ended during this call (its "
            f"process died, or the call was cancelled)"
        ),
        next_at=None,
        ended="crashed" if row["status"] == "running" else "failed",
        **{c: row[c] for c in USAGE},
        traceback=row.get("traceback"),
    )
