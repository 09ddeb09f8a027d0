"""MCP tool calls for tests/test_agent_requests.py's trials, run as a child process.

``python tests/mcp_requests.py MODE DB SIDE [KILL_AT [TASK]]``: a program that
calls a shop's MCP tools through ``DurableMCP`` with its default arguments (no
journal opened, no run name; the journal file from ``$LETITLOOP_DB``): each
call is a run of its own, named by the tool and its arguments. The shop is a
real MCP server (the SDK's ``MCPServer``) in the program's process, reached
through the SDK's in-memory transport: ``forecast`` and ``quote`` are
read-only (a paid look-up), ``book`` changes things (a hotel booking). MODE
``ask`` books the city TASK is about (its forecast, a quote for that
forecast, a booking at that price); ``chat`` asks its forecast, then,
continuing from that answer, quotes and books. Each tool appends ``start
WHAT`` and ``end WHAT`` to the side file SIDE and SIGKILLs the process at
``start KILL_AT``; ``after return`` is the point where the program got its
answer and had not printed it yet, ``between turns`` the point between the two
turns. The answer is the last line.

A booking in flight at a kill is in doubt (the rerun stops for a person's
decision: tests/test_mcp_calls.py's TestADestructiveCallInDoubt), so a trial's
kill point is never inside ``book`` (:data:`NOT_KILLED_IN`).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from side_file import SideFile

SIDE = SideFile(task="What is 40 + 1, and the weather?")
WHERE, event, done = SIDE.where, SIDE.event, SIDE.done
#: Each call takes this long (s), so that two copies started together meet.
PACE = 0.01
READS = ToolAnnotations(read_only_hint=True)
BOOKS = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False)


def city_of(question: str) -> str:
    """The city a question is about: Oslo (Rome in the evening)."""
    return "Rome" if "evening" in question else "Oslo"


def shop() -> MCPServer:
    server = MCPServer("shop")

    @server.tool(annotations=READS)
    def forecast(city: str) -> str:
        event(f"forecast {city}")
        time.sleep(PACE)
        done(f"forecast {city}")
        return {"Oslo": "snow"}.get(city, "sun")

    @server.tool(annotations=READS)
    def quote(city: str, weather: str) -> str:
        event(f"quote {city}")
        time.sleep(PACE)
        done(f"quote {city}")
        return "90 EUR" if weather == "snow" else "120 EUR"

    @server.tool(annotations=BOOKS)
    def book(city: str, price: str) -> str:
        what = f"book {city}"
        with open(WHERE["side"], "a") as f:  # never a kill point (see the module)
            f.write(f"start {what}\n")
        time.sleep(PACE)
        done(what)
        return f"booked a hotel in {city} for {price}"

    return server


async def main(mode: str) -> str:
    from letitloop.mcp import DurableMCP

    def text(result: Any) -> str:
        return str(result.content[0].text)

    city = city_of(WHERE["task"])
    async with DurableMCP(shop()) as tools:
        weather = text(await tools.call_tool("forecast", {"city": city}))
        if mode == "chat":
            event("between turns")
        price = text(await tools.call_tool("quote", {"city": city, "weather": weather}))
        booked = text(await tools.call_tool("book", {"city": city, "price": price}))
    event("after return")
    return f"{weather}; {price}; {booked}"


#: The calls of the conversation's second turn (kill points inside it).
TURN_TWO = ("quote Oslo",)

if __name__ == "__main__":
    mode, os.environ["LETITLOOP_DB"], WHERE["side"] = sys.argv[1:4]
    WHERE["kill_at"] = sys.argv[4] if len(sys.argv) > 4 else ""
    WHERE["task"] = sys.argv[5] if len(sys.argv) > 5 else WHERE["task"]
    print(json.dumps({"answer": asyncio.run(main(mode))}))
