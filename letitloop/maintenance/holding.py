"""A run held while it is changed from outside: its lock taken, so no process opens it
meanwhile, or RunHeldError when a live process holds it (:func:`holding_run`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from .. import locks
from ..errors import RunHeldError
from ..inspection import RunInfo
from ..sqlite_holding import run_lock_path
from ..store import Store


@contextlib.contextmanager
def holding_run(store: Store, run: RunInfo, doing: str) -> Iterator[None]:
    """Hold ``run``'s lock (so no process opens it meanwhile); RunHeldError if a live one has it."""
    lock = locks.new_lock(run_lock_path(store, run.id))
    if not locks.acquire(lock, 0):
        raise RunHeldError(
            f"run {run.id} of goal {run.goal!r} is held by a live process (pid "
            f"{run.holder_pid} on {run.holder_host}); cannot {doing} it. Wait for it to "
            f"finish or stop that process, then try again",
            run_id=run.id,
            pid=run.holder_pid,
            host=run.holder_host,
        )
    try:
        yield
    finally:
        locks.release(lock)
