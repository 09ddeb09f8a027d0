"""Per-call overhead of LetItLoopDurability against the bare Pydantic AI agent.

    python benchmarks/bench_pydantic_ai.py [--runs 60] [--tools 4]

One agent on Pydantic AI's offline ``TestModel`` with ``--tools`` plain tools:
an ``agent.run`` makes 2 model requests and ``--tools`` tool calls. Three rows,
timed in rounds that run each once (a busy moment of the shared machine falls on
all of them alike), medians of ``--runs`` rounds:

- bare: the agent without the capability (what Pydantic AI itself costs);
- durable, fresh: inside ``async with Journal`` on a new named run, each unit a
  step written to the file (what journaling costs);
- durable, replay: the same completed run opened again, every unit replayed.

The per-unit overhead is (durable - bare) / units. Bias, stated: the journal
uses letitloop's default ``durability="process"`` (WAL, synchronous=NORMAL);
TestModel answers in microseconds, so a real model call makes the overhead a
far smaller share than here. The file lives in a temporary folder.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import sqlite3
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

from benchmarks._agents import print_per_unit, timed_rounds
from letitloop import __version__
from letitloop.adapters.pydantic_ai import LetItLoopDurability


def build(tools: int, durable: bool) -> Agent[None, str]:
    capabilities = [LetItLoopDurability()] if durable else []
    agent: Agent[None, str] = Agent(TestModel(), name="bench", capabilities=capabilities)
    for i in range(tools):

        def tool(x: int) -> str:
            return f"{x}"

        tool.__name__ = f"tool_{i}"
        agent.tool_plain(tool)
    return agent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60, help="rounds (default 60)")
    parser.add_argument("--tools", type=int, default=4, help="tools per agent run (default 4)")
    args = parser.parse_args()
    print(
        f"letitloop {__version__}, pydantic-ai-slim {version('pydantic-ai-slim')}, "
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, {sys.platform}"
    )
    bare, durable = build(args.tools, False), build(args.tools, True)
    with tempfile.TemporaryDirectory() as folder:
        times = asyncio.run(
            timed_rounds(
                args.runs,
                Path(folder) / "journal.db",
                lambda: bare.run("go"),
                lambda: durable.run("go"),
            )
        )
    units = 2 + args.tools
    print_per_unit(times, units, "agent.run", "unit")
    print(f"{units} units per agent.run (2 model requests, {args.tools} tool calls)")


if __name__ == "__main__":
    main()
