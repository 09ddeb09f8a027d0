"""``AutoGenStateSerializer``: AutoGen agents and teams whose model and tool calls are steps.

``wrap_agent(agent)`` makes, in place, the agent's model client a
:class:`DurableChatCompletionClient` and its tools' calls journaled
(``tools.py``), and its ``run``/``run_stream`` run inside a journal: the
open one (``with Journal(...)``, ``@durable``) if any, else
``Journal(session_id)``, completed when the run ends. ``wrap_team(team)``
does the same for every participant and the team's own run (and a
``SelectorGroupChat``'s model client, whose choices of speaker are model
calls too).

The agents' state (their model contexts, the team's message thread) is
not stored as a snapshot: a rerun of the same script replays every
finished call, so the agents rebuild exactly the state they had, and only
the calls in flight at the kill run again. ``save_state()`` and
``load_state()`` keep working as AutoGen documents them.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from typing import Any, TypeVar

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.base import ChatAgent, Team
from autogen_core.models import ChatCompletionClient

from letitloop.adapters.agentcalls import Pricing, run_journal
from letitloop.adapters.autogen.calls import AgentCalls, JournalHolder
from letitloop.adapters.autogen.client import DurableChatCompletionClient
from letitloop.adapters.autogen.tools import wrap_workbench
from letitloop.errors import LetItLoopError

A = TypeVar("A", bound=ChatAgent)
T = TypeVar("T", bound=Team)

#: The attribute a wrapped agent carries: the serializer that wrapped its calls.
WRAPPED = "_letitloop_serializer"
#: The attribute an agent or team whose runs are wrapped carries.
RUNS = "_letitloop_runs"


def refuse_unless_assistant(agent: ChatAgent) -> None:
    """LetItLoopError unless ``agent`` is an ``AssistantAgent`` (whose calls are known)."""
    if not isinstance(agent, AssistantAgent):
        raise LetItLoopError(
            f"AutoGenStateSerializer journals AssistantAgent's model and tool calls; "
            f"got {type(agent).__name__} {agent.name!r}; wrap its model client and tools "
            f"yourself, or leave it out of the journaled team"
        )


class AutoGenStateSerializer:
    """Journal the model and tool calls of AutoGen agents, so a rerun resumes them.

    ``session_id`` is the goal of the journal opened around each run (and of
    nothing else: keys are labelled by the agents' names); ``path`` the
    journal file (default: ``$LETITLOOP_DB``, else ``.letitloop/journal.db``
    found as ``Journal`` finds it); ``cost`` what a model call cost from its
    model's name and tokens (reported with them; default: no cost). One
    serializer serves one run at a time.
    """

    def __init__(
        self, session_id: str = "autogen", *, path: str | None = None, cost: Pricing | None = None
    ) -> None:
        self.session_id = session_id
        self.path = path
        self.cost = cost
        self.holder = JournalHolder()

    def wrap_agent(self, agent: A) -> A:
        """Journal ``agent``'s calls and run it inside a journal (in place); returns it."""
        self._wrap_calls(agent)
        self._wrap_runs(agent)
        return agent

    def wrap_team(self, team: T) -> T:
        """Journal the calls of every participant of ``team``, and run it inside a journal.

        Raises LetItLoopError, before anything is wrapped, for a participant
        that is not an ``AssistantAgent`` (its calls could not be journaled).
        """
        participants = getattr(team, "_participants", [])
        for participant in participants:
            refuse_unless_assistant(participant)
        for participant in participants:
            self._wrap_calls(participant)
        selector = getattr(team, "_model_client", None)
        if isinstance(selector, ChatCompletionClient) and not isinstance(
            selector, DurableChatCompletionClient
        ):
            label = f"{getattr(team, 'name', None) or type(team).__name__}.selector"
            team._model_client = DurableChatCompletionClient(  # type: ignore[attr-defined]
                selector, AgentCalls(label, self.holder, self.cost)
            )
        self._wrap_runs(team)
        return team

    def _wrap_calls(self, agent: ChatAgent) -> None:
        if getattr(agent, WRAPPED, None) is not None:
            return
        refuse_unless_assistant(agent)
        assert isinstance(agent, AssistantAgent)
        calls = AgentCalls(agent.name, self.holder, self.cost)
        agent._model_client = DurableChatCompletionClient(agent._model_client, calls)
        for workbench in agent._workbench:
            wrap_workbench(workbench, calls)
        setattr(agent, WRAPPED, self)

    def _wrap_runs(self, runner: ChatAgent | Team) -> None:
        if getattr(runner, RUNS, False):
            return
        runner.run = self._journaled_run(runner.run)  # type: ignore[method-assign]
        runner.run_stream = self._journaled_stream(runner.run_stream)  # type: ignore[method-assign]
        setattr(runner, RUNS, True)

    def _journaled_run(self, run: Callable[..., Any]) -> Callable[..., Any]:
        holder, goal, path = self.holder, self.session_id, self.path

        async def journaled_run(*args: Any, **kwargs: Any) -> Any:
            with run_journal(goal, path) as journal:
                before, holder.current = holder.current, journal
                try:
                    return await run(*args, **kwargs)
                finally:
                    holder.current = before

        return journaled_run

    def _journaled_stream(self, run_stream: Callable[..., Any]) -> Callable[..., Any]:
        holder, goal, path = self.holder, self.session_id, self.path

        async def journaled_stream(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
            with run_journal(goal, path) as journal:
                before, holder.current = holder.current, journal
                try:
                    async for item in run_stream(*args, **kwargs):
                        yield item
                finally:
                    holder.current = before

        return journaled_stream
