"""A smolagents CodeAgent killed with SIGKILL inside a tool call, then resumed: what runs again?

Offline and deterministic: the model is a scripted stand-in (a smolagents
``Model`` subclass) that writes Python code, as a CodeAgent's model does; no API
key, a second or two.

    python examples/smolagents_resume.py --crash   # killed inside its second tool call
    python examples/smolagents_resume.py           # the same script again: it resumes

The agent (a ``CodeAgent`` with two tools) is wrapped with ``durable_agent``:
each model call, each execution of the model's code and each tool call is a
step of the journal file. Its first snippet prints the time (``time.time()``,
which smolagents lets the code import): that output is the next model call's
prompt, so a rerun gets the recorded output back instead of running the code
again. Every call that really runs prints a line. Killed inside ``convert``,
the first run printed the first model call and ``get_weather``; the second
run prints only ``convert`` (its snippet was in flight) and what comes after
it: the finished calls and the first snippet replay from the journal, and the
snippet's variables (``weather``) come back for the last one.
``lil show travel --db PATH`` lists the calls with their tokens, and what
replay saved.

Needs ``pip install -e '.[smolagents]'``, run from a checkout of this repository.
"""

from __future__ import annotations

import argparse
import os
import signal
from typing import Any

from smolagents import CodeAgent, tool
from smolagents.models import ChatMessage, MessageRole, Model
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


#: The code the model writes, one snippet per step.
CODE = [
    'import time\nweather = get_weather(city="Lisbon")\nprint(f"at {time.time()}: {weather}")',
    'price = convert(amount=120.0, currency="USD")\nprint(price)',
    'final_answer(f"Pack sunglasses. {weather} / {price}")',
]


class ScriptedModel(Model):
    """A stand-in for an LLM: its n-th reply (n: its replies in the prompt) is CODE[n]."""

    def generate(self, messages: list[Any], **kwargs: Any) -> ChatMessage:
        turn = sum(1 for m in messages if getattr(m, "role", None) == MessageRole.ASSISTANT)
        print(f"  ran  model call {turn + 1}")
        return ChatMessage(
            role=MessageRole.ASSISTANT,
            content=f"Thought: step {turn + 1}.\n<code>\n{CODE[turn]}\n</code>",
            token_usage=TokenUsage(input_tokens=400 + 50 * turn, output_tokens=20),
        )


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
    agent = CodeAgent(
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
