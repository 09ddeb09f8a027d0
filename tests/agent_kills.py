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
import os
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from preloaded import Preloaded


@dataclass
class Attempts:
    """What a series of attempts did: exit statuses, the last answer, the side file."""

    returncodes: list[int] = field(default_factory=list)
    #: What the last attempt printed: the script's answer and the agents' memory.
    answer: Any = None
    #: Per attempt, the (event, call) lines in order: ("start", "tool add 2 3").
    lines: list[list[tuple[str, str]]] = field(default_factory=list)
    #: Per attempt, what it printed (None: it did not finish).
    answers: list[Any] = field(default_factory=list)

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
    return run_sequence(script, db, side, [(mode, k) for k in [*kills, ""]], preloaded)


def run_sequence(
    script: Path,
    db: Path,
    side: Path,
    attempts: list[tuple[str, str]],
    preloaded: Preloaded | None = None,
) -> Attempts:
    """Run ``script MODE DB SIDE KILL_AT`` for each (mode, kill point) in turn, each in a
    fresh interpreter or, given ``preloaded``, in a child it forks. An attempt with no
    kill point must succeed (AssertionError with its stderr otherwise)."""
    out = Attempts()
    first = len(read_side(side)) + 1 if side.exists() else 1
    for n, (mode, kill_at) in enumerate(attempts, start=first):
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
        answer = None
        if done.returncode == 0:
            answer = out.answer = json.loads(done.stdout.strip().splitlines()[-1])
        elif kill_at == "" or done.returncode != -9:
            raise AssertionError(
                f"attempt {n} ({mode}, kill at {kill_at!r}) ended with {done.returncode}: "
                f"{done.stderr[-3000:]}"
            )
        out.answers.append(answer)
    out.lines = read_side(side)
    return out


def read_side(side: Path) -> list[list[tuple[str, str]]]:
    """The side file's lines, per attempt."""
    lines: list[list[tuple[str, str]]] = []
    for line in side.read_text().splitlines():
        event, _, what = line.partition(" ")
        if event == "attempt":
            lines.append([])
        else:  # start, end (a call), at (a point of the program: SideFile.reached)
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
    """``lil show GOAL --json`` run as a command, its output parsed."""
    done = subprocess.run(
        [sys.executable, "-m", "letitloop", "--db", str(db), "show", goal, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
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


def example_crashed_then_resumed(example: str, db: Path) -> tuple[list[str], list[str], str]:
    """``examples/EXAMPLE --crash`` (it must die of SIGKILL), then run again to the end,
    both on journal ``db``: the calls each of the two processes printed that it ran, and
    what the second printed."""
    path = Path(__file__).resolve().parent.parent / "examples" / example
    crashed = run_python_file(path, "--crash", "--db", str(db))
    assert crashed.returncode == -9, crashed.stderr
    resumed = run_python_file(path, "--db", str(db))
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


# Requests asked again (issue 48): the same request is never paid twice, by default.
#
# A request script (tests/*_requests.py) takes ``MODE DB SIDE KILL_AT`` as the team
# scripts do, and marks with ``SideFile.reached`` the points where its program returned
# an answer and had not used it yet ("returned", "returned turn 1"): a kill there is a
# kill after the agent returned. Each trial below draws its kill points at random from
# the points its mode reaches, in a journal of its own, and returns what went wrong.


@dataclass
class Requests:
    """A request script and what its modes reach, in program order."""

    script: Path
    #: The forking interpreters (two: two copies run at once), imported the framework.
    forkers: tuple[Preloaded, Preloaded]
    #: The kill points of each mode, in the order the program reaches them.
    points: dict[str, list[str]]
    #: The uninterrupted run of each mode (filled by :meth:`reference`).
    references: dict[str, Attempts] = field(default_factory=dict)

    def reference(self, folder: Path, mode: str) -> Attempts:
        """``mode`` run once, uninterrupted, in a journal of its own (cached)."""
        if mode not in self.references:
            where = folder / f"reference-{mode}"
            where.mkdir(parents=True, exist_ok=True)
            self.references[mode] = run_sequence(
                self.script, where / "j.db", where / "side.txt", [(mode, "")], self.forkers[0]
            )
        return self.references[mode]

    def attempts(self, folder: Path, steps: list[tuple[str, str]]) -> Attempts:
        return run_sequence(
            self.script, folder / "j.db", folder / "side.txt", steps, self.forkers[0]
        )


@dataclass
class Tally:
    """What a series of trials did: how many, the kills that landed, what went wrong."""

    trials: int = 0
    kills: int = 0
    wrong: list[str] = field(default_factory=list)

    def add(self, n: int, attempts: Attempts, wrong: list[str]) -> None:
        self.trials += 1
        self.kills += sum(1 for code in attempts.returncodes if code == -9)
        self.wrong += [f"trial {n}: {w}" for w in wrong]


def calls_wrong(attempts: Attempts, expected: Counter[str]) -> list[str]:
    """Each call that finished ran exactly once overall, and none started again after it
    finished (so only calls in flight at a kill ran again)."""
    wrong = reran_after_finishing(attempts)
    if attempts.ends() != expected:
        extra = attempts.ends() - expected
        missing = expected - attempts.ends()
        wrong.append(f"calls that finished: {dict(extra)} too many, {dict(missing)} missing")
    return wrong


def kills_in_order(rng: random.Random, points: list[str], most: int) -> list[str]:
    """0 to ``most`` of ``points``, drawn at random, in program order."""
    drawn = set(rng.sample(points, rng.randint(0, min(most, len(points)))))
    return [p for p in points if p in drawn]


def killed_after_it_returned(
    requests: Requests, mode: str, folder: Path, rng: random.Random
) -> tuple[Attempts, list[str]]:
    """``mode`` killed at random calls or not, then killed once its program returned
    (the ``returned`` point), then run again: the last attempt must start no call."""
    calls = [p for p in requests.points[mode] if p != "returned"]
    kills = [*kills_in_order(rng, calls, 1), "returned"]
    reference = requests.reference(folder.parent, mode)
    got = requests.attempts(folder, [(mode, k) for k in [*kills, ""]])
    wrong = calls_wrong(got, reference.ends())
    if got.started(len(got.lines) - 1):
        wrong.append(
            f"the rerun after the kill at 'returned' paid {got.started(len(got.lines) - 1)}"
        )
    if got.answer != reference.answer:
        wrong.append(f"answer {got.answer!r}, uninterrupted {reference.answer!r}")
    return got, wrong


def two_copies_at_once(
    requests: Requests, mode: str, folder: Path, rng: random.Random
) -> tuple[Attempts, list[str]]:
    """Two copies of ``mode`` started together (the second 0-0.3 s later), the first
    killed at a random call or not; then a third run after both: every call paid once,
    the copies that finished and the third answer as the uninterrupted run."""
    reference = requests.reference(folder.parent, mode)
    kill_at = rng.choice(["", *requests.points[mode]])
    db, side = folder / "j.db", folder / "side.txt"
    side.write_text("attempt 1\n")
    first = requests.forkers[0].start(requests.script, mode, str(db), str(side), kill_at)
    time.sleep(rng.uniform(0, 0.3))
    second = requests.forkers[1].start(requests.script, mode, str(db), str(side), "")
    ends = [first.wait(), second.wait()]
    got = Attempts(returncodes=[e.returncode for e in ends])
    wrong = [
        f"copy {n} ended with {e.returncode}: {e.stderr[-2000:]}"
        for n, e in enumerate(ends, start=1)
        if e.returncode != 0 and not (n == 1 and e.returncode == -9 and kill_at)
    ]
    got.answers = [
        json.loads(e.stdout.splitlines()[-1]) if e.returncode == 0 else None for e in ends
    ]
    third = run_sequence(requests.script, db, side, [(mode, "")], requests.forkers[0])
    got.returncodes += third.returncodes
    got.answers += third.answers
    got.answer, got.lines = third.answer, third.lines
    wrong += calls_wrong(got, reference.ends())
    if got.started(1):
        wrong.append(f"the run after both copies paid {got.started(1)}")
    for n, answer in enumerate(got.answers, start=1):
        if answer is not None and answer != reference.answer:
            wrong.append(f"copy {n} answered {answer!r}, uninterrupted {reference.answer!r}")
    return got, wrong


def killed_in_turn_two(
    requests: Requests, mode: str, folder: Path, rng: random.Random
) -> tuple[Attempts, list[str]]:
    """A conversation of two turns (``mode``) killed at a random point of its second turn
    (a call, or once it returned), maybe once more, then run again: turn 1 replays turn 1."""
    points = requests.points[mode]
    second = points[points.index("returned turn 1") + 1 :]
    kills = [rng.choice(second)]
    kills += kills_in_order(rng, second[second.index(kills[0]) + 1 :], 1)
    reference = requests.reference(folder.parent, mode)
    got = requests.attempts(folder, [(mode, k) for k in [*kills, ""]])
    wrong = calls_wrong(got, reference.ends())
    if got.answer != reference.answer:
        wrong.append(f"answer {got.answer!r}, uninterrupted {reference.answer!r}")
    return got, wrong


def changed_prompt(
    requests: Requests, mode: str, other: str, folder: Path, rng: random.Random
) -> tuple[Attempts, list[str]]:
    """``mode`` killed at a random point or run to its end, then ``other`` (the same
    program asked something else) and ``mode`` again: ``other`` is a run of its own
    (no StepMismatchError: every attempt without a kill must succeed), each answer is
    its uninterrupted run's, and no call is paid twice."""
    kill_at = rng.choice(["", *requests.points[mode]])
    reference = requests.reference(folder.parent, mode)
    changed = requests.reference(folder.parent, other)
    try:
        got = requests.attempts(folder, [(mode, kill_at), (other, ""), (mode, "")])
    except AssertionError as exc:
        return Attempts(), [str(exc)]
    wrong = calls_wrong(got, reference.ends() + changed.ends())
    if got.answers[-2] != changed.answer:
        wrong.append(f"the changed prompt answered {got.answers[-2]!r}, not {changed.answer!r}")
    if got.answers[-1] != reference.answer:
        wrong.append(f"the first prompt again answered {got.answers[-1]!r}")
    return got, wrong


def trials(
    count: int,
    seed: str,
    folder: Path,
    trial: Callable[[Path, random.Random], tuple[Attempts, list[str]]],
) -> Tally:
    """``count`` trials of ``trial``, each in a folder of its own, drawn from ``seed``."""
    rng = random.Random(seed)
    tally = Tally()
    for n in range(1, count + 1):
        where = folder / f"trial-{n}"
        where.mkdir(parents=True)
        got, wrong = trial(where, rng)
        tally.add(n, got, wrong)
    report = os.environ.get("LETITLOOP_TRIALS_REPORT")
    if report:  # a line per series, for a report's figures (benchmarks, PR notes)
        with open(report, "a") as f:
            f.write(
                json.dumps(
                    {
                        "seed": seed,
                        "trials": tally.trials,
                        "kills": tally.kills,
                        "wrong": len(tally.wrong),
                    }
                )
                + "\n"
            )
    return tally
