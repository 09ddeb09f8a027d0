"""One smolagents agent's journaled calls: which journal and context they go to, their keys.

Each wrapped agent has an :class:`AgentCalls`. Its run (``agent.run``) sets the
journal and the context the agent's calls are made in, so a call made in
another thread (smolagents runs a CodeAgent's code and parallel tool calls
in worker threads) is still keyed under the step it belongs to (a managed
agent's calls under the manager's call of it).

Keys, none of which depends on timing:

- ``{label}.model``, ``{label}.model#2``, …: the agent's model calls in order
  (an agent calls its model one call at a time).
- ``{label}.tool:{tool}:{digest}``: a tool call, named by its arguments'
  digest, so parallel calls of one tool with other arguments have their own
  names; identical calls are made one at a time and numbered in call order
  (``#2``), being interchangeable.
- ``{label}.agent:{name}:{digest}``: a call of a managed agent; the managed
  agent's own calls are keyed under it (``…/{name}.model``), so a finished
  call replays as a unit.
- ``{label}.code``, ``{label}.code#2``, …: a CodeAgent's code executions in
  order (code.py); the tool calls its code makes are keyed under it.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from letitloop.adapters.agentcalls import Pricing, agent_mismatch, open_journal
from letitloop.errors import NoJournalError, StepMismatchError
from letitloop.run.journal import Journal

T = TypeVar("T")


class AgentCalls:
    """The journal, context and label of one wrapped agent's calls."""

    def __init__(self, label: str, cost: Pricing | None = None) -> None:
        #: The prefix of every key of this agent's calls.
        self.label = label
        #: What a model call cost (reported with its tokens), if the user said.
        self.cost = cost
        self.journal: Journal | None = None
        self.context: contextvars.Context | None = None
        self._guard = threading.Lock()
        #: One lock per call name: identical calls are made one at a time.
        self._locks: dict[str, threading.Lock] = {}
        #: The conversation the agent's next run continues (``agentcalls.conversation_after``
        #: of its last run; None: a new one) and that run's turn in it (agent.py).
        self.conversation: str | None = None
        self.turn = 0
        #: An error that must end the agent's run, raised where smolagents would have made
        #: it an observation (code.py); the agent's next model call and its run raise it.
        self.refusal: BaseException | None = None

    @contextmanager
    def running(self, journal: Journal) -> Iterator[None]:
        """Within this block the agent's calls go to ``journal``, in the caller's context."""
        before = (self.journal, self.context)
        self.journal, self.context = journal, contextvars.copy_context()
        try:
            yield
        finally:
            self.journal, self.context = before

    @contextmanager
    def nested(self) -> Iterator[None]:
        """Within this block the agent's calls are keyed under the step running here (a
        CodeAgent's code, whose tool calls run in the executor's worker thread)."""
        before = self.context
        self.context = contextvars.copy_context()
        try:
            yield
        finally:
            self.context = before

    def step(self, name: str, fn: Callable[..., T], *args: Any, queue: bool = False) -> T:
        """``Journal.step(name, fn, *args)`` on this agent's journal, in its run's context.

        With ``queue``, calls of one name wait for each other (identical tool
        calls in parallel threads, which the journal would refuse as two calls
        of one name in flight). Raises NoJournalError when the agent's run
        did not set a journal and none is open.
        """
        if not queue:
            return self._step(name, fn, *args)
        with self._guard:
            lock = self._locks.setdefault(name, threading.Lock())
        with lock:
            return self._step(name, fn, *args)

    def _step(self, name: str, fn: Callable[..., T], *args: Any) -> T:
        try:
            return self._journal_step(name, fn, *args)
        except StepMismatchError as error:
            raise agent_mismatch(error, self.label, name, args[0]) from None

    def _journal_step(self, name: str, fn: Callable[..., T], *args: Any) -> T:
        journal, context = self.journal, self.context
        if journal is None or context is None:
            journal = open_journal()
            if journal is None:
                raise NoJournalError(
                    f"smolagents agent {self.label!r} made a call outside agent.run() and "
                    f"with no journal open; run the agent with agent.run(...) after "
                    f"wrapping it, or inside 'with Journal(goal):'"
                )
            return journal.step(name, fn, *args)
        return context.copy().run(journal.step, name, fn, *args)
