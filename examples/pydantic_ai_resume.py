"""A Pydantic AI agent killed with SIGKILL inside a tool call, then resumed: what runs again?

Offline and deterministic: the model is Pydantic AI's ``FunctionModel``, no API key.

    python examples/pydantic_ai_resume.py [--crash] [--db PATH]

The agent (``LetItLoopDurability(goal="trip")``) asks for the weather and the
time in Oslo through two tools, then answers. Every model call and tool call
is a step of the journal file, keyed by its number in the run and its name
(``0003:trip__function_toolset__<agent>.call_tool:clock``). Each real call is
appended to a ledger file, so you can see what ran in which process.

Without ``--crash`` the agent runs once. With ``--crash`` it runs in a child
process that is killed with a real SIGKILL from outside while the second tool
(``clock``) is running; a second child resumes the same run:

- the first model request, the ``weather`` tool and the second model request
  are replayed from the journal, not called again;
- ``clock`` runs again (it never returned), then the final model request runs;
- the answer is the same as an uninterrupted run's, and ``lil show trip``
  lists the five units with the tokens of each model request, counted once.

Needs ``pip install -e '.[pydantic-ai]'``, run from a checkout of this repository.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HOLD = "clock"  # with --crash, the child waits inside this tool until it is killed


def agent_main(db: str, ledger: str, hold: bool) -> None:
    """The agent itself, run in a child process."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from letitloop.adapters.pydantic_ai import LetItLoopDurability

    def note(line: str) -> None:
        with open(ledger, "a") as f:
            f.write(f"pid {os.getpid()}: {line}\n")

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = [p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        note(f"model request {len(done) + 1}")
        if not done:
            return ModelResponse(parts=[ToolCallPart("weather", {"city": "Oslo"})])
        if len(done) == 1:
            return ModelResponse(parts=[ToolCallPart("clock", {"city": "Oslo"})])
        return ModelResponse(parts=[TextPart(f"Oslo: {done[0]}, {done[1]}")])

    agent = Agent(
        FunctionModel(model), name="trip", capabilities=[LetItLoopDurability(goal="trip", path=db)]
    )

    @agent.tool_plain
    def weather(city: str) -> str:
        note("tool weather")
        return f"snow in {city}"

    @agent.tool_plain
    def clock(city: str) -> str:
        note("tool clock")
        if hold:
            print("ready-to-be-killed", flush=True)
            time.sleep(60)  # killed here
        return "09:00"

    result = asyncio.run(agent.run("What is Oslo like now?"))
    print(f"answer: {result.output}", flush=True)


def child(db: Path, ledger: Path, hold: bool) -> subprocess.Popen[str]:
    args = [sys.executable, __file__, "--agent", "--db", str(db), "--ledger", str(ledger)]
    if hold:
        args.append("--hold")
    return subprocess.Popen(args, stdout=subprocess.PIPE, text=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crash", action="store_true", help="kill the agent inside a tool call")
    parser.add_argument("--db", help="the journal file (default: a new temporary one)")
    parser.add_argument("--ledger", help=argparse.SUPPRESS)
    parser.add_argument("--agent", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--hold", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.agent:
        agent_main(args.db, args.ledger, args.hold)
        return
    folder = Path(tempfile.mkdtemp(prefix="pydantic-ai-resume-"))
    db = Path(args.db) if args.db else folder / "journal.db"
    ledger = folder / "ledger.txt"
    if args.crash:
        first = child(db, ledger, hold=True)
        assert first.stdout is not None
        for line in first.stdout:  # wait until it is inside the clock tool
            if line.strip() == "ready-to-be-killed":
                break
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        print(f"killed pid {first.pid} inside the '{HOLD}' tool (SIGKILL)")
    last = child(db, ledger, hold=False)
    out, _ = last.communicate()
    print(out.strip())
    print("what really ran, process by process:")
    print(ledger.read_text().rstrip())
    print(f"journal: {db}  (lil show trip --db {db})")
    if args.db:  # the journal lives elsewhere: the ledger's folder is not kept
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
