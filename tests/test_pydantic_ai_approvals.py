"""Pydantic AI: a person's approval is bound to the exact tool call and the call runs once.

The documented wait recipe (tests/pydantic_ai_desk.py) in real child processes,
SIGKILLed at random points before the wait (inside the model call, inside the
approval request) and after the approval (right after it, inside the refund
before and after the money went out, inside the last model call), 20 trials a
mode. In every trial an approval naming another call is refused when it is
sent (the run untouched), the stop is one line naming the exact command, and
the side file, outside the journal, shows one approval request and one refund.
"""

from __future__ import annotations

import json
import os
import random
import shlex
import sqlite3
import subprocess
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pydantic_ai_desk as desk
import pytest
from agent_kills import read_side
from helpers import lil_forked
from preloaded import Preloaded, for_sdk
from trial_count import TRIALS

import letitloop

pytest.importorskip("pydantic_ai.durable_exec")

SCRIPT = Path(__file__).resolve().parent / "pydantic_ai_desk.py"
#: How the program runs the agent: asyncio.run(agent.run(...)), agent.run_sync(...).
MODES = ["async", "sync"]
RIGHT = '{"approvals": {"call-1": true}}'
WRONG = '{"approvals": {"call-2": true}}'
#: Before the wait: nowhere, inside the first model call, inside the approval request.
BEFORE = ["", "model 0", "ask"]
#: After the approval: nowhere, right after it (the process's start), inside the
#: refund before the money went out and after, inside the last model call.
AFTER = ["", "resume", "tool refund", "paid", "model 1"]


@pytest.fixture(scope="module")
def framework() -> Iterator[Preloaded]:
    with for_sdk("pydantic_ai") as preloaded:
        yield preloaded


def lil(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``lil --db DB ARGS`` in a child forked from the tests' interpreter that imported
    letitloop (helpers.lil_forked): what it prints and its exit status are checked here,
    not its process start (about 0.15 s of CPU a trial saved)."""
    return lil_forked("--db", str(db), *args)


def send_command(stderr: str) -> list[str]:
    """The ``lil send`` command the one stop line gives, as argv."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    (line,) = lines
    assert line.startswith("letitloop: run ") and "stopped to wait for" in line
    command = line.split("send it with: ", 1)[1].rsplit(", then run the program again", 1)[0]
    return shlex.split(command)


def run_states(db: Path) -> list[str]:
    """The runs' states, read from the file by a connection of this process."""
    conn = sqlite3.connect(db)
    try:
        return [s for (s,) in conn.execute("SELECT status FROM runs ORDER BY rowid")]
    finally:
        conn.close()


@dataclass
class Trial:
    mode: str
    kill_before: str
    kill_after: str
    returncodes: list[int] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    answer: str = ""
    lines: list[list[tuple[str, str]]] = field(default_factory=list)

    def starts(self) -> Counter[str]:
        return Counter(w for attempt in self.lines for e, w in attempt if e == "start")

    def ends(self) -> Counter[str]:
        return Counter(w for attempt in self.lines for e, w in attempt if e == "end")


def one_trial(framework: Preloaded, folder: Path, rng: random.Random) -> Trial:
    trial = Trial(rng.choice(MODES), rng.choice(BEFORE), rng.choice(AFTER))
    db, side = folder / "j.db", folder / "side.txt"

    def run(kill_at: str = "") -> subprocess.CompletedProcess[str]:
        with side.open("a") as f:
            f.write("attempt\n")
        done = framework.run(SCRIPT, trial.mode, str(db), str(side), kill_at)
        trial.returncodes.append(done.returncode)
        return done

    if trial.kill_before:
        assert run(trial.kill_before).returncode == -9
    stopped = run()
    assert stopped.returncode == 75, stopped.stderr
    argv = send_command(stopped.stderr)
    assert argv[:2] == ["lil", "send"] and argv[3:] == ["refund_approval", RIGHT]
    wrong = lil(db, "send", argv[2], "refund_approval", WRONG)
    assert wrong.returncode == 1, wrong.stderr
    trial.refused.append(wrong.stderr.strip())
    assert run_states(db) == ["waiting"]  # untouched
    letitloop.send(argv[2], "refund_approval", json.loads(RIGHT), path=db)
    if trial.kill_after:
        assert run(trial.kill_after).returncode == -9
    for _ in range(3):
        finished = run()
        if finished.returncode == 0:
            break
        # Cut short inside the approved call: the operator checks the payment, and answers.
        assert finished.returncode == 75, finished.stderr
        again = send_command(finished.stderr)
        assert again[3].endswith("/again:call-1") and again[4] == "false"
        paid = side.read_text().splitlines().count("start paid")
        letitloop.send(again[2], again[3], not paid, path=db)
    assert finished.returncode == 0, finished.stderr
    trial.answer = json.loads(finished.stdout.splitlines()[-1])["answer"]
    trial.lines = read_side(side)
    return trial


@pytest.fixture(scope="module")
def trials(framework: Preloaded, tmp_path_factory: pytest.TempPathFactory) -> list[Trial]:
    rng = random.Random(os.environ.get("APPROVAL_SEED", "pydantic-ai-approvals"))
    return [one_trial(framework, tmp_path_factory.mktemp(f"desk{n}"), rng) for n in range(TRIALS)]


@pytest.mark.timeout(900)  # the module's trials run in the first test's setup
class TestAnApprovalUnderRandomKills:
    def test_an_approval_naming_another_call_is_refused_when_sent_in_one_line(
        self, trials: list[Trial]
    ) -> None:
        for trial in trials:
            (line,) = trial.refused
            assert line.startswith("Error: ") and "\n" not in line
            assert 'got "call-2"' in line and "nothing was written" in line

    def test_the_approval_request_is_posted_once(self, trials: list[Trial]) -> None:
        for trial in trials:
            assert trial.ends()["ask"] == 1, trial

    def test_the_refund_is_paid_once(self, trials: list[Trial]) -> None:
        for trial in trials:
            assert trial.starts()["paid"] == 1, trial

    def test_every_model_call_that_finished_ran_once(self, trials: list[Trial]) -> None:
        for trial in trials:
            ends = trial.ends()
            assert ends["model 0"] == 1 and ends["model 1"] == 1, trial

    def test_the_answer_says_what_happened_to_the_refund(self, trials: list[Trial]) -> None:
        for trial in trials:
            if trial.kill_after == "paid":  # cut short after paying: not run again
                assert "may have happened, and it was not run again" in trial.answer
            else:
                assert trial.answer == "desk: refunded 30 on order 7", trial

    def test_the_trials_reached_every_kill_point_and_mode(self, trials: list[Trial]) -> None:
        assert {t.mode for t in trials} == set(MODES)
        assert {t.kill_before for t in trials} == set(BEFORE)
        assert {t.kill_after for t in trials} == set(AFTER)
        for trial in trials:
            kills = [c for c in trial.returncodes if c == -9]
            assert len(kills) == bool(trial.kill_before) + bool(trial.kill_after)


class TestTheCapabilitiesInEitherOrder:
    @pytest.mark.parametrize("durable_first", [True, False])
    def test_the_wait_takes_only_the_pending_call(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], durable_first: bool
    ) -> None:
        import asyncio

        from pydantic_ai import Agent
        from pydantic_ai.capabilities import RequestInput
        from pydantic_ai.models.function import FunctionModel

        from letitloop import RunWaiting
        from letitloop.adapters.pydantic_ai import LetItLoopDurability
        from letitloop.errors import NotWaitingError

        db = tmp_path / "j.db"
        durable = LetItLoopDurability(goal="desk", path=db, stop_after=0)
        approval = RequestInput(lambda ctx, requests, token: None, name="refund_approval")
        capabilities = [durable, approval] if durable_first else [approval, durable]
        agent = Agent(FunctionModel(desk.model), name="desk", capabilities=capabilities)
        agent.tool_plain(requires_approval=True, name="refund")(refund_tool)
        desk.WHERE["side"] = str(tmp_path / "side.txt")
        with pytest.raises(RunWaiting):
            asyncio.run(agent.run(desk.PROMPT))
        assert "(approval of refund(order=7, amount=30), call 'call-1')" in capsys.readouterr().err
        with pytest.raises(NotWaitingError, match='got "call-2"'):
            letitloop.send("desk", "refund_approval", json.loads(WRONG), path=db)
        letitloop.send("desk", "refund_approval", json.loads(RIGHT), path=db)


def refund_tool(order: int, amount: int) -> str:
    return f"refunded {amount} on order {order}"
