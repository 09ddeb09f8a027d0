"""``Runner.run(agent, input)`` opens the agent's journal itself: the run is the request.

``durable_agent(agent, goal="support")`` registers the agent's goal (and
``run=``, ``reuse=``, ``fresh=``, ``path=``) and puts :class:`JournalRunner` in
front of the SDK's default runner (``agents.run.set_default_agent_runner``),
once per process. A ``Runner.run``/``run_sync`` of a registered agent with no
journal open then runs inside ``Journal(goal, run=...)``:

- ``run=`` given: that run (an idempotency key, handed back for ``reuse``);
- none: the request itself (``request_run``): the agent, the input, and the
  conversation it continues, the items of the ``session`` passed (read from
  the session it wraps, for a :class:`JournalSession`) before this request
  added its own. A completed request asked again within ``reuse``
  (``DEFAULT_REUSE``, an hour) replays its recorded answer, no call paid; a
  second copy in flight waits for the first and replays it; a new input is a
  new run.

The session's items "before this request": when the session already ends
with this very input (a user message no later user message follows), the
request had run (or begun) before, and the items before that input are the
conversation it continues. So a request killed after it returned, or run
twice at once, is the same run. What that cannot tell apart: the same input
sent twice in a row in one session, within ``reuse``, is the same request
(pass ``fresh=True`` to ask again); and a program that reruns a whole
multi-turn session conversation from its first turn asks its earlier turns in
a session that has grown: name those runs (``run=f"{conversation}:{turn}"``).

Agents not registered (and every run inside an open journal) go to the
runner that was there before, unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from agents.agent import Agent
from agents.run import AgentRunner, get_default_agent_runner, set_default_agent_runner

from letitloop.adapters.agentcalls import (
    DEFAULT_REUSE,
    DEFAULT_TIMEOUT,
    digest,
    open_journal,
    plain,
    request_run,
)
from letitloop.run.journal import Journal


@dataclass(frozen=True)
class RunOptions:
    """Where a registered agent's runs are journaled, and which run each is."""

    goal: str
    run: str | None = None
    reuse: float | timedelta | None = None
    fresh: bool = False
    path: str | None = None


#: The attribute holding a registered agent's options (an Agent is an unhashable dataclass).
_OPTIONS = "_letitloop_run_options"


def registered(agent: Agent[Any]) -> RunOptions | None:
    """The options ``durable_agent(agent, goal=...)`` registered for ``agent``, if any."""
    options = getattr(agent, _OPTIONS, None)
    return options if isinstance(options, RunOptions) else None


def _input_items(input: Any) -> list[Any]:
    """The items a run's input adds to a session: a text is one user message."""
    if isinstance(input, str):
        return [{"content": input, "role": "user"}]
    return list(plain(input))


def _is_user_message(item: Any) -> bool:
    return isinstance(item, dict) and item.get("role") == "user"


def _said(item: Any) -> Any:
    """A session item as what was said: its role and content (ids and types left out)."""
    if isinstance(item, dict) and "role" in item:
        return {"role": item.get("role"), "content": item.get("content")}
    return item


def conversation_before(items: list[Any], input: Any) -> str | None:
    """The conversation a request continues, from a session's items (module docstring)."""
    history = [plain(i) for i in items]
    asked = [_said(i) for i in _input_items(input)]
    for start in range(len(history) - len(asked), -1, -1):
        tail = history[start:]
        if [_said(i) for i in tail[: len(asked)]] == asked and not any(
            _is_user_message(i) for i in tail[len(asked) :]
        ):
            history = history[:start]  # this request ran (or began) before: what preceded it
            break
        if any(_is_user_message(i) for i in tail):
            break  # a later user message: this input is a new request
    return digest(history) if history else None


async def session_items(session: Any) -> list[Any]:
    """A session's items, read from the session a JournalSession wraps (no step)."""
    if session is None:
        return []
    underlying = getattr(session, "session", session)
    return list(await underlying.get_items())


def journal_of(options: RunOptions, agent: Agent[Any], input: Any, items: list[Any]) -> Journal:
    """The journal (not yet open) of a registered agent's request."""
    named = options.run is not None
    run = options.run
    if run is None:
        run = request_run(agent.name, plain(input), conversation_before(items, input))
    return Journal(
        options.goal,
        run=run,
        reuse=options.reuse if named or options.reuse is not None else DEFAULT_REUSE,
        fresh=options.fresh,
        path=options.path,
        timeout=DEFAULT_TIMEOUT,
    )


class JournalRunner(AgentRunner):
    """The SDK's runner, with registered agents' runs in their journal (module docstring).

    Holds the runner that was the default before and hands it every run.
    """

    def __init__(self, inner: AgentRunner) -> None:
        super().__init__()
        self.inner = inner

    async def run(self, starting_agent: Agent[Any], input: Any, **kwargs: Any) -> Any:
        options = registered(starting_agent)
        if options is None or open_journal() is not None:
            return await self.inner.run(starting_agent, input, **kwargs)
        items = await session_items(kwargs.get("session"))
        async with journal_of(options, starting_agent, input, items):
            return await self.inner.run(starting_agent, input, **kwargs)

    def run_sync(self, starting_agent: Agent[Any], input: Any, **kwargs: Any) -> Any:
        options = registered(starting_agent)
        if options is None or open_journal() is not None:
            return self.inner.run_sync(starting_agent, input, **kwargs)
        import asyncio

        items = asyncio.run(session_items(kwargs.get("session")))
        with journal_of(options, starting_agent, input, items):
            return self.inner.run_sync(starting_agent, input, **kwargs)

    def run_streamed(self, starting_agent: Agent[Any], input: Any, **kwargs: Any) -> Any:
        return self.inner.run_streamed(starting_agent, input, **kwargs)


def register(agent: Agent[Any], options: RunOptions) -> None:
    """Journal ``agent``'s runs under ``options``; the JournalRunner in front, once."""
    setattr(agent, _OPTIONS, options)
    current = get_default_agent_runner()
    if not isinstance(current, JournalRunner):
        set_default_agent_runner(JournalRunner(current))
