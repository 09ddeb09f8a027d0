"""What ``lil queues`` prints (each queue's counts), and what ``lil show`` says of a queue's
entry: the whole entry when no worker started its run yet, one line under a run that has one."""

from __future__ import annotations

import time
from typing import Any

from ..inspection.entries import ENTRY_STATES, QueueEntry
from ..inspection.queue_listing import QueueStats
from ..inspection.times import parse_utc
from . import render


def entry_lines(entry: QueueEntry) -> list[str]:
    """``lil show`` of an entry no run was opened for yet: what it waits for, or how it ended."""
    head = f"queue entry {entry.id} on queue {entry.queue}: {entry.state}"
    if entry.state == "queued":
        head += " (no worker took it yet)"
    elif entry.state == "delayed":
        head += f" (due {render.local_time(entry.not_before)})"
    elif entry.state == "cancelled":
        head += " before a worker took it"
    elif entry.state == "crashed":
        head += " (its worker died before it started: the next worker takes it over)"
    lines = [
        head,
        f"  task      {entry.task} (the run's goal)",
        f"  run name  {entry.run_name}",
        f"  priority  {entry.priority}",
        f"  enqueued  {render.local_time(entry.enqueued_at)}",
    ]
    if entry.dedup_key is not None:
        lines.append(f"  dedup key {entry.dedup_key}")
    if entry.attempt:
        lines.append(
            f"  claimed   {entry.attempt} time(s), last at {render.local_time(entry.claimed_at)} "
            f"by pid {entry.holder_pid} on {entry.holder_host}"
        )
    if entry.error:
        lines.append(f"  error     {entry.error}")
    return lines


def entry_line(entry: QueueEntry) -> str:
    """The line ``lil show`` prints under a run of a queue's entry."""
    return (
        f"queue: {entry.queue}, entry {entry.id}, priority {entry.priority}, claimed "
        f"{entry.attempt} time(s), entry {entry.state}"
    )


def _ago(iso: str | None, now: float) -> str:
    if iso is None:
        return "-"
    return render.duration(max(0.0, now - parse_utc(iso).timestamp()))


def queue_lines(stats: list[QueueStats], now: float | None = None) -> list[str]:
    """``lil queues``: a table, a row per queue."""
    if not stats:
        return ["no queue entries in this journal (docs/queues.md: Queue(...).enqueue)"]
    at = time.time() if now is None else now
    headers = ["QUEUE", *(s.upper() for s in ENTRY_STATES), "OLDEST WAIT", "WORKERS"]
    rows = [
        [
            s.queue,
            *(str(s.counts[k]) for k in ENTRY_STATES),
            _ago(s.oldest_waiting, at),
            ", ".join(s.workers) or "-",
        ]
        for s in stats
    ]
    right = tuple(range(1, len(ENTRY_STATES) + 2))
    return render.table(headers, rows, right=right)


def queue_records(stats: list[QueueStats]) -> list[dict[str, Any]]:
    """``lil queues --json``: a record per queue."""
    return [s.as_dict() for s in stats]
