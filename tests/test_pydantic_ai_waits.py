"""A Pydantic AI agent waiting for outside input inside the user's own ``with Journal(...)``.

``LetItLoopDurability(stop_after=...)`` stops the process to wait for an
approval (``RequestInput``); the wait leaves the agent run's tasks as
``StoppedToWait``, which carries the journal's ``RunWaiting``. The journal the
program opened itself must leave the run ``waiting`` (not ``failed``), so that
``lil send`` answers it and a rerun continues. Real processes, the real
``lil`` command.
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

DESK = """
    import asyncio, json, os, sys

    from pydantic_ai import Agent
    from pydantic_ai.capabilities import RequestInput
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    from letitloop import Journal
    from letitloop.adapters.pydantic_ai import LetItLoopDurability

    LOG, MODE, DB = os.environ["AGENT_LOG"], sys.argv[1], sys.argv[2]


    def note(line):
        with open(LOG, "a") as f:
            f.write(line + "\\n")


    def model(messages, info):
        done = [p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        note(f"model {len(done)}")
        if not done:
            call = ToolCallPart("refund", {"order": 7, "amount": 30}, tool_call_id="call-1")
            return ModelResponse(parts=[call])
        return ModelResponse(parts=[TextPart(f"done: {done[0]}")])


    def ask(ctx, requests, token):
        note(f"ask {token}")


    approval = RequestInput(ask, name="refund_approval")
    durable = LetItLoopDurability(stop_after=0.2)
    agent = Agent(FunctionModel(model), name="desk", capabilities=[durable, approval])


    @agent.tool_plain(requires_approval=True)
    def refund(order: int, amount: int) -> str:
        note("tool refund")
        return f"refunded {amount} on order {order}"


    async def program():
        async with Journal("desk", path=DB):
            return (await agent.run("Refund order 7")).output


    if MODE == "sync":
        with Journal("desk", path=DB):
            output = agent.run_sync("Refund order 7").output
    else:
        output = asyncio.run(program())
    print(json.dumps({"output": output}))
"""


def lil(*args: str) -> subprocess.CompletedProcess[str]:
    """``lil ARGS`` forked from the tests' interpreter that imported letitloop
    (helpers.lil_forked): what it prints is checked here, not its process start."""
    return lil_forked(*args)


@pytest.fixture(scope="module")
def framework() -> Iterator[Preloaded]:
    """Forks the processes from an interpreter that imported Pydantic AI and the adapter once."""
    with for_sdk("pydantic_ai") as preloaded:
        yield preloaded


class TestAnAgentWaitingInsideTheProgramsOwnJournal:
    @pytest.mark.parametrize("mode", ["sync", "async"])
    def test_the_run_is_left_waiting_and_a_rerun_continues_with_the_answer(
        self, tmp_path: Path, mode: str, framework: Preloaded
    ) -> None:
        script = write_script(tmp_path, "desk.py", DESK)
        db, log = tmp_path / "journal.db", tmp_path / "calls.log"
        env = {**os.environ, "AGENT_LOG": str(log)}
        stopped = framework.run(script, mode, str(db), env=env)
        assert stopped.returncode == 75, stopped.stderr  # RunWaiting: the process left
        runs = lil("runs", "--db", str(db))
        assert "waiting for 'refund_approval'" in runs.stdout, runs.stdout
        assert "failed" not in runs.stdout
        sent = lil(
            "send", "desk", "refund_approval", '{"approvals": {"call-1": true}}', "--db", str(db)
        )
        assert sent.returncode == 0, sent.stderr
        resumed = framework.run(script, mode, str(db), env=env)
        assert resumed.returncode == 0, resumed.stderr
        assert json.loads(resumed.stdout)["output"] == "done: refunded 30 on order 7"
        calls = log.read_text().splitlines()
        # Asked once, the first model request replayed, the approved tool run once.
        assert [c.split()[0] for c in calls] == ["model", "ask", "tool", "model"]
        assert "completed" in lil("runs", "--db", str(db)).stdout
        shown = lil("show", "desk", "--db", str(db)).stdout
        assert "— stopped to wait for 'refund_approval'" in shown, shown
