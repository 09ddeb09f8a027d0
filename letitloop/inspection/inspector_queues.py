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
    ) -> list[dict[str, Any]]:
        """Queue entries as recorded (:data:`~.records.QUEUE_COLUMNS`), newest first: of
        ``queue``, with one of ``ids``, whose run is one of ``run_ids`` or is named one of
        ``run_names``, with no run yet (``unstarted``): every condition given holds; at
        most ``limit`` (None: all). None
        in a journal no queue has used."""
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
