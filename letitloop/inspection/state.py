"""What a run is now: its ``runs`` row read with its rows' counts and usage, its steps in
flight and its pauses, and its state (:data:`STATES`), told from its lock (:func:`run_infos`
makes the :class:`RunInfo` every query returns).

Whether a run is *live* is read from its lock, not from the ``status``
column: a process holding a run holds its lock file
(:func:`letitloop.sqlite_holding.run_lock_path`), and a process that died released
it. So a run recorded as ``running`` whose lock is free has *crashed* (or,
with no attempt yet, is a *pending* fork).
"""

from __future__ import annotations

from typing import Any

from .. import locks
from ..sqlite_holding import run_lock_path
from ..store import Store
from .records import InFlight, Pause, RunInfo
from .times import later, plus_ms

#: The states a run can be in, as ``lil runs`` shows them. ``running``: held
#: by a live process; ``crashed``: recorded as running, but no process holds
#: it; ``pending``: a fork (or a run) that no process has opened yet;
#: ``waiting``: stopped to wait for outside input (``wait_for(stop_after=)``);
#: ``cancelled``: cancelled, or asked to be and left by its process.
STATES = ("running", "crashed", "pending", "waiting", "completed", "failed", "cancelled")


def is_run_held(store: Store, run_id: str) -> bool:
    """True when a live process (this one included) holds ``run_id`` right now; writes nothing."""
    return locks.is_held(run_lock_path(store, run_id))


def _state(
    store: Store, status: str, attempts: int, run_id: str, cancel_at: str | None = None
) -> str:
    if status != "running":
        return status
    if is_run_held(store, run_id):
        return "running"
    if cancel_at is not None:
        return "cancelled"  # asked to stop, and its process is gone: no opener resumes it
    return "crashed" if attempts else "pending"


RUN_COLUMNS = (
    "r.id, r.goal, r.name, r.status, r.attempts, r.started_at, r.updated_at, r.finished_at, "
    "r.error, r.holder_pid, r.holder_host, g.journal_table, r.input, r.forked_from, r.forked_at, "
    "r.cancel_requested_at, r.cancel_reason"
)

#: Per run: steps done, steps failed, markers, the latest finished_at, then its
#: usage: input tokens, output tokens, cost (None where none was reported).
_Counts = tuple[int, int, int, "str | None", "int | None", "int | None", "float | None"]

#: The statuses of rows that are paused, not running (see :class:`Pause`).
PAUSED = ("sleeping", "waiting", "retrying")


def run_counts(store: Store, table: str, run_ids: list[str]) -> dict[str, _Counts]:
    out: dict[str, _Counts] = {}
    # SQLite allows at most 999 bound parameters in old builds; stay well below.
    for i in range(0, len(run_ids), 500):
        chunk = run_ids[i : i + 500]
        marks = ",".join("?" * len(chunk))
        for run, done, failed, markers, last, inp, outp, cost in store.query(
            f"SELECT run, sum(kind = 'step' AND status = 'done'), "
            f"sum(kind = 'step' AND status = 'failed'), sum(kind = 'marker'), max(finished_at), "
            f"sum(input_tokens), sum(output_tokens), sum(cost) "
            f'FROM "{table}" WHERE run IN ({marks}) GROUP BY run',
            chunk,
        ):
            out[run] = (int(done or 0), int(failed or 0), int(markers or 0), last, inp, outp, cost)
        for run, inp, outp, cost in store.query(
            f"SELECT run, sum(input_tokens), sum(output_tokens), sum(cost) FROM step_tries "
            f"WHERE run IN ({marks}) AND (input_tokens IS NOT NULL OR output_tokens IS NOT NULL "
            f"OR cost IS NOT NULL) GROUP BY run",
            chunk,
        ):
            c = out.get(run, (0, 0, 0, None, None, None, None))
            out[run] = (
                *c[:4],
                plus(c[4], inp),
                plus(c[5], outp),
                plus(c[6], cost),
            )
    return out


def plus(a: Any, b: Any) -> Any:
    """``a + b`` where None means nothing reported."""
    if a is None:
        return b
    return a if b is None else a + b


def _running_rows(store: Store, table: str, run_ids: list[str]) -> dict[str, list[Any]]:
    """Per run: ``(key, kind, status, started_at, duration_ms, attempt, wake_at, error)`` of its
    ``running`` rows and its paused ones (:data:`PAUSED`)."""
    out: dict[str, list[Any]] = {}
    for i in range(0, len(run_ids), 500):
        chunk = run_ids[i : i + 500]
        marks = ",".join("?" * len(chunk))
        for run, *row in store.query(
            f"SELECT run, key, kind, status, started_at, duration_ms, attempt, wake_at, error "
            f'FROM "{table}" WHERE run IN ({marks}) AND status IN '
            f"('running', 'sleeping', 'waiting', 'retrying') AND kind != 'marker' ORDER BY rowid",
            chunk,
        ):
            out.setdefault(run, []).append(row)
    return out


def run_infos(store: Store, rows: list[Any]) -> list[RunInfo]:
    by_table: dict[str, list[str]] = {}
    for row in rows:
        by_table.setdefault(row[11], []).append(row[0])
    counts: dict[str, _Counts] = {}
    running: dict[str, list[Any]] = {}
    for table, ids in by_table.items():
        counts.update(run_counts(store, table, ids))
        running.update(_running_rows(store, table, ids))
    out = []
    for row in rows:
        rid, goal, name, status, attempts, started, updated, finished, error, pid, host = row[:11]
        table, input_json, forked_from, forked_at, cancel_at, cancel_reason = row[11:17]
        done, failed, markers, last, inp, outp, cost = counts.get(
            rid, (0, 0, 0, None, None, None, None)
        )
        state = _state(store, status, attempts, rid, cancel_at)
        seen = later(updated, last)
        flight = []
        pauses = []
        for key, kind, f_status, f_started, f_ms, f_attempt, wake_at, f_error in running.get(
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
                goal=goal,
                name=name,
                status=status,
                state=state,
                attempts=attempts,
                steps_done=done,
                steps_failed=failed,
                markers=markers,
                started_at=started,
                updated_at=updated,
                finished_at=finished,
                error=error,
                holder_pid=pid,
                holder_host=host,
                journal_table=table,
                input_json=input_json,
                forked_from=forked_from,
                forked_at=forked_at,
                last_seen_at=seen,
                in_flight=tuple(flight),
                pauses=tuple(pauses),
                cancel_requested_at=cancel_at,
                cancel_reason=cancel_reason,
                input_tokens=inp,
                output_tokens=outp,
                cost=cost,
            )
        )
    return out
