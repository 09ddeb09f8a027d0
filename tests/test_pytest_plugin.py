"""The pytest plugin (``pytest11`` entry point): a test marked ``letitloop_replay(path)`` replays
a fixture made by ``lil fixture``, calling no step, and fails naming the step that drifted.

Each case is a small project of its own run by a pytest process of its own (``pytester``'s
``runpytest_subprocess``, its pytest forked from an interpreter that imported pytest, the
plugins it loads and letitloop once: :func:`runpytest`): the pipeline is recorded by a
child process, turned into a fixture by ``lil``, and tested by a test file that only uses
the marker; the plugin comes from the installed package's entry point, nothing else
registers it (an import registers no plugin).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import textwrap
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from helpers import UNUSED_PYTEST_PLUGINS, lil_forked, run_forked
from preloaded import Preloaded

pytest_plugins = ["pytester"]

#: ``python -m pytest`` as a script, for a pytest forked from :func:`pytests`.
PYTEST_MAIN = Path(__file__).with_name("pytest_main.py")


@pytest.fixture(scope="module")
def pytests() -> Iterator[Preloaded]:
    """Forks the pytest processes from an interpreter that imported pytest, the plugins
    pytest loads here through their entry points, and letitloop once (about 0.5 s of CPU a
    fresh pytest spends on them). Each child loads its plugins as a fresh pytest does."""
    plugins = ("xdist.plugin", "xdist.looponfail", "pytest_timeout", "platformdirs.pytest_plugin")
    with Preloaded("pytest", *plugins, "letitloop.pytest_plugin", with_letitloop=True) as forker:
        yield forker


def runpytest(pytester: pytest.Pytester, pytests: Preloaded, *args: str) -> pytest.RunResult:
    """``pytester.runpytest_subprocess(*args)``: ``python -m pytest --basetemp=... ARGS`` in
    the project's folder, with pytester's environment and the folder first on PYTHONPATH,
    its pytest a child forked from ``pytests``."""
    path = os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH", "")]))
    basetemp = pytester.path / "runpytest-0"
    done = pytests.run(
        PYTEST_MAIN,
        f"--basetemp={basetemp}",
        *args,
        env={**os.environ, "PYTHONPATH": path},
        cwd=pytester.path,
    )
    ret: int | pytest.ExitCode = done.returncode
    with contextlib.suppress(ValueError):
        ret = pytest.ExitCode(ret)
    return pytest.RunResult(ret, done.stdout.splitlines(), done.stderr.splitlines(), 0.0)


# The pipeline under test: DRIFT (read when it runs) changes it after the recording.
AGENT = textwrap.dedent(
    """
    import os
    from letitloop import durable, step

    CALLS = []

    def search(query, limit):
        CALLS.append(("search", query))
        return [f"{query} result {i}" for i in range(limit)]

    def summarize(found):
        CALLS.append(("summarize", len(found)))
        return " / ".join(found)

    @durable("agent")
    def agent(question):
        drift = os.environ.get("DRIFT", "")
        limit = 5 if drift == "args" else 3
        found = step("search", search, question, limit=limit)
        if drift == "added":
            step("rerank", summarize, found)
        return step("summarize", summarize, found)
    """
)

TEST_FILE = textwrap.dedent(
    """
    import os
    import pytest
    import agent
    from letitloop.errors import UnrecordedStepError

    @pytest.mark.letitloop_replay("tests/fixtures/agent.db")
    def test_the_agent_replays_its_recording():
        answer = agent.agent("why?")
        assert answer == "why? result 0 / why? result 1 / why? result 2"
        assert agent.CALLS == []  # no step function was called

    @pytest.mark.letitloop_replay("tests/fixtures/agent.db")
    def test_the_fixture_names_the_file(letitloop_replay):
        assert letitloop_replay.path.is_absolute() and letitloop_replay.path.name == "agent.db"
        assert os.environ["LETITLOOP_DB"] == str(letitloop_replay.path)
        with pytest.raises(UnrecordedStepError, match="never-recorded"):
            with letitloop_replay.journal("agent", run="never-recorded"):
                pass  # replay-only on the fixture: a run it lacks is refused

    def test_a_test_without_the_marker_is_left_alone():
        assert "LETITLOOP_REPLAY" not in os.environ
        assert "LETITLOOP_DB" not in os.environ
    """
)


@pytest.fixture(scope="module")
def recorded_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder tests/fixtures/ holding the agent's recording turned into agent.db by
    ``lil fixture``, each in a process of its own (forked: tests/helpers.py), in a project
    folder of its own: made once for the module."""
    folder = tmp_path_factory.mktemp("recorded")
    (folder / "agent.py").write_text(textwrap.dedent(AGENT), encoding="utf-8")
    (folder / "record.py").write_text("import agent\nprint(agent.agent('why?'))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LETITLOOP_")}
    recorded = run_forked(
        folder / "record.py", cwd=folder, env={**env, "LETITLOOP_DB": "recordings.db"}
    )
    assert recorded.returncode == 0, recorded.stderr
    (folder / "tests" / "fixtures").mkdir(parents=True)
    made = lil_forked(
        "--db", "recordings.db", "fixture", "agent", "--to", "tests/fixtures/agent.db",
        cwd=folder, env=env,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    return folder / "tests" / "fixtures"


@pytest.fixture
def project(pytester: pytest.Pytester, recorded_fixture: Path) -> pytest.Pytester:
    """A project with the agent and :func:`recorded_fixture`'s tests/fixtures/agent.db (no
    recordings.db: the test must read the fixture, nothing else)."""
    pytester.makepyfile(agent=AGENT)
    shutil.copytree(recorded_fixture, pytester.path / "tests" / "fixtures")
    pytester.makepyfile(test_agent=TEST_FILE)
    return pytester


def run(
    project: pytest.Pytester, pytests: Preloaded, monkeypatch: pytest.MonkeyPatch, drift: str = ""
) -> pytest.RunResult:
    monkeypatch.setenv("DRIFT", drift)  # the pytest process inherits it
    return runpytest(project, pytests, "-p", "no:cacheprovider", *UNUSED_PYTEST_PLUGINS, "-v")


class TestTheEntryPoint:
    def test_the_installed_package_registers_the_plugin_under_pytest11(self) -> None:
        found = [e.value for e in entry_points(group="pytest11") if e.name == "letitloop"]
        assert found == ["letitloop.pytest_plugin"]


class TestAMarkedTestReplaysTheFixture:
    def test_it_passes_calling_no_step_and_leaves_unmarked_tests_alone(
        self, project: pytest.Pytester, pytests: Preloaded, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        result = run(project, pytests, monkeypatch)
        result.assert_outcomes(passed=3)

    def test_changed_arguments_fail_naming_the_step_with_both_arguments_side_by_side(
        self, project: pytest.Pytester, pytests: Preloaded, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        result = run(project, pytests, monkeypatch, "args")
        result.assert_outcomes(failed=1, passed=2)
        out = result.stdout.str()
        assert "step 'search' drifted from the recording" in out
        result.stdout.re_match_lines([r".*argument 0\s+same\s+'why\?'$"])
        result.stdout.re_match_lines([r".*argument limit=\s+digest \w+\s+5\s+<- differs$"])
        assert "keyword argument 'limit' differs" in out

    def test_an_added_step_fails_naming_it_uncalled(
        self, project: pytest.Pytester, pytests: Preloaded, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        result = run(project, pytests, monkeypatch, "added")
        result.assert_outcomes(failed=1, passed=2)
        out = result.stdout.str()
        assert "step 'rerank' drifted from the recording" in out
        assert "the recording has no step 'rerank'" in out and "was not run" in out

    def test_a_fixture_file_that_does_not_exist_is_an_error_saying_how_to_make_one(
        self, pytester: pytest.Pytester, pytests: Preloaded
    ) -> None:
        pytester.makepyfile(
            test_missing="""
            import pytest

            @pytest.mark.letitloop_replay("tests/fixtures/nowhere.db")
            def test_it():
                raise AssertionError("the test body must not run")
            """
        )
        result = runpytest(pytester, pytests, "-p", "no:cacheprovider", *UNUSED_PYTEST_PLUGINS)
        result.assert_outcomes(errors=1)
        out = result.stdout.str()
        assert "the fixture file tests/fixtures/nowhere.db does not exist" in out
        assert "lil fixture RUN --to tests/fixtures/nowhere.db" in out
        assert "must not run" not in out


class TestTheClockFixture:
    def test_an_hour_long_durable_sleep_passes_at_once_and_is_recorded_as_an_hour(
        self, pytester: pytest.Pytester, pytests: Preloaded
    ) -> None:
        pytester.makepyfile(
            test_sleep="""
            import time
            from letitloop import Journal

            def test_it(letitloop_clock, tmp_path):
                began, start = time.monotonic(), letitloop_clock()
                with Journal("nightly", path=tmp_path / "j.db") as j:
                    j.sleep("until-tomorrow", 3600)
                    j.step("after", lambda: "done")
                assert letitloop_clock() - start >= 3600  # the journal's time passed an hour
                assert time.monotonic() - began < 60  # the test's did not
            """
        )
        result = runpytest(pytester, pytests, "-p", "no:cacheprovider", *UNUSED_PYTEST_PLUGINS)
        result.assert_outcomes(passed=1)


CRASH_TESTS = textwrap.dedent(
    '''
    import sys

    CAREFUL = """
    import letitloop

    def ask(question):
        letitloop.usage(input_tokens=10, cost=0.1)
        return question.upper()

    @letitloop.durable(goal_id="careful")
    def pipeline():
        return letitloop.step("ask", ask, "hi") + letitloop.step("again", ask, "ho")

    print(pipeline())
    """

    # The send is outside any step: every rerun sends again.
    BROKEN = """
    import letitloop

    @letitloop.durable(goal_id="broken")
    def pipeline():
        with open("sent.log", "a") as log:
            log.write("sent\\\\n")
        return letitloop.step("ask", str.upper, "hi")

    print(pipeline())
    """

    def test_a_careful_pipeline(letitloop_crashtest, tmp_path):
        (tmp_path / "careful.py").write_text(CAREFUL)
        report = letitloop_crashtest([sys.executable, str(tmp_path / "careful.py")])
        assert report.tried == 6 and not report.repeats
        assert len(report.allowed) == 2  # each step killed after its paid call returned

    def test_a_broken_pipeline(letitloop_crashtest, tmp_path):
        (tmp_path / "broken.py").write_text(BROKEN)
        letitloop_crashtest(
            [sys.executable, str(tmp_path / "broken.py")], effects="sent.log", max_kills=1
        )
    '''
)


class TestTheCrashTestFixture:
    def test_under_the_option_a_careful_pipeline_passes_and_a_broken_one_fails_with_the_report(
        self, pytester: pytest.Pytester, pytests: Preloaded
    ) -> None:
        pytester.makepyfile(test_crash=CRASH_TESTS)
        result = runpytest(
            pytester, pytests, "-p", "no:cacheprovider", *UNUSED_PYTEST_PLUGINS, "--letitloop-crash"
        )
        result.assert_outcomes(passed=1, failed=1)
        out = result.stdout.str()
        assert "repeats: 1" in out
        assert "killed before step 'ask': side effect 'sent' happened 2 times (reference: 1)" in out

    def test_without_the_option_its_tests_are_skipped_saying_how_to_run_them(
        self, pytester: pytest.Pytester, pytests: Preloaded
    ) -> None:
        pytester.makepyfile(test_crash=CRASH_TESTS)
        result = runpytest(
            pytester, pytests, "-p", "no:cacheprovider", *UNUSED_PYTEST_PLUGINS, "-rs"
        )
        result.assert_outcomes(skipped=2)
        assert "a crash test: run it with pytest --letitloop-crash" in result.stdout.str()
