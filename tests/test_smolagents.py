"""The smolagents adapter: a team killed in a tool call, between steps and in a managed
agent's model call resumes with every finished call replayed (tests/smolagents_team.py
is the script; its fakes count executions in a side file, not in the journal)."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
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
from crashtest_examples import crashtest_example
from forked_commands import ForkedCommands
from preloaded import Preloaded
from smolagents import CodeAgent, Tool, tool
from smolagents.models import ChatMessage, MessageRole, Model
from smolagents.monitoring import LogLevel, TokenUsage
from trial_count import TRIALS

from letitloop import Journal, LetItLoopError
from letitloop.adapters.smolagents import AgentCalls, SmolagentsWALCallback, durable_agent
from letitloop.adapters.smolagents.agent import wrap_tool

SCRIPT = Path(__file__).resolve().parent / "smolagents_team.py"
CODE_SCRIPT = Path(__file__).resolve().parent / "smolagents_code.py"

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
        self, sdk: Preloaded, tmp_path: Path
    ) -> None:
        crashed, resumed, printed = example_crashed_then_resumed(
            "smolagents_resume.py", tmp_path / "j.db", sdk
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


# A CodeAgent whose code reads the clock and draws random numbers (tests/smolagents_code.py),
# killed at random points: its code's output is the next prompt, so a finished snippet
# must never run again (it would print another time) and its variables must come back.

#: Trials (the issue asks for 20: tests/trial_count.py), each killed once or twice at points
#: drawn at random.
CODE_TRIALS = TRIALS


@dataclass
class CodeTrial:
    kills: list[str]
    returncodes: list[int] = field(default_factory=list)
    answer: str | None = None
    stderr: str = ""
    #: Per attempt, the side file's (event, what) lines.
    lines: list[list[tuple[str, str]]] = field(default_factory=list)

    def ends(self) -> Counter[str]:
        return Counter(w for lines in self.lines for e, w in lines if e == "end")

    def seen(self, step: int) -> str:
        """What the recorded execution of code step ``step`` saw: its last ``saw`` line."""
        return [
            w for lines in self.lines for e, w in lines if e == "saw" and w.startswith(f"{step} ")
        ][-1].split(" ", 1)[1]

    def code_run_again(self) -> list[str]:
        """Snippets that ran in an attempt after an earlier attempt had finished them (the
        model's next call started: the snippet's step was committed before it)."""
        wrong = []
        for n, lines in enumerate(self.lines):
            started = {w for e, w in lines if e == "start"}
            for step in (1, 2):
                if f"model {step}" in started:
                    for later in range(n + 1, len(self.lines)):
                        if ("start", f"tool stamp {step}") in self.lines[later]:
                            wrong.append(f"{self.kills}: snippet {step} ran again in {later + 1}")
        return wrong


@pytest.fixture(scope="module")
def code_trials(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[CodeTrial]]:
    """The trials' processes fork from an interpreter that imported smolagents and the
    adapter once (each child is a fresh process to letitloop all the same)."""
    # The modules of tests/test_agent_requests.py's smolagents forker (with the pygments
    # style its runs import at their first call): one forker kept idle serves both files.
    modules = ("smolagents", "letitloop.adapters.smolagents", "pygments.styles.gh_dark")
    with Preloaded(*modules, with_letitloop=True) as sdk:
        yield code_trials_run(tmp_path_factory, sdk)


def code_trials_run(tmp_path_factory: pytest.TempPathFactory, sdk: Preloaded) -> list[CodeTrial]:
    folder = tmp_path_factory.mktemp("smolagents_code")
    points = [
        "model 0",
        "tool stamp 1",
        "model 1",
        "tool get_weather Paris",
        "tool stamp 2",
        "model 2",
        "after return",
    ]
    draw = random.Random(49)
    trials = []
    for n in range(CODE_TRIALS):
        kills = sorted(draw.sample(points, draw.choice((1, 2))), key=points.index)
        trial = CodeTrial(kills)
        db, side = folder / f"t{n}.db", folder / f"t{n}.txt"
        for kill_at in [*kills, ""]:
            with side.open("a") as f:
                f.write("attempt\n")
            done = sdk.run(CODE_SCRIPT, str(db), str(side), kill_at)
            trial.returncodes.append(done.returncode)
            if done.returncode == 0:
                trial.answer = json.loads(done.stdout.strip().splitlines()[-1])["answer"]
            elif done.returncode != -9:
                trial.stderr = done.stderr[-3000:]
                break
        trial.lines = read_side(side)
        trials.append(trial)
    return trials


def read_side(side: Path) -> list[list[tuple[str, str]]]:
    lines: list[list[tuple[str, str]]] = []
    for line in side.read_text().splitlines():
        if line == "attempt":
            lines.append([])
        else:
            event, _, what = line.partition(" ")
            lines[-1].append((event, what))
    return lines


#: Its trials take a minute of a loaded machine, in the first test that uses them.
@pytest.mark.timeout(900)
class TestACodeAgentWhoseCodeReadsTheClockKilledAtRandom:
    def test_every_trial_resumed_to_an_answer_without_an_error(
        self, code_trials: list[CodeTrial]
    ) -> None:
        errors = [(t.kills, t.returncodes, t.stderr) for t in code_trials if t.returncodes[-1] != 0]
        assert errors == []
        killed = sum(code == -9 for t in code_trials for code in t.returncodes)
        assert killed >= CODE_TRIALS  # each trial killed its process at least once

    def test_no_model_call_ran_twice_and_each_ran(self, code_trials: list[CodeTrial]) -> None:
        for trial in code_trials:
            models = {w: c for w, c in trial.ends().items() if w.startswith("model ")}
            assert models == {"model 0": 1, "model 1": 1, "model 2": 1}, trial.kills

    def test_no_finished_snippet_ran_again(self, code_trials: list[CodeTrial]) -> None:
        assert [w for t in code_trials for w in t.code_run_again()] == []
        for trial in code_trials:
            assert trial.ends()["tool get_weather Paris"] == 1, trial.kills

    def test_the_answer_is_made_of_what_the_recorded_snippets_saw(
        self, code_trials: list[CodeTrial]
    ) -> None:
        wrong = []
        for trial in code_trials:
            now, roll = trial.seen(1).split()
            want = f"roll {roll} at {now}, later {trial.seen(2)}: sunny in Paris"
            if trial.answer != want:
                wrong.append((trial.kills, trial.answer, want))
        assert wrong == []


class Scripted(Model):
    """Writes ``codes[n]`` in its n-th reply; fails at ``fail_at`` (a crash, in process)."""

    def __init__(self, codes: list[str], fail_at: int | None = None) -> None:
        super().__init__(model_id="fake-scripted")
        self.codes, self.fail_at = codes, fail_at

    def generate(self, messages: list[Any], **kwargs: Any) -> ChatMessage:
        turn = sum(1 for m in messages if getattr(m, "role", None) == MessageRole.ASSISTANT)
        if turn == self.fail_at:
            raise RuntimeError("the model's provider is down")
        CALLED.append(f"model {turn}")
        return ChatMessage(
            role=MessageRole.ASSISTANT, content=f"Thought: go.\n<code>\n{self.codes[turn]}\n</code>"
        )


def scripted(db: Path, codes: list[str], fail_at: int | None = None) -> CodeAgent:
    agent = CodeAgent(
        tools=[double], model=Scripted(codes, fail_at), verbosity_level=LogLevel.OFF, max_steps=3
    )
    return durable_agent(agent, "coder", path=str(db), run="once")


class TestACodeSnippetThatFailed:
    def test_its_error_and_what_it_printed_replay_and_it_does_not_run_again(
        self, tmp_path: Path
    ) -> None:
        codes = [
            "import random\nprint(random.random())\ndouble(x=random.randint(1, 10**9))\n1 / 0",
            "final_answer('gave up')",
        ]
        CALLED.clear()
        first = scripted(tmp_path / "j.db", codes)
        assert first.run("Divide") == "gave up"
        ran = list(CALLED)
        assert len([c for c in ran if c.startswith("double")]) == 1
        CALLED.clear()
        again = scripted(tmp_path / "j.db", codes)
        assert again.run("Divide") == "gave up"
        assert CALLED == []  # the model, the code and the tool it called: all replayed
        assert str(again.memory.steps[1].error) == str(first.memory.steps[1].error)
        assert "division by zero" in str(again.memory.steps[1].error)
        assert again.memory.steps[1].observations == first.memory.steps[1].observations


class TestAVariableTheJournalCannotKeep:
    def test_a_resumed_snippet_that_uses_it_is_refused_naming_it_and_the_way_out(
        self, tmp_path: Path
    ) -> None:
        codes = ["handle = iter([1, 2])\nprint('made')", "print(next(handle))", "final_answer(1)"]
        with pytest.raises(Exception, match="provider is down"):
            scripted(tmp_path / "j.db", codes, fail_at=1).run("Iterate")
        CALLED.clear()
        with pytest.raises(LetItLoopError, match=r"'handle', a list_iterator .*coder\.code") as e:
            scripted(tmp_path / "j.db", codes).run("Iterate")
        assert "register" in str(e.value) and "lil reset" in str(e.value)
        assert CALLED == ["model 1"]  # the first snippet replayed; the model's next call ran

    def test_a_streamed_run_is_refused_the_same(self, tmp_path: Path) -> None:
        codes = ["handle = iter([1, 2])\nprint('made')", "print(next(handle))", "final_answer(1)"]
        with pytest.raises(Exception, match="provider is down"):
            list(scripted(tmp_path / "j.db", codes, fail_at=1).run("Iterate", stream=True))
        with pytest.raises(LetItLoopError, match=r"'handle', a list_iterator"):
            list(scripted(tmp_path / "j.db", codes).run("Iterate", stream=True))

    def test_a_resumed_snippet_that_makes_it_again_runs(self, tmp_path: Path) -> None:
        codes = [
            "handle = iter([1, 2])\nprint('made')",
            "handle = iter([3])\nprint(next(handle))",
            "final_answer('ok')",
        ]
        with pytest.raises(Exception, match="provider is down"):
            scripted(tmp_path / "j.db", codes, fail_at=1).run("Iterate")
        assert scripted(tmp_path / "j.db", codes).run("Iterate") == "ok"


#: Its trials are a dozen programs run one after another: minutes on a loaded machine.
@pytest.mark.timeout(900)
class TestTheCrashTest:
    def test_the_example_killed_at_three_seeded_points_runs_and_pays_nothing_twice(
        self, sdk: Preloaded
    ) -> None:
        """lil crashtest's machinery on examples/smolagents_resume.py (smolagents' CodeAgent):
        killed with SIGKILL at three of its kill points drawn with a seed, rerun until it
        finishes: no recorded call ran or was paid again, and each finished run answered as
        the uninterrupted one. Each run is a child forked from an interpreter that imported
        the framework, not letitloop (tests/forked_commands.py)."""
        with ForkedCommands(sdk) as forked:
            report = crashtest_example("smolagents_resume", forked=forked)
        assert report.expected == "answer: Pack sunglasses. 22°C and sunny in Lisbon / 129.60 USD"
