"""DSPy programs made durable by ``JournaledLM`` and ``journaled_tool`` (letitloop.adapters.dspy).

The program is a real ``dspy.Module``: a ``dspy.Predict`` that picks a city,
a tool call for its weather, a ``dspy.Predict`` that answers. The LM is DSPy's
offline ``DummyLM`` (in its stateless mode: answers chosen by the prompt, so a
new process answers the same), subclassed to write ``start``/``end`` lines to a
side file and to report tokens in its history entry as a provider would. It
runs in a child process SIGKILLed inside each model call and inside the tool
call, then runs again; the side file counts what ran, outside the journal.
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
from crashtest_examples import crashtest_example
from forked_commands import ForkedCommands
from helpers import lil_forked, wait_until, write_script
from preloaded import Child, Preloaded

pytest.importorskip("dspy")


PROGRAM = """
    import json, os, sys, time

    import dspy
    from dspy.utils.dummies import DummyLM

    from letitloop import Journal
    from letitloop.adapters.dspy import JournaledLM, journaled_tool

    LOG = os.environ["DS_LOG"]
    HOLD = os.environ.get("DS_HOLD", "")  # the call that blocks (to be killed in)
    RELEASED = os.environ["DS_RELEASED"]  # once this file exists, nothing blocks


    def note(line):
        with open(LOG, "a") as f:
            f.write(line + "\\n")


    def hold(label):
        while label == HOLD and not os.path.exists(RELEASED):
            time.sleep(0.02)  # killed here by the test


    class CountingLM(DummyLM):
        def __call__(self, prompt=None, *, messages=None, **kwargs):
            label = "lm answer" if "snow in Oslo" in messages[-1]["content"] else "lm plan"
            note(f"start {label}")
            hold(label)
            out = super().__call__(prompt, messages=messages, **kwargs)
            self.history[-1]["usage"] = {"prompt_tokens": 11, "completion_tokens": 4}
            note(f"end {label}")
            return out


    lm = CountingLM(
        {
            "Where is it snowing?": {"city": "Oslo"},
            "snow in Oslo": {"answer": "Go to Oslo: snow in Oslo"},
        }
    )


    def weather(city: str) -> str:
        \"\"\"The weather in a city.\"\"\"
        note("start tool weather")
        hold("tool weather")
        note("end tool weather")
        return f"snow in {city}"


    class Trip(dspy.Module):
        def __init__(self):
            super().__init__()
            self.plan = dspy.Predict("question -> city")
            self.weather = journaled_tool(weather)
            self.answer = dspy.Predict("city, weather -> answer")

        def forward(self, question):
            city = self.plan(question=question).city
            return self.answer(city=city, weather=self.weather(city=city))


    dspy.configure(lm=JournaledLM(lm))
    with Journal("trip", run="oslo", path=sys.argv[1]):
        answer = Trip()(question="Where is it snowing?").answer
    print(json.dumps({"answer": answer}))
"""

CALLS = ["lm plan", "tool weather", "lm answer"]


def lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


@pytest.fixture(scope="module")
def framework() -> Iterator[Preloaded]:
    """Forks the processes from an interpreter that imported DSPy and the adapter once."""
    with Preloaded(
        "dspy",
        "dspy.utils.dummies",
        "dspy.clients.engines.dummy_engine",
        "letitloop.adapters.dspy",
        with_letitloop=True,
    ) as preloaded:
        yield preloaded


def run_program(framework: Preloaded, folder: Path, hold: str = "") -> Child:
    script = write_script(folder, "trip.py", PROGRAM)
    env = {
        "DS_LOG": str(folder / "calls.log"),
        "DS_HOLD": hold,
        "DS_RELEASED": str(folder / "go"),
    }
    return framework.start(script, str(folder / "journal.db"), env={**os.environ, **env})


def finish(child: Child) -> str:
    done = child.wait()
    assert done.returncode == 0, done.stderr
    answer: str = json.loads(done.stdout.splitlines()[-1])["answer"]
    return answer


def lil_show(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``lil show oslo ARGS`` forked (helpers.lil_forked): what it prints is checked."""
    return lil_forked("show", "oslo", *args, "--db", str(db))


@dataclass
class Resumed:
    hold: str
    answer: str
    log: list[str]
    db: Path


@pytest.fixture(scope="module", params=CALLS)
def resumed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, framework: Preloaded
) -> Resumed:
    """The program killed inside ``request.param``, then run again."""
    hold: str = request.param
    folder = tmp_path_factory.mktemp("killed")
    child = run_program(framework, folder, hold=hold)
    wait_until(lambda: f"start {hold}" in lines(folder / "calls.log"), f"the program in {hold}")
    os.kill(child.pid, signal.SIGKILL)
    assert child.wait().returncode == -signal.SIGKILL
    (folder / "go").touch()
    answer = finish(run_program(framework, folder))
    return Resumed(hold, answer, lines(folder / "calls.log"), folder / "journal.db")


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory, framework: Preloaded) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("uninterrupted")
    answer = finish(run_program(framework, folder))
    rows = json.loads(lil_show(folder / "journal.db", "--json").stdout)["rows"]
    return {"answer": answer, "rows": rows}


class TestAProgramKilledInsideACall:
    def test_every_finished_call_ran_exactly_once(self, resumed: Resumed) -> None:
        ends = Counter(x.removeprefix("end ") for x in resumed.log if x.startswith("end "))
        starts = Counter(x.removeprefix("start ") for x in resumed.log if x.startswith("start "))
        assert ends == Counter(CALLS)
        assert starts == Counter(CALLS) + Counter([resumed.hold])  # only the killed one again

    def test_its_answer_is_the_uninterrupted_runs(
        self, resumed: Resumed, uninterrupted: dict[str, Any]
    ) -> None:
        assert resumed.answer == uninterrupted["answer"] == "Go to Oslo: snow in Oslo"

    def test_lil_show_lists_the_calls_with_their_tokens_once(
        self, resumed: Resumed, uninterrupted: dict[str, Any]
    ) -> None:
        rows = json.loads(lil_show(resumed.db, "--json").stdout)["rows"]
        assert [r["key"] for r in rows] == ["dspy.lm", "dspy.tool:weather", "dspy.lm#2"]
        assert [r["key"] for r in rows] == [r["key"] for r in uninterrupted["rows"]]
        tokens = [(r["input_tokens"], r["output_tokens"]) for r in rows]
        assert tokens == [(11, 4), (None, None), (11, 4)]
        assert "reported by 2 steps" in lil_show(resumed.db).stdout


class TestTheCookbook:
    def test_its_crash_replays_what_returned_and_runs_the_killed_call_again(self) -> None:
        done = subprocess.run(
            [sys.executable, "examples/dspy_resume.py", "--crash"],
            cwd=Path(__file__).resolve().parent.parent,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert "answer: Go to Oslo: snow in Oslo" in done.stdout
        ran = [
            line.split(": ", 1)[1] for line in done.stdout.splitlines() if line.startswith("pid ")
        ]
        assert ran == ["lm plan", "tool weather", "tool weather", "lm answer"]


class TestAProgramOutsideAJournal:
    def test_it_runs_as_usual_and_journals_nothing(
        self, framework: Preloaded, tmp_path: Path
    ) -> None:
        script = write_script(
            tmp_path,
            "plain.py",
            """
            import asyncio, json

            import dspy
            from dspy.utils.dummies import DummyLM

            from letitloop.adapters.dspy import JournaledLM, journaled_tool


            def double(x: int) -> int:
                \"\"\"Twice x.\"\"\"
                return 2 * x


            lm = JournaledLM(DummyLM({"Oslo?": {"answer": "snow"}}))
            dspy.configure(lm=lm)
            predict = dspy.Predict("question -> answer")
            answers = [predict(question="Oslo?").answer]
            answers.append(asyncio.run(predict.acall(question="Oslo?")).answer)
            print(json.dumps([*answers, journaled_tool(double)(x=21)]))
            """,
        )
        db = tmp_path / "journal.db"
        done = framework.run(script, env={**os.environ, "LETITLOOP_DB": str(db)})
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == ["snow", "snow", 42]
        assert not db.exists()


class TestAnAsyncProgramInAJournal:
    def test_its_calls_replay_on_the_next_open_of_the_run(self, tmp_path: Path) -> None:
        import asyncio

        import dspy
        from dspy.utils.dummies import DummyLM

        from letitloop import Journal
        from letitloop.adapters.dspy import JournaledLM, journaled_tool

        made: list[str] = []

        class Counting(DummyLM):  # type: ignore[misc]
            async def acall(self, prompt: Any = None, *, messages: Any = None, **kw: Any) -> Any:
                made.append("lm")
                return await super().acall(prompt, messages=messages, **kw)

        async def double(x: int) -> int:
            """Twice x."""
            made.append("tool")
            return 2 * x

        lm = JournaledLM(Counting({"Oslo?": {"answer": "snow"}}))
        tool = journaled_tool(double)

        async def program() -> list[Any]:
            async with Journal("async-trip", run="r", path=tmp_path / "journal.db"):
                with dspy.context(lm=lm):
                    answer = await dspy.Predict("question -> answer").acall(question="Oslo?")
                return [answer.answer, await tool.acall(x=21)]

        assert asyncio.run(program()) == ["snow", 42]
        assert asyncio.run(program()) == ["snow", 42]  # the completed run: all replayed
        assert made == ["lm", "tool"]


def counting_program(made: list[str]) -> Any:
    """A ``dspy.Predict`` on a DummyLM that notes each LM call it makes in ``made``."""
    import dspy
    from dspy.utils.dummies import DummyLM

    from letitloop.adapters.dspy import JournaledLM

    class Counting(DummyLM):  # type: ignore[misc]
        def __call__(self, prompt: Any = None, *, messages: Any = None, **kw: Any) -> Any:
            made.append(messages[-1]["content"].split("\n")[1])
            return super().__call__(prompt, messages=messages, **kw)

        async def acall(self, prompt: Any = None, *, messages: Any = None, **kw: Any) -> Any:
            made.append(messages[-1]["content"].split("\n")[1])
            return await super().acall(prompt, messages=messages, **kw)

    dspy.configure(
        lm=JournaledLM(Counting({"Oslo?": {"answer": "snow"}, "Rome?": {"answer": "sun"}}))
    )
    return dspy.Predict("question -> answer")


class TestADurableProgramsRun:
    def test_is_its_request_by_default_and_a_new_answer_is_asked_for_with_fresh(
        self, tmp_path: Path
    ) -> None:
        from letitloop.adapters.dspy import durable_program

        made: list[str] = []
        predict = counting_program(made)
        db = str(tmp_path / "journal.db")
        ask = durable_program(predict, "weather", path=db)
        assert [ask(question=q).answer for q in ("Oslo?", "Rome?", "Oslo?")] == [
            "snow",
            "sun",
            "snow",
        ]
        assert made == ["Oslo?", "Rome?"]  # the same request again: replayed
        again = durable_program(counting_program(made), "weather", path=db, fresh=True)
        assert again(question="Oslo?").answer == "snow"
        assert made == ["Oslo?", "Rome?", "Oslo?"]  # fresh=True: asked again
        listed = lil_forked("--db", db, "runs", "--json")
        assert listed.returncode == 0, listed.stderr
        runs = json.loads(listed.stdout)
        names = sorted(r["name"] for r in runs)
        assert len(names) == 3 and names[0].startswith("weather.request:")
        assert names[2] == names[1] + "~2"  # Oslo's second generation

    def test_an_async_call_is_its_request_too(self, tmp_path: Path) -> None:
        import asyncio

        from letitloop.adapters.dspy import durable_program

        made: list[str] = []
        ask = durable_program(counting_program(made), path=str(tmp_path / "j.db"))

        async def twice() -> list[str]:
            return [(await ask.acall(question=q)).answer for q in ("Oslo?", "Oslo?")]

        assert asyncio.run(twice()) == ["snow", "snow"]
        assert asyncio.run(twice()) == ["snow", "snow"]
        assert made == ["Oslo?"]

    def test_a_completed_request_older_than_reuse_is_asked_again(self, tmp_path: Path) -> None:
        import time

        from letitloop.adapters.dspy import durable_program

        made: list[str] = []
        ask = durable_program(counting_program(made), path=str(tmp_path / "j.db"), reuse=0.2)
        ask(question="Oslo?")
        ask(question="Oslo?")
        time.sleep(0.3)
        ask(question="Oslo?")
        assert made == ["Oslo?", "Oslo?"]

    def test_a_named_run_names_each_call_in_turn_and_replays_them_whenever_asked(
        self, tmp_path: Path
    ) -> None:
        from letitloop.adapters.dspy import durable_program

        made: list[str] = []
        db = str(tmp_path / "journal.db")
        ask = durable_program(counting_program(made), "weather", run="trip", path=db)
        assert [ask(question="Oslo?").answer, ask(question="Rome?").answer] == ["snow", "sun"]
        again = durable_program(counting_program(made), "weather", run="trip", path=db)
        assert [again(question="Oslo?").answer, again(question="Rome?").answer] == ["snow", "sun"]
        assert made == ["Oslo?", "Rome?"]
        listed = lil_forked("--db", db, "runs")
        assert listed.returncode == 0, listed.stderr
        shown = listed.stdout
        assert " trip " in shown and " trip.turn2 " in shown

    def test_an_edited_program_is_a_new_run_and_a_named_one_is_refused_with_the_ways_out(
        self, tmp_path: Path
    ) -> None:
        import dspy

        from letitloop.adapters.dspy import durable_program
        from letitloop.errors import StepMismatchError

        made: list[str] = []
        db = str(tmp_path / "journal.db")
        durable_program(counting_program(made), path=db)(question="Oslo?")
        edited = counting_program(made)
        edited.signature = edited.signature.with_instructions("Answer in one word.")
        assert durable_program(edited, path=db)(question="Oslo?").answer == "snow"
        assert made == ["Oslo?", "Oslo?"]  # a new prompt: a new run, no error
        durable_program(counting_program(made), "w", run="r", path=db)(question="Oslo?")
        with pytest.raises(StepMismatchError) as refused:
            durable_program(edited, "w", run="r", path=db)(question="Oslo?")
        said = str(refused.value)
        assert "'w'" in said and "'dspy.lm'" in said and "prompt" in said
        assert "run='...'" in said and "lil reset w --run" in said and "lil fork" in said
        assert refused.value.key == "dspy.lm"
        assert isinstance(dspy.settings.lm, object)
        assert made == ["Oslo?", "Oslo?", "Oslo?"]  # the refused call was not made


@pytest.fixture(params=["sqlite", "memory", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A journal location of each store: a SQLite file, memory://, PostgreSQL."""
    if request.param == "sqlite":
        return str(tmp_path / "journal.db")
    if request.param == "memory":
        return f"memory://dspy-{tmp_path.name}"
    import pg_server

    return pg_server.location()


class TestAProgramCallOnEveryStore:
    def test_is_its_own_run_replayed_once_completed_and_asked_again_when_fresh(
        self, store: str
    ) -> None:
        from letitloop.adapters.dspy import durable_program

        made: list[str] = []
        ask = durable_program(counting_program(made), path=store)
        assert [ask(question="Oslo?").answer, ask(question="Oslo?").answer] == ["snow", "snow"]
        assert made == ["Oslo?"]
        durable_program(counting_program(made), path=store, fresh=True)(question="Oslo?")
        assert made == ["Oslo?", "Oslo?"]


#: Its trials are a dozen programs run one after another: minutes on a loaded machine.
@pytest.mark.timeout(900)
class TestTheCrashTest:
    def test_the_example_killed_at_three_seeded_points_runs_and_pays_nothing_twice(
        self,
    ) -> None:
        """lil crashtest's machinery on examples/dspy_resume.py (the DSPy program):
        killed with SIGKILL at three of its kill points drawn with a seed, rerun until it
        finishes: no recorded call ran or was paid again, and each finished run answered as
        the uninterrupted one. Each run, and the child that runs its program, is a child
        forked from an interpreter that imported DSPy, not letitloop
        (tests/forked_commands.py)."""
        with (
            Preloaded("dspy", "dspy.utils.dummies", "dspy.clients.engines.dummy_engine") as dspy,
            ForkedCommands(dspy, children=True) as forked,
        ):
            report = crashtest_example("dspy_resume", forked=forked)
        assert report.expected == "answer: Go to Oslo: snow in Oslo"
