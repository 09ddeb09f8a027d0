"""The same request is never paid twice (issue 48), with each agent adapter's default
arguments: killed after the agent returned, two copies at once, a conversation killed in
its second turn, and a changed prompt, each over TRIALS random SIGKILLs in real children
(tests/request_trials.py; the scripts are tests/smolagents_team.py and
tests/autogen_team.py, whose fakes count the calls in a side file).

Each framework's trials run once per module (a fixture); the tests read their counts.
``python -m pytest tests/test_agent_requests.py -s`` prints them, per framework and
scenario.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import autogen_team
import pytest
import smolagents_team
from request_trials import TASK, TRIALS, Scenario, Trials, report

from letitloop import Journal
from letitloop.errors import StepMismatchError

HERE = Path(__file__).resolve().parent

#: Each framework: its script, and the modules its forkers import first (the framework,
#: the adapter, and what a run imports on its first call: each child would import it).
FRAMEWORKS: dict[str, tuple[Path, tuple[str, ...]]] = {
    "smolagents": (
        HERE / "smolagents_team.py",
        ("smolagents", "letitloop.adapters.smolagents", "pygments.styles.gh_dark"),
    ),
    "autogen": (
        HERE / "autogen_team.py",
        (
            "autogen_agentchat.teams",
            "autogen_agentchat.conditions",
            "autogen_ext.models.replay",
            "letitloop.adapters.autogen",
        ),
    ),
}

#: The frameworks whose scripts run the trials only (their entry points' arguments are
#: tested in their own files: tests/test_dspy.py, test_llamaindex.py, test_mcp_calls.py).
TRIALS_ONLY: dict[str, tuple[Path, tuple[str, ...]]] = {
    "dspy": (
        HERE / "dspy_requests.py",
        (
            "dspy",
            "dspy.utils.dummies",
            "dspy.clients.engines.dummy_engine",
            "letitloop.adapters.dspy",
        ),
    ),
    "llamaindex": (
        HERE / "llamaindex_requests.py",
        (
            "workflows",
            "workflows.representation",
            "workflows.runtime.verbose",
            "workflows.representation.validate",
            "letitloop.adapters.llamaindex",
        ),
    ),
    "mcp": (
        HERE / "mcp_requests.py",
        (
            "mcp",
            "mcp.server.mcpserver",
            "letitloop.mcp",
            # The server's logging (rich) and the client's check of a tool's result
            # (jsonschema), imported at the first call: about 110 ms of CPU a child.
            "rich.logging",
            "jsonschema.validators",
            "anyio._backends._asyncio",
        ),
    ),
}

#: Each framework's calls of a conversation's second turn (its kill points there).
TURN_TWO: dict[str, tuple[str, ...]] = {
    "smolagents": ("model asker 2", "tool add 40 2", "tool get_weather Lima"),
    "autogen": ("model asker 2", "tool add 40 2", "tool get_weather Lima"),
    "dspy": ("lm think Bergen", "tool forecast Bergen", "lm answer Bergen"),
    "llamaindex": ("fetch Bergen", "model Bergen", "summarize Bergen"),
    "mcp": ("quote Oslo", "book Oslo"),
}

SCENARIOS = ("killed after return", "two copies at once", "conversation", "changed prompt")


class Found(dict[str, Scenario]):
    """A framework's scenarios, each run when a test first asks for it (so that each
    test's timeout covers one scenario's trials), its counts printed then."""

    def __init__(self, framework: str, trials: Trials) -> None:
        super().__init__()
        self.framework, self.trials = framework, trials

    def __missing__(self, name: str) -> Scenario:
        run = {
            "killed after return": lambda: self.trials.killed_then_rerun("ask"),
            "two copies at once": self.trials.two_copies,
            "conversation": lambda: self.trials.killed_then_rerun("chat"),
            "changed prompt": self.trials.changed_prompt,
        }[name]
        self[name] = found = run()
        print(json.dumps(report(self.framework, {name: found})))
        return found


@pytest.fixture(scope="module", params=sorted({**FRAMEWORKS, **TRIALS_ONLY}))
def scenarios(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Found]]:
    framework = request.param
    script, modules = {**FRAMEWORKS, **TRIALS_ONLY}[framework]
    pytest.importorskip(modules[0])
    trials = Trials(script, tmp_path_factory.mktemp(f"requests_{framework}"), *modules)
    try:
        yield framework, Found(framework, trials)
    finally:
        trials.close()


@pytest.mark.parametrize("name", SCENARIOS)
class TestARequestMadeWithTheDefaults:
    def test_no_finished_call_is_paid_again(self, scenarios: tuple[str, Found], name: str) -> None:
        _, found = scenarios
        assert found[name].failures() == []
        assert found[name].paid_again() == 0

    def test_every_call_of_the_request_was_paid_once(
        self, scenarios: tuple[str, Found], name: str
    ) -> None:
        _, found = scenarios
        assert found[name].never_paid() == 0

    def test_every_answer_is_the_uninterrupted_runs(
        self, scenarios: tuple[str, Found], name: str
    ) -> None:
        _, found = scenarios
        assert found[name].wrong_answers() == []
        assert found[name].survivors() >= TRIALS

    def test_the_trials_killed_real_processes(
        self, scenarios: tuple[str, Found], name: str
    ) -> None:
        _, found = scenarios
        assert len(found[name].trials) == TRIALS
        assert found[name].summary()["killed"] >= TRIALS // 2


class TestKilledAfterTheAgentReturned:
    def test_the_rerun_pays_nothing(self, scenarios: tuple[str, Found]) -> None:
        _, found = scenarios
        after = [t for t in found["killed after return"].trials if t.kill_at == "after return"]
        assert after
        for trial in after:
            assert trial.starts == trial.ends  # nothing in flight, nothing run twice


class TestAConversationKilledInItsSecondTurn:
    def test_the_rerun_replays_turn_one_and_resumes_turn_two(
        self, scenarios: tuple[str, Found]
    ) -> None:
        framework, found = scenarios
        in_two = [
            t for t in found["conversation"].trials if t.kill_at.startswith(TURN_TWO[framework])
        ]
        assert in_two  # the draw reached the second turn
        for trial in in_two:
            turn_one = {w for w in trial.starts if not w.startswith(TURN_TWO[framework])}
            assert all(trial.starts[w] == 1 for w in turn_one), trial


# -- the adapters' arguments, in this process ----------------------------------------------


def _asker(framework: str, db: Path, side: Path, **options: Any) -> Any:
    """A fresh asker of ``framework``'s script, in this process, on journal ``db``."""
    os.environ["LETITLOOP_DB"] = str(db)
    script = smolagents_team if framework == "smolagents" else autogen_team
    script.WHERE.update(side=str(side), kill_at="")
    return script.asker(**options)


def _ask(framework: str, agent: Any, task: str) -> str:
    if framework == "smolagents":
        return str(agent.run(task))
    result = asyncio.run(agent.run(task=task))
    return str(result.messages[-1].to_text())


def _calls(side: Path) -> list[str]:
    return [ln for ln in side.read_text().splitlines() if ln.startswith("end ")]


@pytest.fixture(params=sorted(FRAMEWORKS))
def framework(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.delenv("LETITLOOP_DB", raising=False)
    return str(request.param)


class TestTheAdaptersRunArguments:
    def test_a_completed_request_asked_again_in_a_fresh_agent_is_not_paid(
        self, framework: str, tmp_path: Path
    ) -> None:
        db, side = tmp_path / "j.db", tmp_path / "side.txt"
        first = _ask(framework, _asker(framework, db, side), TASK)
        paid = _calls(side)
        assert _ask(framework, _asker(framework, db, side), TASK) == first
        assert _calls(side) == paid

    def test_fresh_asks_for_a_new_answer(self, framework: str, tmp_path: Path) -> None:
        db, side = tmp_path / "j.db", tmp_path / "side.txt"
        _ask(framework, _asker(framework, db, side), TASK)
        paid = len(_calls(side))
        _ask(framework, _asker(framework, db, side, fresh=True), TASK)
        assert len(_calls(side)) == 2 * paid

    def test_a_named_run_replays_forever_and_names_its_later_turns(
        self, framework: str, tmp_path: Path
    ) -> None:
        db, side = tmp_path / "j.db", tmp_path / "side.txt"
        _ask(framework, _asker(framework, db, side, run="order-1"), TASK)
        paid = _calls(side)
        _ask(framework, _asker(framework, db, side, run="order-1", reuse=None), TASK)
        assert _calls(side) == paid
        goal = "asker" if framework == "smolagents" else "autogen"
        with Journal(goal, run="order-1", path=db) as j:
            assert j.was_completed

    def test_a_changed_prompt_under_a_named_run_names_the_agent_the_call_and_the_ways_out(
        self, framework: str, tmp_path: Path
    ) -> None:
        db, side = tmp_path / "j.db", tmp_path / "side.txt"
        _ask(framework, _asker(framework, db, side, run="order-1"), TASK)
        with pytest.raises(StepMismatchError) as caught:
            _ask(framework, _asker(framework, db, side, run="order-1"), "Something else?")
        message = str(caught.value)
        assert "agent 'asker'" in message
        assert "model call" in message and "Something else?" in message
        assert "new run" in message and "lil reset" in message and "lil fork" in message
        assert caught.value.key is not None and caught.value.differences

    def test_reuse_and_fresh_together_are_refused_when_wrapping(
        self, framework: str, tmp_path: Path
    ) -> None:
        from letitloop.errors import MisuseError

        with pytest.raises(MisuseError, match="both"):
            _asker(framework, tmp_path / "j.db", tmp_path / "side.txt", reuse=60, fresh=True)
