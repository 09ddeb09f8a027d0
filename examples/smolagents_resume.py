"""A smolagents agent killed with SIGKILL inside a tool call, then resumed: what runs again?

Offline and deterministic: the model is a scripted stand-in (a smolagents
``Model`` subclass), no API key, a second or two.

    python examples/smolagents_resume.py --crash   # killed inside its second tool call
    python examples/smolagents_resume.py           # the same script again: it resumes

The agent (a ``ToolCallingAgent`` with two tools) is wrapped with
``durable_agent``: each model call and each tool call is a step of the
journal file. Every call that really runs prints a line. Killed inside
``convert``, the first run printed the first model call and ``get_weather``;
the second run prints only ``convert`` (the call in flight) and what comes
after it: the finished calls replay from the journal, and the agent's memory
is rebuilt from them. ``lil show travel --db PATH`` lists the calls with
their tokens, and what replay saved.

Needs ``pip install -e '.[smolagents]'``, run from a checkout of this repository.
"""

from __future__ import annotations

import argparse
import os
import signal
from typing import Any

from smolagents import ToolCallingAgent, tool
from smolagents.models import (
    ChatMessage,
    ChatMessageToolCall,
    ChatMessageToolCallFunction,
    MessageRole,
    Model,
)
from smolagents.monitoring import LogLevel, TokenUsage

from letitloop.adapters.smolagents import durable_agent

CRASH = False


@tool
def get_weather(city: str) -> str:
    """Today's weather in a city.

    Args:
        city: the city
    """
    print(f"  ran  get_weather({city!r})")
    return f"22°C and sunny in {city}"


@tool
def convert(amount: float, currency: str) -> str:
    """An amount of euros in another currency.

    Args:
        amount: euros
        currency: the currency to convert to
    """
    print(f"  ran  convert({amount}, {currency!r})")
    if CRASH:
        print("  -- SIGKILL inside convert(): run the script again to resume --", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    return f"{amount * 1.08:.2f} {currency}"


def use(n: int, name: str, **arguments: Any) -> ChatMessage:
    call = ChatMessageToolCall(
        function=ChatMessageToolCallFunction(name=name, arguments=arguments),
        id=f"call_{n}",
        type="function",
    )
    return ChatMessage(
        role=MessageRole.ASSISTANT,
        content=None,
        tool_calls=[call],
        token_usage=TokenUsage(input_tokens=400 + 50 * n, output_tokens=20),
    )


def text(message: ChatMessage) -> str:
    """A message's text (smolagents keeps content as a list of parts)."""
    parts = message.content if isinstance(message.content, list) else [{"text": message.content}]
    return "".join(str(p.get("text") or "") for p in parts)


class ScriptedModel(Model):
    """A stand-in for an LLM: its reply depends only on the tool results it was shown."""

    def generate(self, messages: list[Any], **kwargs: Any) -> ChatMessage:
        seen = [m for m in messages if getattr(m, "role", None) == MessageRole.TOOL_RESPONSE]
        print(f"  ran  model call {len(seen) + 1}")
        if len(seen) == 0:
            return use(0, "get_weather", city="Lisbon")
        if len(seen) == 1:
            return use(1, "convert", amount=120.0, currency="USD")
        facts = " / ".join(text(m).replace("Observation:", "").strip() for m in seen)
        return use(2, "final_answer", answer=f"Pack sunglasses. {facts}")


def price(model: str | None, input_tokens: int, output_tokens: int) -> float:
    """What a call cost: a made-up price of $2.50 per million input tokens, $10 per million out."""
    return (2.5 * input_tokens + 10 * output_tokens) / 1e6


def main() -> None:
    global CRASH
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--crash", action="store_true", help="SIGKILL inside convert()")
    parser.add_argument("--db", default=".letitloop/journal.db", help="the journal file")
    args = parser.parse_args()
    CRASH = args.crash
    agent = ToolCallingAgent(
        tools=[get_weather, convert],
        model=ScriptedModel(model_id="scripted"),
        verbosity_level=LogLevel.OFF,
    )
    durable_agent(agent, "travel", path=args.db, cost=price)
    print("calls that really ran in this process:")
    answer = agent.run("Weather in Lisbon, and 120 EUR in USD?")
    print(f"answer: {answer}")
    print(f"see every call, its tokens and what replay saved: lil show travel --db {args.db}")


if __name__ == "__main__":
    main()
