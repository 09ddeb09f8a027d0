"""The OpenAI Agents SDK adapter: agents killed inside a tool call, between steps (at a
handoff), inside a model call and while waiting for a tool approval resume with every
finished call replayed (tests/openai_agents_team.py is the script; its fake model and
tools count executions in a side file, outside the journal)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai_agents_team as oat
import pytest
from agent_kills import (
    Attempts,
    for_agents,
    lil_show,
    ran,
    read_side,
    reference_and_killed,
    reran_after_finishing,
    reran_without_being_in_flight,
)
from agents import Runner
from agents.items import ModelResponse
from agents.model_settings import ModelSettings
from agents.models.interface import ModelTracing
from agents.usage import Usage
from crashtest_examples import crashtest_example
from forked_commands import ForkedCommands
from helpers import lil_forked
from openai.types.responses import ResponseFunctionToolCall
from preloaded import SDKS, Preloaded

from letitloop import Journal
from letitloop.adapters.openai_agents import DurableModel, durable_agent
from letitloop.adapters.openai_agents.model import RESPONSE
from letitloop.errors import NoJournalError, StepMismatchError

LIL = [sys.executable, "-m", "letitloop"]
REJECTED = '{"approve": false, "message": "no refunds today"}'
SCRIPT = Path(__file__).resolve().parent / "openai_agents_team.py"

#: Inside a tool call (one of two the triage's first reply asked for, run concurrently),
#: between steps (the handoff to the analyst), inside the analyst's second model call.
TEAM_KILLS = ["tool add 2 3", "handoff", "model analyst 1"]


@pytest.fixture(scope="module")
def sdk() -> Iterator[Preloaded]:
    """Forks the processes from an interpreter that imported the OpenAI Agents SDK and the
    adapter once."""
    with for_agents() as preloaded:
        yield preloaded


@pytest.fixture(scope="module")
def team(
    tmp_path_factory: pytest.TempPathFactory, sdk: Preloaded
) -> tuple[Attempts, Attempts, Path]:
    folder = tmp_path_factory.mktemp("oa_team")
    return reference_and_killed(
        folder, lambda db: asyncio.run(oat.team(db)), oat.WHERE, SCRIPT, "team", TEAM_KILLS, sdk
    )


class TestAHandoffTeamKilledInAToolCallBetweenStepsAndInAModelCall:
    def test_each_kill_point_was_reached_and_killed_the_process(self, team: Any) -> None:
        _, killed, _ = team
        assert killed.returncodes == [-9, -9, -9, 0]
        assert "tool add 2 3" in killed.in_flight(0)
        assert "tool get_weather Paris" in killed.in_flight(0)  # its concurrent twin
        assert killed.in_flight(1) == set()  # at the handoff: nothing in flight
        assert "model triage 1" in killed.ended(1)
        assert "model analyst 0" not in killed.started(1)
        assert killed.in_flight(2) == {"model analyst 1"}

    def test_every_call_that_finished_ran_exactly_once_overall(self, team: Any) -> None:
        reference, killed, _ = team
        assert reran_after_finishing(killed) == []
        assert killed.ends() == reference.ends()
        assert set(killed.ends().values()) == {1}
        assert len(killed.ends()) == 7  # 4 model calls, 3 tool calls

    def test_only_the_calls_in_flight_at_a_kill_ran_again(self, team: Any) -> None:
        _, killed, _ = team
        assert reran_without_being_in_flight(killed) == []

    def test_the_final_output_and_agent_are_the_uninterrupted_runs(self, team: Any) -> None:
        reference, killed, _ = team
        assert killed.answer["answer"] == reference.answer["answer"]
        assert "330 m" in killed.answer["answer"] and "sunny in Paris" in killed.answer["answer"]
        assert killed.answer["last_agent"] == "analyst"

    def test_the_sdks_usage_counts_every_model_call_once_replayed_or_not(self, team: Any) -> None:
        reference, killed, _ = team
        assert killed.answer["usage"] == reference.answer["usage"] == 50 + 51 + 50 + 51

    def test_the_session_holds_the_history_once_as_the_uninterrupted_run_left_it(
        self, team: Any
    ) -> None:
        reference, killed, _ = team
        assert killed.answer["session"] == reference.answer["session"]
        assert len(killed.answer["session"]) == 10

    def test_lil_show_lists_the_calls_keyed_by_agent_and_call_id_with_their_usage(
        self, sdk: Preloaded, team: Any
    ) -> None:
        _, _, db = team
        shown = lil_show(db, "team")
        rows = {r["key"]: r for r in shown["rows"]}
        assert shown["run"]["state"] == "completed"
        assert shown["run"]["attempts"] == 4
        models = [k for k in rows if ".model:" in k]
        assert models == ["triage.model:1", "triage.model:2", "analyst.model:1", "analyst.model:2"]
        tools = sorted(k for k in rows if k.startswith("tool:"))
        assert tools == [
            "tool:add:triage_0_1",
            "tool:get_weather:triage_0_0",
            "tool:search:analyst_0_0",
        ]
        assert [rows[k]["input_tokens"] for k in models] == [50, 51, 50, 51]
        assert rows["tool:add:triage_0_1"]["result"] == "5"


def run_mode(
    sdk: Preloaded, mode: str, db: Path, side: Path, kill_at: str = "", *budget: str
) -> subprocess.CompletedProcess[str]:
    with side.open("a") as f:
        f.write("attempt\n")
    return sdk.run(SCRIPT, mode, str(db), str(side), kill_at, *budget)


class TestATeamWithABudget:
    def test_resumed_after_a_kill_it_counts_replayed_calls_once_and_stops_at_the_limit(
        self, sdk: Preloaded, tmp_path: Path
    ) -> None:
        db, side = tmp_path / "j.db", tmp_path / "side.txt"
        # Killed inside the analyst's second model call, after 57 + 58 + 57 = 172 tokens.
        assert run_mode(sdk, "team", db, side, "model analyst 1", "200").returncode == -9
        # Resumed under 200 tokens: the replayed calls count once (172, not 344), and the
        # killed call, which may have been billed, keeps what it reserved before it started
        # (no max_tokens: all that remained, 28): the bill cannot pass 200, so the
        # analyst's call is not made again.
        stopped = run_mode(sdk, "team", db, side, "", "200")
        assert stopped.returncode == 1
        assert "BudgetExceededError" in stopped.stderr
        assert "spent 172 tokens" in stopped.stderr
        assert "analyst.model:2 (28 tokens, $0.00, cut short by a dead process)" in stopped.stderr
        assert read_side(side)[-1] == []  # nothing was called, nothing paid
        shown = lil_show(db, "team")
        assert shown["run"]["state"] == "failed"


class TestASessionKilledInsideAModelCall:
    """One agent, one tool: its history is 4 items (input, call, output, answer)."""

    def test_the_journal_session_has_the_4_items_of_an_uninterrupted_run(
        self, sdk: Preloaded, tmp_path: Path
    ) -> None:
        killed = run_mode(
            sdk, "session", tmp_path / "j.db", tmp_path / "side.txt", "model helper 1"
        )
        assert killed.returncode == -signal.SIGKILL
        done = run_mode(sdk, "session", tmp_path / "j.db", tmp_path / "side.txt")
        answer = json.loads(done.stdout.splitlines()[-1])
        assert answer["answer"] == "helper: 42"
        assert len(answer["session"]) == 4
        ends = [w for lines in read_side(tmp_path / "side.txt") for e, w in lines if e == "end"]
        assert ends.count("tool add 40 2") == 1 and ends.count("model helper 0") == 1

    def test_killed_after_the_session_wrote_before_the_step_was_recorded_it_writes_once(
        self, sdk: Preloaded, tmp_path: Path
    ) -> None:
        # The second add (the tool turn's call and output) is in the session's file, its
        # step not in the journal: the rerun's step finds the items there and adds nothing.
        db, side = tmp_path / "j.db", tmp_path / "side.txt"
        killed = run_mode(sdk, "session", db, side, "session written 2")
        assert killed.returncode == -signal.SIGKILL
        done = run_mode(sdk, "session", db, side)
        answer = json.loads(done.stdout.splitlines()[-1])
        assert answer["session"] == [None, "function_call", "function_call_output", "message"]

    def test_the_sdks_own_sqlite_session_has_5_its_input_added_twice(
        self, sdk: Preloaded, tmp_path: Path
    ) -> None:
        # What the journal session is for: the same kill, the SDK's session alone.
        killed = run_mode(
            sdk, "session-sdk", tmp_path / "j.db", tmp_path / "side.txt", "model helper 1"
        )
        assert killed.returncode == -signal.SIGKILL
        done = run_mode(sdk, "session-sdk", tmp_path / "j.db", tmp_path / "side.txt")
        assert len(json.loads(done.stdout.splitlines()[-1])["session"]) == 5


def wait_for_line(side: Path, line: str, count: int, deadline: float = 60.0) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if side.exists() and side.read_text().splitlines().count(line) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{line!r} not seen {count} times in {side}: {side.read_text()}")


class TestAToolApprovalWaitedForDurably:
    def test_stopped_then_killed_while_waiting_it_resumes_with_the_answer_sent(
        self, sdk: Preloaded, tmp_path: Path
    ) -> None:
        db, side = tmp_path / "j.db", tmp_path / "side.txt"
        stopped = run_mode(sdk, "approve", db, side, "stop:0.2")
        assert stopped.returncode == 75, stopped.stderr  # RunWaiting: the run is left waiting
        assert "approve:refund:clerk_0_0" in stopped.stderr
        # Attempt 2 waits in the process; it is SIGKILLed there.
        with side.open("a") as f:
            f.write("attempt\n")
        waiting = sdk.start(SCRIPT, "approve", str(db), str(side), "wait", unbuffered=False)
        try:
            wait_for_line(side, "start waiting", 2)
            time.sleep(1.0)  # past the replayed model call and the state, into the wait
            assert waiting.running()
            os.kill(waiting.pid, signal.SIGKILL)
        finally:
            ended = waiting.wait()
        assert ended.returncode == -signal.SIGKILL
        assert lil_show(db, "refunds")["run"]["state"] in ("waiting", "crashed")
        sent = lil_forked("--db", str(db), "send", "refunds", "approve:refund:clerk_0_0", "true")
        assert sent.returncode == 0, sent.stderr
        done = run_mode(sdk, "approve", db, side)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout.splitlines()[-1])["answer"] == "clerk: refunded 30"
        lines = read_side(side)
        assert [w for e, w in lines[1] if e == "start"] == ["waiting"]  # waited, ran nothing
        ends = [w for attempt in lines for e, w in attempt if e == "end"]
        assert sorted(ends) == ["model clerk 0", "model clerk 1", "tool refund 30"]
        keys = [r["key"] for r in lil_show(db, "refunds")["rows"]]
        assert "approvals:1.state" in keys and "approve:refund:clerk_0_0" in keys

    def test_a_rejection_sent_is_what_the_model_is_told(
        self, sdk: Preloaded, tmp_path: Path
    ) -> None:
        db, side = tmp_path / "j.db", tmp_path / "side.txt"
        assert run_mode(sdk, "approve", db, side, "stop:0.1").returncode == 75
        sent = lil_forked("--db", str(db), "send", "refunds", "approve:refund:clerk_0_0", REJECTED)
        assert sent.returncode == 0, sent.stderr
        done = run_mode(sdk, "approve", db, side)
        assert json.loads(done.stdout.splitlines()[-1])["answer"] == "clerk: no refunds today"
        assert "start tool refund 30" not in side.read_text()


class TestTheModelWrapper:
    def test_a_response_comes_back_from_the_journal_equal_to_the_one_recorded(self) -> None:
        response = ModelResponse(
            output=[
                ResponseFunctionToolCall(
                    id="fc_1", call_id="c1", name="add", arguments="{}", type="function_call"
                )
            ],
            usage=Usage(requests=1, input_tokens=3, output_tokens=4, total_tokens=7),
            response_id="resp_1",
        )
        dumped = RESPONSE.dump_python(response, mode="json", by_alias=True)
        assert RESPONSE.validate_python(json.loads(json.dumps(dumped))) == response

    def test_called_with_no_journal_open_it_says_how_to_open_one(self, tmp_path: Path) -> None:
        oat.WHERE["side"] = str(tmp_path / "side.txt")
        agent = durable_agent(oat.helper())
        with pytest.raises(NoJournalError, match="with Journal"):
            asyncio.run(Runner.run(agent, "What is 40 + 2?"))

    def test_a_replay_for_another_prompt_is_refused(self, tmp_path: Path) -> None:
        oat.WHERE.update(side=str(tmp_path / "side.txt"), kill_at="")
        db = str(tmp_path / "j.db")

        async def ask(question: str) -> Any:
            async with Journal("ask", path=db, run="one"):
                return (await Runner.run(durable_agent(oat.helper()), question)).final_output

        assert asyncio.run(ask("What is 40 + 2?")) == "helper: 42"
        assert asyncio.run(ask("What is 40 + 2?")) == "helper: 42"  # replayed
        with pytest.raises(StepMismatchError) as refused:
            asyncio.run(ask("What is 1 + 1?"))
        said = str(refused.value)
        assert "agent 'helper': its model call 'helper.model:1'" in said
        assert "prompt ending 'What is 1 + 1?'" in said
        assert "its prompt, tools or options differ" in said and "new run" in said
        assert "lil reset ask --run " in said and "lil fork " in said

    def test_a_streamed_turn_with_no_journal_open_is_refused(self) -> None:
        # Streamed turns are journaled (tests/test_openai_agents_streams.py): not without one.
        model = DurableModel(oat.FakeModel("helper"))
        events = model.stream_response(
            None,
            "x",
            ModelSettings(),
            [],
            None,
            [],
            ModelTracing.DISABLED,
            previous_response_id=None,
            conversation_id=None,
            prompt=None,
        )

        async def first() -> Any:
            return await events.__anext__()

        with pytest.raises(NoJournalError, match=r"with Journal\(goal\)"):
            asyncio.run(first())


class TestTheCookbook:
    def test_killed_inside_a_tool_call_it_resumes_running_only_that_call_and_the_rest(
        self, sdk: Preloaded, tmp_path: Path
    ) -> None:
        example = SCRIPT.parent.parent / "examples" / "openai_agents_resume.py"
        db = str(tmp_path / "j.db")
        crashed = sdk.run(example, "--crash", "--db", db)
        assert crashed.returncode == -signal.SIGKILL
        assert ran(crashed.stdout) == [
            "triage model call 1",
            "look_up_order('A17')",
            "triage model call 2",
            "refunds model call 1",
            "refund('A17', 39.9)",
        ]
        resumed = sdk.run(example, "--db", db)
        assert resumed.returncode == 0, resumed.stderr
        assert ran(resumed.stdout) == ["refund('A17', 39.9)", "refunds model call 2"]
        assert "history: 8 items" in resumed.stdout
        assert "answer: order A17: a kettle, 39.90 EUR / refunded 39.90 EUR" in resumed.stdout


#: Its trials are a dozen programs run one after another: minutes on a loaded machine.
@pytest.mark.timeout(900)
class TestTheCrashTest:
    def test_the_example_killed_at_three_seeded_points_runs_and_pays_nothing_twice(
        self,
    ) -> None:
        """lil crashtest's machinery on examples/openai_agents_resume.py (an Agents SDK handoff):
        killed with SIGKILL at three of its kill points drawn with a seed, rerun until it
        finishes: no recorded call ran or was paid again, and each finished run answered as
        the uninterrupted one. Each run is a child forked from an interpreter that imported
        the framework, not letitloop (tests/forked_commands.py)."""
        sdk = (m for m in SDKS["agents"][0] if not m.startswith("letitloop"))
        with Preloaded(*sdk) as agents, ForkedCommands(agents) as forked:
            report = crashtest_example("openai_agents_resume", forked=forked)
        assert report.expected == (
            "history: 8 items\n"
            "answer: order A17: a kettle, 39.90 EUR / refunded 39.90 EUR for order A17"
        )
