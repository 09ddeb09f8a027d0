"""One AutoGen agent's journaled calls: which journal they go to, and their keys.

AutoGen runs each agent's turn, and each tool call, in asyncio tasks of their
own; the journal refuses to number calls of one name made from several
tasks (their order would be timing). So every call gets a name of its own,
from the agent's own count of its model calls in the run (the agent makes
them one after another):

- ``{label}.model:{n}``: the agent's n-th model call in the run;
- ``{label}.model:{n}.tool:{tool}:{call_id}``: a tool call that the n-th
  reply asked for, by the call id in that (journaled) reply; a call without
  an id is named by its arguments' digest instead;
- ``{label}.input:{n}``: a ``UserProxyAgent``'s n-th input, a wait (human.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from letitloop.adapters.agentcalls import (
    Counters,
    Pricing,
    agent_mismatch,
    open_journal,
)
from letitloop.errors import NoJournalError, StepMismatchError
from letitloop.run.journal import Journal

if TYPE_CHECKING:
    from letitloop.primitives.waits import RunWaiting


class AgentCalls:
    """The label and model-call count of one wrapped agent, and its journal lookup."""

    def __init__(
        self, label: str, journal_of_run: JournalHolder, cost: Pricing | None = None
    ) -> None:
        #: The prefix of every key of this agent's calls.
        self.label = label
        #: What a model call cost (reported with its tokens), if the user said.
        self.cost = cost
        self.holder = journal_of_run
        self.counts = Counters()
        #: The number of the last model call, per run: tool calls are keyed under it.
        self.last: dict[str, int] = {}

    def journal(self) -> Journal:
        """The journal of the run in progress (see :class:`JournalHolder`)."""
        return self.holder.journal(self.label)

    def model_key(self, journal: Journal) -> str:
        """The next model call's key (``{label}.model:{n}``)."""
        n = self.counts.next(journal.run_id, self.label)
        self.last[journal.run_id] = n
        return f"{self.label}.model:{n}"

    async def step(
        self, journal: Journal, key: str, fn: Callable[..., Any], identity: Any, call: Any
    ) -> Any:
        """``journal.async_step(key, fn, identity, call)``; a call that differs from the one
        recorded at its place raises StepMismatchError naming this agent and the call."""
        try:
            return await journal.async_step(key, fn, identity, call)
        except StepMismatchError as error:
            raise agent_mismatch(error, self.label, key, identity) from None

    def tool_key(self, journal: Journal, tool: str, call: str) -> str:
        """A tool call's key, under the model call whose reply asked for it."""
        n = self.last.get(journal.run_id, 0)
        return f"{self.label}.model:{n}.tool:{tool}:{call}"


class JournalHolder:
    """The journal a wrapped run opened (or found open), for the calls made inside it."""

    def __init__(self) -> None:
        self.current: Journal | None = None
        #: The stop of a run whose person has not answered yet (human.py), raised by the
        #: wrapped run once AutoGen's team has returned.
        self.waiting: RunWaiting | None = None

    def journal(self, label: str) -> Journal:
        """The run's journal; else the open one; NoJournalError when there is none."""
        if self.current is not None and self.current.is_open:
            return self.current
        journal = open_journal()
        if journal is None:
            raise NoJournalError(
                f"AutoGen agent {label!r} made a model or tool call with no journal open; "
                f"run it through the wrapped agent.run()/run_stream() or team.run()/"
                f"run_stream(), or inside 'with Journal(goal):'"
            )
        return journal
