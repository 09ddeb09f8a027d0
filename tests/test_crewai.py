"""CrewAI crews killed mid-run and resumed: finished calls replay, the ones in flight run again.

Real CrewAI (the version pinned in .ci/crewai-constraints.txt), an offline
``BaseLLM`` subclass and two tools (tests/crewai_crew.py), each run in a child
process that SIGKILLs itself at a named point: inside a model call, inside a
tool call (one of two parallel calls of one tool), between two tasks. The
next process resumes; the chain goes on until a process completes. What ran
is counted in the side file the model and the tools write (never in the
journal): every call that finished ran exactly once over all the attempts,
the one in flight at each kill ran again, and the crew's answer (and its
token counts) equals an uninterrupted run's.

These tests run in CrewAI's own environment (``python tests/crewai_env.py``,
which README's test command runs); in the main one, without CrewAI, they skip.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from crashtest_examples import crashtest_example
from trial_count import TRIALS

# Not imported here: the children import it (with its telemetry opted out).
if importlib.util.find_spec("crewai") is None and not os.environ.get("LETITLOOP_CREWAI_ENV"):
    pytest.skip("CrewAI has its own environment: python tests/crewai_env.py", allow_module_level=True)  # fmt: skip  # noqa: E501

ROOT = Path(__file__).resolve().parent.parent
CREW = Path(__file__).with_name("crewai_crew.py")
CONSTRAINTS = ROOT / ".ci" / "crewai-constraints.txt"

#: The research crew's calls, as its side file names them, in an uninterrupted run.
RESEARCH_TOOL = "tool word_count [sqlite history: 14 notes] [sqlite today: 12 notes]"


#: CrewAI's telemetry and tracing opt-outs (as tests/crewai_crew.py sets them), for the
#: forkers that import CrewAI before a script runs.
OPT_OUTS = {
    "OTEL_SDK_DISABLED": "true",
    "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_DISABLE_TRACKING": "true",
    "CREWAI_TRACING_ENABLED": "false",
}


@pytest.fixture(scope="session")
def opted_out() -> Iterator[None]:
    """OPT_OUTS in this process's environment while the forker starts (and its children,
    the request trials', inherit them)."""
    saved = {k: os.environ.get(k) for k in OPT_OUTS}
    os.environ.update(OPT_OUTS)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


#: What the forker loads besides CrewAI and the adapter, once for its few hundred children
#: (about 0.13 s of CPU a child without them, 0.10 s with them): the modules and the
#: Pydantic models CrewAI loads and builds at a crew's first kickoff, and the scripts'
#: helper modules (what tests/crewai_crew.py reads of the environment at its import is
#: the forker's: crewai_requests.py sets its kill point itself, and a chain's child runs
#: crewai_crew.py as ``__main__``, afresh); then one plain kickoff
#: (crewai_crew.warm_kickoff: what CrewAI caches at a process's first kickoff, about
#: 10 ms of CPU a child, leaving no thread, file or output behind).
#: Then its objects are frozen out of the garbage collector's reach, so that a child's
#: collections do not copy the pages of the forker's memory they would touch.
WARM = f"""
import gc, sys
import crewai.hooks.contexts, crewai.llms.cache, crewai.skills.tool
from crewai.events.types.agent_events import (
    AgentExecutionCompletedEvent, AgentExecutionStartedEvent,
)
AgentExecutionStartedEvent.model_rebuild()
AgentExecutionCompletedEvent.model_rebuild()
from crewai.agents.agent_executor import AgentExecutor
AgentExecutor.flow_definition()  # the executor's Flow, built at its first kickoff
sys.path.insert(0, {str(CREW.parent)!r})
import crewai_bills, crewai_crew, request_trials
sys.path.remove({str(CREW.parent)!r})
crewai_crew.warm_kickoff()
gc.collect()
gc.freeze()
"""


@pytest.fixture(scope="session")
def forker(opted_out: None) -> Iterator[Any]:
    """CrewAI's scripts run in children of one interpreter (one per xdist worker) that imported
    CrewAI and the adapter once (tests/preloaded.py): each a process of its own, SIGKILLed
    for real. The chains, the example, the docs block, the request trials and the budget's
    trials share it: each import of CrewAI costs about 2.5 s of CPU."""
    from preloaded import Preloaded

    with Preloaded("crewai", "letitloop.adapters.crewai", with_letitloop=True, warm=WARM) as pre:
        yield pre


#: ``python -m letitloop`` as a script (tests/lil_entry.py), for :func:`lil`.
LIL_ENTRY = Path(__file__).with_name("lil_entry.py")


def lil(forker: Any, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m letitloop ARGS`` forked from ``forker`` (these tests check what ``lil``
    prints, not its process's start: a fork costs a fraction of a fresh interpreter's CPU)."""
    done: subprocess.CompletedProcess[str] = forker.run(LIL_ENTRY, *args, cwd=cwd)
    return done


@dataclass
class Chain:
    """A scenario run until it completed, killed at each of ``kills`` on the way."""

    kills: list[str]
    codes: list[int]
    lines: list[str]
    output: object
    folder: Path

    def count(self, what: str) -> Counter[str]:
        return Counter(ln.split(" ", 1)[1] for ln in self.lines if ln.startswith(what + " "))


def child_env(folder: Path, kill_at: str, late: str) -> dict[str, str]:
    return {
        **os.environ,
        "CREW_KILL_AT": kill_at,
        "CREW_LATE": late,
        # CrewAI keeps its own files (task outputs, credentials) under these.
        "XDG_DATA_HOME": str(folder / "xdg"),
        "CREWAI_STORAGE_DIR": "letitloop-tests",
    }


def run_chain(
    forker: Any,
    folder: Path,
    scenario: str,
    kills: list[str],
    mode: str,
    late: list[str] | None = None,
) -> Chain:
    """Run ``scenario`` killed at each of ``kills``, then once more to completion.

    ``late[i]``: the search query that starts late in the i-th process, once its
    parallel twin has finished; by default the search a native chain is killed in.
    """
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "calls.log"
    codes = []
    output: object = None
    # A native chain's kill inside one of two parallel searches lands once its twin finished.
    search = "start tool search "
    parallel = [k.removeprefix(search) if k.startswith(search) else "" for k in kills]
    lates = late or [*(q if mode == "native" else "" for q in parallel), ""]
    for kill_at, late_query in zip([*kills, ""], lates, strict=True):
        done = forker.run(
            CREW, scenario, "--mode", mode, "--db", str(folder / "journal.db"),
            "--log", str(log), "--net", str(folder / "net.log"),
            cwd=folder, env=child_env(folder, kill_at, late_query),
        )  # fmt: skip
        codes.append(done.returncode)
        if kill_at:
            assert done.returncode == -9, (kill_at, done.returncode, done.stderr[-3000:])
        else:
            assert done.returncode == 0, done.stderr[-3000:]
            output = json.loads(done.stdout.strip().splitlines()[-1])
    lines = log.read_text(encoding="utf-8").splitlines()
    return Chain(kills, codes, lines, output, folder)


#: Each chain: (scenario, mode, kill points), run on first use.
CHAINS: dict[str, tuple[str, str, list[str]]] = {
    "research": ("research", "native", []),
    "research-killed": (
        "research",
        "native",
        [
            "start llm Researcher sqlite 2:0",  # inside the first model call
            "start tool search sqlite today",  # inside one of two parallel tool calls
            f"start {RESEARCH_TOOL}",  # inside a tool call
            "after-task Research",  # between the two tasks
            "start llm Writer sqlite 2:0",  # inside the second task's first model call
            "start tool word_count draft about sqlite",  # inside its tool call
        ],
    ),
    "text": ("research", "text", []),
    "text-killed": (
        "research",
        "text",
        ["start tool search sqlite today", "start llm Writer sqlite 2:0"],
    ),
    "two": ("two", "native", []),
    "two-killed": ("two", "native", ["start tool search wal history", "start llm Writer wal 4:1"]),
    "delegation": ("delegation", "native", []),
    "delegation-killed": (
        "delegation",
        "native",
        [
            f"start {RESEARCH_TOOL}",  # inside the coworker's tool, mid-delegation
            "start llm Manager sqlite 4:1",  # inside the manager's call after the delegation
        ],
    ),
}


#: Chains whose processes start one of two parallel calls late: (query per process).
LATE: dict[str, list[str]] = {
    # The first process records "history" and dies in "today"; the next starts
    # "today" first, before the recorded "history" call is made again.
    "parallel-killed": ["sqlite today", "sqlite history"],
}
CHAINS["parallel-killed"] = ("research", "native", ["start tool search sqlite today"])


class Chains:
    """The chains of CHAINS, each run once for the module, when a test first asks for it."""

    def __init__(self, base: Path, forker: Any) -> None:
        self.base = base
        self.forker = forker
        self.done: dict[str, Chain] = {}

    def __getitem__(self, name: str) -> Chain:
        if name not in self.done:
            scenario, mode, kills = CHAINS[name]
            got = run_chain(self.forker, self.base / name, scenario, kills, mode, LATE.get(name))
            self.done[name] = got
        return self.done[name]


@pytest.fixture(scope="module")
def chains(tmp_path_factory: pytest.TempPathFactory, forker: Any) -> Chains:
    return Chains(tmp_path_factory.mktemp("crews"), forker)


PAIRS = [
    ("research", "research-killed"),
    ("research", "parallel-killed"),
    ("text", "text-killed"),
    ("two", "two-killed"),
    ("delegation", "delegation-killed"),
]


#: A chain runs up to 7 processes (forked from one that imported CrewAI: seconds each on a
#: busy machine all the same).
LONG = pytest.mark.timeout(900)


@LONG
class TestACrewKilledAndResumed:
    @pytest.mark.parametrize(("whole", "killed"), PAIRS)
    def test_every_call_that_finished_ran_exactly_once_overall(
        self, chains: Chains, whole: str, killed: str
    ) -> None:
        got = chains[killed]
        assert got.codes[:-1] == [-9] * len(got.kills) and got.codes[-1] == 0
        done = got.count("done")
        assert done == chains[whole].count("done"), "the same calls finished, each once"
        assert set(done.values()) == {1}, {k: n for k, n in done.items() if n != 1}

    @pytest.mark.parametrize(("whole", "killed"), PAIRS)
    def test_only_the_calls_in_flight_at_each_kill_ran_again(
        self, chains: Chains, whole: str, killed: str
    ) -> None:
        got = chains[killed]
        in_flight = Counter(k.removeprefix("start ") for k in got.kills if k.startswith("start "))
        started = got.count("start") - chains[whole].count("start")
        assert started == in_flight, "started again: exactly the calls killed mid-way"

    @pytest.mark.parametrize(("whole", "killed"), PAIRS)
    def test_the_answer_and_token_counts_equal_an_uninterrupted_runs(
        self, chains: Chains, whole: str, killed: str
    ) -> None:
        assert chains[killed].output == chains[whole].output

    def test_the_kills_landed_inside_calls_and_between_tasks(self, chains: Chains) -> None:
        lines = chains["research-killed"].lines
        for kill in chains["research-killed"].kills:
            at = lines.index(kill)
            if kill.startswith("start "):  # died inside: its done line came from a later process
                assert lines[at + 1] != "done " + kill.removeprefix("start ")
            else:  # died after the first task's callback, before the second task's first call
                assert lines.index("start llm Writer sqlite 2:0") > at


@LONG
class TestWhatTheJournalShows:
    def test_lil_show_lists_the_model_and_tool_calls_with_their_usage(self, chains: Chains) -> None:
        db = chains["research-killed"].folder / "journal.db"
        shown = lil(chains.forker, "show", "research_crew", "--db", str(db))
        assert shown.returncode == 0, shown.stderr
        text = shown.stdout
        assert "state     completed; 7 attempts" in text
        keys = re.findall(r"^\s*\d+\s+(\S+)\s+step\s+done\s", text, re.M)
        names = Counter(re.sub(r":[0-9a-f]{8}(#\d+)?$", "", k) for k in keys)
        assert names == {
            "llm:Researcher": 3,
            "tool:search": 2,
            "tool:word_count": 2,
            "llm:Writer": 2,
        }
        rows = [ln for ln in text.splitlines() if re.match(r"^\s*\d+\s+llm:", ln)]
        assert len(rows) == 5 and all(re.search(r"done\s+\d+\s+\S+\s+\d+\s", r) for r in rows)
        assert re.search(r"^usage\s+[\d,]+ tokens \([\d,]+ in, [\d,]+ out\) reported by 5 steps", text, re.M)  # fmt: skip  # noqa: E501
        assert re.search(r"^replayed\s+[\d,]+ tokens", text, re.M)

    def test_two_crews_share_one_run_of_the_programs_journal(self, chains: Chains) -> None:
        db = chains["two-killed"].folder / "journal.db"
        shown = lil(chains.forker, "show", "two_crews", "--db", str(db))
        assert shown.returncode == 0, shown.stderr
        assert "state     completed; 3 attempts" in shown.stdout
        keys = re.findall(r"^\s*\d+\s+(\S+)\s+step\s+done\s", shown.stdout, re.M)
        crews = Counter(k.split(":", 1)[0] for k in keys)
        assert crews == {"crew_a": 9, "crew_b": 9}, keys


@LONG
class TestTheEnvironment:
    def test_no_network_connection_was_attempted(self, chains: Chains) -> None:
        for name in CHAINS:
            chain = chains[name]
            assert not (chain.folder / "net.log").exists(), (name, chain.folder)

    def test_the_framework_is_the_version_tested(self) -> None:
        pins = dict(
            line.split("==", 1)
            for line in CONSTRAINTS.read_text(encoding="utf-8").splitlines()
            if "==" in line and not line.startswith("#")
        )
        for name in ("crewai", "openai", "mcp", "pydantic"):
            assert importlib.metadata.version(name) == pins[name], name


EXAMPLE = ROOT / "examples" / "crewai_resume.py"


def python(forker: Any, args: list[str], folder: Path) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in ``folder``, forked from the session's forker."""
    folder.mkdir(parents=True, exist_ok=True)
    script, *rest = args
    done: subprocess.CompletedProcess[str] = forker.run(
        Path(script), *rest, cwd=folder, env=child_env(folder, "", "")
    )
    return done


def ran(out: str) -> list[str]:
    return [ln.strip() for ln in out.splitlines() if ln.startswith("  ran ")]


@LONG
class TestTheExample:
    def test_crash_then_rerun_runs_only_what_was_in_flight_and_answers_the_same(
        self, tmp_path: Path, forker: Any
    ) -> None:
        whole = python(forker, [str(EXAMPLE), "--db", "j.db"], tmp_path / "whole")
        assert whole.returncode == 0, whole.stderr[-3000:]
        crashed = python(forker, [str(EXAMPLE), "--crash", "--db", "j.db"], tmp_path / "crashed")
        assert crashed.returncode == -9, crashed.stderr[-3000:]
        assert "-- SIGKILL inside the tool call --" in crashed.stdout
        resumed = python(forker, [str(EXAMPLE), "--db", "j.db"], tmp_path / "crashed")
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert ran(crashed.stdout) + ran(resumed.stdout)[1:] == ran(whole.stdout)
        assert ran(resumed.stdout) == [
            "ran tool  word_count('Draft: WAL keeps readers and a'...)",
            "ran model Writer (after 1 tool results)",
        ]
        answer = [ln for ln in whole.stdout.splitlines() if ln.startswith(("report:", "tokens:"))]
        assert answer == [
            ln for ln in resumed.stdout.splitlines() if ln.startswith(("report:", "tokens:"))
        ]
        assert answer[0] == "report: Report: WAL keeps readers and a writer apart (8 words)."


BLOCK_START = "from letitloop.adapters.crewai import CrewAIDurabilityHandler"


def crewai_block(text: str) -> str:
    """The fenced python block of ``text`` that starts with BLOCK_START."""
    found = re.findall(r"```python\n(.*?)```", text, re.S)
    (block,) = [b for b in found if b.startswith(BLOCK_START)]
    return str(block)


@LONG
class TestTheDocsBlock:
    def test_readme_and_docs_show_the_same_block_and_it_runs_on_the_examples_crew(
        self, tmp_path: Path, forker: Any
    ) -> None:
        block = crewai_block((ROOT / "README.md").read_text(encoding="utf-8"))
        assert block == crewai_block((ROOT / "docs" / "adapters.md").read_text(encoding="utf-8"))
        program = tmp_path / "block.py"
        program.write_text(
            f"import sys\nsys.path.insert(0, {str(EXAMPLE.parent)!r})\n"
            "from crewai_resume import build_crew\nmy_crew = build_crew()\n"
            + block
            + "assert result.raw.startswith('Report: WAL'), result.raw\n",
            encoding="utf-8",
        )
        done = python(forker, [str(program)], tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        shown = lil(forker, "show", "research_crew", cwd=tmp_path)
        assert "state     completed; 1 attempt" in shown.stdout, shown.stdout + shown.stderr


# -- the same request is never paid twice (issue 48; tests/request_trials.py) ------------

REQUESTS = CREW.with_name("crewai_requests.py")
#: The other kickoffs' modes of crewai_requests.py: kickoff_async, kickoff_for_each (two
#: inputs) and kickoff_for_each_async (the same two, at once).
KICKOFFS = ("async", "each", "each-async")


@pytest.fixture(scope="session")
def requests(tmp_path_factory: pytest.TempPathFactory, forker: Any) -> Iterator[dict[str, Any]]:
    """The request scenarios of the research crew, each run when a test first asks for it.

    Session-scoped, not module-scoped: on xdist workers (``crewai_env.py -n 2``),
    tests/conftest.py's scheduler sends each class of them to whichever worker is free,
    apart from the chains, where a module-scoped fixture's tests would all go to one
    worker. Its trials' children are forked by ``forker`` (each worker's own): Trials' own
    forker (a second import of CrewAI) is let go before it started."""
    from request_trials import Trials

    trials = Trials(
        REQUESTS, tmp_path_factory.mktemp("crew_requests"), "crewai", "letitloop.adapters.crewai"
    )
    trials.close()
    trials.forkers = (forker.sibling(), forker.sibling())
    runs = {
        "killed after return": lambda: trials.killed_then_rerun("ask"),
        "two copies at once": trials.two_copies,
        "changed prompt": trials.changed_prompt,
    }
    for kickoff in KICKOFFS:
        runs[f"{kickoff}, killed"] = partial(trials.killed_then_rerun, kickoff)
        runs[f"{kickoff}, two copies at once"] = partial(trials.two_copies, kickoff)
    for kickoff in ("each", "each-async"):  # a batch with a run name: items by place
        runs[f"{kickoff} named, killed"] = partial(
            with_kickoff, NAMED, partial(trials.killed_then_rerun, kickoff)
        )
    runs["each named, list changed"] = partial(with_kickoff, NAMED, partial(list_changed, trials))

    class Found(dict[str, Any]):
        def __missing__(self, name: str) -> Any:
            self[name] = found = runs[name]()
            print(json.dumps({"crewai": {name: found.summary()}}))
            return found

    try:
        yield Found()
    finally:
        trials.close()


#: The run name of the batches whose items are named by their place (``{run}.item{n}``).
NAMED = {"run": "batch-7"}


def with_kickoff(kickoff: dict[str, Any], scenario: Any) -> Any:
    """``scenario()`` with every child's kickoff given ``kickoff`` (CREW_KICKOFF)."""
    os.environ["CREW_KICKOFF"] = json.dumps(kickoff)
    try:
        return scenario()
    finally:
        os.environ.pop("CREW_KICKOFF", None)


@dataclass
class ListChanged:
    """The trials of a named batch whose list of inputs changed: the scenario, without the
    runs of the changed list, and those runs (each refused)."""

    scenario: Any
    refused: list[Any]

    def summary(self) -> dict[str, int]:
        return {**self.scenario.summary(), "changed lists refused": len(self.refused)}


def list_changed(trials: Any) -> ListChanged:
    """``kickoff_for_each([sqlite, wal], run=...)`` killed at a random point (half of the
    trials after it returned); then the program kicks off a changed list ([wal, wal]: item
    1 is now another input); then the list as it was, to its end."""
    from request_trials import CHANGED, TASK, Trial, counted

    refused: list[Any] = []

    def trial(kill_at: str, answers: dict[str, str]) -> Any:
        if trials.random.random() < 0.5:
            kill_at = "after return"
        db, side = trials.fresh()
        first = trials.run("each", db, side, kill_at)
        before = side.read_text()
        refused.append(trials.run("each", db, side, task=CHANGED))
        assert side.read_text() == before, "the changed list made a call"
        last = trials.run("each", db, side)
        return counted(Trial(kill_at, [first, last], [answers[TASK]] * 2), side)

    return ListChanged(trials.scenario("each", trial), refused)


@LONG
@pytest.mark.parametrize("name", ["killed after return", "two copies at once", "changed prompt"])
class TestAKickoffWithTheDefaultArguments:
    def test_no_finished_call_is_paid_again(self, requests: dict[str, Any], name: str) -> None:
        assert requests[name].failures() == []
        assert requests[name].paid_again() == 0

    def test_every_call_was_paid_once_and_every_answer_is_the_uninterrupted_runs(
        self, requests: dict[str, Any], name: str
    ) -> None:
        assert requests[name].never_paid() == 0
        assert requests[name].wrong_answers() == []
        assert requests[name].summary()["killed"] >= TRIALS // 2


def _ask(forker: Any, folder: Path, **kickoff: Any) -> tuple[str, int]:
    """The crew asked once in a child: its answer, and how many calls finished in it."""
    side = folder / "side.txt"
    before = ("\n" + side.read_text()).count("\ndone ") if side.exists() else 0
    done = forker.run(
        REQUESTS,
        "ask",
        str(folder / "j.db"),
        str(side),
        env={**os.environ, "CREW_KICKOFF": json.dumps(kickoff)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    paid = ("\n" + side.read_text()).count("\ndone ") - before
    return json.loads(done.stdout.splitlines()[-1])["answer"], paid


@LONG
@pytest.mark.parametrize("kickoff", KICKOFFS)
class TestTheOtherKickoffsWithTheDefaultArguments:
    """kickoff_async, kickoff_for_each and kickoff_for_each_async: each input is its own
    request's run, so a kill anywhere (after return included) and a second copy at once
    pay no finished call again."""

    @pytest.mark.parametrize("scenario", ["killed", "two copies at once"])
    def test_no_finished_call_is_paid_again_and_every_answer_is_the_uninterrupted_runs(
        self, requests: dict[str, Any], kickoff: str, scenario: str
    ) -> None:
        found = requests[f"{kickoff}, {scenario}"]
        assert found.failures() == []
        assert found.paid_again() == 0
        assert found.never_paid() == 0
        assert found.wrong_answers() == []
        # Two copies: a quarter of the first copies are not killed, and a first copy that
        # found the second holding the run replays it, never reaching its kill point.
        assert found.summary()["killed"] >= (TRIALS // 2 if scenario == "killed" else TRIALS // 4)


@LONG
@pytest.mark.parametrize("kickoff", ["each", "each-async"])
class TestAKickoffForEachWithARunName:
    """Its n-th input's run is ``{run}.item{n}``: killed anywhere (after it returned
    included), the program run again pays no finished call again."""

    def test_no_finished_call_is_paid_again_and_every_answer_is_the_uninterrupted_runs(
        self, requests: dict[str, Any], kickoff: str
    ) -> None:
        found = requests[f"{kickoff} named, killed"]
        assert found.failures() == []
        assert found.paid_again() == 0
        assert found.never_paid() == 0
        assert found.wrong_answers() == []
        assert found.summary()["killed"] >= TRIALS // 2


#: What the refusal of a changed list says: the item, both inputs, the ways out.
WORDS_OF_THE_REFUSAL = (
    "of run 'batch-7' (its run 'batch-7.item1', ",
    'recorded for inputs {"topic": "sqlite"}',
    'now kicked off with {"topic": "wal"}',
    "('topic' differ)",
    "nothing was called",
    "the list as it was (it resumes)",
    "fresh=True",
    "lil reset research_crew --run ",
    "lil fork ",
)


@LONG
class TestAKickoffForEachWithARunNameWhoseListChanged:
    """Items are named by their place, so a changed list would pair item 1 with another
    input: it is refused before any call, naming the item, both inputs and the ways out,
    and the list as it was then finishes the batch."""

    def test_the_changed_list_is_refused_in_one_error_and_makes_no_call(
        self, requests: dict[str, Any]
    ) -> None:
        found = requests["each named, list changed"]
        assert len(found.refused) == TRIALS
        for run in found.refused:
            assert run.returncode == 1, run.stderr[-2000:]
            last = run.stderr.strip().splitlines()[-1]
            error = "letitloop.errors.StepMismatchError: kickoff_for_each item 1 "
            assert last.startswith(error), last
            for words in WORDS_OF_THE_REFUSAL:
                assert words in last, last

    def test_the_list_as_it_was_then_finishes_the_batch_paying_no_call_again(
        self, requests: dict[str, Any]
    ) -> None:
        found = requests["each named, list changed"].scenario
        assert found.failures() == []
        assert found.paid_again() == 0
        assert found.never_paid() == 0
        assert found.wrong_answers() == []


@LONG
class TestAKickoffsRunArguments:
    def test_fresh_asks_again_and_a_named_run_replays(self, tmp_path: Path, forker: Any) -> None:
        answer, paid = _ask(forker, tmp_path)
        assert paid > 0
        assert _ask(forker, tmp_path) == (answer, 0)  # the same inputs: handed back
        assert _ask(forker, tmp_path, fresh=True) == (answer, paid)  # a new answer, paid
        assert _ask(forker, tmp_path, run="ticket-812") == (answer, paid)
        assert _ask(forker, tmp_path, run="ticket-812") == (answer, 0)


# -- a budget bounds the bill across kills (issue 48; tests/bill_pipeline.py) -------------


@LONG
class TestABudgetUnderRandomKills:
    def test_the_bill_never_passes_it_and_lil_show_shows_reserved_and_settled_spend(
        self, tmp_path: Path, forker: Any
    ) -> None:
        from bill_trials import check, summary

        env = {**os.environ, **OPT_OUTS, "XDG_DATA_HOME": str(tmp_path / "xdg")}
        results = bill_trials(forker, tmp_path, TRIALS, seed=48, env=env)
        print(json.dumps({"crewai": summary(results)}))
        check(results)
        assert {r["outcome"] for r in results} == {"done", "refused"}
        # A trial whose kills cut calls short: lil show lists them, reserved and not settled.
        cut = max(results, key=lambda r: r["kills"])
        shown = lil(forker, "--db", cut["db"], "show", cut["goal"])
        assert shown.returncode == 0, shown.stderr
        budget = next(ln for ln in shown.stdout.splitlines() if ln.startswith("budget"))
        assert re.search(r"tokens reserved and not settled by \d+ calls?\)", budget), budget
        assert re.search(r"^reserved\s+\d+ paid calls: \d+ settled", shown.stdout, re.M)
        assert "not settled (cut short, counted as spent)" in shown.stdout


def bill_trials(
    forker: Any, folder: Path, n: int, seed: int, env: dict[str, str]
) -> list[dict[str, Any]]:
    """tests/bill_trials.py's ``trials("crewai", "process", ...)``, its pipeline forked from
    ``forker`` (which imported CrewAI: bill_pipeline.py's own import of it costs about
    2.5 s of CPU) instead of started afresh; its attempts are forked from it as before."""
    from bill_trials import PIPELINE

    args = ["crewai", "process", str(folder), str(n), str(seed), "random"]
    done = forker.run(PIPELINE, *args, env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    results = [json.loads(line) for line in done.stdout.splitlines()]
    # An attempt that ended otherwise printed its traceback: show it with the trial.
    odd = [r for r in results if r["outcome"] not in ("done", "refused")]
    assert not odd, (odd, done.stderr[-4000:])
    assert len(results) == n, done.stderr[-4000:]
    return results


class Forked:
    """What the crash test's ``Program.run`` uses of the ``subprocess`` module, its
    ``python SCRIPT ARGS`` forked from ``forker`` (an interpreter that imported CrewAI and
    nothing of letitloop: the child imports letitloop with the crash test's variables set,
    as a fresh interpreter would, and its hook kills it there) instead of started afresh
    (about 2.5 s of CPU each: the import of CrewAI)."""

    DEVNULL = subprocess.DEVNULL
    TimeoutExpired = subprocess.TimeoutExpired

    def __init__(self, forker: Any) -> None:
        self.forker = forker

    def run(
        self, command: list[str], *, cwd: Path, env: dict[str, str], **_: Any
    ) -> subprocess.CompletedProcess[bytes]:
        _python, script, *args = command
        done = self.forker.run(Path(script), *args, cwd=cwd, env=env)
        return subprocess.CompletedProcess(
            command, done.returncode, done.stdout.encode(), done.stderr.encode()
        )


@LONG
class TestTheCrashTest:
    def test_the_example_killed_at_three_seeded_points_runs_and_pays_nothing_twice(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, opted_out: None
    ) -> None:
        """lil crashtest's machinery on examples/crewai_resume.py, in CrewAI's environment:
        killed with SIGKILL at three of its kill points, rerun until it finishes: no recorded
        call ran or was paid again, and each finished run reported what the uninterrupted
        one did. Its processes are forked (Forked) from an interpreter that imported CrewAI."""
        from preloaded import Preloaded

        from letitloop.supervision import crashtest

        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))  # CrewAI's own files
        monkeypatch.setenv("CREWAI_STORAGE_DIR", "letitloop-tests")
        with Preloaded("crewai") as crewai_only:
            monkeypatch.setattr(crashtest, "subprocess", Forked(crewai_only))
            report = crashtest_example("crewai_resume")
        assert report.expected == "report: Report: WAL keeps readers and a writer apart (8 words)."
        assert report.tried == 3 and report.reruns >= 3  # each killed run, then its rerun
