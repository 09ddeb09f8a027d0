"""An AutoGen team for tests/test_autogen.py, run as a child process.

``python tests/autogen_team.py MODE DB SIDE [KILL_AT [TASK]]``: MODE ``team`` runs
a Swarm (a planner with two tools hands off to an analyst with a tool of its
own); ``two`` runs two agents, one after the other, in one journal; ``ask``
asks one agent TASK with the adapter's default arguments (no session, no run
name, the journal from ``LETITLOOP_DB``); ``chat`` asks it TASK, then a
second run that continues its conversation (AutoGen keeps it until reset). The fake
model client and the tools append ``start WHAT`` and ``end WHAT`` to the side
file SIDE and SIGKILL their own process at ``start KILL_AT``; ``handoff``
kills it between the planner's handoff and the analyst's first turn (in the
termination check, which the team runs between turns). The final answer is
printed with the agents' model contexts as the last line of stdout.

The fake client is a ``ReplayChatCompletionClient`` made stateless: which of
its replies it gives depends only on the prompt (the number of the agent's
own earlier replies in it), so a resumed process asks it where the killed
one stopped.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.base import TerminationCondition
from autogen_agentchat.conditions import TextMentionTermination
from autogen_agentchat.messages import BaseAgentEvent, BaseChatMessage, HandoffMessage, StopMessage
from autogen_agentchat.teams import Swarm
from autogen_core import CancellationToken, FunctionCall
from autogen_core.models import (
    AssistantMessage,
    CreateResult,
    LLMMessage,
    RequestUsage,
    UserMessage,
)
from autogen_core.models import FunctionExecutionResultMessage as Results
from autogen_core.tools import Tool, ToolSchema
from autogen_ext.models.replay import ReplayChatCompletionClient
from pydantic import BaseModel
from side_file import SideFile

from letitloop import Journal
from letitloop.adapters.autogen import AutoGenStateSerializer

SIDE = SideFile()
WHERE, event, done = SIDE.where, SIDE.event, SIDE.done


#: Two concurrent tool calls meet here before either finishes (SideFile.together).
together = SIDE.together


async def get_weather(city: str) -> str:
    """The weather in a city."""
    event(f"tool get_weather {city}")
    if city == "Paris":
        await together()
    done(f"tool get_weather {city}")
    return f"sunny in {city}"


async def add(a: int, b: int) -> int:
    """The sum of two numbers."""
    event(f"tool add {a} {b}")
    if (a, b) == (2, 3):
        await together()
    done(f"tool add {a} {b}")
    return a + b


async def search(query: str) -> str:
    """Search the web."""
    event(f"tool search {query}")
    done(f"tool search {query}")
    return f"found: {query} is 330 m tall"


def calls(turn: int, *made: tuple[str, dict[str, Any]]) -> CreateResult:
    return CreateResult(
        finish_reason="function_calls",
        content=[
            FunctionCall(id=f"call_{turn}_{i}", name=name, arguments=json.dumps(arguments))
            for i, (name, arguments) in enumerate(made)
        ],
        usage=RequestUsage(prompt_tokens=50 + turn, completion_tokens=7),
        cached=False,
    )


#: Each agent's replies, by the number of its own replies in the prompt.
SCRIPTS: dict[str, list[CreateResult | str]] = {
    "planner": [
        calls(0, ("get_weather", {"city": "Paris"}), ("add", {"a": 2, "b": 3})),
        calls(1, ("transfer_to_analyst", {})),
    ],
    "analyst": [
        calls(0, ("search", {"query": "Eiffel tower height"})),
        "{seen} TERMINATE",
    ],
    "writer": [calls(0, ("get_weather", {"city": "Rome"})), "{seen}"],
    "reviewer": [
        calls(0, ("add", {"a": 40, "b": 2})),
        calls(1, ("get_weather", {"city": "Oslo"})),
        "{seen}",
    ],
}

MODEL_INFO = {
    "vision": False,
    "function_calling": True,
    "json_output": False,
    "family": "fake",
    "structured_output": False,
}


class FakeClient(ReplayChatCompletionClient):
    """A ReplayChatCompletionClient whose next reply is chosen by the prompt, not a counter."""

    def __init__(self, name: str) -> None:
        super().__init__(SCRIPTS[name], model_info=MODEL_INFO)  # type: ignore[arg-type]
        self.name = name

    async def create(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Tool | ToolSchema] = [],
        tool_choice: Any = "auto",
        json_output: bool | type[BaseModel] | None = None,
        extra_create_args: Mapping[str, Any] = {},
        cancellation_token: CancellationToken | None = None,
    ) -> CreateResult:
        turn = sum(1 for m in messages if isinstance(m, AssistantMessage) and m.source == self.name)
        event(f"model {self.name} {turn}")
        reply = SCRIPTS[self.name][turn]
        if isinstance(reply, str):  # the answer quotes every tool result in the prompt
            seen = [r.content for m in messages if isinstance(m, Results) for r in m.content]
            self.chat_completions[turn] = reply.format(seen=f"{self.name}: {' | '.join(seen)}")
        self._current_index = turn
        result = await super().create(messages, tools=tools)
        done(f"model {self.name} {turn}")
        return result


def price(model: str | None, input_tokens: int, output_tokens: int) -> float:
    """A made-up price: $1 per million input tokens, $4 per million output tokens."""
    return (input_tokens + 4 * output_tokens) / 1e6


class KillAtHandoff(TerminationCondition):
    """Never terminates; SIGKILLs the process when it sees the handoff, if asked to."""

    @property
    def terminated(self) -> bool:
        return False

    async def __call__(
        self, messages: Sequence[BaseAgentEvent | BaseChatMessage]
    ) -> StopMessage | None:
        if WHERE["kill_at"] == "handoff" and any(isinstance(m, HandoffMessage) for m in messages):
            os.kill(os.getpid(), signal.SIGKILL)
        return None

    async def reset(self) -> None:
        pass


def assistant(name: str, tools: list[Any], **kw: Any) -> AssistantAgent:
    return AssistantAgent(name, model_client=FakeClient(name), tools=tools, **kw)


async def contexts(*agents: AssistantAgent) -> list[Any]:
    """Each agent's model context, as its saved state holds it (no times, no ids)."""
    return [(await agent.save_state())["llm_context"] for agent in agents]


#: The asker's cities, by its turn in the conversation.
CITIES = ["Oslo", "Lima", "Kyiv"]


class AskerClient(ReplayChatCompletionClient):
    """The asker: in each turn of a conversation (a task), an addition, a weather lookup,
    then an answer that names the turn, the task and what the tools said. Its reply
    depends only on its prompt: the tasks in it, and its replies since the last."""

    def __init__(self) -> None:
        super().__init__(["", "", ""], model_info=MODEL_INFO)  # type: ignore[arg-type]

    async def create(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Tool | ToolSchema] = [],
        tool_choice: Any = "auto",
        json_output: bool | type[BaseModel] | None = None,
        extra_create_args: Mapping[str, Any] = {},
        cancellation_token: CancellationToken | None = None,
    ) -> CreateResult:
        tasks = [i for i, m in enumerate(messages) if isinstance(m, UserMessage)]
        turn, last = len(tasks), tasks[-1]
        since = [m for m in messages[last:] if isinstance(m, AssistantMessage)]
        event(f"model asker {turn}.{len(since)}")
        replies: list[CreateResult | str] = [
            calls(0, ("add", {"a": 40, "b": turn})),
            calls(1, ("get_weather", {"city": CITIES[turn - 1]})),
        ]
        if len(since) < 2:
            self.chat_completions[0] = replies[len(since)]
        else:
            seen = [r.content for m in messages[last:] if isinstance(m, Results) for r in m.content]
            task = messages[last].content
            self.chat_completions[0] = f"turn {turn} ({task}): {' | '.join(seen)}"
        self._current_index = 0
        result = await super().create(messages, tools=tools)
        done(f"model asker {turn}.{len(since)}")
        return result


def asker(**options: Any) -> AssistantAgent:
    """The asker with the adapter's defaults (no session, no run name, the default
    journal), or with ``options`` (``run=``, ``reuse=``, ``fresh=``)."""
    plain = AssistantAgent(
        "asker", model_client=AskerClient(), tools=[add, get_weather], max_tool_iterations=3
    )
    return AutoGenStateSerializer(**options).wrap_agent(plain)


async def ask(db: str) -> dict[str, Any]:
    """One request (``WHERE["task"]``); killed after it returned if asked to."""
    os.environ["LETITLOOP_DB"] = db
    agent = asker()
    result = await agent.run(task=WHERE["task"])
    event("after return")  # the program has the answer and has not used it yet
    return {"answer": result.messages[-1].to_text(), "memory": await contexts(agent)}


async def chat(db: str) -> dict[str, Any]:
    """A conversation of two turns, the second continuing the first (AutoGen's default)."""
    os.environ["LETITLOOP_DB"] = db
    agent = asker()
    first = await agent.run(task=WHERE["task"])
    event("between turns")
    second = await agent.run(task="And tomorrow?")
    event("after return")
    texts = [m.messages[-1].to_text() for m in (first, second)]
    return {"answer": " // ".join(texts), "memory": await contexts(agent)}


async def team(db: str) -> dict[str, Any]:
    planner = assistant("planner", [get_weather, add], handoffs=["analyst"])
    analyst = assistant("analyst", [search])
    swarm = Swarm(
        [planner, analyst],
        termination_condition=TextMentionTermination("TERMINATE") | KillAtHandoff(),
    )
    AutoGenStateSerializer("swarm", path=db, cost=price).wrap_team(swarm)
    result = await swarm.run(task="Weather in Paris, 2 + 3, and the Eiffel tower's height?")
    last = result.messages[-1]
    assert isinstance(last, BaseChatMessage)
    return {"answer": last.to_text(), "memory": await contexts(planner, analyst)}


async def two(db: str) -> dict[str, Any]:
    # max_tool_iterations: each agent sees its tools' results in its next model call.
    writer = AutoGenStateSerializer("writer").wrap_agent(
        assistant("writer", [get_weather], max_tool_iterations=3)
    )
    reviewer = AutoGenStateSerializer("reviewer").wrap_agent(
        assistant("reviewer", [add, get_weather], max_tool_iterations=3)
    )
    with Journal("two_agents", path=db):
        first = await writer.run(task="Write about Rome")
        second = await reviewer.run(task="Review it")
    texts = [m.to_text() for m in (first.messages[-1], second.messages[-1])]
    return {"answer": " // ".join(texts), "memory": await contexts(writer, reviewer)}


MODES = {"team": team, "two": two, "ask": ask, "chat": chat}

if __name__ == "__main__":
    mode, db, WHERE["side"] = sys.argv[1:4]
    WHERE["kill_at"] = sys.argv[4] if len(sys.argv) > 4 else ""
    WHERE["task"] = sys.argv[5] if len(sys.argv) > 5 else "What is 40 + 1, and the weather?"
    answer = asyncio.run(MODES[mode](db))
    print(json.dumps(answer))
