"""Every program of ``examples/`` passes ``lil crashtest``: killed at a few of its kill points
(drawn with a seed), rerun until it finishes, nothing ran or was paid twice and it answers
as the uninterrupted run did.

The adapters' examples are crash-tested in their adapter's tests (the call of
``crashtest_example`` there); the others here. benchmarks/crashtest_examples.py kills
each example at every kill point, with its cost (docs/crashtest.md).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from crashtest_examples import ALL, BY_NAME, EXAMPLES, crashtest_example

HERE = Path(__file__).resolve().parent


class TestEveryExample:
    def test_is_listed_with_how_the_crash_test_runs_it(self) -> None:
        programs = {
            str(path.relative_to(EXAMPLES))
            for path in EXAMPLES.rglob("*.py")
            if path.name != "conftest.py" and "tests" not in path.relative_to(EXAMPLES).parts
        }
        assert programs == {example.file for example in ALL}

    def test_is_crash_tested_by_a_test_of_the_suite(self) -> None:
        called = {
            name
            for path in HERE.glob("test_*.py")
            for name in re.findall(r'crashtest_example\(\s*"(\w+)"', path.read_text("utf-8"))
        }
        assert called == set(BY_NAME)


def needs(name: str) -> None:
    if importlib.util.find_spec(BY_NAME[name].needs) is None:
        pytest.skip(f"{BY_NAME[name].file} needs {BY_NAME[name].needs}")


#: Each test runs its program a few times over: minutes on a loaded machine.
@pytest.mark.timeout(900)
class TestTheExamplesOfNoAdapter:
    def test_the_replay_tests_triage_pipeline(self) -> None:
        report = crashtest_example("replay_test_triage", max_kills=2)
        assert report.expected.startswith("billing: Hello!")

    def test_the_starlette_apps_report_under_its_own_worker(self) -> None:
        needs("starlette_app")
        report = crashtest_example("starlette_app", max_kills=2)
        assert report.expected == "{'id': 'order-1'} {'total': 30}"

    def test_the_fastapi_apps_report_under_its_own_worker(self) -> None:
        needs("fastapi_app")
        report = crashtest_example("fastapi_app", max_kills=2)
        assert report.expected == "{'id': 'order-1'} {'total': 30}"

    def test_the_langgraph_graph_killed_in_a_node_and_run_again(self) -> None:
        needs("langgraph_resume")
        crashtest_example("langgraph_resume", max_kills=2)

    def test_the_autogen_team_that_waits_for_a_person(self) -> None:
        needs("autogen_human")
        report = crashtest_example("autogen_human", max_kills=2)
        assert report.expected.startswith("approved poem")
