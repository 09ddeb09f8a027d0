"""A smoke run of the LangGraph kill benchmark (the long runs are benchmarks/langgraph_kill.py).

Real graphs with durable nodes in forked child processes, SIGKILLed at
random moments, in each of LangGraph's durability modes, the journal sharing
the saver's file; fresh children resume. Every returned ``step()`` is
counted in a side file: none may run again, every thread must end with the
right state, and an answered ``interrupt()`` must not be asked again.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

pytest.importorskip("langgraph.graph", reason="LangGraph is not installed (letitloop[langgraph])")

if not hasattr(__import__("os"), "fork"):  # pragma: no cover
    pytest.skip("the trials fork their children", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.langgraph_kill import Outcome, Setup, run  # noqa: E402

TRIALS = 3
#: Kills that landed, per configuration run in this session (a child that
#: finished before its kill time proves nothing).
KILLS: dict[str, int] = {}


def _trials(tmp_path: Path, scenario: str, mode: str, state: str) -> Outcome:
    folder = tmp_path / f"{scenario}-{mode}-{state}"
    folder.mkdir()
    setup = Setup(folder, mode, state, large_mb=1)
    got = run(setup, scenario, TRIALS, random.Random(f"{scenario}-{mode}-{state}"), 1)
    KILLS[folder.name] = got.kills
    return got


class TestDurableNodesKilledAtRandom:
    @pytest.mark.parametrize(
        ("mode", "state"),
        [("sync", "instant"), ("async", "instant"), ("exit", "instant"), ("async", "large")],
    )
    def test_no_returned_step_runs_again_and_the_graph_ends_right(
        self, tmp_path: Path, mode: str, state: str
    ) -> None:
        got = _trials(tmp_path, "steps", mode, state)
        assert got.errors == []
        assert got.trials == TRIALS and got.wrong == 0
        assert got.reruns == 0, got

    @pytest.mark.parametrize("mode", ["sync", "async"])
    def test_an_answer_the_node_received_is_never_asked_for_again(
        self, tmp_path: Path, mode: str
    ) -> None:
        got = _trials(tmp_path, "resume", mode, "instant")
        assert got.errors == []
        assert got.wrong == 0 and got.reruns == 0
        assert got.asked_again == 0, got
        assert got.answers_saved_late == 0, got


# xdist: one worker (tests/conftest.py): the last test counts the kills of the tests above.
class TestTheSmokeRunItself:
    def test_its_kills_landed_while_children_were_running(self) -> None:
        if len(KILLS) < 6:
            pytest.skip("run with the whole module: counts the kills of the tests above")
        # 18 trials; a kill lands in about half (it is drawn over one run's duration).
        assert sum(KILLS.values()) >= 3, KILLS
