"""LlamaIndex agents killed with SIGKILL in a tool call, then resumed: what runs again?

Offline and deterministic: the model is llama-index-core's MockFunctionCallingLLM
with a response generator (as LlamaIndex's own agent tests write it); no API key.

    python examples/llamaindex_resume.py [--crash] [--db PATH]

An ``AgentWorkflow`` of two ``FunctionAgent``\\ s, ``runtime=LetItLoopRuntime()``:
the researcher looks the city up (a tool) and hands off to the writer, who adds
two numbers (a tool) and answers; ``output_cls=Report`` makes the last model call
a structured answer. Every model call and workflow step is a step of the journal
file; each real model and tool call is appended to a ledger file, so you can see
what ran in which process.

Without ``--crash`` the agents run once. With ``--crash`` they run in a child
process that is killed with a real SIGKILL from outside inside the writer's
``add`` tool; a second child resumes the same run:

- the researcher's model calls, its lookup and the handoff are not made again:
  their results, the agents' memory and scratchpad come back from the journal;
- ``add`` runs again (it never returned), then the writer's last two model calls;
- the answer is an ``AgentOutput`` equal to an uninterrupted run's, and ``lil show
  llama-demo`` lists the ticks and model calls (``AgentWorkflow.llm:…``).

Needs ``pip install -e '.[llamaindex]'``, run from a checkout of this repository.
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
from typing import Any

HOLD = "add"  # with --crash, the child waits inside this tool until it is killed


def agents_main(db: str, ledger: str, hold: bool) -> None:
    """The agents themselves, run in a child process."""
    from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent
    from llama_index.core.llms import ChatMessage
    from llama_index.core.llms.mock import MockFunctionCallingLLM
    from llama_index.core.tools import ToolSelection
    from pydantic import BaseModel

    from letitloop import Journal
    from letitloop.adapters.llamaindex import LetItLoopRuntime

    def note(line: str) -> None:
        with open(ledger, "a") as f:
            f.write(f"pid {os.getpid()}: {line}\n")

    def lookup(city: str) -> str:
        """Look up facts about a city."""
        note(f"tool lookup {city}")
        return f"{city} has 700000 people"

    def add(a: int, b: int) -> int:
        """Add two numbers."""
        note(f"tool add {a} {b}")
        if hold:
            print("ready-to-be-killed", flush=True)
            time.sleep(60)  # killed here
        return a + b

    class Report(BaseModel):
        """What the team reports."""

        city: str
        total: int

    def use(name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        return {"tool_calls": [ToolSelection(tool_id=name, tool_name=name, tool_kwargs=kwargs)]}

    def model(agent: str) -> MockFunctionCallingLLM:
        def reply(messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
            results = sum(m.role == "tool" for m in messages)
            if any(t.metadata.name == "Report" for t in kwargs.get("tools") or []):
                note(f"model {agent}: the structured report")
                return ChatMessage(
                    role="assistant",
                    content="",
                    additional_kwargs=use("Report", {"city": "Oslo", "total": 5}),
                )
            note(f"model {agent}, after {results} tool results")
            if agent == "researcher" and results == 0:
                return ChatMessage(
                    role="assistant", content="", additional_kwargs=use("lookup", {"city": "Oslo"})
                )
            if agent == "researcher":
                handoff = {"to_agent": "writer", "reason": "the writer adds it up"}
                return ChatMessage(
                    role="assistant", content="", additional_kwargs=use("handoff", handoff)
                )
            if results < 3:
                return ChatMessage(
                    role="assistant", content="", additional_kwargs=use("add", {"a": 2, "b": 3})
                )
            return ChatMessage(role="assistant", content="Oslo has 700000 people; 2 + 3 = 5")

        return MockFunctionCallingLLM(response_generator=reply)

    async def run() -> Any:
        researcher = FunctionAgent(
            name="researcher",
            description="Finds facts about a city.",
            system_prompt="You research cities.",
            tools=[lookup],
            llm=model("researcher"),
            can_handoff_to=["writer"],
        )
        writer = FunctionAgent(
            name="writer",
            description="Writes the report.",
            system_prompt="You write reports.",
            tools=[add],
            llm=model("writer"),
        )
        team = AgentWorkflow(
            agents=[researcher, writer],
            root_agent="researcher",
            output_cls=Report,
            runtime=LetItLoopRuntime(),
        )
        async with Journal("llama-demo", run="oslo", path=db):
            return await team.run(user_msg="Tell me about Oslo")

    output = asyncio.run(run())
    print(f"result: {type(output).__name__}: {output} {output.structured_response}", flush=True)


def child(db: Path, ledger: Path, hold: bool) -> subprocess.Popen[str]:
    args = [sys.executable, __file__, "--agents", "--db", str(db), "--ledger", str(ledger)]
    if hold:
        args.append("--hold")
    return subprocess.Popen(args, stdout=subprocess.PIPE, text=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crash", action="store_true", help="kill the agents inside a tool")
    parser.add_argument("--db", help="the journal file (default: a new temporary one)")
    parser.add_argument("--ledger", help=argparse.SUPPRESS)
    parser.add_argument("--agents", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--hold", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.agents:
        agents_main(args.db, args.ledger, args.hold)
        return
    folder = Path(tempfile.mkdtemp(prefix="llamaindex-resume-"))
    db = Path(args.db) if args.db else folder / "journal.db"
    ledger = folder / "ledger.txt"
    if args.crash:
        first = child(db, ledger, hold=True)
        assert first.stdout is not None
        for line in first.stdout:  # wait until it is inside the add tool
            if line.strip() == "ready-to-be-killed":
                break
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        print(f"killed pid {first.pid} inside the '{HOLD}' tool (SIGKILL)")
    last = child(db, ledger, hold=False)
    out, _ = last.communicate()
    print(out.strip())
    print("what really ran, process by process:")
    # No ledger: this run's every model call and tool came back from the journal (a run
    # killed after its last one, say).
    print(ledger.read_text().rstrip() if ledger.exists() else "nothing: all of it was recorded")
    print(f"journal: {db}  (lil show llama-demo --db {db})")
    if args.db:  # the journal lives elsewhere: the ledger's folder is not kept
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
