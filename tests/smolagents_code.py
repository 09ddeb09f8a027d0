"""A CodeAgent whose code reads the clock and draws random numbers, run as a child process
(tests/test_smolagents.py).

``python tests/smolagents_code.py DB SIDE KILL_AT``: a ``CodeAgent(tools=[...],
model=model)`` made durable with ``durable_agent(agent)`` and its defaults (the
journal from ``LETITLOOP_DB``), asked one task. Its offline model writes, in three
steps, code that imports ``time``, ``random`` and ``datetime`` (smolagents allows
them), prints the time and a random number, defines a function, calls the tools,
and gives a final answer made of the variables of the earlier snippets. The model
and the tools write ``start WHAT``/``end WHAT`` to SIDE and SIGKILL their own
process at ``start KILL_AT``; the tool ``stamp`` also writes ``saw STEP VALUE``:
what that execution of the code saw. ``after return`` is the point after the agent
returned. The answer is the last line of stdout.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from side_file import SideFile
from smolagents import CodeAgent, tool
from smolagents.models import ChatMessage, MessageRole, Model
from smolagents.monitoring import TokenUsage

from letitloop.adapters.smolagents import durable_agent

SIDE = SideFile()
WHERE, event, done = SIDE.where, SIDE.event, SIDE.done


@tool
def stamp(step: int, value: str) -> str:
    """Note what a step's code saw.

    Args:
        step: the step's number
        value: what it saw
    """
    event(f"tool stamp {step}")
    with open(WHERE["side"], "a") as f:
        f.write(f"saw {step} {value}\n")
    done(f"tool stamp {step}")
    return f"noted {step}"


@tool
def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city's name
    """
    event(f"tool get_weather {city}")
    done(f"tool get_weather {city}")
    return f"sunny in {city}"


#: The code the model writes, by the number of its replies already in the prompt.
CODE = [
    """import time
import random

def describe(roll, now):
    return f"roll {roll} at {now}"

now = time.time()
roll = random.randint(1, 10**9)
print(f"now={now} roll={roll}")
stamp(step=1, value=f"{now} {roll}")""",
    """from datetime import datetime
later = datetime.now().isoformat()
elapsed = time.time() - now
weather = get_weather(city="Paris")
print(f"later={later} after={elapsed > 0} twice={roll * 2} {weather}")
stamp(step=2, value=later)""",
    """final_answer(f"{describe(roll, now)}, later {later}: {weather}")""",
]


class CodeWriter(Model):
    """Writes CODE[n] in its n-th reply (n: the replies in its prompt)."""

    def __init__(self) -> None:
        super().__init__(model_id="fake-coder")

    def generate(self, messages: list[Any], **kwargs: Any) -> ChatMessage:
        turn = sum(1 for m in messages if getattr(m, "role", None) == MessageRole.ASSISTANT)
        event(f"model {turn}")
        reply = f"Thought: step {turn}.\n<code>\n{CODE[turn]}\n</code>"
        done(f"model {turn}")
        return ChatMessage(
            role=MessageRole.ASSISTANT,
            content=reply,
            token_usage=TokenUsage(input_tokens=100 + turn, output_tokens=20),
        )


def main() -> None:
    db, WHERE["side"], WHERE["kill_at"] = sys.argv[1:4]
    os.environ["LETITLOOP_DB"] = db
    agent = CodeAgent(tools=[stamp, get_weather], model=CodeWriter())
    durable_agent(agent)
    answer = agent.run("What time is it, and the weather in Paris?")
    event("after return")
    print(json.dumps({"answer": str(answer)}))


if __name__ == "__main__":
    main()
