"""An AutoGen team killed with SIGKILL after a handoff, then resumed: what runs again?

Offline and deterministic: each agent's model client is AutoGen's own
``ReplayChatCompletionClient`` (made to pick its reply from the prompt), no
API key, a second or two.

    python examples/autogen_resume.py --crash   # killed inside the analyst's model call
    python examples/autogen_resume.py           # the same script again: it resumes

A ``Swarm`` of two ``AssistantAgent``s: a planner looks up the weather,
then hands off to an analyst, who converts a price and answers. The team is
wrapped with ``AutoGenStateSerializer(...).wrap_team``: each model call and
each tool call is a step of the journal file. Every call that really runs
prints a line. Killed inside the analyst's second model call, the first run
printed everything before it; the second run prints only that model call:
the planner's calls, the handoff and the analyst's tool call replay from the
journal, and the agents' contexts are rebuilt from them.
``lil show trip --db PATH`` lists the calls with their tokens.

Needs ``pip install -e '.[autogen]'``, run from a checkout of this repository.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
from collections.abc import Sequence
from typing import Any

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import TextMentionTermination
from autogen_agentchat.teams import Swarm
from autogen_core import EVENT_LOGGER_NAME, FunctionCall
from autogen_core.models import (
    AssistantMessage,
    CreateResult,
    LLMMessage,
    RequestUsage,
    UserMessage,
)
from autogen_core.models import FunctionExecutionResultMessage as Results
from autogen_ext.models.replay import ReplayChatCompletionClient

from letitloop.adapters.autogen import AutoGenStateSerializer

CRASH = False
MODEL_INFO: Any = {
    "vision": False,
    "function_calling": True,
    "json_output": False,
    "family": "scripted",
    "structured_output": False,
}


async def get_weather(city: str) -> str:
    """Today's weather in a city."""
    print(f"  ran  get_weather({city!r})")
    return f"22°C and sunny in {city}"


async def convert(amount: float, currency: str) -> str:
    """An amount of euros in another currency."""
    print(f"  ran  convert({amount}, {currency!r})")
    return f"{amount * 1.08:.2f} {currency}"


def use(name: str, **arguments: Any) -> CreateResult:
    return CreateResult(
        finish_reason="function_calls",
        content=[FunctionCall(id=f"call_{name}", name=name, arguments=json.dumps(arguments))],
        usage=RequestUsage(prompt_tokens=300, completion_tokens=20),
        cached=False,
    )


SCRIPTS: dict[str, list[CreateResult | str]] = {
    "planner": [use("get_weather", city="Lisbon"), use("transfer_to_analyst")],
    "analyst": [use("convert", amount=120.0, currency="USD"), "answer"],
}


class ScriptedClient(ReplayChatCompletionClient):
    """AutoGen's replay client, its reply chosen by how often this agent spoke already."""

    def __init__(self, agent: str) -> None:
        super().__init__(SCRIPTS[agent], model_info=MODEL_INFO)
        self.agent = agent

    async def create(self, messages: Sequence[LLMMessage], **kwargs: Any) -> CreateResult:
        turn = sum(isinstance(m, AssistantMessage) and m.source == self.agent for m in messages)
        print(f"  ran  {self.agent} model call {turn + 1}")
        if CRASH and self.agent == "analyst" and turn == 1:
            print(
                "  -- SIGKILL inside the analyst's model call: run again to resume --", flush=True
            )
            os.kill(os.getpid(), signal.SIGKILL)
        if SCRIPTS[self.agent][turn] == "answer":  # quotes the planner's and its own tool results
            seen = [m.content for m in messages if isinstance(m, UserMessage) and "°C" in m.content]
            seen += [r.content for m in messages if isinstance(m, Results) for r in m.content]
            self.chat_completions[turn] = f"Pack sunglasses. {' / '.join(seen)} TERMINATE"
        self._current_index = turn
        return await super().create(messages, **kwargs)


def price(model: str | None, input_tokens: int, output_tokens: int) -> float:
    """What a call cost: a made-up price of $2.50 per million input tokens, $10 per million out."""
    return (2.5 * input_tokens + 10 * output_tokens) / 1e6


async def main() -> None:
    global CRASH
    # The replay client warns that it counts tokens of text only: true, and beside the point.
    logging.getLogger(EVENT_LOGGER_NAME).setLevel(logging.ERROR)
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--crash", action="store_true", help="SIGKILL in the analyst's call")
    parser.add_argument("--db", default=".letitloop/journal.db", help="the journal file")
    args = parser.parse_args()
    CRASH = args.crash
    planner = AssistantAgent(
        "planner",
        model_client=ScriptedClient("planner"),
        tools=[get_weather],
        handoffs=["analyst"],
    )
    analyst = AssistantAgent(
        "analyst",
        model_client=ScriptedClient("analyst"),
        tools=[convert],
        max_tool_iterations=2,  # it sees convert's result in its next model call
    )
    team = Swarm([planner, analyst], termination_condition=TextMentionTermination("TERMINATE"))
    AutoGenStateSerializer("trip", path=args.db, cost=price).wrap_team(team)
    print("calls that really ran in this process:")
    result = await team.run(task="Weather in Lisbon, and 120 EUR in USD?")
    print(f"answer: {result.messages[-1].to_text()}")
    print(f"see every call, its tokens and what replay saved: lil show trip --db {args.db}")


if __name__ == "__main__":
    asyncio.run(main())
