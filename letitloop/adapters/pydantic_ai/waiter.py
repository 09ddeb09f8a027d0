"""Pydantic AI's wait for an external event, durably: a journal wait answered by ``lil send``.

``RequestInput`` (deferred tools, approvals) and ``wait_for_external_event``
wait through the ``ExternalEventWaiter`` a durable engine installs. Ours
journals ``ask`` as a step (its token and answer are recorded, so a replay does
not ask again), then waits with the journal's ``async_wait_for``: the process
may stop (``stop_after``) or be killed, a value sent with ``lil send RUN NAME
VALUE`` is written into the wait's row, and a rerun continues with it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta

from pydantic import JsonValue
from pydantic_ai.durable_exec import ExternalEventError, ExternalEventWaiter

from ...errors import WaitTimeoutError
from ...identity.step_names import Named
from ...primitives.waits import RunWaiting
from .decisions import approved_ids, expect_for, requests_in
from .units import AgentRun, StoppedToWait


class JournalWaiter(ExternalEventWaiter):
    """Waits for a value sent to the agent run's journal (``lil send``, ``letitloop.send``).

    The token handed to ``ask`` is ``"RUN_ID NAME"``: what ``lil send`` needs to
    answer it. ``stop_after``: seconds this process waits before it stops with
    ``RunWaiting`` (exit status 75), leaving the run ``waiting``. A timeout is
    recorded (``WaitTimeoutError``) and raised as Pydantic AI's
    ``ExternalEventError``, in this attempt and every later one.
    """

    def __init__(self, run: AgentRun, *, stop_after: float | None) -> None:
        self.run = run
        self.stop_after = stop_after

    async def wait(
        self,
        name: str,
        *,
        ask: Callable[[str], Awaitable[JsonValue]],
        timeout: timedelta | None,
    ) -> JsonValue:
        journal = self.run.journal
        pending, self.run.pending = self.run.pending or requests_in(ask), None
        token = f"{journal.run_id} {name}"
        key = self.run.next_key(f"{self.run.agent}__external_event.{name}.ask")
        # Pydantic AI's function, recorded under a name of its own, not where it lives there.
        answer = await journal.async_step(key, Named("letitloop:pydantic_ai.ask", ask), token)
        if answer is None:
            try:
                answer = await journal.async_wait_for(
                    name,
                    timeout=None if timeout is None else timeout.total_seconds(),
                    stop_after=self.stop_after,
                    expect=None if pending is None else expect_for(pending),
                )
            except WaitTimeoutError as exc:
                raise ExternalEventError(str(exc)) from exc
            except RunWaiting as stop:
                raise StoppedToWait(stop) from None
        self.run.approved |= approved_ids(answer)
        return answer
