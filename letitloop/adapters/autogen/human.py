"""A ``UserProxyAgent`` (a person in the team) whose every answer is a durable wait.

AutoGen asks the person through the agent's ``input_func``. A wrapped
``UserProxyAgent`` asks the journal instead: its n-th input of the run is the
wait ``{agent}.input:{n}`` (``Journal.async_wait_for``), which takes a string.
With no answer sent, the process stops (within ``stop_after`` seconds; 0 by
default: at once): it prints one line saying what the run waits for and the
``lil send`` that answers it, leaves the run ``waiting`` and exits with status
75. The answer, sent by ``lil send RUN NAME '"text"'`` or ``letitloop.send``
while no process runs, is journaled in the wait's row; the program run again
replays every finished call and every answer, and goes on from the next one.

AutoGen's agents run in tasks of their own and turn an error of the input
function into a ``RuntimeError`` of the team; a ``SystemExit`` there would
leave the team half-stopped. So the stop is carried out as
:class:`StoppedToWait` (an ``Exception`` with ``run_waiting``), noted on the
run's :class:`JournalHolder`, and the wrapped ``run``/``run_stream`` raises the
``RunWaiting`` once the team has returned (serializer.py). AutoGen's runtime
logs that error (and the team's error report that follows it) with their
tracebacks; :data:`QUIET` leaves those records out while a run stops, so the
one line is all the person reads.
"""

from __future__ import annotations

import inspect
import logging
import weakref

from autogen_agentchat.agents import UserProxyAgent
from autogen_core import CancellationToken

from letitloop.adapters.autogen.calls import AgentCalls, JournalHolder
from letitloop.primitives.expects import Expect
from letitloop.primitives.waits import RunWaiting


class StoppedToWait(Exception):
    """Carries ``RunWaiting`` out of AutoGen's tasks as an ordinary exception."""

    def __init__(self, run_waiting: RunWaiting) -> None:
        super().__init__(str(run_waiting))
        self.run_waiting = run_waiting


class QuietStop(logging.Filter):
    """Leaves out AutoGen's error records while a run of ``holders`` stops to wait."""

    def __init__(self) -> None:
        super().__init__()
        self.holders: weakref.WeakSet[JournalHolder] = weakref.WeakSet()

    def filter(self, record: logging.LogRecord) -> bool:
        stopping = any(holder.waiting is not None for holder in self.holders)
        return not (stopping and record.levelno >= logging.ERROR)


#: On AutoGen's runtime logger ("autogen_core"), which logs an agent handler's error.
QUIET = QuietStop()
logging.getLogger("autogen_core").addFilter(QUIET)


def input_expect(label: str, prompt: str) -> Expect:
    """What the wait for a person's answer takes: text."""
    return Expect(
        {"type": "string"},
        f"{label}'s answer to the team (AutoGen's prompt: {prompt.strip()!r})",
        "your answer",
    )


def wrap_user_proxy(agent: UserProxyAgent, calls: AgentCalls, stop_after: float | None) -> None:
    """Make ``agent``'s input a wait of the run's journal (in place, once)."""

    async def journaled_input(prompt: str, cancellation_token: CancellationToken | None) -> str:
        journal = calls.journal()
        n = calls.counts.next(journal.run_id, f"{calls.label}.input")
        try:
            answer: str = await journal.async_wait_for(
                f"{calls.label}.input:{n}",
                stop_after=stop_after,
                expect=input_expect(calls.label, prompt),
            )
        except RunWaiting as stop:
            calls.holder.waiting = stop
            raise StoppedToWait(stop) from None
        return answer

    QUIET.holders.add(calls.holder)
    agent.input_func = journaled_input
    # UserProxyAgent decides once, in __init__, whether its input function is async.
    agent._is_async = inspect.iscoroutinefunction(journaled_input)
