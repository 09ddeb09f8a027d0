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
- inside a journal the program already opened (``with Journal(...)``,
  ``@durable``), the crew's steps go to that run, their names prefixed with
  the session id (``research_crew:llm:Researcher``), so several crews of one
  program resume together.

The crew's state (its tasks' outputs, each agent's conversation, tool usage
counts, token counters) is rebuilt by running the crew again with every
finished call replayed: CrewAI does the same work on the same answers.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from crewai import Crew
from crewai.llms.base_llm import BaseLLM
from crewai.tools import BaseTool

from ...errors import LetItLoopError
from ...generations import reuse_seconds
from ...journal import Journal, current_journal
from ...pragmas import Durability
from ..agentcalls import DEFAULT_TIMEOUT as WAIT_FOR_HOLDER
from ..agentcalls import plain, request_options
from .calls import Session, active
from .llms import WRAPPED, wrap_llm
from .tools import wrap_tool

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
    ) -> None:
        reuse_seconds(reuse, fresh)  # refused here, not at the first kickoff
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
        if not getattr(crew, WRAPPED, False):
            object.__setattr__(crew, "kickoff", self._kickoff(crew.kickoff))
            object.__setattr__(crew, WRAPPED, True)
        return crew

    def _kickoff(self, original: Callable[..., Any]) -> Callable[..., Any]:
        handler = self

        def kickoff(
            inputs: dict[str, Any] | None = None,
            *,
            run: str | None = None,
            reuse: float | timedelta | None = None,
            fresh: bool = False,
            **kwargs: Any,
        ) -> Any:
            if active.get() is not None:  # a kickoff inside a journaled one (CrewAI's own)
                return original(inputs=inputs, **kwargs)
            outer = current_journal.get()
            if outer is not None and outer.is_open and handler.path is None:
                token = active.set(Session(outer, f"{handler.session_id}:"))
                try:
                    return original(inputs=inputs, **kwargs)
                finally:
                    active.reset(token)
            opened = request_options(
                handler.session_id,
                plain({"inputs": dict(inputs or {})}),
                None,
                run=run if run is not None else handler.run,
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
                input=dict(inputs or {}),
            )
            with journal:
                token = active.set(Session(journal))
                try:
                    return original(inputs=inputs, **kwargs)
                finally:
                    active.reset(token)

        return kickoff


def durable_crew(crew: Crew, goal: str, **options: Any) -> Crew:
    """``crew`` with its kickoff journaled as goal ``goal``: ``CrewAIDurabilityHandler(goal, ...)``.

    ``options`` are the handler's (``run=``, ``reuse=``, ``fresh=``, ``path=``,
    ``durability=``, ``timeout=``). Returns the same crew, wrapped in place.
    """
    return CrewAIDurabilityHandler(goal, **options).wrap_crew(crew)


def _wrap_model(value: Any) -> None:
    if isinstance(value, BaseLLM):
        wrap_llm(value)


def _wrap_tool(value: Any) -> None:
    if isinstance(value, BaseTool):
        wrap_tool(value)
