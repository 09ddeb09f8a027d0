"""``QueueEntries``: a journal's work-queue entries as ``lil queues``, ``lil gc``,
``lil reset``, ``lil cancel`` and ``lil copy`` read and change them (docs/queues.md; a
part of :class:`~letitloop.inspection.inspector.Inspector`). No I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class QueueEntries(Protocol):
    """Work-queue entries, as recorded: read, held, cancelled, requeued, deleted, added."""

    def queue_rows(
        self,
        queue: str | None = None,
        *,
        ids: Sequence[str] | None = None,
        run_ids: Sequence[str] | None = None,
        run_names: Sequence[str] | None = None,
        unstarted: bool = False,
        limit: int | None = None,
        status: str | None = None,
    ) -> list[dict[str, Any]]:
        """Queue entries as recorded (:data:`~.records.QUEUE_COLUMNS`), newest first (by
        ``enqueued_at``, then ``id``: ids of one millisecond sort in no particular order): of
        ``queue``, with one of ``ids``, whose run is one of ``run_ids`` or is named one of
        ``run_names``, with no run yet (``unstarted``), recorded as ``status``: every
        condition given holds; at most ``limit`` (None: all). None
        in a journal no queue has used."""
        ...

    def queue_counts(self, queue: str | None, now: str) -> list[tuple[str, str, bool, int, str]]:
        """``(queue, recorded status, queued but not due at ``now``, how many, the earliest
        due)`` of each group of entries (of ``queue`` alone, if given), counted by the
        store (``lil queues``)."""
        ...

    def queue_parents(self, run_ids: Sequence[str]) -> dict[str, str]:
        """The run that enqueued the entry of each of these runs (a child's parent run id,
        ``parent_run``), by run id; none for an entry enqueued outside a run, or recorded
        before the link was (migration 0023)."""
        ...

    def queue_held(self, entry_ids: Sequence[str]) -> set[str]:
        """Which of these entries a live worker holds now (its lock); writes nothing."""
        ...

    def delete_queue_entries(self, entry_ids: Sequence[str]) -> int:
        """Delete these entries, the ended ones only (a queued or claimed one stays), with
        the rate-limit claims they left; how many went."""
        ...

    def cancel_entry(self, entry_id: str, at: str, error: str) -> bool:
        """Cancel an entry no worker took yet (``queued``, no run): ``cancelled`` at ``at``
        with ``error``; False (nothing changed) when it is not such an entry any more."""
        ...

    def requeue_entry(self, entry_id: str, run_id: str) -> bool:
        """The entry whose run ``run_id`` was forgotten (``lil reset``) put back in its
        queue: ``queued``, no run, no result, claimable at once; False (nothing changed)
        when it is not that run's any more or a live worker holds it."""
        ...

    def add_queue_rows(self, rows: Sequence[dict[str, Any]]) -> int:
        """Insert these entries (``lil copy``) in one transaction; an entry whose id is there
        already is left as it is. How many were inserted."""
        ...
