"""What a run is now: its recorded row (:class:`RunRow`) with its rows' counts and usage
(:class:`RunCounts`), its steps in flight and its pauses (:class:`OpenRow`), and its state
(:data:`STATES`), told from its lock: :func:`run_infos` makes the :class:`RunInfo` every
inspector returns, from what the inspector read. No I/O.

Whether a run is *live* is read from its lock, not from the ``status``
column: a process holding a run holds its lock (for SQLite a lock file,
:func:`letitloop.stores.sqlite.holding.run_lock_path`), and a process that died released
it. So a run recorded as ``running`` whose lock is free has *crashed* (or,
with no attempt yet, is a *pending* fork).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

from .records import InFlight, Pause, RunInfo
from .times import later, plus_ms

#: The states a run can be in, as ``lil runs`` shows them. ``running``: held
#: by a live process; ``crashed``: recorded as running, but no process holds
#: it; ``pending``: a fork (or a run) that no process has opened yet;
#: ``waiting``: stopped to wait for outside input (``wait_for(stop_after=)``);
#: ``cancelled``: cancelled, or asked to be and left by its process.
STATES = ("running", "crashed", "pending", "waiting", "completed", "failed", "cancelled")


def state_of(status: str, attempts: int, cancel_at: str | None, held: Callable[[], bool]) -> str:
    """A run's state (:data:`STATES`) from its recorded status; ``held`` asks its lock, and
    is asked only for a run recorded as ``running``."""
    if status != "running":
        return status
    if held():
        return "running"
    if cancel_at is not None:
        return "cancelled"  # asked to stop, and its process is gone: no opener resumes it
    return "crashed" if attempts else "pending"


#: The statuses of rows that are paused, not running (see :class:`Pause`).
PAUSED = ("sleeping", "waiting", "retrying")


class RunRow(NamedTuple):
    """A run as recorded (its ``runs`` row and its goal's journal table), before its state."""

    id: str
    goal: str
    name: str | None
    status: str
    attempts: int
    started_at: str
    updated_at: str
    finished_at: str | None
    error: str | None
    holder_pid: int | None
    holder_host: str | None
    journal_table: str
    input_json: str | None
    forked_from: str | None
    forked_at: str | None
    cancel_requested_at: str | None
    cancel_reason: str | None
    #: The version of the code its latest attempt ran.
    version: str | None = None


class RunCounts(NamedTuple):
    """Per run: steps done and failed, markers, the latest ``finished_at`` of its rows, and
    its usage (rows and failed tries; None where none was reported)."""

    done: int = 0
    failed: int = 0
    markers: int = 0
    last_finished: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost: float | None = None


class OpenRow(NamedTuple):
    """A row of a run that is ``running`` (a step in flight) or paused (:data:`PAUSED`)."""

    key: str
    kind: str
    status: str
    started_at: str | None
    duration_ms: float | None
    attempt: int
    wake_at: str | None
    error: str | None


def plus(a: Any, b: Any) -> Any:
    """``a + b`` where None means nothing reported."""
    if a is None:
        return b
    return a if b is None else a + b


def run_infos(
    rows: list[RunRow],
    counts: dict[str, RunCounts],
    open_rows: dict[str, list[OpenRow]],
    held: Callable[[str], bool],
) -> list[RunInfo]:
    """The :class:`RunInfo` of each run in ``rows``, in order: every inspector makes them here.

    ``counts`` and ``open_rows`` are per run id (a run without an entry has
    none); ``held(run_id)`` says whether a live process holds the run now
    (asked only for a run recorded as ``running``).
    """
    out = []
    for row in rows:
        rid, attempts = row.id, row.attempts
        done, failed, markers, last, inp, outp, cost = counts.get(rid, RunCounts())
        state = state_of(row.status, attempts, row.cancel_requested_at, partial(held, rid))
        seen = later(row.updated_at, last)
        flight = []
        pauses = []
        for key, kind, f_status, f_started, f_ms, f_attempt, wake_at, f_error in open_rows.get(
            rid, ()
        ):
            if f_status != "running":
                if state not in ("completed", "cancelled"):  # else nothing waits any more
                    pauses.append(
                        Pause(key, kind, f_status, f_started, wake_at, f_attempt, f_error)
                    )
                continue
            seen = later(seen, plus_ms(f_started, f_ms or 0))
            flight.append(
                InFlight(
                    key=key,
                    started_at=f_started,
                    attempt=f_attempt,
                    ran_s=f_ms / 1000 if isinstance(f_ms, (int, float)) else None,
                    live=state == "running" and f_attempt == attempts,
                )
            )
        out.append(
            RunInfo(
                id=rid,
                goal=row.goal,
                name=row.name,
                status=row.status,
                state=state,
                attempts=attempts,
                steps_done=done,
                steps_failed=failed,
                markers=markers,
                started_at=row.started_at,
                updated_at=row.updated_at,
                finished_at=row.finished_at,
                error=row.error,
                holder_pid=row.holder_pid,
                holder_host=row.holder_host,
                journal_table=row.journal_table,
                input_json=row.input_json,
                forked_from=row.forked_from,
                forked_at=row.forked_at,
                last_seen_at=seen,
                in_flight=tuple(flight),
                pauses=tuple(pauses),
                cancel_requested_at=row.cancel_requested_at,
                cancel_reason=row.cancel_reason,
                input_tokens=inp,
                output_tokens=outp,
                cost=cost,
                version=row.version,
            )
        )
    return out
