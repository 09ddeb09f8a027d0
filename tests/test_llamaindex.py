"""LlamaIndex workflows made durable by ``LetItLoopRuntime`` (letitloop.adapters.llamaindex).

The workflow is a real ``workflows.Workflow`` (llama-index-workflows): a step
that fetches and keeps the topic in the context state, a step that fans out two
parts with ``ctx.send_event``, a step that counts each part (two workers, the
parts run concurrently), a step that collects both counts and finishes with
the topic read back from the context state. It runs in a child process
SIGKILLed inside a step, between two steps, and inside one of two concurrent
steps, then runs again. Each step writes ``start X`` and ``end X`` to a side
file, so what ran is counted outside the journal.

Where a kill could land between a step's ``end`` line and the commit of its
result (a race: that step would rightly run again), the test first waits for
the result to be in the journal file (read with ``lil show``), so a finished
step is one whose result was recorded, and the count is exact.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from crashtest_examples import EXAMPLES, crashtest_example
from helpers import lil_forked, wait_until, write_script
from preloaded import Child, Preloaded

from letitloop.run.crashhook import KILL_ENV, LEDGER_ENV
from letitloop.supervision.crashtest import Run, committed_steps, judge

pytest.importorskip("workflows")


WORKFLOW = """
    import asyncio, json, os, signal, sys, time

    from workflows import Context, Workflow, step
    from workflows.events import Event, StartEvent, StopEvent

    from letitloop import Journal
    from letitloop.adapters.llamaindex import LetItLoopRuntime, journaled

    LOG = os.environ["WF_LOG"]
    HOLD = os.environ.get("WF_HOLD", "")  # the step that blocks (to be killed in)
    KILL_AFTER = os.environ.get("WF_KILL_AFTER", "")  # die once this tick is recorded
    RELEASED = os.environ["WF_RELEASED"]  # once this file exists, nothing blocks


    def note(line):
        with open(LOG, "a") as f:
            f.write(line + "\\n")


    async def work(label):
        note(f"start {label}")
        while label == HOLD and not os.path.exists(RELEASED):
            await asyncio.sleep(0.02)  # killed here by the test
        note(f"end {label}")


    record = journaled.JournaledRun.record


    async def record_then_maybe_die(self, t, state):
        await record(self, t, state)  # committed: the step's result is in the journal
        if KILL_AFTER and journaled.label(t) == KILL_AFTER and not os.path.exists(RELEASED):
            os.kill(os.getpid(), signal.SIGKILL)  # between this step and the next


    journaled.JournaledRun.record = record_then_maybe_die


    class Fetched(Event):
        text: str


    class Part(Event):
        index: int
        text: str


    class Counted(Event):
        index: int
        words: int


    class Pipeline(Workflow):
        @step
        async def fetch(self, ctx: Context, ev: StartEvent) -> Fetched:
            await work("fetch")
            await ctx.store.set("topic", ev.topic)
            return Fetched(text=f"{ev.topic} is a city in Norway by a fjord")

        @step
        async def split(self, ctx: Context, ev: Fetched) -> Part | None:
            await work("split")
            words = ev.text.split()
            ctx.send_event(Part(index=0, text=" ".join(words[:4])))
            ctx.send_event(Part(index=1, text=" ".join(words[4:])))
            return None

        @step(num_workers=2)
        async def count(self, ev: Part) -> Counted:
            await work(f"count {ev.index}")
            return Counted(index=ev.index, words=len(ev.text.split()))

        @step
        async def join(self, ctx: Context, ev: Counted) -> StopEvent | None:
            got = ctx.collect_events(ev, [Counted, Counted])
            if got is None:
                return None
            await work("join")
            topic = await ctx.store.get("topic")
            parts = sorted((c.index, c.words) for c in got)
            return StopEvent(result={"topic": topic, "parts": parts})


    async def main():
        wf = Pipeline(runtime=LetItLoopRuntime(), timeout=120)
        async with Journal("pipeline", run="oslo", path=sys.argv[1]):
            result = await wf.run(topic="Oslo")
        print(json.dumps({"result": result}))


    asyncio.run(main())
"""

STEPS = ["fetch", "split", "count 0", "count 1", "join"]


def lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


@pytest.fixture(scope="module")
def workflows_sdk() -> Iterator[Preloaded]:
    """Forks the workflows' processes from an interpreter that imported llama-index-workflows
    and the adapter once (each child a process of its own, SIGKILLed for real)."""
    # The modules of tests/test_agent_requests.py's LlamaIndex forker (with what its runs
    # import at their first call): one forker kept idle serves both files in a worker.
    modules = (
        "workflows",
        "workflows.representation",
        "workflows.runtime.verbose",
        "workflows.representation.validate",
        "letitloop.adapters.llamaindex",
    )
    with Preloaded(*modules, with_letitloop=True) as sdk:
        yield sdk


def run_workflow(sdk: Preloaded, folder: Path, **env: str) -> Child:
    script = write_script(folder, "pipeline.py", WORKFLOW)
    base = {"WF_LOG": str(folder / "steps.log"), "WF_RELEASED": str(folder / "go")}
    return sdk.start(script, str(folder / "journal.db"), env={**os.environ, **base, **env})


def finish(child: Child) -> Any:
    done = child.wait()
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])["result"]


def lil_show(db: Path) -> dict[str, Any]:
    """``lil show oslo --json --db DB``, in a process of its own (forked: tests/helpers.py)."""
    done = lil_forked("show", "oslo", "--json", "--db", str(db))
    shown: dict[str, Any] = json.loads(done.stdout) if done.returncode == 0 else {"rows": []}
    return shown


def recorded(db: Path, what: str) -> int:
    """How many tick rows whose key ends with ``what`` the journal file holds now."""
    return sum(1 for r in lil_show(db)["rows"] if r["key"].endswith(what))


@dataclass
class Resumed:
    kill: str
    result: Any
    first: list[str]  # the side file when the first attempt died
    log: list[str]  # after the second attempt
    db: Path


@pytest.fixture(scope="module")
def uninterrupted(
    tmp_path_factory: pytest.TempPathFactory, workflows_sdk: Preloaded
) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("uninterrupted")
    result = finish(run_workflow(workflows_sdk, folder))
    return {"result": result, "log": lines(folder / "steps.log")}


#: Where a "between" kill dies: once this tick is recorded.
BETWEEN = {
    "between fetch and split": "step_result:fetch",
    # Its session's start recorded, not its start event (lil crashtest found a rerun
    # that waited forever for the start event it took for recorded).
    "between the session's start and the start event": "session_start",
}


@pytest.fixture(
    scope="module",
    params=[
        "inside fetch",
        "between fetch and split",
        "inside count 1",
        "between the session's start and the start event",
    ],
)
def resumed(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    workflows_sdk: Preloaded,
) -> Resumed:
    """The workflow killed at ``request.param``, then run again."""
    kill: str = request.param
    folder = tmp_path_factory.mktemp("killed")
    log, db = folder / "steps.log", folder / "journal.db"
    if kill.startswith("between"):
        child = run_workflow(workflows_sdk, folder, WF_KILL_AFTER=BETWEEN[kill])
    else:
        held = kill.removeprefix("inside ")
        child = run_workflow(workflows_sdk, folder, WF_HOLD=held)
        wait_until(lambda: f"start {held}" in lines(log), f"the workflow inside {held}")
        if held == "count 1":
            # count 0 runs beside it: wait until its result is committed, so that
            # the kill cannot land between its side effect and its record.
            wait_until(lambda: recorded(db, "step_result:count") == 1, "count 0 recorded")
        os.kill(child.pid, signal.SIGKILL)
    assert child.wait().returncode == -signal.SIGKILL
    first = lines(log)
    (folder / "go").touch()
    result = finish(run_workflow(workflows_sdk, folder))
    return Resumed(kill, result, first, lines(log), db)


class TestAWorkflowKilledAndRunAgain:
    def test_every_finished_step_ran_exactly_once(self, resumed: Resumed) -> None:
        ends = Counter(x.removeprefix("end ") for x in resumed.log if x.startswith("end "))
        assert ends == Counter(STEPS), resumed.log

    def test_only_the_step_in_flight_started_again(self, resumed: Resumed) -> None:
        starts = Counter(x.removeprefix("start ") for x in resumed.log if x.startswith("start "))
        in_flight = {x.removeprefix("start ") for x in resumed.first if x.startswith("start ")}
        in_flight -= {x.removeprefix("end ") for x in resumed.first if x.startswith("end ")}
        assert starts == Counter(STEPS) + Counter(in_flight)
        if resumed.kill.startswith("inside"):
            assert in_flight == {resumed.kill.removeprefix("inside ")}
        else:
            assert in_flight == set()  # between steps: nothing was running

    def test_its_result_is_the_uninterrupted_runs(
        self, resumed: Resumed, uninterrupted: dict[str, Any]
    ) -> None:
        assert resumed.result == uninterrupted["result"]
        # The topic came back from the context state recorded by fetch.
        assert resumed.result == {"topic": "Oslo", "parts": [[0, 4], [1, 5]]}

    def test_a_rerun_of_the_finished_run_runs_nothing(
        self, resumed: Resumed, workflows_sdk: Preloaded
    ) -> None:
        folder = resumed.db.parent
        before = lines(folder / "steps.log")
        assert finish(run_workflow(workflows_sdk, folder)) == resumed.result
        assert lines(folder / "steps.log") == before


class TestAWorkflowRunOutsideAJournal:
    def test_each_request_is_a_run_of_its_own_and_the_same_request_replays(
        self, tmp_path: Path, workflows_sdk: Preloaded
    ) -> None:
        script = write_script(
            tmp_path,
            "echo.py",
            """
            import asyncio, json, sys

            from workflows import Workflow, step
            from workflows.events import StartEvent, StopEvent

            from letitloop.adapters.llamaindex import LetItLoopRuntime


            class Echo(Workflow):
                @step
                async def echo(self, ev: StartEvent) -> StopEvent:
                    print("ran", ev.text, file=sys.stderr)
                    return StopEvent(result=ev.text.upper())


            async def main():
                wf = Echo(runtime=LetItLoopRuntime())
                return [await wf.run(text="a"), await wf.run(text="b"), await wf.run(text="a")]


            print(json.dumps(asyncio.run(main())))
            """,
        )
        db = tmp_path / "journal.db"
        env = {**os.environ, "LETITLOOP_DB": str(db)}
        first = workflows_sdk.run(script, env=env)
        assert first.returncode == 0, first.stderr
        assert json.loads(first.stdout) == ["A", "B", "A"]
        assert first.stderr.split() == ["ran", "a", "ran", "b"]  # the third: replayed
        again = workflows_sdk.run(script, env=env)
        assert json.loads(again.stdout) == ["A", "B", "A"]
        assert again.stderr == ""  # every request replayed: no step ran
        listed = lil_forked("--db", str(db), "runs", "--json")
        assert listed.returncode == 0, listed.stderr
        runs = json.loads(listed.stdout)
        assert sorted((r["goal"], r["state"]) for r in runs) == [("Echo", "completed")] * 2


class TestTheCookbook:
    def test_its_crash_replays_the_finished_calls_and_runs_the_killed_tool_again(self) -> None:
        pytest.importorskip("llama_index.core.agent.workflow")
        done = subprocess.run(
            [sys.executable, "examples/llamaindex_resume.py", "--crash"],
            cwd=Path(__file__).resolve().parent.parent,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stderr
        assert "result: AgentOutput: Oslo has 700000 people; 2 + 3 = 5" in done.stdout
        assert "{'city': 'Oslo', 'total': 5}" in done.stdout
        ran = [line.split(": ", 1) for line in done.stdout.splitlines() if line.startswith("pid ")]
        pids = list(dict.fromkeys(pid for pid, _ in ran))
        assert len(pids) == 2
        assert [what for pid, what in ran if pid == pids[0]] == [
            "model researcher, after 0 tool results",
            "tool lookup Oslo",
            "model researcher, after 1 tool results",
            "model writer, after 2 tool results",
            "tool add 2 3",
        ]
        assert [what for pid, what in ran if pid == pids[1]] == [
            "tool add 2 3",
            "model writer, after 3 tool results",
            "model writer: the structured report",
        ]


class TestARunStartedAgainWithAnotherInput:
    def test_it_is_refused_and_the_same_input_still_gets_its_result(self, tmp_path: Path) -> None:
        import asyncio

        from workflows import Workflow, step
        from workflows.events import StartEvent, StopEvent

        from letitloop import Journal
        from letitloop.adapters.llamaindex import LetItLoopRuntime
        from letitloop.errors import StepMismatchError

        ran: list[str] = []

        class Echo(Workflow):
            @step
            async def echo(self, ev: StartEvent) -> StopEvent:
                ran.append(ev.text)
                return StopEvent(result=ev.text.upper())

        async def run(text: str) -> Any:
            async with Journal("echo", run="r", path=tmp_path / "journal.db"):
                return await Echo(runtime=LetItLoopRuntime()).run(text=text)

        assert asyncio.run(run("oslo")) == "OSLO"
        with pytest.raises(StepMismatchError) as refused:
            asyncio.run(run("bergen"))
        said = str(refused.value)
        assert "'Echo'" in said and "Echo.00001:add_event" in said
        assert "bergen" in said and "oslo" in said
        assert "run='...'" in said and "lil reset echo --run" in said and "lil fork" in said
        assert asyncio.run(run("oslo")) == "OSLO"  # replayed: the step is not run again
        assert ran == ["oslo"]


class TestTheRuntimesRunOptions:
    def test_a_named_run_names_each_wf_run_in_turn_and_fresh_asks_again(
        self, tmp_path: Path
    ) -> None:
        import asyncio

        from workflows import Workflow, step
        from workflows.events import StartEvent, StopEvent

        from letitloop.adapters.llamaindex import LetItLoopRuntime

        ran: list[str] = []

        class Echo(Workflow):
            @step
            async def echo(self, ev: StartEvent) -> StopEvent:
                ran.append(ev.text)
                return StopEvent(result=ev.text.upper())

        db = str(tmp_path / "journal.db")

        async def twice(**options: Any) -> list[Any]:
            wf = Echo(runtime=LetItLoopRuntime(path=db, **options))
            return [await wf.run(text="a"), await wf.run(text="b")]

        assert asyncio.run(twice(run="echo")) == ["A", "B"]
        assert asyncio.run(twice(run="echo")) == ["A", "B"]  # both named runs replayed
        assert ran == ["a", "b"]
        assert asyncio.run(twice(fresh=True)) == ["A", "B"]  # no name, a fresh answer
        assert ran == ["a", "b", "a", "b"]
        listed = lil_forked("--db", db, "runs", "--json")
        assert listed.returncode == 0, listed.stderr
        runs = json.loads(listed.stdout)
        names = sorted(r["name"] for r in runs)
        assert names[2:] == ["echo", "echo.turn2"]  # sorted after upper case
        assert all(n.startswith("Echo.request:") for n in names[:2]) and len(names) == 4

    def test_reuse_and_fresh_are_checked_when_it_is_made(self) -> None:
        from letitloop.adapters.llamaindex import LetItLoopRuntime
        from letitloop.errors import MisuseError

        with pytest.raises(MisuseError, match="reuse="):
            LetItLoopRuntime(reuse=-1)


@pytest.fixture(params=["sqlite", "memory", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A journal location of each store: a SQLite file, memory://, PostgreSQL."""
    if request.param == "sqlite":
        return str(tmp_path / "journal.db")
    if request.param == "memory":
        return f"memory://li-{tmp_path.name}"
    import pg_server

    return pg_server.location()


class TestAWorkflowRunOnEveryStore:
    def test_is_its_own_run_replayed_once_completed_and_run_again_when_fresh(
        self, store: str
    ) -> None:
        import asyncio

        from workflows import Workflow, step
        from workflows.events import StartEvent, StopEvent

        from letitloop.adapters.llamaindex import LetItLoopRuntime

        ran: list[str] = []

        class Echo(Workflow):
            @step
            async def echo(self, ev: StartEvent) -> StopEvent:
                ran.append(ev.text)
                return StopEvent(result=ev.text.upper())

        async def once(**options: Any) -> Any:
            return await Echo(runtime=LetItLoopRuntime(path=store, **options)).run(text="a")

        assert asyncio.run(once()) == asyncio.run(once()) == "A"
        assert ran == ["a"]
        assert asyncio.run(once(fresh=True)) == "A"
        assert ran == ["a", "a"]


#: Its trials are a dozen programs run one after another: minutes on a loaded machine.
@pytest.mark.timeout(900)
class TestTheCrashTest:
    def test_the_example_killed_at_three_seeded_points_runs_and_pays_nothing_twice(
        self,
    ) -> None:
        """lil crashtest's machinery on examples/llamaindex_resume.py's agents (its process
        ``--agents``, where every kill point is; forked): killed with SIGKILL at three of its
        kill points drawn with a seed, rerun until it finishes: no recorded call ran or was
        paid again, and each finished run answered as the uninterrupted one. The whole
        example (its parent printing the ledger) is killed and rerun by
        TestTheExampleKilledWhereTheCrashTestFoundReruns, and by the benchmark at every
        point."""
        report = crashtest_example("llamaindex_resume")
        assert report.expected == (
            "result: AgentOutput: Oslo has 700000 people; 2 + 3 = 5 {'city': 'Oslo', 'total': 5}"
        )


#: Where lil crashtest killed examples/llamaindex_resume.py and its rerun went wrong
#: (issue 56), by the step's key: its kind of kill point, and whether the example runs
#: whole (its parent prints what ran) or only its agents (``--agents``, its child).
#: Around the tick after a model call's step, the rerun recorded its session's start
#: under that tick's number (every later key one further), where the killed run had
#: committed the model call; in flight with the tool call it sent, a step's result was
#: recorded after the tool's; killed after the last step's body, the rerun, whose every
#: call was recorded, left the example no ledger to print.
EXAMPLE_KILLS = {
    "before the tick after the second model call": ("before", "00017:add_event", False),
    "after the tick after the third model call": ("end", "00028:add_event", False),
    "as the handoff's step returned, its tool in flight": (
        "start", "00019:step_result:parse_agent_output", False,
    ),
    "after the last step's body, the whole example": (
        "end", "00038:step_result:parse_agent_output", True,
    ),
}  # fmt: skip


@dataclass
class ExampleTrial:
    """The example's runs in one folder (the first killed), what they called, the keys."""

    runs: list[Run]
    #: The model and tool calls that really ran, in every process (the example's notes).
    calls: list[str]
    #: The journal's step keys, read back by ``lil show`` in a process of its own.
    keys: list[str]


def example_run(sdk: Preloaded, folder: Path, n: int, kill: str = "", whole: bool = False) -> Run:
    """The example run once in ``folder`` under the crash test's hook (ledger ``n``),
    SIGKILLed at ``kill`` (``KIND<TAB>POSITION``) if given."""
    ledger = folder / f"ledger{n}"
    tmp = folder / f"tmp{n}"  # its TMPDIR: given --db, a run that finished leaves it empty
    tmp.mkdir()
    env = {**os.environ, "LETITLOOP_DB": str(folder / "default.db"), LEDGER_ENV: str(ledger)}
    env.pop(KILL_ENV, None)
    env["TMPDIR"] = str(tmp)
    if kill:
        env[KILL_ENV] = kill
    args = ["--db", "journal.db"]
    if not whole:
        args += ["--agents", "--ledger", str(folder / "notes.txt")]
    done = sdk.run(EXAMPLES / "llamaindex_resume.py", *args, env=env, cwd=folder)
    if done.returncode == 0:
        assert list(tmp.iterdir()) == [], "the example left files in its TMPDIR"
    events = []
    for line in ledger.read_text().splitlines() if ledger.exists() else []:
        kind, where, key, run = [*line.split("\t"), "", "", ""][:4]
        events.append((kind, where, key, run))
    return Run(done.returncode, done.stdout, events)


def calls_of(trial_runs: list[Run], notes: Path) -> list[str]:
    """The model and tool calls that ran: the example's notes, from its file (``--agents``)
    or as the whole example printed them, without the process ids."""
    lines = notes.read_text().splitlines() if notes.exists() else []
    lines += [line for run in trial_runs for line in run.stdout.splitlines()]
    return [line.split(": ", 1)[1] for line in lines if line.startswith("pid ")]


def example_keys(folder: Path) -> list[str]:
    shown = lil_show(folder / "journal.db")
    return sorted(row["key"] for row in shown["rows"])


@pytest.fixture(scope="module")
def agents_sdk() -> Iterator[Preloaded]:
    """Forks the example's processes from an interpreter that imported llama-index-core's
    agents (letitloop is imported by each child: the crash test's hook is installed then)."""
    pytest.importorskip("llama_index.core.agent.workflow")
    with Preloaded("llama_index.core.agent.workflow") as preloaded:
        yield preloaded


@pytest.fixture(scope="module")
def example_reference(
    agents_sdk: Preloaded, tmp_path_factory: pytest.TempPathFactory
) -> ExampleTrial:
    folder = tmp_path_factory.mktemp("example-reference")
    run = example_run(agents_sdk, folder, 0)
    assert run.status == 0, run.stdout
    return ExampleTrial([run], calls_of([run], folder / "notes.txt"), example_keys(folder))


@pytest.fixture(scope="module", params=list(EXAMPLE_KILLS))
def example_killed(
    request: pytest.FixtureRequest,
    agents_sdk: Preloaded,
    example_reference: ExampleTrial,
    tmp_path_factory: pytest.TempPathFactory,
) -> ExampleTrial:
    """The example SIGKILLed at one of EXAMPLE_KILLS, then run again until it finishes."""
    kind, key, whole = EXAMPLE_KILLS[request.param]
    where = next(
        w for event, w, k, _ in example_reference.runs[0].events
        if event == "start" and k == f"AgentWorkflow.{key}"
    )  # fmt: skip
    folder = tmp_path_factory.mktemp("example-killed")
    runs = [example_run(agents_sdk, folder, 0, f"{kind}\t{where}", whole)]
    assert ("kill", kind, where, "") in runs[0].events  # killed there, by the hook
    while len(runs) <= 3 and (len(runs) == 1 or runs[-1].status != 0):
        runs.append(example_run(agents_sdk, folder, len(runs), whole=whole))
    return ExampleTrial(runs, calls_of(runs, folder / "notes.txt"), example_keys(folder))


def answer(run: Run) -> list[str]:
    return [line for line in run.stdout.splitlines() if line.startswith("result: ")]


#: Its trials are a dozen processes run one after another: a minute on a loaded machine.
@pytest.mark.timeout(900)
class TestTheExampleKilledWhereTheCrashTestFoundReruns:
    def test_it_finishes_with_the_uninterrupted_runs_answer(
        self, example_killed: ExampleTrial, example_reference: ExampleTrial
    ) -> None:
        last = example_killed.runs[-1]
        assert last.status == 0, last.stdout
        assert (
            answer(last)
            == answer(example_reference.runs[0])
            == [
                "result: AgentOutput: Oslo has 700000 people; 2 + 3 = 5 "
                "{'city': 'Oslo', 'total': 5}"
            ]
        )

    def test_nothing_ran_twice_by_its_notes_or_the_crash_tests_judge(
        self, example_killed: ExampleTrial, example_reference: ExampleTrial
    ) -> None:
        # Killed between steps, or as a step returned with only the handoff's tool (which
        # notes nothing) in flight: no noted call was in flight, none may run again.
        assert Counter(example_killed.calls) == Counter(example_reference.calls)
        reference = example_reference.runs[0].events
        known = {key for event, _, key, _ in reference if event == "start"}
        once = committed_steps(example_reference.runs)
        assert judge(example_killed.runs, known, once) == []

    def test_its_steps_keys_are_the_uninterrupted_runs(
        self, example_killed: ExampleTrial, example_reference: ExampleTrial
    ) -> None:
        assert example_killed.keys == example_reference.keys
