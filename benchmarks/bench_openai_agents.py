"""Per-call overhead of the OpenAI Agents adapter against the bare SDK.

    python benchmarks/bench_openai_agents.py [--runs 60] [--tools 4]

One agent on a scripted offline ``Model`` (its first reply asks for ``--tools``
tool calls, which the SDK runs concurrently; its second answers): a
``Runner.run`` makes 2 model calls and ``--tools`` tool calls. Three rows,
timed in rounds that run each once (a busy moment of the shared machine falls
on all of them alike), medians of ``--runs`` rounds:

- bare: the agent as the SDK runs it (what the SDK itself costs);
- durable, fresh: ``durable_agent(agent)`` inside ``async with Journal`` on a
  new named run, each call a step written to the file;
- durable, replay: the same completed run opened again, every call replayed.

The per-call overhead is (durable - bare) / calls. Bias, stated: the journal
uses letitloop's default ``durability="process"`` (WAL, synchronous=NORMAL);
the scripted model answers in microseconds, so a real model call makes the
overhead a far smaller share than here. No session (its reads and writes would
be steps too). The file lives in a temporary folder; tracing is off.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sqlite3
import sys
import tempfile
from collections.abc import AsyncIterator
from importlib.metadata import version
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from typing import Any

from agents import Agent, FunctionTool, Runner, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from benchmarks._agents import print_per_unit, timed_rounds
from letitloop import __version__
from letitloop.adapters.openai_agents import durable_agent


class Scripted(Model):
    """Asks for every tool once, then answers: chosen by its input alone."""

    def __init__(self, tools: int) -> None:
        self.tools = tools

    async def get_response(self, system_instructions: Any, input: Any, *a: Any, **kw: Any) -> Any:
        answered = not isinstance(input, str) and any(
            isinstance(i, dict) and i.get("type") == "function_call_output" for i in input
        )
        usage = Usage(requests=1, input_tokens=100, output_tokens=10, total_tokens=110)
        if answered:
            text = ResponseOutputText(text="done", type="output_text", annotations=[])
            message = ResponseOutputMessage(
                id="m", role="assistant", status="completed", type="message", content=[text]
            )
            return ModelResponse(output=[message], usage=usage, response_id=None)
        calls = [
            ResponseFunctionToolCall(
                id=f"fc{i}",
                call_id=f"c{i}",
                name=f"tool_{i}",
                arguments=json.dumps({"x": i}),
                type="function_call",
            )
            for i in range(self.tools)
        ]
        return ModelResponse(output=calls, usage=usage, response_id=None)

    def stream_response(self, *a: Any, **kw: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


def build(tools: int) -> Agent[Any]:
    made: list[FunctionTool] = []
    for i in range(tools):

        def tool(x: int) -> str:
            return f"{x}"

        made.append(function_tool(tool, name_override=f"tool_{i}"))
    return Agent(name="bench", model=Scripted(tools), tools=list(made))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=60, help="rounds (default 60)")
    parser.add_argument("--tools", type=int, default=4, help="tool calls per run (default 4)")
    args = parser.parse_args()
    set_tracing_disabled(True)
    print(
        f"letitloop {__version__}, openai-agents {version('openai-agents')}, "
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, {sys.platform}"
    )
    bare, durable = build(args.tools), durable_agent(build(args.tools))
    with tempfile.TemporaryDirectory() as folder:
        times = asyncio.run(
            timed_rounds(
                args.runs,
                Path(folder) / "journal.db",
                lambda: Runner.run(bare, "go"),
                lambda: Runner.run(durable, "go"),
            )
        )
    calls = 2 + args.tools
    print_per_unit(times, calls, "Runner.run", "call")
    print(f"{calls} calls per Runner.run (2 model calls, {args.tools} tool calls)")


if __name__ == "__main__":
    main()
