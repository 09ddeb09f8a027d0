"""A work queue's entry changed from outside (docs/queues.md): ``lil cancel`` of an entry no
worker started yet (:func:`cancel_waiting`). ``lil reset`` of a queue's run puts its entry
back in its queue (``reset.py``); ``lil gc`` removes ended entries (``gc.py``).
"""

from __future__ import annotations

from ..errors import LetItLoopError, RunNotFoundError
from ..inspection import Inspector, RunInfo
from ..inspection.queue_listing import entry_run, find_entry, queue_entries


def cancel_waiting(journal: Inspector, ref: str, at: str, error: str) -> RunInfo | None:
    """Cancel the entry ``ref`` names (its id or run name) when no worker started its run:
    ``cancelled``, it never starts; the entry as ``lil runs`` shows it now. None when
    ``ref`` names no such entry; LetItLoopError when it ended already."""
    try:
        entry = find_entry(journal, ref)
    except RunNotFoundError:
        return None
    if entry.run_id is not None:
        return None  # a run's: cancelled as a run
    if entry.status != "queued" or not journal.cancel_entry(entry.id, at, error):
        now = queue_entries(journal, ids=[entry.id])
        state = now[0].state if now else "gone"
        raise LetItLoopError(
            f"queue {entry.queue!r}'s entry {entry.id} is {state}: only an entry that "
            f"waits (queued or delayed) is cancelled before it starts"
        )
    return entry_run(queue_entries(journal, ids=[entry.id])[0])
