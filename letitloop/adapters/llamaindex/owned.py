"""A workflow run outside an open journal: a journal run of its own, named by its request.

``LetItLoopRuntime(goal, run=, reuse=, fresh=, path=, timeout=)`` keeps these
options (:class:`RunOptions`); each ``wf.run`` with no journal open opens
the run they name: ``run``'s turn (``run``, then ``{run}.turn2`` … in the
order of the process's ``wf.run`` calls), else the request itself, the start
event and the context state it continues (:func:`request_of`,
``agentcalls.request_run``), handed back for ``reuse`` seconds once completed
(default: the adapters' window). :func:`closed_with` closes it when the run ends.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from datetime import timedelta
from typing import Any

from workflows.events import StartEvent, StopEvent

from ...run.generations import reuse_seconds
from ...run.journal import Journal
from ..agentcalls import request_options


def request_of(start: StartEvent | None, state: dict[str, Any] | None) -> Any:
    """What a ``wf.run`` asks, as plain data: its start event (its type's name and fields,
    never its module's path) and the context state it continues (None for a new one)."""
    event = None if start is None else {type(start).__name__: start.model_dump(mode="json")}
    return {"start": event, "state": state or None}


async def closed_with(journal: Journal, run: asyncio.Task[StopEvent]) -> StopEvent:
    """``run``'s result, once ``journal`` (opened for it) is closed: completed when the
    run returned, failed with its exception otherwise (the next ``wf.run`` resumes it)."""
    try:
        result = await run
    except BaseException as exc:
        await journal.__aexit__(type(exc), exc, exc.__traceback__)
        raise
    await journal.__aexit__(None, None, None)
    return result


class RunOptions:
    """Which journal run a ``wf.run`` outside an open journal is (see the module)."""

    def __init__(
        self,
        goal: str | None,
        run: str | None,
        reuse: float | timedelta | None,
        fresh: bool,
        path: str | os.PathLike[str] | None,
        timeout: float,
    ) -> None:
        reuse_seconds(reuse, fresh)  # refused here, not at the first run
        self.goal, self.run, self.reuse, self.fresh = goal, run, reuse, fresh
        self.path, self.timeout = path, timeout
        #: This runtime's wf.run calls in this process, counted from 1 (``run``'s turns).
        self.turns = itertools.count(1)

    def open(
        self, workflow: str, start: StartEvent | None, state: dict[str, Any] | None
    ) -> Journal:
        """The journal run of one ``wf.run`` of workflow ``workflow`` (its class name), open;
        waits for another process holding it, up to ``timeout`` seconds."""
        goal = self.goal or workflow
        options = request_options(
            goal,
            request_of(start, state),
            None,
            run=self.run,
            turn=next(self.turns),
            reuse=self.reuse,
            fresh=self.fresh,
        )
        journal = Journal(goal, path=self.path, timeout=self.timeout, **options)
        journal.open()
        return journal
