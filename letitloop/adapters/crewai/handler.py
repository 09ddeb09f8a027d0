"""``CrewAIDurabilityHandler``: a crew whose kickoff is a journal run and whose calls are steps.

``wrap_crew(crew)`` wraps, on those instances only, every model the crew
uses (each agent's ``llm`` and ``function_calling_llm``, the crew's
``manager_llm``, ``planning_llm``, ``function_calling_llm`` and
``chat_llm``, a manager agent's) and every tool of its agents and tasks
(``llms.py``, ``tools.py``), and makes ``crew.kickoff(...)`` run inside a
journal run:

- by default the run of the request: the goal is the session id, and the
  run is named by the kickoff's inputs (``agentcalls.request_run``), so a
  kickoff resumes the unfinished run of the same inputs, hands back a
  completed one without a call for ``agentcalls.DEFAULT_REUSE`` (an hour),
  and waits while another process runs it (docs/adapters.md, "The same
  request is never paid twice"); ``run=`` names the run (it then replays
  once complete, for ``reuse=`` seconds or forever), ``fresh=True`` asks
  for a new answer; the handler's, or one kickoff's
  (``crew.kickoff(inputs=..., run=..., fresh=True)``);
- ``kickoff_for_each`` (and its async twin) with a run name names its n-th
  input's run ``{run}.item{n}``, which records its inputs first and refuses
  other inputs (``items.py``: the list changed under a recorded batch);
- inside a journal the program already opened (``with Journal(...)``,
  ``@durable``), the crew's steps go to that run, their names prefixed with
  the session id (``research_crew:llm:Researcher``), so several crews of one
  program resume together.

The crew's state (its tasks' outputs, each agent's conversation, tool usage
counts, token counters) is rebuilt by running the crew again with every
finished call replayed: CrewAI does the same work on the same answers.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from crewai import Crew
from crewai.llms.base_llm import BaseLLM
from crewai.tools import BaseTool

from ...errors import LetItLoopError
from ...primitives.budgets import Budget, budget_of
from ...run.generations import reuse_seconds
from ...run.journal import Journal, current_journal
from ...stores.sqlite.pragmas import Durability
from ..agentcalls import DEFAULT_TIMEOUT as WAIT_FOR_HOLDER
from ..agentcalls import plain, request_options
from .calls import Session, active
from .items import check_item
from .llms import WRAPPED, wrap_llm
from .tools import wrap_tool

#: The crew methods ``wrap_crew`` replaces on the instance (CrewAI's own ``kickoff_async`` and
#: ``kickoff_for_each``, ``kickoff_for_each_async`` reach the journaled kickoff through them).
KICKOFFS = ("kickoff", "kickoff_async", "kickoff_for_each", "kickoff_for_each_async", "copy")


@dataclass
class Batch:
    """One ``kickoff_for_each`` (or its async twin) of a wrapped crew: its run options, and
    how many copies of the crew it made (CrewAI makes one per input, in the inputs' order)."""

    crew: Crew
    run: str | None
    reuse: float | timedelta | None
    fresh: bool
    copies: int = 0


#: The batch whose copies are being made in this context (None: none).
_batch: ContextVar[Batch | None] = ContextVar("letitloop_crewai_batch", default=None)


#: The models a crew or an agent may hold, by attribute.
CREW_LLMS = ("manager_llm", "planning_llm", "function_calling_llm", "chat_llm")
AGENT_LLMS = ("llm", "function_calling_llm")


class CrewAIDurabilityHandler:
    """Journals a CrewAI crew's model and tool calls so a killed kickoff resumes where it died.

    ``session_id`` is the goal of the crew's runs (or, inside a journal the
    program opened, the prefix of its step names). ``run`` names the run (an
    idempotency key); with none, a kickoff's run is its inputs (the module's
    docstring). ``reuse`` (seconds or a ``timedelta``) is how long a completed
    run is handed back (None: an hour for a kickoff's inputs, forever for a
    named run), ``fresh=True`` asks for a new answer; ``path`` the journal file
    (else ``LETITLOOP_DB``, else ``.letitloop/journal.db`` found as ``Journal``
    finds it); ``durability`` is ``Journal``'s, and ``timeout`` how long a
    kickoff waits for another process running the same run (default: as long
    as that process lives).
    """

    def __init__(
        self,
        session_id: str,
        *,
        run: str | None = None,
        reuse: float | timedelta | None = None,
        fresh: bool = False,
        path: str | os.PathLike[str] | None = None,
        durability: Durability = "process",
        timeout: float = WAIT_FOR_HOLDER,
        budget: Budget | Mapping[str, Any] | None = None,
    ) -> None:
        reuse_seconds(reuse, fresh)  # refused here, not at the first kickoff
        self.budget = None if budget is None else budget_of(budget)  # refused here too
        self.session_id = session_id
        self.run = run
        self.reuse = reuse
        self.fresh = fresh
        self.path = path
        self.durability: Durability = durability
        self.timeout = timeout

    def wrap_crew(self, crew: Crew) -> Crew:
        """Wrap ``crew``'s models, tools and kickoff (in place); returns ``crew``.

        Raises LetItLoopError for a crew that streams (``stream=True``): its
        kickoff runs itself again in another thread, outside the journal.
        """
        if getattr(crew, "stream", False):
            raise LetItLoopError(
                "wrap_crew: this crew streams (stream=True), and a streaming kickoff runs "
                "in a thread of its own, outside the journal; make the crew with "
                "stream=False to journal it"
            )
        _wrap_parts(crew)
        if not getattr(crew, WRAPPED, False):
            self._wrap_kickoffs(crew, None)
        return crew

    def _wrap_kickoffs(self, crew: Crew, item: tuple[int, Batch] | None) -> None:
        """Replace ``crew``'s kickoffs and ``copy`` on the instance (``KICKOFFS``): the
        ``item``-th copy of ``batch`` (from 1), or None for a crew the user wrapped."""
        originals = {name: getattr(crew, name) for name in KICKOFFS}
        kickoff = self._kickoff(originals["kickoff"], item)

        async def kickoff_async(
            inputs: dict[str, Any] | None = None,
            *args: Any,
            run: str | None = None,
            reuse: float | timedelta | None = None,
            fresh: bool = False,
            **kwargs: Any,
        ) -> Any:
            # CrewAI's own kickoff_async: the kickoff in a worker thread (the context copied).
            options = {"run": run, "reuse": reuse, "fresh": fresh}
            return await asyncio.to_thread(kickoff, inputs or {}, *args, **options, **kwargs)

        def kickoff_for_each(
            inputs: list[dict[str, Any]],
            *args: Any,
            run: str | None = None,
            reuse: float | timedelta | None = None,
            fresh: bool = False,
            **kwargs: Any,
        ) -> Any:
            token = _batch.set(Batch(crew, run, reuse, fresh))
            try:  # CrewAI's: each input kicks off a copy of the crew (copy, below)
                return originals["kickoff_for_each"](inputs, *args, **kwargs)
            finally:
                _batch.reset(token)

        async def kickoff_for_each_async(
            inputs: list[dict[str, Any]],
            *args: Any,
            run: str | None = None,
            reuse: float | timedelta | None = None,
            fresh: bool = False,
            **kwargs: Any,
        ) -> Any:
            token = _batch.set(Batch(crew, run, reuse, fresh))
            try:  # CrewAI's copies the crew once per input, in order, then kicks them off
                return await originals["kickoff_for_each_async"](inputs, *args, **kwargs)
            finally:
                _batch.reset(token)

        def copy() -> Crew:
            copied: Crew = originals["copy"]()
            batch = _batch.get()
            made: tuple[int, Batch] | None = None
            if batch is not None and batch.crew is crew:
                batch.copies += 1
                made = (batch.copies, batch)
            _wrap_parts(copied)  # its models: copies of this crew's, wrapped anew
            self._wrap_kickoffs(copied, made)
            return copied

        replaced: tuple[Callable[..., Any], ...] = (
            kickoff,
            kickoff_async,
            kickoff_for_each,
            kickoff_for_each_async,
            copy,
        )
        for name, function in zip(KICKOFFS, replaced, strict=True):
            object.__setattr__(crew, name, function)
        object.__setattr__(crew, WRAPPED, True)

    def _kickoff(
        self, original: Callable[..., Any], item: tuple[int, Batch] | None
    ) -> Callable[..., Any]:
        handler = self

        def kickoff(
            inputs: dict[str, Any] | None = None,
            *args: Any,
            run: str | None = None,
            reuse: float | timedelta | None = None,
            fresh: bool = False,
            **kwargs: Any,
        ) -> Any:
            if active.get() is not None:  # a kickoff inside a journaled one (CrewAI's own)
                return original(inputs, *args, **kwargs)
            outer = current_journal.get()
            if outer is not None and outer.is_open and handler.path is None:
                token = active.set(Session(outer, f"{handler.session_id}:"))
                try:
                    return original(inputs, *args, **kwargs)
                finally:
                    active.reset(token)
            named = run if run is not None else handler.run
            batch_name = None  # the run name of the batch this copy is an item of
            if item is not None:  # a copy kicked off by kickoff_for_each: its batch's options
                n, batch = item
                batch_name = run if run is not None else batch.run if batch.run else handler.run
                named = None if batch_name is None else f"{batch_name}.item{n}"
                reuse = reuse if reuse is not None else batch.reuse
                fresh = fresh or batch.fresh
            opened = request_options(
                handler.session_id,
                plain({"inputs": dict(inputs or {})}),
                None,
                run=named,
                turn=1,
                reuse=reuse if reuse is not None else handler.reuse,
                fresh=fresh or handler.fresh,
            )
            journal = Journal(
                handler.session_id,
                **opened,
                path=handler.path,
                durability=handler.durability,
                timeout=handler.timeout,
                budget=handler.budget,
                input=dict(inputs or {}),
            )
            with journal:
                token = active.set(Session(journal))
                try:
                    if item is not None and batch_name is not None:  # named by its place
                        check_item(journal, item[0], batch_name, inputs)
                    return original(inputs, *args, **kwargs)
                finally:
                    active.reset(token)

        return kickoff


def durable_crew(crew: Crew, goal: str, **options: Any) -> Crew:
    """``crew`` with its kickoff journaled as goal ``goal``: ``CrewAIDurabilityHandler(goal, ...)``.

    ``options`` are the handler's (``run=``, ``reuse=``, ``fresh=``, ``path=``,
    ``durability=``, ``timeout=``). Returns the same crew, wrapped in place.
    """
    return CrewAIDurabilityHandler(goal, **options).wrap_crew(crew)


def _wrap_parts(crew: Crew) -> None:
    """Wrap, in place, every model and tool ``crew`` holds."""
    for attribute in CREW_LLMS:
        _wrap_model(getattr(crew, attribute, None))
    agents = list(crew.agents)
    if crew.manager_agent is not None:
        agents.append(crew.manager_agent)
    for agent in agents:
        for attribute in AGENT_LLMS:
            _wrap_model(getattr(agent, attribute, None))
        for tool in agent.tools or []:
            _wrap_tool(tool)
    for task in crew.tasks:
        for tool in task.tools or []:
            _wrap_tool(tool)


def _wrap_model(value: Any) -> None:
    if isinstance(value, BaseLLM):
        wrap_llm(value)


def _wrap_tool(value: Any) -> None:
    if isinstance(value, BaseTool):
        wrap_tool(value)
