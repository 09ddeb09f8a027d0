"""An agent script run in child processes, SIGKILLed at chosen points and rerun, and what
its side file says ran (tests/test_smolagents.py, tests/test_autogen.py).

The scripts (``smolagents_team.py``, ``autogen_team.py``) take ``MODE DB SIDE
KILL_AT``; their fake models and tools write ``start WHAT`` and ``end WHAT``
to SIDE and kill their own process at ``start KILL_AT``. Before each
attempt this writes ``attempt N``, so the side file says which attempt ran
what; nothing here reads the journal to count executions.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers import lil_forked
from preloaded import SDKS, Preloaded

#: What an Agents SDK program builds at its first run, built once in the forker of
#: :func:`for_agents` instead of in each child: the global trace provider (its exporter's
#: HTTP client loads the CA certificates: about 20 ms of CPU a child; no thread started,
#: no socket opened; a script's ``set_tracing_disabled(True)`` then only sets its flag).
AGENTS_WARM = """
from agents.tracing.setup import get_trace_provider
get_trace_provider()
# What a child built at its first run (about 20 ms of CPU each): the OpenAI response types
# its model returns (pydantic models built at their first use), and a tool's schema from its
# signature and docstring (the docstring styles' and the schema's regular expressions).
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails
for model in (
    InputTokensDetails,
    OutputTokensDetails,
    ResponseFunctionToolCall,
    ResponseOutputText,
    ResponseOutputMessage,
):
    model.model_rebuild()
from agents import function_tool
def warm(city: str) -> str:
    \"\"\"The weather in a city.

    Args:
        city: The city.
    \"\"\"
    return city
function_tool(warm)
"""


def for_agents(*more: str) -> Preloaded:
    """preloaded.for_sdk("agents", *more), its forker also running :data:`AGENTS_WARM`."""
    modules, warm = SDKS["agents"]
    return Preloaded(*modules, *more, with_letitloop=True, warm=warm + AGENTS_WARM)


@dataclass
class Attempts:
    """What a series of attempts did: exit statuses, the last answer, the side file."""

    returncodes: list[int] = field(default_factory=list)
    #: What the last attempt printed: the script's answer and the agents' memory.
    answer: Any = None
    #: Per attempt, the (event, call) lines in order: ("start", "tool add 2 3").
    lines: list[list[tuple[str, str]]] = field(default_factory=list)

    def started(self, attempt: int) -> set[str]:
        return {what for event, what in self.lines[attempt] if event == "start"}

    def ended(self, attempt: int) -> set[str]:
        return {what for event, what in self.lines[attempt] if event == "end"}

    def in_flight(self, attempt: int) -> set[str]:
        """Calls this attempt started and did not finish (the kill came first)."""
        return self.started(attempt) - self.ended(attempt)

    def ends(self) -> Counter[str]:
        return Counter(what for lines in self.lines for event, what in lines if event == "end")


def run_attempts(
    script: Path,
    mode: str,
    db: Path,
    side: Path,
    kills: list[str],
    preloaded: Preloaded | None = None,
) -> Attempts:
    """Run ``script MODE DB SIDE KILL_AT`` once per kill point, then once without one,
    each in a fresh interpreter or, given ``preloaded``, in a child it forks."""
    out = Attempts()
    for n, kill_at in enumerate([*kills, ""], start=1):
        with side.open("a") as f:
            f.write(f"attempt {n}\n")
        args = (mode, str(db), str(side), kill_at)
        done = (
            preloaded.run(script, *args)
            if preloaded is not None
            else subprocess.run(
                [sys.executable, str(script), *args], capture_output=True, text=True, timeout=120
            )
        )
        out.returncodes.append(done.returncode)
        if done.returncode == 0:
            out.answer = json.loads(done.stdout.strip().splitlines()[-1])
        elif kill_at == "":
            raise AssertionError(f"the last attempt failed: {done.stderr[-3000:]}")
    out.lines = read_side(side)
    return out


def read_side(side: Path) -> list[list[tuple[str, str]]]:
    """The side file's lines, per attempt."""
    lines: list[list[tuple[str, str]]] = []
    for line in side.read_text().splitlines():
        event, _, what = line.partition(" ")
        if event == "attempt":
            lines.append([])
        else:
            lines[-1].append((event, what))
    return lines


def run_here(run: Callable[[str], Any], where: dict[str, str], db: Path, side: Path) -> Attempts:
    """One uninterrupted run of a script's mode in this process (no interpreter to start).

    ``where`` is the script's WHERE (its side file and kill point), set for the run.
    """
    side.write_text("attempt 1\n")
    where.update(side=str(side), kill_at="")
    answer = run(str(db))
    return Attempts(returncodes=[0], answer=answer, lines=read_side(side))


def reran_after_finishing(attempts: Attempts) -> list[str]:
    """Calls started again in a later attempt after an earlier one had finished them."""
    wrong = []
    for n in range(len(attempts.lines)):
        for later in range(n + 1, len(attempts.lines)):
            for what in attempts.ended(n) & attempts.started(later):
                wrong.append(f"{what!r} finished in attempt {n + 1}, ran again in {later + 1}")
    return wrong


def reran_without_being_in_flight(attempts: Attempts) -> list[str]:
    """Calls started again in an attempt though the attempt before had not left them in flight."""
    wrong = []
    for n in range(1, len(attempts.lines)):
        before = set().union(*(attempts.started(k) for k in range(n)))
        for what in (attempts.started(n) & before) - attempts.in_flight(n - 1):
            wrong.append(f"{what!r} ran again in attempt {n + 1} without being in flight")
    return wrong


def lil_show(db: Path, goal: str) -> dict[str, Any]:
    """``lil show GOAL --json`` run as a command (forked: helpers.lil_forked), its output
    parsed."""
    done = lil_forked("--db", str(db), "show", goal, "--json")
    assert done.returncode == 0, done.stderr
    shown: dict[str, Any] = json.loads(done.stdout)
    return shown


def run_python_file(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python PATH ARGS...`` in a child process, its output as text."""
    return subprocess.run(
        [sys.executable, str(path), *args], capture_output=True, text=True, timeout=120
    )


def ran(stdout: str) -> list[str]:
    """The examples' ``  ran  WHAT`` lines: the calls that really ran in that process."""
    return [line.split("ran  ", 1)[1] for line in stdout.splitlines() if "  ran  " in line]


def example_crashed_then_resumed(
    example: str, db: Path, preloaded: Preloaded | None = None
) -> tuple[list[str], list[str], str]:
    """``examples/EXAMPLE --crash`` (it must die of SIGKILL), then run again to the end,
    both on journal ``db`` (each in a fresh interpreter or, given ``preloaded``, in a child
    it forks): the calls each of the two processes printed that it ran, and what the
    second printed."""
    path = Path(__file__).resolve().parent.parent / "examples" / example
    run = run_python_file if preloaded is None else preloaded.run
    crashed = run(path, "--crash", "--db", str(db))
    assert crashed.returncode == -9, crashed.stderr
    resumed = run(path, "--db", str(db))
    assert resumed.returncode == 0, resumed.stderr
    return ran(crashed.stdout), ran(resumed.stdout), resumed.stdout


def reference_and_killed(
    folder: Path,
    run: Callable[[str], Any],
    where: dict[str, str],
    script: Path,
    mode: str,
    kills: list[str],
    preloaded: Preloaded | None = None,
) -> tuple[Attempts, Attempts, Path]:
    """A script's mode run once uninterrupted here, then killed at ``kills`` in children
    (forked by ``preloaded`` where given).

    (the reference, the killed attempts, the killed attempts' journal) in ``folder``.
    """
    reference = run_here(run, where, folder / "ref.db", folder / "ref.txt")
    killed = run_attempts(script, mode, folder / "j.db", folder / "side.txt", kills, preloaded)
    return reference, killed, folder / "j.db"


class KilledTeamPromises:
    """What a team killed at every kill point of its script keeps, whatever the framework.

    A test class of the framework's file inherits these tests; its module
    defines the ``team`` fixture (:func:`reference_and_killed`) and the class
    names, in ``answer_holds``, words the final answer must hold.
    """

    answer_holds: tuple[str, ...] = ()

    def test_every_call_that_finished_ran_exactly_once_overall(self, team: Any) -> None:
        reference, killed, _ = team
        assert reran_after_finishing(killed) == []
        assert killed.ends() == reference.ends()
        assert set(killed.ends().values()) == {1}

    def test_only_the_calls_in_flight_at_a_kill_ran_again(self, team: Any) -> None:
        _, killed, _ = team
        assert reran_without_being_in_flight(killed) == []

    def test_the_final_answer_is_the_uninterrupted_runs(self, team: Any) -> None:
        reference, killed, _ = team
        assert killed.answer["answer"] == reference.answer["answer"]
        assert self.answer_holds
        for words in self.answer_holds:
            assert words in killed.answer["answer"]

    def test_the_agents_memory_is_rebuilt_as_the_uninterrupted_run_left_it(self, team: Any) -> None:
        reference, killed, _ = team
        assert killed.answer["memory"] == reference.answer["memory"]
        assert len(str(killed.answer["memory"])) > 500  # the whole conversation, not nothing


class TwoAgentsPromises:
    """What two agents of one script in one journal keep when the second was killed.

    Its module defines the ``two`` fixture (:func:`reference_and_killed`, the
    second agent's model call its kill point); the first agent is the writer.
    """

    def test_the_first_agents_calls_are_not_run_again_when_the_second_was_killed(
        self, two: Any
    ) -> None:
        reference, killed, _ = two
        assert killed.returncodes == [-9, 0]
        assert not any(w.startswith("model writer") for w in killed.started(1))
        assert reran_after_finishing(killed) == []
        assert reran_without_being_in_flight(killed) == []
        assert killed.ends() == reference.ends()
