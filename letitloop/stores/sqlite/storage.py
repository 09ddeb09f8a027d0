"""``SqliteStorage``: the ``Storage`` protocol on a SQLite journal file, one part per concept.

Built on ``store.Store`` (connection, transactions, errors). Each part is one
narrow protocol of ``storage.py`` in a module of its own, over one shared base,
``SqliteKeys`` (``sqlite_keys.py``: the goal's table, the run's and functions'
keys), which owns the state they share:

- ``SqliteRunRows`` (``sqlite_runs.py``): ``RunRows``, ``RunEnds``, ``RecordedRuns``;
- ``SqliteStepRows`` (``sqlite_steps.py``): ``StepRows``, the per-step path;
- ``SqliteMarkerRows`` (``sqlite_markers.py``): ``MarkerRows``;
- ``SqlitePauseRows`` (``sqlite_pauses.py``): ``PauseRows``;
- ``SqliteCallRows`` (``sqlite_calls.py``): ``CallRows``;
- ``SqliteSpendRows`` (``sqlite_spend.py``): ``SpendRows``;
- ``SqliteSealRows`` (``sqlite_chain.py``): ``SealRows``;
- ``SqliteSchedules`` (``sqlite_schedules.py``): ``ScheduleRows``;
- ``SqliteHolding`` (``sqlite_holding.py``): ``Holding``, what is not SQL of rows.

A list of parts, not composition: the per-step path calls ``write_done``, a
partial bound on the storage itself, with no forwarding frame between, and
every part reads the one goal table the opener found.
``open_sqlite`` is the store ``schemes.py`` opens for a plain path.
"""

from __future__ import annotations

import os

from .calls import SqliteCallRows
from .chain import SqliteSealRows
from .holding import SqliteHolding
from .markers import SqliteMarkerRows
from .pauses import SqlitePauseRows
from .pool import open_store
from .pragmas import Durability
from .runs import SqliteRunRows
from .schedules import SqliteSchedules
from .spend import SqliteSpendRows
from .steps import SqliteStepRows
from .store import Store
from .streams import SqliteStreamRows

__all__ = ["SqliteStorage", "open_sqlite", "open_sqlite_readonly"]


class SqliteStorage(
    SqliteRunRows,
    SqliteStepRows,
    SqliteMarkerRows,
    SqlitePauseRows,
    SqliteCallRows,
    SqliteSpendRows,
    SqliteSealRows,
    SqliteSchedules,
    SqliteStreamRows,
    SqliteHolding,
):
    """One goal's runs and steps in a journal file (``journal_<goal>`` and ``runs``): its parts."""


def open_sqlite(path: str | os.PathLike[str] | None, durability: Durability) -> SqliteStorage:
    """The storage of a journal file (``files.resolve_file``: ``path``, env, default)."""
    return SqliteStorage(open_store(path, durability=durability))


def open_sqlite_readonly(path: str | os.PathLike[str] | None) -> SqliteStorage:
    """The storage of a journal file opened for reading only (a replay-only journal).

    SQLite refuses every write; nothing is created, migrated or checkpointed,
    and no lock file is made (``Store(readonly=True)``).
    """
    return SqliteStorage(Store(path, readonly=True))
