"""``MemoryStorage``: the ``Storage`` protocol in one process's memory, for tests: ``memory://NAME``.

It keeps the boundary honest: a second store that the journal, markers,
sleeps, waits, retries and cancellation use through ``storage.py`` alone,
and that the contract suite runs over (``tests/test_contract.py``). It is no
place to keep anything: its runs live as long as the process.

- **A database** is named by its URL: every journal of the process that
  opens ``memory://jobs`` meets the same runs, as every connection to one
  file does. Each journal's open is its own ``MemoryStorage``: one
  connection, with its own holds and its own change notices.
- **Transactions**: one lock per database; every operation runs under it,
  as one transaction, and reads all it needs before it changes anything.
- **Holding** a run or a marker is a slot in the database that one
  ``MemoryHold`` holds at a time; a waiter sleeps on a condition until it
  is free or its timeout passes (``memory_holding.py``).
- **Parts**: one class per narrow protocol of ``storage.py``, each in a
  module of its own (``memory_runs.py``, ``memory_steps.py``,
  ``memory_markers.py``, ``memory_pauses.py``, ``memory_calls.py``,
  ``memory_spend.py``, ``memory_chain.py``, ``memory_schedules.py``,
  ``memory_holding.py``), over
  ``MemoryConnection`` (``memory_database.py``), which owns what they share.
- **A holder that died.** A process's memory dies with the process, so the
  death of a holder that other processes would notice cannot happen here.
  What it simulates instead is :func:`abandon`: a journal dropped without
  closing (a thread frozen mid-step, say) loses its connection: its holds
  are released, as the kernel releases a SIGKILLed process's lock files, and
  everything it tries afterwards is refused (JournalFileError), as nothing
  a dead process tries reaches a file. The contract cases that need a second
  process (a SIGKILL, processes racing for a marker) run on stores that
  other processes reach; those that fit in one process run here too.
- **Durability** is accepted and means nothing: nothing survives the process."""

from __future__ import annotations

from typing import Any

from ...errors import LetItLoopError
from ..sqlite.pragmas import Durability
from .calls import MemoryCallRows
from .chain import MemorySealRows
from .database import database
from .holding import MemoryHolding
from .markers import MemoryMarkerRows
from .pauses import MemoryPauseRows
from .runs import MemoryRunRows
from .schedules import MemorySchedules
from .spend import MemorySpendRows
from .steps import MemoryStepRows
from .streams import MemoryStreamRows

__all__ = ["MemoryStorage", "abandon", "open_memory"]


class MemoryStorage(
    MemoryRunRows,
    MemoryStepRows,
    MemoryMarkerRows,
    MemoryPauseRows,
    MemoryCallRows,
    MemorySpendRows,
    MemorySealRows,
    MemorySchedules,
    MemoryStreamRows,
    MemoryHolding,
):
    """One journal's connection to a ``MemoryDatabase``: the whole ``Storage`` protocol, one
    part per narrow protocol (as ``SqliteStorage``'s), over ``MemoryConnection``."""


def open_memory(location: str, durability: Durability = "process") -> MemoryStorage:
    """The storage of one journal's open of ``memory://NAME`` (the scheme's opener)."""
    if not location.startswith("memory://") or len(location) == len("memory://"):
        raise LetItLoopError(
            f"{location}: expected memory://NAME (a name for the in-memory store), found no "
            f"name; pass e.g. memory://tests"
        )
    return MemoryStorage(database(location))


def abandon(storage: Any) -> None:
    """Drop ``storage`` as a process's death would: its holds released, all it tries refused.

    What a journal left unclosed by a holder that died looks like to the
    others (see the module docstring). ``storage`` is a journal's
    ``MemoryStorage`` (``Journal.store``).
    """
    assert isinstance(storage, MemoryStorage), storage
    storage.gone = True
    db = storage.db
    with db.lock:
        for slot, (_, taker) in list(db.holds.items()):
            if taker is storage:
                del db.holds[slot]
        db.changed.notify_all()
