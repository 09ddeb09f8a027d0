"""What changes a journal from outside a run: forget a run (``lil reset``), fork it
(``lil fork``), collect old runs (``lil gc``).

The read-only side (listing, showing, exporting, finding runs) is
:mod:`letitloop.inspection`; these functions take an inspector opened for
writing (``open_inspector(path, write=True)``; or a journal file's store,
``open_journal_file(path, write=True)``), hold each run while they change it
(so no process opens it meanwhile; RunHeldError for a run a live process
holds) and change it in one transaction, each change an
:class:`~letitloop.inspection.Inspector` method: no SQL here.

Its modules, bottom up (each imports only the ones before it): ``holding``
(a run's lock held while it changes), ``reset``, ``fork``, ``gc``, ``rekey`` (a new
encryption key for a file's encrypted values), ``copying`` (runs moved to another
store: ``lil copy``).
"""

from __future__ import annotations

from .copying import CopyResult, copy_runs, open_ends
from .fork import ForkResult, fork_run
from .gc import GC_BATCH, GcResult, gc_candidates, gc_runs
from .rekey import GoalRekeyed, rekey
from .reset import reset_run, reset_target

__all__ = [
    "GC_BATCH",
    "CopyResult",
    "ForkResult",
    "GcResult",
    "GoalRekeyed",
    "copy_runs",
    "fork_run",
    "gc_candidates",
    "gc_runs",
    "open_ends",
    "rekey",
    "reset_run",
    "reset_target",
]
