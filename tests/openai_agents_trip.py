"""An OpenAI Agents SDK agent that books a hotel, run as a child process with the adapter's
default arguments (tests/test_openai_agents_identity.py).

``python tests/openai_agents_trip.py MODE DB SIDE KILL_AT CITY [CITY2]``:
``durable_agent(agent, goal="trip")`` and ``Runner.run(agent, CITY)`` with no journal
open and no run name; MODE ``session`` passes ``session=JournalSession(SQLiteSession(...))``,
MODE ``plain`` none. With CITY2, a second turn: ``Runner.run(agent,
first.to_input_list() + [CITY2 as a user message])`` (MODE ``plain``). The fake model
asks for the weather, then books a hotel (the side effect), then answers; the model
and the tools write ``start WHAT``/``end WHAT`` to SIDE and SIGKILL their own process
at ``start KILL_AT``; ``after`` is the point after the run returned, before the
program printed the answer. The last line of stdout is the answers as JSON.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from side_file import SideFile

from letitloop.adapters.openai_agents import JournalSession, durable_agent

set_tracing_disabled(True)
SIDE = SideFile()
WHERE, event, done = SIDE.where, SIDE.event, SIDE.done


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


class TripModel(Model):
    """Weather, then a booking, then the answer: by the items after the last user message."""

    async def get_response(self, system_instructions: Any, input: Any, *a: Any, **kw: Any) -> Any:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        last = max(i for i, item in enumerate(items) if _field(item, "role") == "user")
        city = str(_field(items[last], "content"))
        outputs = [
            str(_field(i, "output"))
            for i in items[last:]
            if _field(i, "type") == "function_call_output"
        ]
        n = len(outputs)
        event(f"model {city} {n}")
        if n < 2:
            tool = "weather" if n == 0 else "book"
            output: list[Any] = [
                ResponseFunctionToolCall(
                    id=f"fc_{city}_{n}",
                    call_id=f"{city}_{tool}",
                    name=tool,
                    arguments=json.dumps({"city": city}),
                    type="function_call",
                )
            ]
        else:
            output = [
                ResponseOutputMessage(
                    id=f"msg_{city}",
                    role="assistant",
                    status="completed",
                    type="message",
                    content=[
                        ResponseOutputText(
                            text=f"{city}: {' / '.join(outputs)}",
                            type="output_text",
                            annotations=[],
                        )
                    ],
                )
            ]
        done(f"model {city} {n}")
        return ModelResponse(
            output=output,
            usage=Usage(requests=1, input_tokens=50, output_tokens=7, total_tokens=57),
            response_id=None,
        )

    def stream_response(self, *a: Any, **kw: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


@function_tool
async def weather(city: str) -> str:
    """The weather in a city."""
    event(f"tool weather {city}")
    await asyncio.sleep(0.05)  # a kill may land while it runs
    done(f"tool weather {city}")
    return f"sunny in {city}"


@function_tool
def book(city: str) -> str:
    """Book a hotel in a city."""
    event(f"tool book {city}")  # the booking, paid: counted by its end
    done(f"tool book {city}")
    return f"hotel booked in {city}"


async def main(mode: str, db: str, cities: list[str]) -> list[Any]:
    agent = durable_agent(
        Agent(name="trip", instructions="Plan.", model=TripModel(), tools=[weather, book]),
        goal="trip",
        path=db,
    )
    answers: list[Any] = []
    if mode == "session":
        session = JournalSession(SQLiteSession("conv", db + ".session"))
        for city in cities:
            answers.append((await Runner.run(agent, city, session=session)).final_output)
    else:
        asked: Any = cities[0]
        for city in cities[1:]:
            result = await Runner.run(agent, asked)
            answers.append(result.final_output)
            asked = [*result.to_input_list(), {"role": "user", "content": city}]
        answers.append((await Runner.run(agent, asked)).final_output)
    event("after")  # the run returned; the program has not used the answer yet
    return answers


if __name__ == "__main__":
    mode, db, WHERE["side"], WHERE["kill_at"], *cities = sys.argv[1:]
    print(json.dumps({"answers": asyncio.run(main(mode, db, cities))}))
