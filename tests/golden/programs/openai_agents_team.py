"""OpenAI Agents SDK agents for tests/test_openai_agents.py, run as a child process.

``python tests/openai_agents_team.py MODE DB SIDE [KILL_AT [BUDGET]]`` (BUDGET: the
``team`` journal's budget in tokens):

- ``team``: a triage agent with two tools (called concurrently) hands off to
  an analyst with a tool of its own, through a ``JournalSession``;
- ``session``: one agent, one tool, its history in a ``JournalSession``;
  ``session-sdk`` the same with the SDK's ``SQLiteSession``, no journal;
- ``approve``: a clerk whose ``refund`` tool needs approval, run with
  ``run_durably`` (KILL_AT is then ``stop:SECONDS`` or ``wait``); ``desk`` the
  same, stopping after 0.2 s to wait, KILL_AT a kill point (``resume``: the
  process's start; ``paid``: inside the refund, right after the money went out).

The fake model and the tools append ``start WHAT`` and ``end WHAT`` to SIDE
and SIGKILL their own process at ``start KILL_AT``; ``handoff`` kills it in
the run hooks' ``on_handoff`` (between the triage's last step and the
analyst's first). The last line of stdout is the result as JSON.

The fake model keeps no state across calls or processes: its reply depends
only on the input it is given (how many of its own tool calls are in it), so
a resumed process asks it where the killed one stopped.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, RunHooks, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from side_file import SideFile

from letitloop import Journal
from letitloop.adapters.openai_agents import JournalSession, durable_agent, run_durably

set_tracing_disabled(True)

SIDE = SideFile(budget="")
WHERE, event, done = SIDE.where, SIDE.event, SIDE.done


#: Two concurrent tool calls meet here before either finishes (SideFile.together).
together = SIDE.together


@function_tool
async def get_weather(city: str) -> str:
    """The weather in a city."""
    event(f"tool get_weather {city}")
    if city == "Paris":
        await together()
    done(f"tool get_weather {city}")
    return f"sunny in {city}"


@function_tool
async def add(a: int, b: int) -> str:
    """The sum of two numbers."""
    event(f"tool add {a} {b}")
    if (a, b) == (2, 3):
        await together()
    done(f"tool add {a} {b}")
    return str(a + b)


@function_tool
def search(query: str) -> str:
    """Search the web."""
    event(f"tool search {query}")
    done(f"tool search {query}")
    return f"found: {query} is 330 m tall"


@function_tool(needs_approval=True)
def refund(amount: int) -> str:
    """Refund an amount to the customer."""
    event(f"tool refund {amount}")
    event("paid")  # the refund went out (KILL_AT=paid: killed right after, inside the call)
    done(f"tool refund {amount}")
    return f"refunded {amount}"


#: Each agent's replies, by the number of its own tool calls in the input: a list of
#: (tool, arguments) calls, or the final text ("{seen}": every tool output in the input).
SCRIPTS: dict[str, list[list[tuple[str, dict[str, Any]]] | str]] = {
    "triage": [
        [("get_weather", {"city": "Paris"}), ("add", {"a": 2, "b": 3})],
        [("transfer_to_analyst", {})],
    ],
    "analyst": [[("search", {"query": "Eiffel tower height"})], "analyst: {seen}"],
    "helper": [[("add", {"a": 40, "b": 2})], "helper: {seen}"],
    "clerk": [[("refund", {"amount": 30})], "clerk: {seen}"],
}


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


class FakeModel(Model):
    """A scripted model that keeps no state: its reply is chosen by its input alone."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def get_response(self, system_instructions: Any, input: Any, *a: Any, **kw: Any) -> Any:
        items = [] if isinstance(input, str) else list(input)
        mine = [
            i
            for i in items
            if _field(i, "type") == "function_call"
            and str(_field(i, "call_id")).startswith(f"{self.name}_")
        ]
        turn = len({_field(i, "call_id").rsplit("_", 1)[0] for i in mine})
        event(f"model {self.name} {turn}")
        reply = SCRIPTS[self.name][turn]
        if isinstance(reply, str):
            seen = [
                str(_field(i, "output"))
                for i in items
                if _field(i, "type") == "function_call_output"
            ]
            output: list[Any] = [
                ResponseOutputMessage(
                    id=f"msg_{self.name}_{turn}",
                    role="assistant",
                    status="completed",
                    type="message",
                    content=[
                        ResponseOutputText(
                            text=reply.format(seen=" | ".join(seen)),
                            type="output_text",
                            annotations=[],
                        )
                    ],
                )
            ]
        else:
            output = [
                ResponseFunctionToolCall(
                    id=f"fc_{self.name}_{turn}_{i}",
                    call_id=f"{self.name}_{turn}_{i}",
                    name=name,
                    arguments=json.dumps(arguments),
                    type="function_call",
                )
                for i, (name, arguments) in enumerate(reply)
            ]
        spent = Usage(requests=1, input_tokens=50 + turn, output_tokens=7, total_tokens=57 + turn)
        done(f"model {self.name} {turn}")
        return ModelResponse(output=output, usage=spent, response_id=None)

    def stream_response(self, *a: Any, **kw: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


def price(model: str | None, input_tokens: int, output_tokens: int) -> float:
    """A made-up price: $1 per million input tokens, $4 per million output tokens."""
    return (input_tokens + 4 * output_tokens) / 1e6


class KillAtHandoff(RunHooks[Any]):
    async def on_handoff(self, context: Any, from_agent: Any, to_agent: Any) -> None:
        if WHERE["kill_at"] == "handoff":
            os.kill(os.getpid(), signal.SIGKILL)


def team_agents() -> Agent[Any]:
    analyst = Agent(
        name="analyst", instructions="Answer.", model=FakeModel("analyst"), tools=[search]
    )
    return Agent(
        name="triage",
        instructions="Route.",
        model=FakeModel("triage"),
        tools=[get_weather, add],
        handoffs=[analyst],
    )


async def session_items(session: Any) -> list[Any]:
    """The underlying session's items, as the SDK stores them."""
    return list(await session.get_items())


async def team(db: str) -> dict[str, Any]:
    triage = durable_agent(team_agents(), cost=price)
    sdk_session = SQLiteSession("conv", db + ".session")
    budget = {"tokens": int(WHERE["budget"])} if WHERE["budget"] else None
    async with Journal("team", path=db, budget=budget):
        result = await Runner.run(
            triage,
            "Weather in Paris, 2 + 3, and the Eiffel tower's height?",
            session=JournalSession(sdk_session),
            hooks=KillAtHandoff(),
        )
    items = await session_items(sdk_session)
    return {
        "answer": result.final_output,
        "last_agent": result.last_agent.name,
        "usage": result.context_wrapper.usage.input_tokens,
        "session": [_field(i, "type") or _field(i, "role") for i in items],
    }


def helper() -> Agent[Any]:
    return Agent(name="helper", instructions="Help.", model=FakeModel("helper"), tools=[add])


class KillingSession(SQLiteSession):
    """The SDK's SQLiteSession, SIGKILLing the process at ``session written N``: right
    after its N-th ``add_items`` in this process committed, before the journal's step did."""

    writes = 0

    async def add_items(self, items: list[Any]) -> None:
        await super().add_items(items)
        KillingSession.writes += 1
        if WHERE["kill_at"] == f"session written {KillingSession.writes}":
            os.kill(os.getpid(), signal.SIGKILL)


async def session(db: str) -> dict[str, Any]:
    sdk_session = KillingSession("chat", db + ".session")
    async with Journal("chat", path=db):
        result = await Runner.run(
            durable_agent(helper()), "What is 40 + 2?", session=JournalSession(sdk_session)
        )
    items = await session_items(sdk_session)
    return {"answer": result.final_output, "session": [_field(i, "type") for i in items]}


async def session_sdk(db: str) -> dict[str, Any]:
    sdk_session = SQLiteSession("chat", db + ".session")
    result = await Runner.run(helper(), "What is 40 + 2?", session=sdk_session)
    items = await session_items(sdk_session)
    return {"answer": result.final_output, "session": [_field(i, "type") for i in items]}


async def approve(db: str) -> dict[str, Any]:
    how = WHERE["kill_at"]
    stop_after = float(how.split(":", 1)[1]) if how.startswith("stop:") else None
    clerk = durable_agent(
        Agent(name="clerk", instructions="Refund.", model=FakeModel("clerk"), tools=[refund])
    )
    async with Journal("refunds", path=db):
        with open(WHERE["side"], "a") as f:
            f.write("start waiting\n")
        result = await run_durably(clerk, "Refund my 30 euros", stop_after=stop_after)
    return {"answer": result.final_output}


async def desk(db: str) -> dict[str, Any]:
    """The approval recipe as docs/adapters.md writes it: stops after 0.2 s to wait."""
    event("resume")  # KILL_AT=resume: killed right after an approval was sent
    clerk = durable_agent(
        Agent(name="clerk", instructions="Refund.", model=FakeModel("clerk"), tools=[refund])
    )
    async with Journal("refunds", path=db):
        result = await run_durably(clerk, "Refund my 30 euros", stop_after=0.2)
    return {"answer": result.final_output}


MODES = {
    "team": team,
    "session": session,
    "session-sdk": session_sdk,
    "approve": approve,
    "desk": desk,
}

if __name__ == "__main__":
    mode, db, WHERE["side"] = sys.argv[1:4]
    WHERE["kill_at"] = sys.argv[4] if len(sys.argv) > 4 else ""
    WHERE["budget"] = sys.argv[5] if len(sys.argv) > 5 else ""
    answer = asyncio.run(MODES[mode](db))
    print(json.dumps(answer))
