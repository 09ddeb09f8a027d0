"""Streamed Pydantic AI agent runs (``run_stream``, ``iter``) made durable.

A streamed model request is one durable unit (``model.request_stream``): its
final response is journaled, and a replay hands it back as the stream. The
agent runs in a child process SIGKILLed inside a tool call and in the middle of
a streamed response (after its first chunk), then runs again; its model and
tool write ``start``/``end`` lines to a side file, so what ran is counted
outside the journal.
"""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_until, write_script
from preloaded import Child, Preloaded, for_sdk

pytest.importorskip("pydantic_ai.durable_exec")

AGENT = """
    import asyncio, json, os, sys, time

    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import DeltaToolCall, FunctionModel

    from letitloop import Journal
    from letitloop.adapters.pydantic_ai import LetItLoopDurability

    LOG = os.environ["AGENT_LOG"]
    HOLD = os.environ.get("AGENT_HOLD", "")  # the call that blocks (to be killed in)
    RELEASED = os.environ["AGENT_RELEASED"]  # once this file exists, nothing blocks
    DB, MODE = sys.argv[1], sys.argv[2]


    def note(line):
        with open(LOG, "a") as f:
            f.write(line + "\\n")


    def hold(label):
        while label == HOLD and not os.path.exists(RELEASED):
            time.sleep(0.02)  # killed here by the test


    def returned(messages):
        return [p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]


    async def stream(messages, info):
        done = returned(messages)
        note(f"start model {len(done)}")
        if not done:
            yield {0: DeltaToolCall(name="weather", json_args='{"city": "Oslo"}')}
        else:
            yield "Oslo: "
            hold("model 1")
            yield done[0]
        note(f"end model {len(done)}")


    def respond(messages, info):
        done = returned(messages)
        note(f"start model {len(done)}")
        hold(f"model {len(done)}")
        note(f"end model {len(done)}")
        if not done:
            return ModelResponse(parts=[ToolCallPart("weather", {"city": "Oslo"})])
        return ModelResponse(parts=[TextPart(f"Oslo: {done[0]}")])


    model = FunctionModel(respond, stream_function=stream)
    agent = Agent(model, name="trip", capabilities=[LetItLoopDurability()])


    @agent.tool_plain
    def weather(city: str) -> str:
        note("start tool weather")
        hold("tool weather")
        note("end tool weather")
        return f"snow in {city}"


    async def main():
        async with Journal("trip", run="oslo", path=DB):
            if MODE == "run_stream":
                async with agent.run_stream("What is Oslo like now?") as result:
                    async for _ in result.stream_output(debounce_by=None):
                        pass
                    output = await result.get_output()
            else:
                async with agent.iter("What is Oslo like now?") as run:
                    async for _ in run:
                        pass
                output = run.result.output
        print(json.dumps({"output": output}))


    asyncio.run(main())
"""

CALLS = ["model 0", "tool weather", "model 1"]


def lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def run_agent(framework: Preloaded, folder: Path, mode: str, hold: str = "") -> Child:
    script = write_script(folder, "agent.py", AGENT)
    env = {
        "AGENT_LOG": str(folder / "calls.log"),
        "AGENT_HOLD": hold,
        "AGENT_RELEASED": str(folder / "go"),
    }
    return framework.start(script, str(folder / "journal.db"), mode, env={**os.environ, **env})


def finish(child: Child) -> dict[str, Any]:
    done = child.wait()
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


@pytest.fixture(scope="module")
def framework() -> Iterator[Preloaded]:
    """Forks the processes from an interpreter that imported Pydantic AI and the adapter once."""
    with for_sdk("pydantic_ai") as preloaded:
        yield preloaded


@dataclass
class Resumed:
    mode: str
    hold: str
    output: str
    log: list[str]  # the side file after both attempts


@pytest.fixture(
    scope="module",
    params=[("run_stream", "tool weather"), ("run_stream", "model 1"), ("iter", "tool weather")],
    ids=lambda p: f"{p[0]}, killed inside {p[1]}",
)
def resumed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, framework: Preloaded
) -> Resumed:
    """A streamed agent run killed inside a call, then run again."""
    mode, hold = request.param
    folder = tmp_path_factory.mktemp("killed")
    child = run_agent(framework, folder, mode, hold=hold)
    wait_until(lambda: f"start {hold}" in lines(folder / "calls.log"), f"the agent in {hold}")
    os.kill(child.pid, signal.SIGKILL)
    assert child.wait().returncode == -signal.SIGKILL
    (folder / "go").touch()
    output = finish(run_agent(framework, folder, mode))["output"]
    return Resumed(mode, hold, output, lines(folder / "calls.log"))


class TestAStreamedAgentRunKilledInsideACall:
    def test_every_finished_call_ran_exactly_once(self, resumed: Resumed) -> None:
        ends = Counter(x.removeprefix("end ") for x in resumed.log if x.startswith("end "))
        starts = Counter(x.removeprefix("start ") for x in resumed.log if x.startswith("start "))
        assert ends == Counter(CALLS)
        assert starts == Counter(CALLS) + Counter([resumed.hold])  # only the killed one again

    def test_its_output_is_the_uninterrupted_runs(
        self, resumed: Resumed, tmp_path_factory: pytest.TempPathFactory, framework: Preloaded
    ) -> None:
        folder = tmp_path_factory.mktemp("uninterrupted")
        assert resumed.output == finish(run_agent(framework, folder, resumed.mode))["output"]
        assert resumed.output == "Oslo: snow in Oslo"
