"""``SmolagentsWALCallback``: a smolagents agent whose model calls and tool calls are steps.

``wrap_agent(agent)`` makes, in place:

- ``agent.model`` a :class:`DurableModel` (each reply journaled);
- a CodeAgent's ``python_executor`` a :class:`JournaledExecutor` (each
  execution of its code journaled, with the variables it set: code.py);
- each tool's ``forward`` a journaled call (``Tool.__call__`` still checks
  and converts the inputs and outputs around it);
- each managed agent wrapped the same way, its ``run`` a journaled call of
  the manager (key ``{manager}.agent:{name}:{digest}``), its own calls
  keyed under it;
- ``agent.run`` the same run inside a journal: the open one (``with
  Journal(...)``, ``@durable``) if any, else ``Journal(session_id,
  run=...)`` of the request (its task and the conversation it continues,
  unless ``run=`` names it), completed when the run returns;
- this object one of the agent's step callbacks, which checks that the
  agent it is called for was wrapped.

A rerun of the same script replays every call that had finished, and the
agent's memory (``agent.memory.steps``) is rebuilt from the replies and
observations as it was; only the calls in flight run again.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

from smolagents.agents import MultiStepAgent
from smolagents.local_python_executor import PythonExecutor
from smolagents.memory import ActionStep
from smolagents.tools import Tool

from letitloop.adapters.agentcalls import (
    Pricing,
    conversation_after,
    digest,
    mismatch_within,
    plain,
    plain_text,
    request_options,
    run_journal,
)
from letitloop.adapters.smolagents.calls import AgentCalls
from letitloop.adapters.smolagents.code import JournaledExecutor
from letitloop.adapters.smolagents.model import DurableModel
from letitloop.errors import LetItLoopError
from letitloop.identity.step_names import named
from letitloop.identity.unchecked import unchecked
from letitloop.run.generations import reuse_seconds

#: The attribute a wrapped agent or tool carries: its AgentCalls.
WRAPPED = "_letitloop_calls"

#: What a run's request is, of ``agent.run``'s arguments (docs/adapters.md, "The same
#: request is never paid twice"): ``reset`` is the conversation it continues, and
#: ``stream`` and ``return_full_result`` change only how the same answer comes back.
REQUEST = ("task", "images", "additional_args", "max_steps")


@named("letitloop:smolagents.tool")
def call_tool(
    identity: Any, call: tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]
) -> Any:
    """The step's function: the tool's real ``forward``; text subclasses as plain text."""
    del identity  # for the journal's argument check only
    forward, args, kwargs = call
    return plain_text(forward(*args, **kwargs))


@named("letitloop:smolagents.agent")
def call_agent(identity: Any, call: tuple[Callable[[], Any]]) -> Any:
    """The step's function: a managed agent's whole run."""
    del identity
    (run,) = call
    return plain_text(run())


def wrap_tool(tool: Tool, calls: AgentCalls) -> None:
    """Journal ``tool``'s calls as ``{label}.tool:{name}:{digest}`` (in place, once)."""
    if getattr(tool, WRAPPED, None) is not None:
        return
    forward = tool.forward

    def journaled_forward(*args: Any, **kwargs: Any) -> Any:
        identity = plain({"args": list(args), "kwargs": kwargs})
        return calls.step(
            f"{calls.label}.tool:{tool.name}:{digest(identity)}",
            call_tool,
            identity,
            unchecked((forward, args, kwargs)),
            queue=True,
        )

    tool.forward = journaled_forward
    setattr(tool, WRAPPED, calls)


class SmolagentsWALCallback:
    """Journal a smolagents agent's model and tool calls, so a rerun resumes it.

    ``session_id`` is the goal of the journal opened around each run (default:
    the agent's name, else ``"smolagents"``) and the label of its keys;
    ``path`` the journal file (default: ``$LETITLOOP_DB``, else
    ``.letitloop/journal.db`` found as ``Journal`` finds it); ``cost`` what a
    model call cost from its model's name and tokens (reported with them;
    default: no cost). Each ``agent.run`` is a run of its own: ``run`` names
    it (a later turn of the conversation, ``agent.run(task, reset=False)``,
    is ``{run}.turn2`` …); with no ``run``, the run is the request itself
    (the task, images, additional args and max steps, and the conversation
    it continues: ``agentcalls.request_run``), so a new task is a new run and
    the same task again hands back its recorded answer without a call, for
    ``reuse`` seconds (default ``agentcalls.DEFAULT_REUSE``, an hour; with a
    ``run``, forever); ``fresh=True`` asks for a new answer. A second process
    asking the same request at once waits for the first and replays it. Call
    :meth:`wrap_agent` before the agent runs: a step callback alone fires
    after a step's calls have run, too late to replay them.
    """

    def __init__(
        self,
        session_id: str | None = None,
        *,
        path: str | None = None,
        cost: Pricing | None = None,
        run: str | None = None,
        reuse: float | timedelta | None = None,
        fresh: bool = False,
    ) -> None:
        reuse_seconds(reuse, fresh)  # refused here, not at the first run
        self.session_id = session_id
        self.path = path
        self.cost = cost
        self.run = run
        self.reuse = reuse
        self.fresh = fresh

    def wrap_agent(self, agent: MultiStepAgent) -> MultiStepAgent:
        """Wrap ``agent`` (model, tools, managed agents, run) in place; returns it."""
        label = self.session_id or agent.name or type(agent).__name__
        self._wrap(agent, label, parent=None)
        return agent

    def _wrap(self, agent: MultiStepAgent, label: str, parent: AgentCalls | None) -> None:
        if getattr(agent, WRAPPED, None) is not None:
            return
        calls = AgentCalls(label, self.cost)
        setattr(agent, WRAPPED, calls)
        agent.model = DurableModel(agent.model, calls)
        executor = getattr(agent, "python_executor", None)
        if isinstance(executor, PythonExecutor) and not isinstance(executor, JournaledExecutor):
            agent.python_executor = JournaledExecutor(executor, calls)
        for tool in agent.tools.values():
            wrap_tool(tool, calls)
        for name, managed in agent.managed_agents.items():
            self._wrap(managed, managed.name or name, parent=calls)
        agent.step_callbacks.register(ActionStep, self)
        agent.run = self._journaled_run(agent, calls, parent)

    def _journaled_run(
        self, agent: MultiStepAgent, calls: AgentCalls, parent: AgentCalls | None
    ) -> Callable[..., Any]:
        run = agent.run
        goal = self.session_id or agent.name or "smolagents"
        path = self.path
        signature = inspect.signature(run)

        def options(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
            """The run of this request (agentcalls.request_options), its turn counted."""
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            given = bound.arguments
            if given.get("reset", True):
                calls.conversation, calls.turn = None, 0
            calls.turn += 1
            request = plain({k: given.get(k) for k in REQUEST})
            return request_options(
                goal,
                request,
                calls.conversation,
                run=self.run,
                turn=calls.turn,
                reuse=self.reuse,
                fresh=self.fresh,
            )

        def answered(opened: dict[str, Any], answer: Any) -> None:
            """The conversation the agent's next run continues, unless it resets."""
            output = getattr(answer, "output", answer)  # a RunResult, a FinalAnswerStep
            calls.conversation = conversation_after(
                calls.conversation, opened["run"], plain(plain_text(output))
            )

        def streamed(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Iterator[Any]:
            opened = options(args, kwargs)
            last = None
            calls.refusal = None
            try:
                with run_journal(goal, path, **opened) as journal, calls.running(journal):
                    for last in run(*args, **kwargs):
                        yield last
            except Exception as error:
                if calls.refusal is not None:
                    raise calls.refusal from error
                raise
            answered(opened, last)

        def journaled_run(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("stream", args[1] if len(args) > 1 else False):
                return streamed(args, kwargs)
            if parent is not None and parent.journal is not None:

                def whole_run() -> Any:
                    assert parent.journal is not None
                    with calls.running(parent.journal):
                        return run(*args, **kwargs)

                identity = plain({"args": list(args), "kwargs": kwargs})
                return parent.step(
                    f"{parent.label}.agent:{calls.label}:{digest(identity)}",
                    call_agent,
                    identity,
                    unchecked((whole_run,)),
                    queue=True,
                )
            opened = options(args, kwargs)
            calls.refusal = None
            try:
                with run_journal(goal, path, **opened) as journal, calls.running(journal):
                    answer = run(*args, **kwargs)
            except Exception as error:  # smolagents wraps a model call's error in its own
                if calls.refusal is not None:
                    raise calls.refusal from error
                found = mismatch_within(error)
                if found is None or found is error:
                    raise
                raise found from error
            answered(opened, answer)
            return answer

        return journaled_run

    def __call__(self, memory_step: ActionStep, agent: MultiStepAgent | None = None) -> None:
        """The step callback: refuses an agent that was not wrapped (its calls ran unjournaled)."""
        if agent is not None and getattr(agent, WRAPPED, None) is None:
            raise LetItLoopError(
                f"SmolagentsWALCallback was called for agent {agent.name or type(agent).__name__!r}"
                f" after step {memory_step.step_number}, whose model and tool calls ran without "
                f"being journaled: a step callback fires only after a step's calls; wrap the "
                f"agent before it runs: SmolagentsWALCallback(...).wrap_agent(agent), or "
                f"letitloop.adapters.smolagents.durable_agent(agent)"
            )


def durable_agent(
    agent: MultiStepAgent,
    session_id: str | None = None,
    *,
    path: str | None = None,
    cost: Pricing | None = None,
    run: str | None = None,
    reuse: float | timedelta | None = None,
    fresh: bool = False,
) -> MultiStepAgent:
    """``SmolagentsWALCallback(session_id, ...).wrap_agent(agent)``: two lines become one."""
    wal = SmolagentsWALCallback(session_id, path=path, cost=cost, run=run, reuse=reuse, fresh=fresh)
    return wal.wrap_agent(agent)
