"""MCP tool calls asked again, for tests/test_mcp_calls.py, run as a child process.

``python tests/mcp_requests.py MODE DB SIDE [KILL_AT]``: a program that calls
a shop's MCP tools through ``DurableMCP`` with its default arguments (no
journal opened, no run name; the journal file from ``$LETITLOOP_DB``): each
call is a run of its own, named by the tool and its arguments. The shop is a
real MCP server (the SDK's ``MCPServer``) in the program's process, reached
through the SDK's in-memory transport: ``forecast`` and ``quote`` are
read-only (a paid look-up), ``book`` changes things (a hotel booking). MODE
``trip`` books Oslo (forecast, a quote for that forecast, a booking at that
price), ``slow`` too with each tool taking 50 ms (two copies meet), ``other``
books Rome (a changed request), ``turns`` asks Oslo's forecast, then, continuing
from its answer, quotes and books. Each tool appends ``start WHAT`` and ``end
WHAT`` to the side file SIDE and SIGKILLs the process at ``start KILL_AT``;
``returned`` (``returned turn N``) is the point where the program got its
answer and had not printed it yet.
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

SIDE = SideFile()
WHERE, event, done, reached = SIDE.where, SIDE.event, SIDE.done, SIDE.reached
PACE = {"slow": 0.05}
READS = ToolAnnotations(read_only_hint=True)
BOOKS = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False)


def shop(pace: float) -> MCPServer:
    server = MCPServer("shop")

    @server.tool(annotations=READS)
    def forecast(city: str) -> str:
        event(f"forecast {city}")
        time.sleep(pace)
        done(f"forecast {city}")
        return {"Oslo": "snow", "Bergen": "rain"}.get(city, "sun")

    @server.tool(annotations=READS)
    def quote(city: str, weather: str) -> str:
        event(f"quote {city}")
        time.sleep(pace)
        done(f"quote {city}")
        return "90 EUR" if weather == "snow" else "120 EUR"

    @server.tool(annotations=BOOKS)
    def book(city: str, price: str) -> str:
        event(f"book {city}")
        time.sleep(pace)
        done(f"book {city}")
        return f"booked a hotel in {city} for {price}"

    return server


async def main(mode: str) -> Any:
    from letitloop.mcp import DurableMCP

    def text(result: Any) -> str:
        return str(result.content[0].text)

    city = "Rome" if mode == "other" else "Oslo"
    async with DurableMCP(shop(PACE.get(mode, 0.0))) as tools:
        weather = text(await tools.call_tool("forecast", {"city": city}))
        if mode == "turns":
            reached("returned turn 1")
        price = text(await tools.call_tool("quote", {"city": city, "weather": weather}))
        booked = text(await tools.call_tool("book", {"city": city, "price": price}))
    reached("returned turn 2" if mode == "turns" else "returned")
    return [weather, price, booked]


#: The kill points of each mode, in the order its program reaches them: never inside
#: ``book`` (a booking in flight at a kill is in doubt: the rerun stops for a person's
#: decision, tests/test_mcp_calls.py's TestADestructiveCallInDoubt).
POINTS = {
    mode: [f"forecast {city}", f"quote {city}", "returned"]
    for mode, city in (("trip", "Oslo"), ("slow", "Oslo"), ("other", "Rome"))
}
POINTS["turns"] = ["forecast Oslo", "returned turn 1", "quote Oslo", "returned turn 2"]

if __name__ == "__main__":
    mode, os.environ["LETITLOOP_DB"], WHERE["side"] = sys.argv[1:4]
    WHERE["kill_at"] = sys.argv[4] if len(sys.argv) > 4 else ""
    print(json.dumps({"answer": asyncio.run(main(mode))}))
