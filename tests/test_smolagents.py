"""The smolagents adapter: a team killed in a tool call, between steps and in a managed
agent's model call resumes with every finished call replayed (tests/smolagents_team.py
is the script; its fakes count executions in a side file, not in the journal)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import smolagents_team
from agent_kills import (
    Attempts,
    KilledTeamPromises,
    TwoAgentsPromises,
    example_crashed_then_resumed,
    lil_show,
    reference_and_killed,
)
from preloaded import Preloaded
from smolagents import CodeAgent, Tool, tool
from smolagents.models import ChatMessage, MessageRole, Model
from smolagents.monitoring import LogLevel, TokenUsage

from letitloop import Journal, LetItLoopError
from letitloop.adapters.smolagents import AgentCalls, SmolagentsWALCallback, durable_agent
from letitloop.adapters.smolagents.agent import wrap_tool

SCRIPT = Path(__file__).resolve().parent / "smolagents_team.py"

#: Inside a tool call (one of two the manager's first reply asked for, run in
#: parallel), between the manager's first and second step, inside the managed
#: researcher's second model call (the team mid-conversation).
TEAM_KILLS = ["tool add 2 3", "step manager 1", "model researcher 1"]
#: Inside the second agent's second model call: the first agent had finished.
TWO_KILLS = ["model reviewer 1"]


@pytest.fixture(scope="module")
def sdk() -> Iterator[Preloaded]:
    """Forks the processes from an interpreter that imported smolagents once."""
    with Preloaded("smolagents") as preloaded:
        yield preloaded


@pytest.fixture(scope="module")
def team(
    tmp_path_factory: pytest.TempPathFactory, sdk: Preloaded
) -> tuple[Attempts, Attempts, Path]:
    folder = tmp_path_factory.mktemp("smolagents_team")
    return reference_and_killed(
        folder, smolagents_team.team, smolagents_team.WHERE, SCRIPT, "team", TEAM_KILLS, sdk
    )


@pytest.fixture(scope="module")
def two(
    tmp_path_factory: pytest.TempPathFactory, sdk: Preloaded
) -> tuple[Attempts, Attempts, Path]:
    folder = tmp_path_factory.mktemp("smolagents_two")
    return reference_and_killed(
        folder, smolagents_team.two, smolagents_team.WHERE, SCRIPT, "two", TWO_KILLS, sdk
    )


class TestATeamKilledInAToolCallBetweenStepsAndInAManagedAgentsModelCall(KilledTeamPromises):
    answer_holds = ("sunny in Paris", "330 m")

    def test_each_kill_point_was_reached_and_killed_the_process(self, team: Any) -> None:
        _, killed, _ = team
        assert killed.returncodes == [-9, -9, -9, 0]
        assert "tool add 2 3" in killed.in_flight(0)
        assert "tool get_weather Paris" not in killed.ended(0)  # its parallel twin
        assert "model researcher 1" in killed.in_flight(2)
        assert killed.started(1) & {"model manager 1"} == set()  # killed before it

    def test_lil_show_lists_the_model_and_tool_calls_with_their_usage(self, team: Any) -> None:
        _, _, db = team
        shown = lil_show(db, "team")
        rows = {r["key"]: r for r in shown["rows"]}
        assert shown["run"]["state"] == "completed"
        assert shown["run"]["attempts"] == 4
        models = [k for k in rows if k.rsplit("/", 1)[-1].split("#")[0].endswith(".model")]
        assert len(models) == 5  # the manager's 3, the researcher's 2
        for key in models:
            row = rows[key]
            assert row["input_tokens"] >= 100 and row["output_tokens"] >= 10
            assert row["cost"] == (row["input_tokens"] + 4 * row["output_tokens"]) / 1e6
        assert rows["team.model"]["model"] == "fake-manager"
        tools = [k for k in rows if ".tool:" in k]
        assert {k.split(".tool:")[1].split(":")[0] for k in tools} == {
            "get_weather",
            "add",
            "search",
            "final_answer",
        }
        nested = [k for k in rows if k.startswith("team.agent:researcher:") and "/" in k]
        assert len(nested) == 4  # the researcher's calls, keyed under the manager's call
        assert shown["usage"]["replayed"]["steps"] > 0 and shown["usage"]["replayed"]["cost"] > 0


class TestTwoAgentsOfOneScriptInOneJournal(TwoAgentsPromises):
    def test_both_answers_are_the_uninterrupted_runs(self, two: Any) -> None:
        reference, killed, db = two
        assert killed.answer == reference.answer
        keys = {r["key"] for r in lil_show(db, "two_agents")["rows"]}
        assert {"writer.model", "reviewer.model", "reviewer.model#3"} <= keys


# In-process: a CodeAgent runs its code, and so its tools, in a worker thread.

CALLED: list[str] = []


@tool
def double(x: int) -> int:
    """Twice a number.

    Args:
        x: the number
    """
    CALLED.append(f"double {x}")
    return 2 * x


@tool
def shout(text: str) -> str:
    """A text in capitals.

    Args:
        text: the text
    """
    CALLED.append(f"shout {text}")
    return text.upper()


class CodeModel(Model):
    """Writes code that calls both tools, then code that gives the final answer."""

    def generate(self, messages: list[Any], **kwargs: Any) -> ChatMessage:
        turn = sum(1 for m in messages if getattr(m, "role", None) == MessageRole.ASSISTANT)
        CALLED.append(f"model {turn}")
        code = (
            "a = double(x=21)\nb = shout(text='hi')\nprint(a, b)"
            if turn == 0
            else "final_answer(f'{double(x=1)} and done')"
        )
        return ChatMessage(
            role=MessageRole.ASSISTANT,
            content=f"Thought: go.\n<code>\n{code}\n</code>",
            token_usage=TokenUsage(input_tokens=5, output_tokens=3),
        )


def code_agent() -> CodeAgent:
    return CodeAgent(
        tools=[double, shout], model=CodeModel(), verbosity_level=LogLevel.OFF, max_steps=4
    )


class TestACodeAgent:
    def test_its_tools_called_from_its_code_are_replayed_with_its_model_calls(
        self, tmp_path: Path
    ) -> None:
        db = str(tmp_path / "j.db")
        CALLED.clear()
        first = durable_agent(code_agent(), "coder", path=db)
        with Journal("coder", path=db, run="once"):
            answer = first.run("Double 21 and shout hi")
        assert answer == "2 and done"
        assert CALLED == ["model 0", "double 21", "shout hi", "model 1", "double 1"]
        CALLED.clear()
        again = durable_agent(code_agent(), "coder", path=db)
        with Journal("coder", path=db, run="once"):  # a completed named run: all replays
            assert again.run("Double 21 and shout hi") == "2 and done"
        assert CALLED == []
        assert [m.__class__.__name__ for m in again.memory.steps] == [
            m.__class__.__name__ for m in first.memory.steps
        ]
        assert again.memory.steps[1].observations == first.memory.steps[1].observations


class TestAStepCallbackAlone:
    def test_it_refuses_an_agent_whose_calls_were_not_wrapped(self, tmp_path: Path) -> None:
        agent = CodeAgent(
            tools=[double],
            model=CodeModel(),
            verbosity_level=LogLevel.OFF,
            step_callbacks=[SmolagentsWALCallback("bare", path=str(tmp_path / "j.db"))],
        )
        with pytest.raises(LetItLoopError, match=r"wrap_agent\(agent\)"):
            agent.run("Double 21")


class TestTheExample:
    def test_killed_inside_a_tool_call_it_resumes_running_only_that_call_and_the_rest(
        self, tmp_path: Path
    ) -> None:
        crashed, resumed, printed = example_crashed_then_resumed(
            "smolagents_resume.py", tmp_path / "j.db"
        )
        assert crashed == [
            "model call 1",
            "get_weather('Lisbon')",
            "model call 2",
            "convert(120.0, 'USD')",
        ]
        assert resumed == ["convert(120.0, 'USD')", "model call 3"]
        assert "answer: Pack sunglasses. 22°C and sunny in Lisbon / 129.60 USD" in printed


class TestToolCallsWhoseArgumentsJsonCannotHold:
    def test_calls_told_apart_by_the_journal_are_two_calls_replayed_each_its_own(
        self, tmp_path: Path
    ) -> None:
        ran: list[frozenset[int]] = []

        class Count(Tool):
            name = "count"
            description = "How many numbers."
            inputs: ClassVar = {"numbers": {"type": "any", "description": "the numbers"}}
            output_type = "integer"

            def forward(self, numbers: Any) -> int:
                ran.append(numbers)
                return len(numbers)

        def twice(first: frozenset[int], second: frozenset[int]) -> list[int]:
            tool = Count()
            wrap_tool(tool, AgentCalls("t"))
            with Journal("sets", path=tmp_path / "j.db", run="once"):
                return [tool(first), tool(second)]

        assert twice(frozenset({1, 2}), frozenset({1, 2, 3})) == [2, 3]
        assert ran == [frozenset({1, 2}), frozenset({1, 2, 3})]
        ran.clear()
        assert twice(frozenset({1, 2, 3}), frozenset({1, 2})) == [3, 2]  # each its own answer
        assert ran == []
