"""A run held while it is changed from outside: held through its inspector, so no process
opens it meanwhile, or RunHeldError when a live process holds it (:func:`holding_run`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ..errors import RunHeldError
from ..inspection import RunInfo
from ..inspection.inspector_runs import JournalHolds


@contextlib.contextmanager
def holding_run(inspector: JournalHolds, run: RunInfo, doing: str) -> Iterator[None]:
    """Hold ``run`` (so no process opens it meanwhile); RunHeldError if a live one has it."""
    with inspector.hold(run.id) as held:
        if not held:
            raise RunHeldError(
                f"run {run.id} of goal {run.goal!r} is held by a live process (pid "
                f"{run.holder_pid} on {run.holder_host}); cannot {doing} it. Wait for it to "
                f"finish or stop that process, then try again",
                run_id=run.id,
                pid=run.holder_pid,
                host=run.holder_host,
            )
        yield
