"""Random SIGKILL trials of one agent request made with an adapter's default arguments
(tests/test_agent_requests.py): "the same request is never paid twice".

A framework's script (``smolagents_team.py``, ``autogen_team.py``; CrewAI's
``crewai_requests.py``, ``ask`` only) has two modes for
this: ``ask`` (one request, TASK) and ``chat`` (TASK, then a turn that continues the
conversation). Its fake model and tools write ``start WHAT``/``end WHAT`` to a side file
and SIGKILL their own process at ``start KILL_AT``; ``after return`` is the point after
the agent returned and before the program used its answer, ``between turns`` the point
between the two turns of ``chat``. Each trial picks its kill point at random (seeded)
from the points the uninterrupted run passes, runs the killed process and then what a
supervisor or a user would run next, in a fresh journal; the side file, never the
journal, says which calls were paid.

A call **paid again** is one whose ``end`` line appears more often than in the
uninterrupted run: a finished call run again. A call in flight at the kill (a
``start`` without its ``end``) runs again by design and is counted apart.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trial_count
from preloaded import Child, Preloaded

#: The task of the trials' requests, and the changed prompt of the fourth scenario.
TASK = "What is 40 + 1, and the weather?"
CHANGED = "What is 40 + 1, and the weather in the evening?"

#: Trials per scenario (CI-sized; the issue asks for at least 20): tests/trial_count.py.
TRIALS = trial_count.TRIALS

#: The side file's word for a call that finished (CrewAI's script writes ``done``).
ENDS = ("end", "done")


@dataclass
class Run:
    """One process of a trial: its exit status and its answer (None when killed)."""

    returncode: int
    answer: str | None
    stderr: str = ""


@dataclass
class Trial:
    """What one trial did: its kill point, its processes, and the calls the side file saw."""

    kill_at: str
    runs: list[Run] = field(default_factory=list)
    #: The answer each process must give if it lives (the uninterrupted run's).
    expected: list[str] = field(default_factory=list)
    #: The ``end`` lines of every process of the trial, counted.
    ends: Counter[str] = field(default_factory=Counter)
    #: The ``start`` lines, counted (a call in flight at the kill starts twice).
    starts: Counter[str] = field(default_factory=Counter)


@dataclass
class Scenario:
    """A scenario's trials, against the uninterrupted runs' calls."""

    trials: list[Trial]
    reference_ends: Counter[str]

    def paid_again(self) -> int:
        """Finished calls run again, over every trial (each must be 0)."""
        return sum(sum((t.ends - self.reference_ends).values()) for t in self.trials)

    def never_paid(self) -> int:
        """Calls of the uninterrupted run that a trial never finished (each must be 0)."""
        return sum(sum((self.reference_ends - t.ends).values()) for t in self.trials)

    def in_flight_again(self) -> int:
        """Calls in flight at a kill that ran again (by design)."""
        return sum(sum((t.starts - t.ends).values()) for t in self.trials)

    def wrong_answers(self) -> list[str]:
        """Answers of a trial's surviving processes that differ from the uninterrupted run's."""
        return [
            f"killed at {t.kill_at!r}, process {n + 1}: {r.answer!r} != {want!r}"
            for t in self.trials
            for n, (r, want) in enumerate(zip(t.runs, t.expected, strict=True))
            if r.returncode == 0 and r.answer != want
        ]

    def survivors(self) -> int:
        """Processes that lived to give an answer."""
        return sum(r.returncode == 0 for t in self.trials for r in t.runs)

    def failures(self) -> list[str]:
        """Processes that neither succeeded nor died of the trial's SIGKILL."""
        return [
            f"killed at {t.kill_at!r}: exit {r.returncode}: {r.stderr[-2000:]}"
            for t in self.trials
            for r in t.runs
            if r.returncode not in (0, -9)
        ]

    def summary(self) -> dict[str, int]:
        return {
            "trials": len(self.trials),
            "killed": sum(r.returncode == -9 for t in self.trials for r in t.runs),
            "paid again": self.paid_again(),
            "never paid": self.never_paid(),
            "in flight, ran again": self.in_flight_again(),
            "wrong answers": len(self.wrong_answers()),
        }


class Trials:
    """The trials of one framework's script, run in children of one preloaded forker
    (two copies at once: one started from each of its two handles)."""

    def __init__(self, script: Path, folder: Path, *modules: str, seed: int = 48) -> None:
        self.script = script
        self.folder = folder
        # (runpy's pkgutil, which each child's run would import, the forker imports itself.)
        forker = Preloaded(*modules, with_letitloop=True)
        self.forkers = (forker, forker.sibling())
        self.random = random.Random(seed)
        self.count = 0
        #: The uninterrupted runs, by mode and task: each run once, shared by the scenarios.
        self.references: dict[tuple[str, str], tuple[Counter[str], str, list[str]]] = {}

    def close(self) -> None:
        for forker in self.forkers:
            forker.close()

    def start(self, mode: str, db: Path, side: Path, kill_at: str, task: str, n: int) -> Child:
        return self.forkers[n].start(self.script, mode, str(db), str(side), kill_at, task)

    def run(self, mode: str, db: Path, side: Path, kill_at: str = "", task: str = TASK) -> Run:
        return ended(self.start(mode, db, side, kill_at, task, 0))

    def fresh(self) -> tuple[Path, Path]:
        """A new journal and side file for one trial."""
        self.count += 1
        trial = self.folder / f"trial{self.count}"
        trial.mkdir()
        return trial / "journal.db", trial / "side.txt"

    def reference(self, mode: str, task: str = TASK) -> tuple[Counter[str], str, list[str]]:
        """The uninterrupted run: its finished calls, its answer, and its kill points (run
        once per mode and task: the scenarios that ask the same share it)."""
        if (mode, task) not in self.references:
            self.references[mode, task] = self.uninterrupted(mode, task)
        return self.references[mode, task]

    def uninterrupted(self, mode: str, task: str) -> tuple[Counter[str], str, list[str]]:
        db, side = self.fresh()
        done = self.run(mode, db, side, task=task)
        assert done.returncode == 0 and done.answer is not None, done.stderr
        lines = [line.partition(" ")[::2] for line in side.read_text().splitlines()]
        points = [w for e, w in lines if e == "start"]
        ends = Counter(w for e, w in lines if e in ENDS)
        return ends, done.answer, points

    def scenario(
        self, mode: str, trial: Callable[[str, dict[str, str]], Trial], *tasks: str
    ) -> Scenario:
        """TRIALS trials of ``trial(kill_at, answers)``: kill points drawn from the first
        task's uninterrupted run, ``answers`` the uninterrupted runs' by task."""
        ends: Counter[str] = Counter()
        answers: dict[str, str] = {}
        points: list[str] = []
        for task in tasks or (TASK,):
            more, answers[task], found = self.reference(mode, task)
            ends += more
            points = points or found
        trials = [trial(self.random.choice(points), answers) for _ in range(TRIALS)]
        return Scenario(trials, ends)

    # -- the four scenarios --------------------------------------------------------------

    def killed_then_rerun(self, mode: str) -> Scenario:
        """Killed at a random point (half of the trials after the agent returned), then
        the same program run again to its end."""

        def trial(kill_at: str, answers: dict[str, str]) -> Trial:
            if self.random.random() < 0.5:
                kill_at = "after return"
            db, side = self.fresh()
            runs = [self.run(mode, db, side, kill_at), self.run(mode, db, side)]
            return counted(Trial(kill_at, runs, [answers[TASK]] * 2), side)

        return self.scenario(mode, trial)

    def two_copies(self, mode: str = "ask") -> Scenario:
        """Two copies of one request at once (``mode``: the script's way of asking it), the
        first killed at a random point (or not at all), then the first restarted, as a
        supervisor would."""

        def trial(kill_at: str, answers: dict[str, str]) -> Trial:
            if self.random.random() < 0.25:
                kill_at = ""
            db, side = self.fresh()
            first = self.start(mode, db, side, kill_at, TASK, 0)
            time.sleep(self.random.uniform(0, 0.05))
            second = self.start(mode, db, side, "", TASK, 1)
            runs = [ended(first), ended(second)]
            if runs[0].returncode != 0:
                runs.append(self.run(mode, db, side))
            return counted(Trial(kill_at, runs, [answers[TASK]] * len(runs)), side)

        return self.scenario(mode, trial)

    def changed_prompt(self) -> Scenario:
        """Killed at a random point of one request; then the program asks a changed
        prompt, to its end; then the first request again, to its end."""

        def trial(kill_at: str, answers: dict[str, str]) -> Trial:
            db, side = self.fresh()
            runs = [
                self.run("ask", db, side, kill_at),
                self.run("ask", db, side, task=CHANGED),
                self.run("ask", db, side),
            ]
            expected = [answers[TASK], answers[CHANGED], answers[TASK]]
            return counted(Trial(kill_at, runs, expected), side)

        return self.scenario("ask", trial, TASK, CHANGED)


def ended(child: Child) -> Run:
    done = child.wait()
    answer = None
    if done.returncode == 0:
        answer = json.loads(done.stdout.strip().splitlines()[-1])["answer"]
    return Run(done.returncode, answer, done.stderr)


def counted(trial: Trial, side: Path) -> Trial:
    """``trial`` with its side file's ``start`` and ``end`` lines counted."""
    for line in side.read_text().splitlines():
        event, _, what = line.partition(" ")
        if event in ENDS:
            trial.ends[what] += 1
        elif event == "start" and what not in ("after return", "between turns"):
            trial.starts[what] += 1
    return trial


def report(framework: str, scenarios: dict[str, Scenario]) -> dict[str, Any]:
    """The counts per scenario, for the issue's closing note."""
    return {framework: {name: s.summary() for name, s in scenarios.items()}}
