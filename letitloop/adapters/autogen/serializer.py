"""``AutoGenStateSerializer``: AutoGen agents and teams whose model and tool calls are steps.

``wrap_agent(agent)`` makes, in place, the agent's model client a
:class:`DurableChatCompletionClient` and its tools' calls journaled
(``tools.py``), and its ``run``/``run_stream`` run inside a journal: the
open one (``with Journal(...)``, ``@durable``) if any, else
``Journal(session_id, run=...)`` of the request (its task and the
conversation it continues, unless ``run=`` names it), completed when the
run ends. ``wrap_team(team)``
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
from datetime import timedelta
from typing import Any, TypeVar

from autogen_agentchat.agents import AssistantAgent, UserProxyAgent
from autogen_agentchat.base import ChatAgent, Team
from autogen_agentchat.messages import BaseAgentEvent, BaseChatMessage
from autogen_core.models import ChatCompletionClient

from letitloop.adapters.agentcalls import (
    Pricing,
    conversation_after,
    plain,
    request_options,
    run_journal_async,
)
from letitloop.adapters.autogen.calls import AgentCalls, JournalHolder
from letitloop.adapters.autogen.client import DurableChatCompletionClient
from letitloop.adapters.autogen.human import wrap_user_proxy
from letitloop.adapters.autogen.tools import wrap_workbench
from letitloop.errors import LetItLoopError
from letitloop.run.generations import reuse_seconds

A = TypeVar("A", bound=ChatAgent)
T = TypeVar("T", bound=Team)

#: The attribute a wrapped agent carries: the serializer that wrapped its calls.
WRAPPED = "_letitloop_serializer"
#: The attribute an agent or team whose runs are wrapped carries: its Conversation.
RUNS = "_letitloop_runs"


def refuse_unless_known(agent: ChatAgent) -> None:
    """LetItLoopError unless ``agent`` is an ``AssistantAgent`` (whose calls are known) or
    a ``UserProxyAgent`` (whose input is a wait)."""
    if not isinstance(agent, AssistantAgent | UserProxyAgent):
        raise LetItLoopError(
            f"AutoGenStateSerializer journals AssistantAgent's model and tool calls and "
            f"UserProxyAgent's input; got {type(agent).__name__} {agent.name!r}; wrap its "
            f"model client and tools yourself, or leave it out of the journaled team"
        )


class AutoGenStateSerializer:
    """Journal the model and tool calls of AutoGen agents, so a rerun resumes them.

    ``session_id`` is the goal of the journal opened around each run (and of
    nothing else: keys are labelled by the agents' names); ``path`` the
    journal file (default: ``$LETITLOOP_DB``, else ``.letitloop/journal.db``
    found as ``Journal`` finds it); ``cost`` what a model call cost from its
    model's name and tokens (reported with them; default: no cost). One
    serializer serves one run at a time. Each ``run``/``run_stream`` is a run of
    its own: ``run`` names it (later runs of the same conversation, which
    AutoGen continues until ``reset()``, are ``{run}.turn2`` …); with no
    ``run``, the run is the request itself (the task, and the conversation it
    continues: ``agentcalls.request_run``), so a new task is a new run and the
    same task again hands back its recorded answer without a call, for
    ``reuse`` seconds (default ``agentcalls.DEFAULT_REUSE``, an hour; with a
    ``run``, forever); ``fresh=True`` asks for a new answer. A second process
    asking the same request at once waits for the first and replays it.
    A ``UserProxyAgent``'s input is a wait of the run (human.py): with no
    answer sent within ``stop_after`` seconds (default 0; None: wait in the
    process), the run stops and the process exits 75, its one line saying
    the ``lil send`` that answers it.
    """

    def __init__(
        self,
        session_id: str = "autogen",
        *,
        path: str | None = None,
        cost: Pricing | None = None,
        run: str | None = None,
        reuse: float | timedelta | None = None,
        fresh: bool = False,
        stop_after: float | None = 0.0,
    ) -> None:
        reuse_seconds(reuse, fresh)  # refused here, not at the first run
        self.stop_after = stop_after
        self.session_id = session_id
        self.path = path
        self.cost = cost
        self.run = run
        self.reuse = reuse
        self.fresh = fresh
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
            refuse_unless_known(participant)
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
        refuse_unless_known(agent)
        calls = AgentCalls(agent.name, self.holder, self.cost)
        setattr(agent, WRAPPED, self)
        if isinstance(agent, UserProxyAgent):
            wrap_user_proxy(agent, calls, self.stop_after)
            return
        assert isinstance(agent, AssistantAgent)
        agent._model_client = DurableChatCompletionClient(agent._model_client, calls)
        for workbench in agent._workbench:
            wrap_workbench(workbench, calls)

    def _wrap_runs(self, runner: ChatAgent | Team) -> None:
        if getattr(runner, RUNS, None) is not None:
            return
        talk = Conversation()
        runner.run = self._journaled_run(runner.run, talk)  # type: ignore[method-assign]
        runner.run_stream = self._journaled_stream(runner.run_stream, talk)  # type: ignore[method-assign]
        # A reset starts a new conversation; a loaded state continues the one it holds.
        resetting = "reset" if isinstance(runner, Team) else "on_reset"
        setattr(runner, resetting, talk.forgetting(getattr(runner, resetting)))
        runner.load_state = talk.loading(runner.load_state)  # type: ignore[method-assign]
        setattr(runner, RUNS, talk)

    def _options(self, talk: Conversation, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The journal options of a run asked with ``kwargs`` (its request: the task)."""
        talk.turn += 1
        return request_options(
            self.session_id,
            plain({"task": task_identity(kwargs.get("task"))}),
            talk.conversation,
            run=self.run,
            turn=talk.turn,
            reuse=self.reuse,
            fresh=self.fresh,
        )

    def _journaled_run(self, run: Callable[..., Any], talk: Conversation) -> Callable[..., Any]:
        holder, goal, path = self.holder, self.session_id, self.path

        async def journaled_run(*args: Any, **kwargs: Any) -> Any:
            opened = self._options(talk, kwargs)
            async with run_journal_async(goal, path, **opened) as journal:
                before, holder.current, holder.waiting = holder.current, journal, None
                try:
                    result = await run(*args, **kwargs)
                except Exception:
                    stop_if_waiting(holder)
                    raise
                finally:
                    holder.current = before
                stop_if_waiting(holder)
            talk.answered(opened["run"], result)
            return result

        return journaled_run

    def _journaled_stream(
        self, run_stream: Callable[..., Any], talk: Conversation
    ) -> Callable[..., Any]:
        holder, goal, path = self.holder, self.session_id, self.path

        async def journaled_stream(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
            opened = self._options(talk, kwargs)
            last = None
            async with run_journal_async(goal, path, **opened) as journal:
                before, holder.current, holder.waiting = holder.current, journal, None
                try:
                    async for last in run_stream(*args, **kwargs):
                        yield last
                except Exception:
                    stop_if_waiting(holder)
                    raise
                finally:
                    holder.current = before
                stop_if_waiting(holder)
            talk.answered(opened["run"], last)

        return journaled_stream


def stop_if_waiting(holder: JournalHolder) -> None:
    """Raise the run's RunWaiting if a person's answer stopped it (human.py): the journal
    leaves the run waiting, the process exits 75."""
    stop, holder.waiting = holder.waiting, None
    if stop is not None:
        raise stop from None


def message_identity(message: Any) -> Any:
    """A chat message or agent event as a request's identity: its kind, source and text
    (no id, no time)."""
    if isinstance(message, (BaseChatMessage, BaseAgentEvent)):
        return {"type": type(message).__name__, "source": message.source, "text": message.to_text()}
    return plain(message)


def task_identity(task: Any) -> Any:
    """``run(task=...)``'s task as plain data: text, a message, or messages (None: continue)."""
    if task is None or isinstance(task, str):
        return task
    if isinstance(task, BaseChatMessage):
        return message_identity(task)
    return [message_identity(m) for m in task]


class Conversation:
    """The conversation an agent's or team's next run continues, and its turn in it.

    AutoGen keeps an agent's model context and a team's thread across runs
    until ``reset()`` (a team) or ``on_reset()`` (an agent); each run's
    identity includes what it continues (``agentcalls.conversation_after``):
    the first turn of a conversation rerun after a kill replays that turn,
    never the second's.
    """

    def __init__(self) -> None:
        self.conversation: str | None = None
        self.turn = 0

    def answered(self, run: str, result: Any) -> None:
        """``run`` returned ``result`` (a TaskResult): the conversation continues from it."""
        messages = getattr(result, "messages", None) or []
        said = [message_identity(m) for m in messages]
        answer = {"messages": said, "stop_reason": getattr(result, "stop_reason", None)}
        self.conversation = conversation_after(self.conversation, run, answer)

    def forgetting(self, reset: Callable[..., Any]) -> Callable[..., Any]:
        """``reset`` (a coroutine function), which now starts a new conversation too."""

        async def forgets(*args: Any, **kwargs: Any) -> Any:
            self.conversation, self.turn = None, 0
            return await reset(*args, **kwargs)

        return forgets

    def loading(self, load_state: Callable[..., Any]) -> Callable[..., Any]:
        """``load_state``, which now continues the conversation the state holds."""

        async def loads(state: Any) -> Any:
            self.conversation, self.turn = conversation_after(None, "loaded", state), 1
            return await load_state(state)

        return loads
