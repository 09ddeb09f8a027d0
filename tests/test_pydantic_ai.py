"""Pydantic AI agents made durable by ``LetItLoopDurability`` (letitloop.adapters.pydantic_ai).

The agent is the real Pydantic AI agent loop with its offline ``FunctionModel``
and two tools, in a child process SIGKILLed inside a tool call and inside a
model call, then run again. The model function and the tools write a line to a
side file when they start and when they end, so the tests count what ran,
across processes, outside the journal.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from crashtest_examples import crashtest_example
from forked_commands import ForkedCommands
from helpers import lil_forked, wait_until, write_script
from preloaded import SDKS, Child, Preloaded, for_sdk

pytest.importorskip("pydantic_ai.durable_exec")

AGENT = """
    import asyncio, json, os, sys, time

    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    from letitloop import Journal
    from letitloop.adapters.pydantic_ai import LetItLoopDurability, units

    LOG = os.environ["AGENT_LOG"]
    HOLD = os.environ.get("AGENT_HOLD", "")  # the call that blocks (to be killed in)
    RELEASED = os.environ["AGENT_RELEASED"]  # once this file exists, nothing blocks


    def note(line):
        with open(LOG, "a") as f:
            f.write(line + "\\n")


    def call(label, result):
        note(f"start {label}")
        while label == HOLD and not os.path.exists(RELEASED):
            time.sleep(0.02)  # killed here by the test
        note(f"end {label}")
        return result


    # Which units this process ran, and which it got back from the journal.
    reported = units.record_durable_unit


    def spy(*, executed):
        note(f"unit executed={executed}")
        reported(executed=executed)


    units.record_durable_unit = spy


    def model(messages, info):
        done = [p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if not done:
            return call("model 0", ModelResponse(parts=[ToolCallPart("weather", {"city": "Oslo"})]))
        if len(done) == 1:
            return call("model 1", ModelResponse(parts=[ToolCallPart("clock", {"city": "Oslo"})]))
        return call("model 2", ModelResponse(parts=[TextPart(f"Oslo: {done[0]} at {done[1]}")]))


    agent = Agent(FunctionModel(model), name="trip", capabilities=[LetItLoopDurability()])


    @agent.tool_plain
    def weather(city: str) -> str:
        return call("tool weather", f"snow in {city}")


    @agent.tool_plain
    def clock(city: str) -> str:
        return call("tool clock", "09:00")


    async def main():
        async with Journal("trip", run="oslo", path=sys.argv[1]) as j:
            result = await agent.run("What is Oslo like now?")
            print(json.dumps({"output": result.output, "run": j.run_id}))


    asyncio.run(main())
"""

CALLS = ["model 0", "tool weather", "model 1", "tool clock", "model 2"]


def lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def run_agent(framework: Preloaded, tmp_path: Path, db: Path, log: Path, hold: str = "") -> Child:
    script = write_script(tmp_path, "agent.py", AGENT)
    env = {"AGENT_LOG": str(log), "AGENT_HOLD": hold, "AGENT_RELEASED": str(tmp_path / "go")}
    return framework.start(script, str(db), env={**os.environ, **env})


def finish(child: Child) -> dict[str, Any]:
    done = child.wait()
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def lil(*args: str) -> subprocess.CompletedProcess[str]:
    """``lil ARGS`` forked from the tests' interpreter that imported letitloop
    (helpers.lil_forked): what it prints is checked here, not its process start."""
    return lil_forked(*args)


@pytest.fixture(scope="module")
def framework() -> Iterator[Preloaded]:
    """Forks the processes from an interpreter that imported Pydantic AI and the adapter once."""
    with for_sdk("pydantic_ai") as preloaded:
        yield preloaded


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory, framework: Preloaded) -> dict[str, Any]:
    """One run without a kill: its output, its side file and its rows."""
    folder = tmp_path_factory.mktemp("uninterrupted")
    db, log = folder / "journal.db", folder / "calls.log"
    result = finish(run_agent(framework, folder, db, log))
    shown = lil("show", result["run"], "--json", "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    return {**result, "log": lines(log), "rows": json.loads(shown.stdout)["rows"]}


@pytest.fixture(scope="module", params=["tool clock", "model 1"])
def resumed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, framework: Preloaded
) -> Resumed:
    """The agent killed inside ``request.param``, then run again (once per kill point)."""
    hold: str = request.param
    folder = tmp_path_factory.mktemp("killed")
    db, log = folder / "journal.db", folder / "calls.log"
    child = run_agent(framework, folder, db, log, hold=hold)
    wait_until(lambda: f"start {hold}" in lines(log), f"the agent inside {hold}")
    os.kill(child.pid, signal.SIGKILL)
    assert child.wait().returncode == -signal.SIGKILL
    first = lines(log)
    (folder / "go").touch()
    result = finish(run_agent(framework, folder, db, log))
    return Resumed(hold, db, result, first, lines(log))


@dataclass
class Resumed:
    hold: str
    db: Path
    result: dict[str, Any]
    first: list[str]  # the side file when the first attempt was killed
    log: list[str]  # the side file after the second attempt


class TestAnAgentKilledInsideACall:
    def test_every_finished_call_ran_exactly_once(self, resumed: Resumed) -> None:
        ends = Counter(x.removeprefix("end ") for x in resumed.log if x.startswith("end "))
        starts = Counter(x.removeprefix("start ") for x in resumed.log if x.startswith("start "))
        assert ends == Counter(CALLS)  # every call finished once, none twice
        # Only the call the process died in started again.
        assert starts == Counter(CALLS) + Counter([resumed.hold])

    def test_its_output_is_the_uninterrupted_runs(
        self, resumed: Resumed, uninterrupted: dict[str, Any]
    ) -> None:
        assert resumed.result["output"] == uninterrupted["output"] == "Oslo: snow in Oslo at 09:00"

    def test_replayed_units_are_reported_as_not_executed(self, resumed: Resumed) -> None:
        finished_before = CALLS.index(resumed.hold)
        assert resumed.first.count("unit executed=True") == finished_before
        second = resumed.log[len(resumed.first) :]
        assert second.count("unit executed=False") == finished_before
        assert second.count("unit executed=True") == len(CALLS) - finished_before

    def test_lil_show_lists_the_units_with_their_usage_once(
        self, resumed: Resumed, uninterrupted: dict[str, Any]
    ) -> None:
        shown = lil("show", resumed.result["run"], "--json", "--db", str(resumed.db))
        assert shown.returncode == 0, shown.stderr
        rows = json.loads(shown.stdout)["rows"]
        assert rows[0]["key"] == "trip.request"  # the agent run's request
        assert [r["key"] for r in rows] == [r["key"] for r in uninterrupted["rows"]]
        rows = rows[1:]
        assert [r["key"] for r in rows] == [
            "0000:trip__model.request",
            "0001:trip__function_toolset__<agent>.call_tool:weather",
            "0002:trip__model.request",
            "0003:trip__function_toolset__<agent>.call_tool:clock",
            "0004:trip__model.request",
        ]
        tokens = [(r["input_tokens"], r["output_tokens"]) for r in rows]
        assert tokens == [
            (r["input_tokens"], r["output_tokens"]) for r in uninterrupted["rows"][1:]
        ]
        assert all(t[0] and t[1] for t in tokens[0::2])  # every model request has its usage
        assert tokens[1::2] == [(None, None), (None, None)]  # tool calls report none
        text = lil("show", resumed.result["run"], "--db", str(resumed.db)).stdout
        assert "reported by 3 steps" in text


DESK = """
    import asyncio, json, os, sys

    from pydantic_ai import Agent
    from pydantic_ai.capabilities import RequestInput
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    from letitloop.adapters.pydantic_ai import LetItLoopDurability

    LOG = os.environ["AGENT_LOG"]


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
        note(f"ask {token}")  # hand the token to a person; they answer with lil send


    durable = LetItLoopDurability(goal="desk", path=sys.argv[1], stop_after=0.2)
    approval = RequestInput(ask, name="refund_approval")
    agent = Agent(FunctionModel(model), name="desk", capabilities=[durable, approval])


    @agent.tool_plain(requires_approval=True)
    def refund(order: int, amount: int) -> str:
        note("tool refund")
        return f"refunded {amount} on order {order}"


    result = asyncio.run(agent.run("Refund order 7"))
    print(json.dumps({"output": result.output}))
"""


class TestAnAgentWaitingForAnApproval:
    def test_it_stops_and_a_rerun_continues_with_the_answer_sent(
        self, tmp_path: Path, framework: Preloaded
    ) -> None:
        script = write_script(tmp_path, "desk.py", DESK)
        db, log = tmp_path / "journal.db", tmp_path / "calls.log"
        env = {**os.environ, "AGENT_LOG": str(log)}
        stopped = framework.run(script, str(db), env=env)
        assert stopped.returncode == 75, stopped.stderr  # RunWaiting: the process left
        assert "lil send" in stopped.stderr
        runs = lil("runs", "--db", str(db))
        assert "waiting for 'refund_approval'" in runs.stdout, runs.stdout
        sent = lil(
            "send", "desk", "refund_approval", '{"approvals": {"call-1": true}}', "--db", str(db)
        )
        assert sent.returncode == 0, sent.stderr
        resumed = framework.run(script, str(db), env=env)
        assert resumed.returncode == 0, resumed.stderr
        assert json.loads(resumed.stdout)["output"] == "done: refunded 30 on order 7"
        calls = lines(log)
        # Asked once (the token and the answer are recorded), the model's first
        # request replayed, the approved tool run once, after the answer.
        assert [c.split()[0] for c in calls] == ["model", "ask", "tool", "model"]
        assert calls[1].startswith("ask 0") and calls[1].endswith(" refund_approval")


class TestTheCookbook:
    def test_its_crash_replays_what_returned_and_runs_the_killed_tool_again(self) -> None:
        done = subprocess.run(
            [sys.executable, "examples/pydantic_ai_resume.py", "--crash"],
            cwd=Path(__file__).resolve().parent.parent,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert "answer: Oslo: snow in Oslo, 09:00" in done.stdout
        out = done.stdout.splitlines()
        ran = [line.split(": ", 1)[1] for line in out if line.startswith("pid ")]
        assert ran == [
            "model request 1",
            "tool weather",
            "model request 2",
            "tool clock",  # killed inside
            "tool clock",  # the second process: only the interrupted call again
            "model request 3",
        ]


class TestAnAgentRunOutsideAJournal:
    def test_it_runs_as_usual_and_journals_nothing(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from pydantic_ai import Agent
        from pydantic_ai.models.test import TestModel

        from letitloop.adapters.pydantic_ai import LetItLoopDurability

        monkeypatch.chdir(tmp_path)
        ran: list[int] = []
        agent = Agent(TestModel(), name="plain", capabilities=[LetItLoopDurability()])

        @agent.tool_plain
        def lookup(order: int) -> str:
            ran.append(order)
            return "shipped"

        assert agent.run_sync("Where is my order?").output == '{"lookup":"shipped"}'
        assert agent.run_sync("Where is my order?").output == '{"lookup":"shipped"}'
        assert len(ran) == 2  # nothing replayed: no journal
        assert not (tmp_path / ".letitloop").exists()

    def test_with_a_goal_it_opens_a_journal_for_the_run(self, tmp_path: Path) -> None:
        from pydantic_ai import Agent
        from pydantic_ai.models.test import TestModel

        from letitloop import Journal
        from letitloop.adapters.pydantic_ai import LetItLoopDurability

        db = tmp_path / "journal.db"
        durable = LetItLoopDurability(goal="orders", run="order-7", path=db)
        agent = Agent(TestModel(), name="orders", capabilities=[durable])
        ran: list[int] = []

        @agent.tool_plain
        def lookup(order: int) -> str:
            ran.append(order)
            return "shipped"

        # asyncio.run: the journal opens in the loop's default executor, which it shuts down.
        first = asyncio.run(agent.run("Where is order 7?")).output
        again = asyncio.run(agent.run("Where is order 7?")).output  # the completed run replays
        assert first == again == '{"lookup":"shipped"}'
        assert len(ran) == 1
        with Journal("orders", run="order-7", path=db) as j:
            assert j.was_completed


class TestTwoAgentRunsInOneJournal:
    def test_each_has_keys_of_its_own_and_both_replay(self, tmp_path: Path) -> None:
        from pydantic_ai import Agent
        from pydantic_ai.models.test import TestModel

        from letitloop import Journal
        from letitloop.adapters.pydantic_ai import LetItLoopDurability

        db = tmp_path / "journal.db"
        agent = Agent(TestModel(), name="two", capabilities=[LetItLoopDurability()])
        ran: list[int] = []

        @agent.tool_plain
        def lookup(order: int) -> str:
            ran.append(order)
            return "shipped"

        async def program() -> list[str]:
            async with Journal("two", run="r", path=db):
                first = await agent.run("a")
                second = await agent.run("b")
            return [first.output, second.output]

        assert asyncio.run(program()) == ['{"lookup":"shipped"}'] * 2
        assert asyncio.run(program()) == ['{"lookup":"shipped"}'] * 2  # all replayed
        assert len(ran) == 2
        shown = lil("show", "r", "--json", "--db", str(db))
        assert [r["key"] for r in json.loads(shown.stdout)["rows"]] == [
            "two.request",  # each agent run's request (checked on replay)
            "0000:two__model.request",
            "0001:two__function_toolset__<agent>.call_tool:lookup",
            "0002:two__model.request",
            "run2.two.request",
            "run2.0000:two__model.request",
            "run2.0001:two__function_toolset__<agent>.call_tool:lookup",
            "run2.0002:two__model.request",
        ]


#: Its trials are a dozen programs run one after another: minutes on a loaded machine.
@pytest.mark.timeout(900)
class TestTheCrashTest:
    def test_the_example_killed_at_three_seeded_points_runs_and_pays_nothing_twice(
        self,
    ) -> None:
        """lil crashtest's machinery on examples/pydantic_ai_resume.py (the Pydantic AI agent):
        killed with SIGKILL at three of its kill points drawn with a seed, rerun until it
        finishes: no recorded call ran or was paid again, and each finished run answered as
        the uninterrupted one. Each run, and the child that runs its agent, is a child
        forked from an interpreter that imported Pydantic AI, not letitloop
        (tests/forked_commands.py)."""
        modules, warm = SDKS["pydantic_ai"]
        sdk = (m for m in modules if not m.startswith("letitloop"))
        with (
            Preloaded(*sdk, warm=warm) as pydantic_ai,
            ForkedCommands(pydantic_ai, children=True) as forked,
        ):
            report = crashtest_example("pydantic_ai_resume", forked=forked)
        assert report.expected == "answer: Oslo: snow in Oslo, 09:00"
