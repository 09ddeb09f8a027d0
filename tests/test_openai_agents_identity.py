"""OpenAI Agents SDK with the adapter's default arguments (``durable_agent(agent, goal=)``,
``Runner.run(agent, input)``, no run name): the same request is never paid twice.

tests/openai_agents_trip.py in real child processes SIGKILLed at random points, 20
trials a scenario: killed after the agent returned (and maybe earlier too), two
copies of the request at once (one of them maybe killed), a two-turn
conversation killed in turn 2, and a changed prompt under a killed run. The
side file, outside the journal, shows every model and tool call that finished
(the hotel booking included) ending once over all the processes, and the
answer is the uninterrupted run's.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_kills import for_agents, read_side
from preloaded import Preloaded
from trial_count import TRIALS

SCRIPT = Path(__file__).resolve().parent / "openai_agents_trip.py"
MODES = ["plain", "session"]


def calls(city: str) -> list[str]:
    """Every call of one request, in order."""
    return [
        f"model {city} 0",
        f"tool weather {city}",
        f"model {city} 1",
        f"tool book {city}",
        f"model {city} 2",
    ]


ANSWER = "{0}: sunny in {0} / hotel booked in {0}"


@pytest.fixture(scope="module")
def forkers() -> Iterator[tuple[Preloaded, Preloaded]]:
    """Two handles on one forking interpreter: two copies of a program run at once, one
    started from each."""
    with for_agents() as one, one.sibling() as two:
        yield one, two


class Side:
    """One trial's folder: its journal, its side file, the exit statuses."""

    def __init__(self, folder: Path) -> None:
        self.db, self.side = folder / "j.db", folder / "side.txt"
        self.returncodes: list[int] = []

    def run(self, forker: Preloaded, mode: str, kill_at: str, *prompts: str) -> Any:
        with self.side.open("a") as f:
            f.write("attempt\n")
        done = forker.run(SCRIPT, mode, str(self.db), str(self.side), kill_at, *prompts)
        self.returncodes.append(done.returncode)
        if done.returncode == 0:
            return json.loads(done.stdout.splitlines()[-1])["answers"]
        assert done.returncode == -9, done.stderr
        return None

    def ends(self) -> Counter[str]:
        return Counter(w for a in read_side(self.side) for e, w in a if e == "end")

    def starts_in(self, attempt: int) -> list[str]:
        return [w for e, w in read_side(self.side)[attempt] if e == "start"]


def assert_each_call_ended_once(side: Side, *cities: str) -> None:
    ends = side.ends()
    expected = [c for city in cities for c in calls(city)]
    assert {c: ends[c] for c in expected} == dict.fromkeys(expected, 1), side.side.read_text()
    assert sum(ends.values()) == len(expected)


@pytest.mark.timeout(900)
class TestTheSameRequestIsNeverPaidTwice:
    def test_killed_after_the_agent_returned_the_rerun_pays_nothing(
        self, forkers: tuple[Preloaded, Preloaded], tmp_path: Path
    ) -> None:
        rng = random.Random("openai-agents-after-return")
        for n in range(TRIALS):
            (tmp_path / f"t{n}").mkdir()
            side, mode = Side(tmp_path / f"t{n}"), rng.choice(MODES)
            earlier = rng.choice(["", *calls("Paris")])
            for kill_at in [earlier, "after"] if earlier else ["after"]:
                assert side.run(forkers[0], mode, kill_at, "Paris") is None
            assert side.run(forkers[0], mode, "", "Paris") == [ANSWER.format("Paris")]
            assert side.starts_in(-1) == ["after"]  # the rerun called nothing
            assert_each_call_ended_once(side, "Paris")

    def test_two_copies_at_once_pay_once_and_both_answer(
        self, forkers: tuple[Preloaded, Preloaded], tmp_path: Path
    ) -> None:
        rng = random.Random("openai-agents-two-copies")
        for n in range(TRIALS):
            folder = tmp_path / f"t{n}"
            folder.mkdir()
            side, mode = Side(folder), rng.choice(MODES)
            kill_at = rng.choice(["", *calls("Paris")])
            with side.side.open("a") as f:
                f.write("attempt\n")
            args = (mode, str(side.db), str(side.side))
            first = forkers[0].start(SCRIPT, *args, kill_at, "Paris")
            second = forkers[1].start(SCRIPT, *args, "", "Paris")
            ended = [first.wait(), second.wait()]
            assert ended[1].returncode == 0, ended[1].stderr
            assert json.loads(ended[1].stdout.splitlines()[-1])["answers"] == [
                ANSWER.format("Paris")
            ]
            assert ended[0].returncode in (0, -9), ended[0].stderr
            assert_each_call_ended_once(side, "Paris")

    def test_a_conversation_killed_in_turn_2_replays_turn_1_and_resumes_turn_2(
        self, forkers: tuple[Preloaded, Preloaded], tmp_path: Path
    ) -> None:
        rng = random.Random("openai-agents-turns")
        for n in range(TRIALS):
            folder = tmp_path / f"t{n}"
            folder.mkdir()
            side, mode = Side(folder), "plain"  # turns continue by their input (runner.py)
            kill_at = rng.choice([*calls("Oslo"), "after"])
            assert side.run(forkers[0], mode, kill_at, "Paris", "Oslo") is None
            answers = side.run(forkers[0], mode, "", "Paris", "Oslo")
            assert answers == [ANSWER.format("Paris"), ANSWER.format("Oslo")]
            assert not any("Paris" in w for w in side.starts_in(-1))  # turn 1 replayed
            assert_each_call_ended_once(side, "Paris", "Oslo")

    def test_a_changed_prompt_is_a_new_run_and_the_killed_one_resumes_later(
        self, forkers: tuple[Preloaded, Preloaded], tmp_path: Path
    ) -> None:
        rng = random.Random("openai-agents-changed")
        for n in range(TRIALS):
            folder = tmp_path / f"t{n}"
            folder.mkdir()
            side, mode = Side(folder), rng.choice(MODES)
            assert side.run(forkers[0], mode, rng.choice(calls("Paris")), "Paris") is None
            assert side.run(forkers[0], mode, "", "Rome") == [ANSWER.format("Rome")]
            assert side.run(forkers[0], mode, "", "Paris") == [ANSWER.format("Paris")]
            assert side.returncodes == [-9, 0, 0]
            if mode == "plain":
                assert_each_call_ended_once(side, "Paris", "Rome")
            else:
                # In one session, Paris asked after Rome continues a conversation that has
                # moved on: a new request (runner.py); Rome's calls still ran once.
                ends = side.ends()
                assert all(ends[c] == 1 for c in calls("Rome")), side.side.read_text()
