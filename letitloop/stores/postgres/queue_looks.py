"""A claim's look at a PostgreSQL queue (``queue.py``): which entries it may take, best
first, or how long to wait; and the sessions of holders whose lease ran out, ended.

The same rules as a journal file's (``stores/sqlite/queue.py``): the entries held by a
live worker counted against the concurrency, the rate window counted, a dead holder's
entry first (its advisory lock free, or its lease run out), then by priority and age.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...primitives.clock import utc_iso
from ...queueing.queue_records import CANDIDATES, POLL_SECONDS, Limits, seconds
from .database import lock_key
from .holding import is_held, run_hold_text

if TYPE_CHECKING:
    from .queue import PostgresQueue


def look(
    store: PostgresQueue, c: Any, queue: str, limits: Limits, now: float, peek: bool
) -> list[str] | float:
    """The entries a claim of ``queue`` may take, best first, or the seconds to wait;
    ``peek``: a look without the queue's lock (one candidate, no holder ended)."""
    held = c.execute(
        "SELECT id, priority, lease_until, run_id FROM ll_queue_entries "
        "WHERE queue = %s AND status = 'claimed'",
        (queue,),
    ).fetchall()
    at = utc_iso(now)
    expired = [(str(i), r) for i, _, lease, r in held if lease is not None and lease < at]
    if expired and not peek:
        end_holders(store, c, expired)
    gone = {i for i, _ in expired}
    dead = sorted(
        (-int(p), str(i))
        for i, p, _, _ in held
        if str(i) in gone or not is_held(c, store._hold_text(str(i)))
    )
    if limits.concurrency is not None and len(held) - len(dead) >= limits.concurrency:
        return POLL_SECONDS
    if limits.rate is not None:
        count, oldest = c.execute(
            "SELECT count(*), min(at) FROM ll_queue_starts WHERE queue = %s AND at > %s",
            (queue, utc_iso(now - limits.rate[1])),
        ).fetchone()
        if count >= limits.rate[0]:
            return max(0.001, seconds(oldest) + limits.rate[1] - now)
    if dead:
        return [i for _, i in dead]
    ready = c.execute(
        "SELECT id FROM ll_queue_entries WHERE queue = %s AND status = 'queued' AND "
        "not_before <= %s ORDER BY priority DESC, not_before, id LIMIT %s",
        (queue, utc_iso(now), 1 if peek else CANDIDATES),
    ).fetchall()
    if not ready:
        (due,) = c.execute(
            "SELECT min(not_before) FROM ll_queue_entries WHERE queue = %s AND status = 'queued'",
            (queue,),
        ).fetchone()
        return POLL_SECONDS if due is None else min(POLL_SECONDS, seconds(due) - now)
    return [str(r[0]) for r in ready]


def end_holders(store: PostgresQueue, c: Any, expired: list[tuple[str, str | None]]) -> None:
    """End the sessions that hold these entries (their lease ran out) and their runs."""
    whats = [store._hold_text(i) for i, _ in expired]
    whats += [run_hold_text(store._schema, r) for _, r in expired if r is not None]
    for what in whats:
        unsigned = lock_key(f"letitloop\x1f{what}") & 0xFFFFFFFFFFFFFFFF
        c.execute(
            "SELECT pg_terminate_backend(pid, 1000) FROM pg_locks WHERE locktype = "
            "'advisory' AND granted AND objsubid = 1 AND pid <> pg_backend_pid() AND "
            "database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND classid = %s::bigint::oid AND objid = %s::bigint::oid",
            (unsigned >> 32, unsigned & 0xFFFFFFFF),
        )
