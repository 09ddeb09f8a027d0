"""The AutoGen adapter: a Swarm killed in a tool call, between turns (after a handoff) and
in the second agent's model call resumes with every finished call replayed
(tests/autogen_team.py is the script; its fakes count executions in a side file)."""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import signal
import sqlite3
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import autogen_human
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
from autogen_agentchat.agents import AssistantAgent, CodeExecutorAgent, UserProxyAgent
from autogen_agentchat.conditions import TextMentionTermination
from autogen_agentchat.messages import BaseChatMessage
from autogen_agentchat.teams import RoundRobinGroupChat, SelectorGroupChat
from autogen_core import CancellationToken, FunctionCall
from autogen_core.models import CreateResult, RequestUsage, UserMessage
from autogen_core.tools import TextResultContent, ToolResult, ToolSchema, Workbench
from autogen_ext.code_executors.local import LocalCommandLineCodeExecutor
from autogen_ext.models.replay import ReplayChatCompletionClient
from crashtest_examples import crashtest_example
from forked_commands import ForkedCommands
from helpers import lil_forked
from preloaded import Preloaded
from trial_count import TRIALS

import letitloop
from letitloop import Journal, LetItLoopError
from letitloop.adapters.autogen import (
    AgentCalls,
    AutoGenStateSerializer,
    DurableChatCompletionClient,
    JournalHolder,
)
from letitloop.errors import NotWaitingError

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
        # The replayed calls took their replies off the replay client's queue, as they did.
        assert asyncio.run(ask_twice(["other", "others"])) == (["7", "42"], 2)

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
        self, sdk: Preloaded, tmp_path: Path
    ) -> None:
        crashed, resumed, printed = example_crashed_then_resumed(
            "autogen_resume.py", tmp_path / "j.db", sdk
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

        async def chat(replies: list[list[str]]) -> tuple[list[str], list[int]]:
            clients = [ReplayChatCompletionClient(r, model_info=MODEL_INFO) for r in replies]  # type: ignore[arg-type]
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

        first = asyncio.run(chat([["hello from a"], ["b here, TERMINATE"], ["a", "b"]]))
        assert first[0] == ["talk", "hello from a", "b here, TERMINATE"]
        assert first[1][2] >= 1  # the selector was asked
        # The completed named run: everything replays (other replies are never given),
        # and each replay client's queue is where the first run left its own.
        again = asyncio.run(chat([["other"], ["others, TERMINATE"], ["b", "a"]]))
        assert again == first
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
        with pytest.warns(UserWarning):  # AutoGen's own: it would run code unreviewed
            coder = CodeExecutorAgent("coder", code_executor=LocalCommandLineCodeExecutor())
        team = RoundRobinGroupChat([assistant, coder])
        serializer = AutoGenStateSerializer("mixed", path=str(tmp_path / "j.db"))
        with pytest.raises(LetItLoopError, match=r"got CodeExecutorAgent 'coder'"):
            serializer.wrap_team(team)
        assert assistant._model_client is inner


# A team with a person in it (tests/autogen_human.py): the team stops to wait for the
# person's answer, which comes by letitloop.send or lil send while no process runs.

HUMAN = Path(__file__).resolve().parent / "autogen_human.py"

#: Trials (the issue asks for 20: tests/trial_count.py), each killed once or twice at points
#: drawn at random: inside the writer's model calls, while a process waits for the person,
#: after return.
HUMAN_TRIALS = TRIALS
HUMAN_KILLS = ["model writer 0", "waiting", "model writer 1", "after return"]


@dataclass
class HumanTrial:
    kills: list[str]
    #: Each process's exit status: 0, 75 (stopped to wait), -9 (killed).
    returncodes: list[int] = field(default_factory=list)
    #: What each process that stopped to wait wrote on stderr.
    stops: list[str] = field(default_factory=list)
    #: The waits answered, in order.
    sent: list[str] = field(default_factory=list)
    answer: Any = None
    failure: str = ""
    ends: Counter[str] = field(default_factory=Counter)
    #: Processes killed while they waited for the person.
    killed_waiting: int = 0


def waiting(db: Path) -> bool:
    """Whether the journal has a wait whose process waits (read from outside the writer)."""
    try:
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)) as c:
            (table,) = c.execute(
                "SELECT journal_table FROM goals WHERE goal = 'autogen'"
            ).fetchone()
            row = c.execute(
                f"SELECT count(*) FROM {table} WHERE kind = 'wait' AND status = 'waiting'"
            ).fetchone()
            return bool(row[0])
    except (sqlite3.Error, TypeError):  # not made yet
        return False


def human_trial(sdk: Preloaded, folder: Path, kills: list[str], by_lil: bool) -> HumanTrial:
    trial = HumanTrial(list(kills))
    db, side = folder / "journal.db", folder / "side.txt"
    side.touch()
    for _ in range(10):
        kill_at = kills[0] if kills else ""
        if kill_at == "waiting":
            child = sdk.start(HUMAN, str(db), str(side), "", "60")
            deadline = time.monotonic() + 60
            while not waiting(db) and child.running() and time.monotonic() < deadline:
                time.sleep(0.02)
            trial.killed_waiting += waiting(db)
            os.kill(child.pid, signal.SIGKILL)
            done = child.wait()
        else:
            done = sdk.run(HUMAN, str(db), str(side), kill_at)
        trial.returncodes.append(done.returncode)
        if done.returncode == -9:
            kills.pop(0)
        elif done.returncode == 75:
            trial.stops.append(done.stderr)
            name = re.findall(r"stopped to wait for '([^']+)'", done.stderr)[0]
            value = autogen_human.ANSWERS[name]
            if by_lil:
                sent = lil_forked("--db", str(db), "send", "autogen", name, json.dumps(value))
                assert sent.returncode == 0, sent.stderr
            else:
                letitloop.send("autogen", name, value, path=db)
            trial.sent.append(name)
        elif done.returncode == 0:
            trial.answer = json.loads(done.stdout.strip().splitlines()[-1])
            break
        else:
            trial.failure = f"exit {done.returncode}: {done.stderr[-3000:]}"
            break
    trial.ends = Counter(
        line.split(" ", 1)[1] for line in side.read_text().splitlines() if line.startswith("end ")
    )
    return trial


@pytest.fixture(scope="module")
def human_trials(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[HumanTrial]]:
    """The trials' processes fork from an interpreter that imported AutoGen, its console
    and the adapter once (each child is a fresh process to letitloop all the same)."""
    draw = random.Random(4949)
    trials = []
    modules = (
        "autogen_agentchat.teams",
        "autogen_agentchat.ui",
        "autogen_agentchat.conditions",
        "autogen_ext.models.replay",
    )
    with Preloaded(*modules, "letitloop.adapters.autogen", with_letitloop=True) as forker:
        for n in range(HUMAN_TRIALS):
            kills = sorted(draw.sample(HUMAN_KILLS, draw.choice((1, 2))), key=HUMAN_KILLS.index)
            folder = tmp_path_factory.mktemp(f"autogen_human{n}")
            trials.append(human_trial(forker, folder, kills, by_lil=n % 10 == 0))
    yield trials


#: Its trials take a minute or two of a loaded machine, in the first test that uses them.
@pytest.mark.timeout(900)
class TestATeamWithAPersonInItKilledAroundItsWaits:
    expected: ClassVar = {
        "answer": ["Draft 0: Write a 4-line poem about the ocean.", "Draft 1: Shorter, please."],
        "stop_reason": "Text 'APPROVE' mentioned",
    }

    def test_every_trial_ends_with_the_uninterrupted_runs_answer(
        self, human_trials: list[HumanTrial]
    ) -> None:
        assert [(t.kills, t.failure) for t in human_trials if t.failure] == []
        assert [t.kills for t in human_trials if t.answer != self.expected] == []

    def test_the_processes_were_killed_and_stopped_to_wait(
        self, human_trials: list[HumanTrial]
    ) -> None:
        codes = Counter(code for t in human_trials for code in t.returncodes)
        assert set(codes) == {0, 75, -9}
        assert codes[-9] >= HUMAN_TRIALS  # at least one kill per trial
        assert codes[0] == HUMAN_TRIALS
        assert sum(t.killed_waiting for t in human_trials) >= 3

    def test_each_answer_was_asked_once_and_sent_once(self, human_trials: list[HumanTrial]) -> None:
        for trial in human_trials:
            assert trial.sent == ["user_proxy.input:1", "user_proxy.input:2"], trial.kills

    def test_no_model_call_that_finished_was_made_again(
        self, human_trials: list[HumanTrial]
    ) -> None:
        for trial in human_trials:
            models = {w: c for w, c in trial.ends.items() if w.startswith("model ")}
            assert models == {"model writer 0": 1, "model writer 1": 1}, trial.kills

    def test_a_process_that_stops_to_wait_says_so_in_one_line(
        self, human_trials: list[HumanTrial]
    ) -> None:
        for stop in (s for t in human_trials for s in t.stops):
            lines = stop.strip().splitlines()
            assert len(lines) == 1, stop
            assert re.fullmatch(
                r"letitloop: run \w+ of goal 'autogen' stopped to wait for 'user_proxy\.input:\d' "
                r"\(user_proxy's answer to the team "
                r"\(AutoGen's prompt: 'Enter your response:'\)\); send it with: "
                r"lil send \w+ user_proxy\.input:\d '\"your answer\"', then run "
                r"the program again to resume",
                lines[0],
            ), lines[0]


class TestAutoGensReplayClientAfterAResume:
    def test_its_next_reply_is_the_one_after_the_replayed_calls(self, tmp_path: Path) -> None:
        """AutoGen's own test double, unchanged: a queue of replies. The journal answers the
        replayed calls, and the adapter takes their replies off the queue too."""
        db = tmp_path / "j.db"

        async def run() -> list[str]:
            client = ReplayChatCompletionClient(["Draft 1", "Draft 2"])
            assistant = AssistantAgent("assistant", model_client=client)
            user_proxy = UserProxyAgent("user_proxy", input_func=input)
            team = RoundRobinGroupChat(
                [assistant, user_proxy], termination_condition=TextMentionTermination("APPROVE")
            )
            AutoGenStateSerializer(path=str(db)).wrap_team(team)
            result = await team.run(task="Write a poem.")
            return [m.to_text() for m in result.messages if m.source == "assistant"]

        with pytest.raises(SystemExit) as stopped:
            asyncio.run(run())
        assert stopped.value.code == 75
        with pytest.raises(NotWaitingError, match="string"):  # the answer is text
            letitloop.send("autogen", "user_proxy.input:1", 42, path=db)
        letitloop.send("autogen", "user_proxy.input:1", "Again.", path=db)
        with pytest.raises(SystemExit):
            asyncio.run(run())  # "Draft 1" replayed from the journal, "Draft 2" from the queue
        letitloop.send("autogen", "user_proxy.input:2", "APPROVE", path=db)
        assert asyncio.run(run()) == ["Draft 1", "Draft 2"]

    def test_a_subclass_that_chooses_its_replies_is_not_called_on_replay(
        self, tmp_path: Path
    ) -> None:
        made: list[str] = []

        class Chooser(ReplayChatCompletionClient):
            async def create(self, messages: Any, **kwargs: Any) -> CreateResult:
                made.append(str(messages[-1].content))
                self._current_index = 0
                return await super().create(messages, **kwargs)

        db = str(tmp_path / "j.db")
        prompt = [UserMessage(content="Pick a number", source="user")]

        async def ask() -> str:
            client = DurableChatCompletionClient(
                Chooser(["7"], model_info=MODEL_INFO),  # type: ignore[arg-type]
                AgentCalls("picker", JournalHolder()),
            )
            with Journal("picker", path=db, run="once"):
                return str((await client.create(prompt)).content)

        assert asyncio.run(ask()) == "7" and asyncio.run(ask()) == "7"
        assert made == ["Pick a number"]


class TestTheHumanExample:
    def test_it_stops_for_each_answer_and_ends_with_the_second_draft(
        self, tmp_path: Path, sdk: Preloaded
    ) -> None:
        example = Path(__file__).resolve().parent.parent / "examples" / "autogen_human.py"
        db = str(tmp_path / "j.db")
        first = sdk.run(example, "--db", db)
        assert first.returncode == 75, first.stderr
        assert first.stderr.count("\n") == 1 and "lil send" in first.stderr
        sent = lil_forked("--db", db, "send", "poem", "user_proxy.input:1", '"Shorter, please."')
        assert sent.returncode == 0, sent.stderr
        second = sdk.run(example, "--db", db)
        assert second.returncode == 75 and "'user_proxy.input:2'" in second.stderr
        letitloop.send("poem", "user_proxy.input:2", "APPROVE", path=db)
        last = sdk.run(example, "--db", db)
        assert last.returncode == 0, last.stderr
        assert "approved poem:\nThe sea breathes in and out again;" in last.stdout
        shown = lil_forked("--db", db, "show", "poem").stdout
        endings = [ln.split(" — ")[-1] for ln in shown.splitlines() if " — " in ln]
        assert endings == [
            "stopped to wait for 'user_proxy.input:1'",
            "stopped to wait for 'user_proxy.input:2'",
            "completed",
        ], shown


#: Its trials are a dozen programs run one after another: minutes on a loaded machine.
@pytest.mark.timeout(900)
class TestTheCrashTest:
    def test_the_example_killed_at_three_seeded_points_runs_and_pays_nothing_twice(
        self,
    ) -> None:
        """lil crashtest's machinery on examples/autogen_resume.py (AutoGen's Swarm):
        killed with SIGKILL at three of its kill points drawn with a seed, rerun until it
        finishes: no recorded call ran or was paid again, and each finished run answered as
        the uninterrupted one. Each run is a child forked from an interpreter that imported
        the framework, not letitloop (tests/forked_commands.py)."""
        modules = (
            "autogen_agentchat.teams",
            "autogen_agentchat.conditions",
            "autogen_ext.models.replay",
        )
        with Preloaded(*modules) as autogen, ForkedCommands(autogen) as forked:
            report = crashtest_example("autogen_resume", forked=forked)
        assert report.expected == (
            "answer: Pack sunglasses. 22°C and sunny in Lisbon / 129.60 USD TERMINATE"
        )
