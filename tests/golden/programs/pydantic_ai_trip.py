"""A Pydantic AI agent that books a hotel, run as a child process with the capability's
default arguments (tests/test_pydantic_ai_identity.py).

``python tests/pydantic_ai_trip.py MODE DB SIDE KILL_AT PROMPT [PROMPT2]``:
``LetItLoopDurability(goal="trip")`` with no run name, ``asyncio.run(agent.run(PROMPT))``;
with PROMPT2, a second turn ``agent.run(PROMPT2, message_history=first.all_messages())``.
MODE ``sync`` uses ``agent.run_sync``. The fake model asks for the weather, then
books a hotel (the side effect), then answers; the model and the tools write
``start WHAT``/``end WHAT`` to SIDE and SIGKILL their own process at ``start
KILL_AT``. ``after`` is the point after the agent returned, before the program
printed the answer. The last line of stdout is the answers as JSON.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from side_file import SideFile

from letitloop.adapters.pydantic_ai import LetItLoopDurability

SIDE = SideFile()
WHERE, event, done = SIDE.where, SIDE.event, SIDE.done


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Weather, then a booking, then the answer: by the tool returns of this turn alone."""
    starts = [
        i
        for i, m in enumerate(messages)
        if isinstance(m, ModelRequest) and any(isinstance(p, UserPromptPart) for p in m.parts)
    ]
    turn = messages[starts[-1] :]
    (city,) = [p.content for p in turn[0].parts if isinstance(p, UserPromptPart)]
    returns = [str(p.content) for m in turn for p in m.parts if isinstance(p, ToolReturnPart)]
    n = len(returns)
    event(f"model {city} {n}")
    if n == 0:
        reply = ModelResponse(parts=[ToolCallPart("weather", {"city": city}, tool_call_id="w")])
    elif n == 1:
        reply = ModelResponse(parts=[ToolCallPart("book", {"city": city}, tool_call_id="b")])
    else:
        reply = ModelResponse(parts=[TextPart(f"{city}: {' / '.join(returns)}")])
    done(f"model {city} {n}")
    return reply


agent = Agent(FunctionModel(model), name="trip", capabilities=[LetItLoopDurability(goal="trip")])


@agent.tool_plain
async def weather(city: str) -> str:
    event(f"tool weather {city}")
    await asyncio.sleep(0.05)  # a kill may land while it runs
    done(f"tool weather {city}")
    return f"sunny in {city}"


@agent.tool_plain
def book(city: str) -> str:
    event(f"tool book {city}")  # the booking, paid: counted by its end
    done(f"tool book {city}")
    return f"hotel booked in {city}"


def main(mode: str, prompts: list[str]) -> list[Any]:
    answers: list[Any] = []
    history: list[ModelMessage] | None = None
    for prompt in prompts:
        if mode == "sync":
            result = agent.run_sync(prompt, message_history=history)
        else:
            result = asyncio.run(agent.run(prompt, message_history=history))
        answers.append(result.output)
        history = result.all_messages()
    event("after")  # the agent returned; the program has not used the answer yet
    return answers


if __name__ == "__main__":
    import os

    mode, db, WHERE["side"], WHERE["kill_at"], *prompts = sys.argv[1:]
    os.environ["LETITLOOP_DB"] = db
    print(json.dumps({"answers": main(mode, prompts)}))
