"""An MCP server's tools in a durable Pydantic AI agent: a full replay starts no server.

The server is a stdio MCP server built on the ``mcp`` SDK's own ``MCPServer``
that writes ``server start`` to a side file when its process starts and
``tool lookup N`` when its tool runs; the agent reaches it through Pydantic
AI's ``MCPToolset`` (which needs FastMCP's client: ``pydantic-ai-slim[mcp]``).
``LetItLoopDurability`` enters an MCP toolset inside the unit that uses it
(``toolset_lifecycles={"mcp": "enter-in-durable-unit"}``), so a run whose every
unit replays never starts the server's process.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import lil_forked, write_script
from preloaded import Preloaded, for_sdk

pytest.importorskip("pydantic_ai.durable_exec")
pytest.importorskip("fastmcp")

SERVER = """
    import os

    from mcp.server.mcpserver import MCPServer


    def note(line):
        with open(os.environ["MCP_LOG"], "a") as f:
            f.write(line + "\\n")


    note("server start")
    server = MCPServer("orders")


    @server.tool()
    def lookup(order: int) -> str:
        note(f"tool lookup {order}")
        return f"order {order} shipped"


    server.run()
"""

AGENT = """
    import asyncio, json, os, sys

    from fastmcp.client.transports import StdioTransport
    from pydantic_ai import Agent
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    from letitloop import Journal
    from letitloop.adapters.pydantic_ai import LetItLoopDurability


    def model(messages, info):
        done = [p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if not done:
            return ModelResponse(parts=[ToolCallPart("lookup", {"order": 7})])
        return ModelResponse(parts=[TextPart(f"answer: {done[0]}")])


    server = StdioTransport(command=sys.executable, args=[sys.argv[2]], env=dict(os.environ))
    # A generous start-up timeout: the server's interpreter imports the SDK first.
    orders = MCPToolset(server, id="orders_mcp", init_timeout=60, read_timeout=60)
    agent = Agent(
        FunctionModel(model), name="orders", toolsets=[orders],
        capabilities=[LetItLoopDurability()],
    )


    async def main():
        async with Journal("orders", run="order-7", path=sys.argv[1]):
            result = await agent.run("Where is order 7?")
        print(json.dumps({"output": result.output}))


    asyncio.run(main())
"""


def lil(*args: str) -> subprocess.CompletedProcess[str]:
    """``lil ARGS`` forked from the tests' interpreter that imported letitloop
    (helpers.lil_forked): what it prints is checked here, not its process start."""
    return lil_forked(*args)


@pytest.fixture(scope="module")
def framework() -> Iterator[Preloaded]:
    """Forks the processes from an interpreter that imported Pydantic AI, its MCP client and
    the adapter once."""
    with for_sdk("pydantic_ai", "pydantic_ai.mcp") as preloaded:
        yield preloaded


class TestAnAgentWithAnMCPServer:
    def test_a_full_replay_starts_no_server_process(
        self, tmp_path: Path, framework: Preloaded
    ) -> None:
        server = write_script(tmp_path, "server.py", SERVER)
        agent = write_script(tmp_path, "agent.py", AGENT)
        db, log = tmp_path / "journal.db", tmp_path / "mcp.log"
        env = {**os.environ, "MCP_LOG": str(log)}
        first = framework.run(agent, str(db), str(server), env=env)
        assert first.returncode == 0, first.stderr
        assert json.loads(first.stdout)["output"] == "answer: order 7 shipped"
        assert log.read_text().splitlines() == ["server start", "tool lookup 7"]
        keys = [
            r["key"]
            for r in json.loads(lil("show", "order-7", "--json", "--db", str(db)).stdout)["rows"]
        ]
        assert "0002:orders__mcp_server__orders_mcp.call_tool" in keys
        again = framework.run(agent, str(db), str(server), env=env)
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout)["output"] == "answer: order 7 shipped"
        # The completed run replayed every unit: no second server process, no second call.
        assert log.read_text().splitlines() == ["server start", "tool lookup 7"]
