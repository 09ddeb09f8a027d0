"""A work queue's entry as the inspectors read it (docs/queues.md): its recorded columns
(:data:`QUEUE_COLUMNS`), its told state (:data:`ENTRY_STATES`), and what ``lil runs`` says
of a run's entry (:class:`QueueTag`). No I/O."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

#: A queue entry's states, told from its recorded status, its due time and its worker's
#: lock: ``queued`` (waiting, due), ``delayed`` (waiting, not due yet), ``running`` (a live
#: worker holds it), ``crashed`` (claimed by a worker that died: the next look of any
#: worker takes it over), and the three endings.
ENTRY_STATES = ("queued", "delayed", "running", "crashed", "completed", "failed", "cancelled")

#: A queue entry's columns, the same in a file (``queue_entries``) and on PostgreSQL
#: (``ll_queue_entries``, which adds its lease): what ``lil copy`` moves.
QUEUE_COLUMNS = (
    "id",
    "queue",
    "task",
    "run_name",
    "run_id",
    "args",
    "priority",
    "dedup_key",
    "status",
    "not_before",
    "attempt",
    "holder_pid",
    "holder_host",
    "enqueued_at",
    "claimed_at",
    "finished_at",
    "result",
    "error",
    "cancel_requested_at",
)


@dataclass(frozen=True)
class QueueTag:
    """What ``lil runs`` says of a run's queue entry: its queue, id, priority and state."""

    queue: str
    entry: str
    priority: int
    state: str
    """One of :data:`ENTRY_STATES`."""
    not_before: str
    """When it is due (``delay=``), ISO-8601 UTC."""
    attempt: int
    """How many times a worker claimed it."""
    reason: str | None = None
    """Why a run given back to its queue waits (a rate limit, a child it waits for)."""


@dataclass(frozen=True)
class QueueEntry:
    """One entry of a work queue (docs/queues.md), as ``lil runs --queue`` and ``lil show``
    see it: its recorded columns but the arguments and result, and its told ``state``."""

    id: str
    queue: str
    task: str
    run_name: str
    run_id: str | None
    priority: int
    dedup_key: str | None
    status: str
    """As recorded: queued, claimed, completed, failed or cancelled."""
    state: str
    """One of :data:`ENTRY_STATES`."""
    not_before: str
    attempt: int
    holder_pid: int | None
    holder_host: str | None
    enqueued_at: str
    claimed_at: str | None
    finished_at: str | None
    error: str | None
    cancel_requested_at: str | None

    @property
    def tag(self) -> QueueTag:
        waits = self.state in ("queued", "delayed")
        return QueueTag(
            self.queue, self.id, self.priority, self.state, self.not_before, self.attempt,
            self.error if waits else None,
        )  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
