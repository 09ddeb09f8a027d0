"""``lil crashtest``: kill a program at every step, rerun it, and find what ran twice.

The program runs once for reference, with the hook of ``crashhook.py``
writing a ledger of its step bodies; each step gives three kill points
(before it, at its body's start, after its body returned but before its
record), each ``atomic_marker`` body one (at its start). For each kill point the program
runs in a fresh folder, SIGKILLs itself there, and is run again without the
kill until it finishes. Then: a step body that ran again after its record
was committed is a repeat; so is one that ran at a place whose committed
step had another key (the key changed between runs: a divergence); so is a
marker body run again after its record; so is a paid call recorded again at a
place whose step was committed (``crashpaid.py``, from the journal's usage
records; a call in flight at the kill, paid again, is reported apart, as
allowed); so is a line of the side-effect file
(``effects``) that appears more often than in the reference. A finished
program's output that differs from the reference's is reported too.

Every run of a trial has its own empty working folder and ``LETITLOOP_DB``
there, so a journal and files written at relative paths start empty each
trial; arguments that name existing files are passed as absolute paths.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import LetItLoopError
from ..run.crashhook import KILL_ENV, LEDGER_ENV
from .crashdb import TrialJournals
from .crashoutput import effects_in, output_mode, shown
from .crashpaid import Paid, judge_paid, paid_in, paid_records


@dataclass
class Run:
    """One run of the program: its exit status, output and ledger events."""

    status: int
    stdout: str
    events: list[tuple[str, str, str, str]]


@dataclass
class Repeat:
    """Something that ran twice, and the kill point after which it did."""

    kill: str
    what: str


@dataclass
class Report:
    """What the crash test tried and found."""

    points: int = 0
    tried: int = 0
    reruns: int = 0
    seconds: float = 0.0
    repeats: list[Repeat] = field(default_factory=list)
    problems: list[Repeat] = field(default_factory=list)
    #: Calls in flight at a kill and paid again: allowed by the contract, told apart.
    allowed: list[Repeat] = field(default_factory=list)
    #: What of the reference run's output every finished trial's had to equal (``output``).
    expected: str = ""


def kill_points(events: list[tuple[str, str, str, str]]) -> list[tuple[str, str, str]]:
    """``(kind, where, label)`` of every kill point the reference run reached, in order."""
    points = []
    for kind, where, key, _ in events:
        if kind == "start":
            points += [
                ("before", where, f"before step {key!r}"),
                ("start", where, f"at the start of step {key!r}"),
                ("end", where, f"after step {key!r} returned, before its record"),
            ]
        elif kind == "mstart":
            # Not after its body, before its record: that window is the marker's
            # documented limit (the next offer says crashed_before), not a repeat.
            points.append(("mstart", where, f"at the start of marker {where!r}'s body"))
    return points


class Program:
    """How to run the program under test: its command, from a fresh folder each time."""

    def __init__(self, command: list[str], timeout: float) -> None:
        here = os.getcwd()
        self.command = [
            os.path.abspath(a) if not a.startswith("-") and os.path.exists(a) else a
            for a in command
        ]
        self.timeout = timeout
        self.env = dict(os.environ)
        self.env["PYTHONPATH"] = os.pathsep.join(
            p for p in (self.env.get("PYTHONPATH", ""), here) if p
        )
        self.env.pop(KILL_ENV, None)

    def run(self, folder: Path, journal: str, n: int, kill: str = "") -> Run:
        """Run once in ``folder`` on ``journal`` (``n`` numbers the ledger), killed at ``kill``
        if set."""
        ledger = folder / f".crashtest-ledger-{n}"
        env = dict(self.env, LETITLOOP_DB=journal)
        env[LEDGER_ENV] = str(ledger)
        if kill:
            env[KILL_ENV] = kill
        status, stdout = self.execute(folder, env, kill)
        events = []
        if ledger.exists():
            for line in ledger.read_text("utf-8").splitlines():
                kind, where, key, run = [*line.split("\t"), "", "", ""][:4]
                events.append((kind, where, key, run))
        return Run(status, stdout.decode("utf-8", "replace"), events)

    def execute(self, folder: Path, env: dict[str, str], kill: str) -> tuple[int, bytes]:
        """Run the command to its end in ``folder`` with the environment ``env`` (its kill
        point ``kill``, for the message of a run over the timeout): its exit status
        (negative: the signal that ended it) and standard output."""
        try:
            done = subprocess.run(
                self.command,
                cwd=folder,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=self.timeout,
            )
        except FileNotFoundError:
            raise LetItLoopError(
                f"crashtest: cannot run {self.command[0]!r}: no such program; "
                f"give the command after --, e.g. lil crashtest -- python pipeline.py"
            ) from None
        except subprocess.TimeoutExpired:
            raise LetItLoopError(
                f"crashtest: {' '.join(self.command)} ran over {self.timeout:g} s "
                f"(kill point {kill.replace(chr(9), ' ') or 'none'}); raise --timeout"
            ) from None
        return done.returncode, done.stdout


#: The ledger's events of a step called: its body ran, or its record was replayed.
CALLED = ("start", "replay")


def committed_steps(runs: list[Run]) -> Counter[str]:
    """The step bodies that ran and were committed in ``runs``, counted by key; but those
    called inside a step in flight at the kill (begun in the killed run, not committed
    there), at any depth: its rerun may call them anew, as the contract allows (an MCP
    call in doubt is sent again under a new key)."""
    first = runs[0].events if runs else []
    excused = {key for kind, _, key, _ in first if kind == "start"}
    excused -= {key for kind, _, key, _ in first if kind == "done"}
    counted: Counter[str] = Counter()
    for run in runs:
        for kind, where, key, _ in run.events:
            if kind != "start" and kind != "done":
                continue
            if where.rsplit("/", 1)[0] in excused and run is not runs[0]:
                excused.add(key)  # called inside a step in flight: its steps are too
            elif kind == "done":
                counted[key] += 1
    return counted


def judge(runs: list[Run], known: set[str], reference: Counter[str] | None = None) -> list[str]:
    """What ran twice across the runs of one trial (the first was killed).

    A body that ran under a key the reference run never used (``known``), at a
    place where an earlier run of the trial committed another key that no
    later run called again (ran or replayed), ran again under a changed key.
    (A place alone is not enough: a resumed program may skip its finished
    steps without calling them, as LangGraph skips the nodes its checkpoint
    holds, or call fewer of them, as LlamaIndex's workflow does, and its next
    steps take the places they had.) When nothing else was found, a key of the
    reference whose bodies were committed more often than in the ``reference``
    run ran again in another run of the program's (a rerun that starts its
    work anew, in a run of its own, instead of resuming); what ran inside a
    step in flight at the kill is not counted.
    """
    found: list[str] = []
    committed: set[tuple[str, str]] = set()  # (run id, key) of the steps committed
    at: dict[str, tuple[int, str]] = {}  # where -> the run (its number) and key committed there
    markers: set[tuple[str, str]] = set()  # (run id, name) of the markers committed
    changed: list[tuple[str, str, int, str]] = []  # (where, new key, run, the key committed)
    for number, run in enumerate(runs):
        for kind, where, key, run_id in run.events:
            if kind == "start" and number and (run_id, key) in committed:
                found.append(f"step {key!r} ran again after its record was committed")
            elif (
                kind == "start"
                and number
                and key not in known
                and at.get(where, (0, key))[1] != key
            ):
                changed.append((where, key, *at[where]))
            elif kind == "done":
                committed.add((run_id, key))
                at[where] = (number, key)
            elif kind == "mstart" and (run_id, where) in markers:
                found.append(f"marker {where!r} ran its body again after its record")
            elif kind == "mdone":
                markers.add((run_id, where))
    for where, key, number, before in changed:
        called = {k for run in runs[number + 1 :] for kind, _, k, _ in run.events if kind in CALLED}
        if before not in called:  # not shifted to another place: called under another key
            found.append(
                f"step at {where} ran again: its record was committed as {before!r}, "
                f"this run called it {key!r} (the key changed between runs: build it "
                f"from the step's inputs, not time or randomness)"
            )
    if reference is not None and not found:
        extra = committed_steps(runs) - reference
        found += [
            f"step {key!r} ran and was committed {extra[key] + reference[key]} times "
            f"(reference: {reference[key]}): a rerun ran it again in another run "
            f"instead of resuming the one that recorded it"
            for key in sorted(extra)
            if key in known
        ]
    return found


def paid_in_journals(runs: list[Run], journal: str) -> Paid:
    """The usage the trial's runs recorded, each run's read from the journal it was kept in
    (its ``journal`` event: ``path=`` in the program, else ``journal``, the trial's)."""
    kept: dict[str, str] = {}  # run id -> its journal's location
    for run in runs:
        for kind, where, _, run_id in run.events:
            if kind == "journal":
                kept[run_id] = where
    by_journal: dict[str, set[str]] = {}
    for run in runs:
        for _, _, _, run_id in run.events:
            if run_id:
                by_journal.setdefault(kept.get(run_id, journal), set()).add(run_id)
    paid = Paid({}, set())
    for location, run_ids in sorted(by_journal.items()):
        found = paid_in(location, run_ids)
        paid.spent.update(found.spent)
        paid.crashed.update(found.crashed)
    return paid


def crashtest(
    command: list[str],
    *,
    max_kills: int | None = None,
    seed: int | None = None,
    order: str = "exhaustive",
    effects: str | None = None,
    max_reruns: int = 3,
    timeout: float = 300.0,
    output: str = "exact",
    program: Program | None = None,
) -> Report:
    """Run the crash test of ``command``; the report says what was tried and what ran twice.

    ``output`` is what of a finished run's standard output must equal the
    reference's: ``exact``, its ``last-line`` (the result a program prints
    last, for one that also prints what ran in this process), ``match:REGEX``
    (the lines that match REGEX, ``re.search``: ``match:^answer: ``), or
    ``ignore``.
    ``program`` runs each run of ``command`` (by default a :class:`Program`: a fresh
    process of the command); a harness's own may start them otherwise.
    Raises LetItLoopError when the program cannot be run, runs over ``timeout``
    seconds, or its reference run uses no journal step at all.
    """
    began = time.monotonic()
    output = output_mode(output)
    program = program or Program(command, timeout)
    journals = TrialJournals(os.environ.get("LETITLOOP_DB"))
    report = Report()
    root = Path(tempfile.mkdtemp(prefix="lil-crashtest-"))
    try:
        (root / "reference").mkdir()
        with journals.journal(root / "reference") as journal:
            reference = program.run(root / "reference", journal, 0)
            paid = paid_records([reference.events], paid_in_journals([reference], journal))
        expected = effects_in(root / "reference", effects)
        report.expected = shown(reference.stdout, output)
        points = kill_points(reference.events)
        known = {key for kind, _, key, _ in reference.events if kind == "start"}
        once = committed_steps([reference])
        if not points:
            raise LetItLoopError(
                f"crashtest: {' '.join(command)} ran no letitloop step (exit status "
                f"{reference.status}); nothing to kill. Run a program whose work is in "
                f"steps, with its journal at the default place (or $LETITLOOP_DB)"
            )
        report.points = len(points)
        if order == "random":
            random.Random(seed).shuffle(points)
        for number, (kind, where, label) in enumerate(points[:max_kills]):
            folder = root / f"kill-{number}"
            folder.mkdir()
            with journals.journal(folder) as journal:
                runs = [program.run(folder, journal, 0, f"{kind}\t{where}")]
                report.tried += 1
                if not any(event[0] == "kill" for event in runs[0].events):
                    report.problems.append(
                        Repeat(
                            label,
                            f"the program was not killed there (exit status "
                            f"{runs[0].status}): it did not reach that place again",
                        )
                    )
                # A killed run never counts as the finished one, even when the
                # command exits as the reference did (its work ran in a child it waited for).
                while len(runs) <= max_reruns and (
                    len(runs) == 1 or runs[-1].status != reference.status
                ):
                    runs.append(program.run(folder, journal, len(runs)))
                    report.reruns += 1
                found = judge(runs, known, once)
                paid_again, allowed = judge_paid(
                    [run.events for run in runs], paid_in_journals(runs, journal), paid
                )
                found += paid_again
                report.allowed += [Repeat(label, what) for what in allowed]
                extra = effects_in(folder, effects) - expected
                found += [
                    f"side effect {line!r} happened {extra[line] + expected[line]} times "
                    f"(reference: {expected[line]})"
                    for line in sorted(extra)
                ]
            report.repeats += [Repeat(label, what) for what in found]
            last = runs[-1]
            if last.status != reference.status:
                report.problems.append(
                    Repeat(
                        label,
                        f"did not finish in {max_reruns} reruns (exit status "
                        f"{last.status}, reference {reference.status})",
                    )
                )
            elif shown(last.stdout, output) != shown(reference.stdout, output):
                report.problems.append(
                    Repeat(
                        label,
                        f"the finished program's output ({output}) differs from the reference's",
                    )
                )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report.seconds = time.monotonic() - began
    return report


def describe(report: Report, command: list[str]) -> list[str]:
    """The report's lines, as ``lil crashtest`` prints them."""
    lines = [
        f"crashtest: {' '.join(command)}",
        f"kill points: {report.tried} tried of {report.points}, {report.reruns} reruns, "
        f"{report.seconds:.1f} s",
        f"repeats: {len(report.repeats)}",
    ]
    lines += [f"  killed {r.kill}: {r.what}" for r in report.repeats]
    if report.allowed:
        lines.append(f"in flight, paid again (allowed): {len(report.allowed)}")
        lines += [f"  killed {r.kill}: {r.what}" for r in report.allowed]
    if report.problems:
        lines.append(f"other problems: {len(report.problems)}")
        lines += [f"  killed {r.kill}: {r.what}" for r in report.problems]
    return lines
