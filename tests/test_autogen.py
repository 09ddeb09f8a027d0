"""The AutoGen adapter: a Swarm killed in a tool call, between turns (after a handoff) and
in the second agent's model call resumes with every finished call replayed
(tests/autogen_team.py is the script; its fakes count executions in a side file)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import autogen_team
import pytest
from agent_kills import (
    Attempts,
    KilledTeamPromises,
    TwoAgentsPromises,
    example_crashed_then_resumed,
    lil_show,
    reference_and_killed,
)
from autogen_agentchat.agents import AssistantAgent, UserProxyAgent
from autogen_agentchat.conditions import TextMentionTermination
from autogen_agentchat.messages import BaseChatMessage
from autogen_agentchat.teams import RoundRobinGroupChat, SelectorGroupChat
from autogen_core import CancellationToken, FunctionCall
from autogen_core.models import CreateResult, RequestUsage, UserMessage
from autogen_core.tools import TextResultContent, ToolResult, ToolSchema, Workbench
from autogen_ext.models.replay import ReplayChatCompletionClient
from preloaded import Preloaded

from letitloop import Journal, LetItLoopError
from letitloop.adapters.autogen import (
    AgentCalls,
    AutoGenStateSerializer,
    DurableChatCompletionClient,
    JournalHolder,
)

SCRIPT = Path(__file__).resolve().parent / "autogen_team.py"

#: Inside a tool call (one of two the planner's first reply asked for, run
#: concurrently), between turns (the team's termination check after the
#: planner's handoff), inside the analyst's second model call.
TEAM_KILLS = ["tool add 2 3", "handoff", "model analyst 1"]
#: Inside the second agent's second model call: the first agent had finished.
TWO_KILLS = ["model reviewer 1"]

MODEL_INFO = {
    "vision": False,
    "function_calling": True,
    "json_output": False,
    "family": "fake",
    "structured_output": False,
}


@pytest.fixture(scope="module")
def sdk() -> Iterator[Preloaded]:
    """Forks the processes from an interpreter that imported AutoGen and the adapter once."""
    with Preloaded(
        "autogen_agentchat.teams",
        "autogen_agentchat.conditions",
        "autogen_ext.models.replay",
        "letitloop.adapters.autogen",
        with_letitloop=True,
    ) as preloaded:
        yield preloaded


@pytest.fixture(scope="module")
def team(
    tmp_path_factory: pytest.TempPathFactory, sdk: Preloaded
) -> tuple[Attempts, Attempts, Path]:
    folder = tmp_path_factory.mktemp("autogen_team")
    return reference_and_killed(
        folder,
        lambda db: asyncio.run(autogen_team.team(db)),
        autogen_team.WHERE,
        SCRIPT,
        "team",
        TEAM_KILLS,
        sdk,
    )


@pytest.fixture(scope="module")
def two(
    tmp_path_factory: pytest.TempPathFactory, sdk: Preloaded
) -> tuple[Attempts, Attempts, Path]:
    folder = tmp_path_factory.mktemp("autogen_two")
    return reference_and_killed(
        folder,
        lambda db: asyncio.run(autogen_team.two(db)),
        autogen_team.WHERE,
        SCRIPT,
        "two",
        TWO_KILLS,
        sdk,
    )


class TestASwarmKilledInAToolCallBetweenTurnsAndInAModelCall(KilledTeamPromises):
    answer_holds = ("330 m",)

    def test_each_kill_point_was_reached_and_killed_the_process(self, team: Any) -> None:
        _, killed, _ = team
        assert killed.returncodes == [-9, -9, -9, 0]
        assert "tool add 2 3" in killed.in_flight(0)
        assert "tool get_weather Paris" not in killed.ended(0)  # its parallel twin
        assert killed.in_flight(1) == set()  # between turns: nothing in flight
        assert "model planner 1" in killed.ended(1)
        assert "model analyst 0" not in killed.started(1)
        assert "model analyst 1" in killed.in_flight(2)

    def test_lil_show_lists_the_model_and_tool_calls_with_their_usage(self, team: Any) -> None:
        _, _, db = team
        shown = lil_show(db, "swarm")
        rows = {r["key"]: r for r in shown["rows"]}
        assert shown["run"]["state"] == "completed"
        assert shown["run"]["attempts"] == 4
        keys = list(rows)
        # The two tool calls of one reply ran at once: their rows are in the order they returned.
        keys[1:3] = sorted(keys[1:3])
        assert keys == [
            "planner.model:1",
            "planner.model:1.tool:add:call_0_1",
            "planner.model:1.tool:get_weather:call_0_0",
            "planner.model:2",
            "analyst.model:1",
            "analyst.model:1.tool:search:call_0_0",
            "analyst.model:2",
        ]
        for key in ("planner.model:1", "planner.model:2", "analyst.model:1", "analyst.model:2"):
            row = rows[key]
            assert row["input_tokens"] > 0 and row["output_tokens"] > 0
            assert row["cost"] == (row["input_tokens"] + 4 * row["output_tokens"]) / 1e6
            assert row["model"] == "fake"
        assert shown["usage"]["replayed"]["steps"] > 0 and shown["usage"]["replayed"]["cost"] > 0


class TestTwoAgentsOfOneScriptInOneJournal(TwoAgentsPromises):
    def test_both_answers_are_the_uninterrupted_runs(self, two: Any) -> None:
        reference, killed, db = two
        assert killed.answer == reference.answer
        keys = {r["key"] for r in lil_show(db, "two_agents")["rows"]}
        assert {"writer.model:1", "reviewer.model:1", "reviewer.model:3"} <= keys


class TestTwoIdenticalPromptsInOneRun:
    def test_each_gets_its_own_recorded_answer_on_replay(self, tmp_path: Path) -> None:
        # Not content-addressed (as AutoGen's ChatCompletionCache is): the n-th
        # call replays the n-th answer, though both prompts are the same.
        db = str(tmp_path / "j.db")
        prompt = [UserMessage(content="Pick a number", source="user")]

        async def ask_twice(replies: list[str]) -> tuple[list[str], int]:
            inner = ReplayChatCompletionClient(replies, model_info=MODEL_INFO)  # type: ignore[arg-type]
            client = DurableChatCompletionClient(inner, AgentCalls("picker", JournalHolder()))
            with Journal("picker", path=db, run="once"):
                answers = [await client.create(prompt), await client.create(prompt)]
            return [str(a.content) for a in answers], inner._current_index

        assert asyncio.run(ask_twice(["7", "42"])) == (["7", "42"], 2)
        assert asyncio.run(ask_twice(["other", "others"])) == (["7", "42"], 0)

    def test_a_replayed_result_is_a_create_result_again(self, tmp_path: Path) -> None:
        db = str(tmp_path / "j.db")

        async def ask() -> CreateResult:
            inner = ReplayChatCompletionClient(["hello"], model_info=MODEL_INFO)  # type: ignore[arg-type]
            client = DurableChatCompletionClient(inner, AgentCalls("a", JournalHolder()))
            with Journal("g", path=db, run="once"):
                return await client.create([UserMessage(content="hi", source="user")])

        first, again = asyncio.run(ask()), asyncio.run(ask())
        assert isinstance(again, CreateResult) and again == first


class TestAnAgentRunThroughTheSerializer:
    def test_its_run_opens_and_completes_a_journal_run_of_the_session(self, tmp_path: Path) -> None:
        db = tmp_path / "j.db"
        inner = ReplayChatCompletionClient(["done"], model_info=MODEL_INFO)  # type: ignore[arg-type]
        agent = AutoGenStateSerializer("solo", path=str(db)).wrap_agent(
            AssistantAgent("solo", model_client=inner)
        )
        result = asyncio.run(agent.run(task="go"))
        assert result.messages[-1].to_text() == "done"
        shown = lil_show(db, "solo")
        assert shown["run"]["state"] == "completed"
        assert [r["key"] for r in shown["rows"]] == ["solo.model:1"]

    def test_its_configuration_still_dumps_with_the_wrapped_model_client(
        self, tmp_path: Path
    ) -> None:
        inner = ReplayChatCompletionClient(["done"], model_info=MODEL_INFO)  # type: ignore[arg-type]
        agent = AutoGenStateSerializer("solo", path=str(tmp_path / "j.db")).wrap_agent(
            AssistantAgent("solo", model_client=inner)
        )
        dumped = agent.dump_component().config["model_client"]
        assert dumped == inner.dump_component().model_dump()


class TestTheExample:
    def test_killed_inside_a_model_call_after_a_handoff_it_resumes_running_only_that_call(
        self, tmp_path: Path
    ) -> None:
        crashed, resumed, printed = example_crashed_then_resumed(
            "autogen_resume.py", tmp_path / "j.db"
        )
        assert crashed == [
            "planner model call 1",
            "get_weather('Lisbon')",
            "planner model call 2",
            "analyst model call 1",
            "convert(120.0, 'USD')",
            "analyst model call 2",
        ]
        assert resumed == ["analyst model call 2"]
        assert "answer: Pack sunglasses. 22°C and sunny in Lisbon / 129.60 USD" in printed


class TestASelectorGroupChat:
    def test_its_choices_of_speaker_are_model_calls_replayed_too(self, tmp_path: Path) -> None:
        db = str(tmp_path / "j.db")

        async def chat() -> tuple[list[str], list[int]]:
            clients = [
                ReplayChatCompletionClient(["hello from a"], model_info=MODEL_INFO),  # type: ignore[arg-type]
                ReplayChatCompletionClient(["b here, TERMINATE"], model_info=MODEL_INFO),  # type: ignore[arg-type]
                ReplayChatCompletionClient(["a", "b"], model_info=MODEL_INFO),  # type: ignore[arg-type]
            ]
            team = SelectorGroupChat(
                [
                    AssistantAgent("a", model_client=clients[0], description="speaks first"),
                    AssistantAgent("b", model_client=clients[1], description="speaks last"),
                ],
                model_client=clients[2],
                termination_condition=TextMentionTermination("TERMINATE"),
            )
            AutoGenStateSerializer("chat", path=db).wrap_team(team)
            with Journal("chat", path=db, run="once"):
                result = await team.run(task="talk")
            texts = [m.to_text() for m in result.messages if isinstance(m, BaseChatMessage)]
            return texts, [c._current_index for c in clients]

        first = asyncio.run(chat())
        assert first[0] == ["talk", "hello from a", "b here, TERMINATE"]
        assert first[1][2] >= 1  # the selector was asked
        again = asyncio.run(chat())  # the completed named run: everything replays
        assert again == (first[0], [0, 0, 0])
        keys = [r["key"] for r in lil_show(tmp_path / "j.db", "chat")["rows"]]
        assert "SelectorGroupChat.selector.model:1" in keys


class RemoteWorkbench(Workbench):
    """A workbench of one tool that is not a StaticWorkbench (as an MCP workbench is not)."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    async def list_tools(self) -> list[ToolSchema]:
        word = {"word": {"type": "string"}}
        schema: ToolSchema = {
            "name": "lookup",
            "description": "Look a word up.",
            "parameters": {"type": "object", "properties": word},
        }
        return [schema]

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        cancellation_token: CancellationToken | None = None,
        call_id: str | None = None,
    ) -> ToolResult:
        self.calls.append(f"{name} {dict(arguments or {})}")
        word = (arguments or {}).get("word")
        return ToolResult(name=name, result=[TextResultContent(content=f"{word}: a fruit")])

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def reset(self) -> None:
        pass

    async def save_state(self) -> Mapping[str, Any]:
        return {}

    async def load_state(self, state: Mapping[str, Any]) -> None:
        pass


class TestAnAgentWithAnotherKindOfWorkbench:
    def test_its_call_tool_results_are_replayed_as_tool_results(self, tmp_path: Path) -> None:
        db = str(tmp_path / "j.db")
        lookup = CreateResult(
            finish_reason="function_calls",
            content=[FunctionCall(id="c1", name="lookup", arguments='{"word": "apple"}')],
            usage=RequestUsage(prompt_tokens=5, completion_tokens=5),
            cached=False,
        )

        async def ask(calls: list[str]) -> str:
            inner = ReplayChatCompletionClient([lookup], model_info=MODEL_INFO)  # type: ignore[arg-type]
            agent = AssistantAgent("reader", model_client=inner, workbench=RemoteWorkbench(calls))
            AutoGenStateSerializer("reader", path=db).wrap_agent(agent)
            with Journal("reader", path=db, run="once"):
                result = await agent.run(task="What is an apple?")
            return result.messages[-1].to_text()

        first: list[str] = []
        assert asyncio.run(ask(first)) == "apple: a fruit"
        assert first == ["lookup {'word': 'apple'}"]
        again: list[str] = []
        assert asyncio.run(ask(again)) == "apple: a fruit"
        assert again == []
        keys = [r["key"] for r in lil_show(tmp_path / "j.db", "reader")["rows"]]
        assert keys == ["reader.model:1", "reader.model:1.tool:lookup:c1"]


class TestATeamWithAnAgentWhoseCallsCannotBeJournaled:
    def test_it_is_refused_before_any_participant_is_wrapped(self, tmp_path: Path) -> None:
        inner = ReplayChatCompletionClient(["hi"], model_info=MODEL_INFO)  # type: ignore[arg-type]
        assistant = AssistantAgent("helper", model_client=inner)
        team = RoundRobinGroupChat([assistant, UserProxyAgent("human")])
        serializer = AutoGenStateSerializer("mixed", path=str(tmp_path / "j.db"))
        with pytest.raises(LetItLoopError, match=r"got UserProxyAgent 'human'"):
            serializer.wrap_team(team)
        assert assistant._model_client is inner
