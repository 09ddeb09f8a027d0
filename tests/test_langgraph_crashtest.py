"""LangGraph's crash test: examples/langgraph_agent.py (the prebuilt agent, its model and tool
calls steps, its checkpoints in the journal) under ``lil crashtest``'s machinery."""

from __future__ import annotations

import pytest
from crashtest_examples import crashtest_example
from forked_commands import ForkedCommands
from preloaded import Preloaded

pytest.importorskip("langgraph.prebuilt")


#: Its trials are a dozen programs run one after another: minutes on a loaded machine.
@pytest.mark.timeout(900)
class TestTheCrashTest:
    def test_the_prebuilt_agent_killed_at_three_seeded_points_books_once(self) -> None:
        """Killed with SIGKILL at three of its kill points, rerun until it finishes (its
        ``resume(agent, config)``): no recorded model or tool call ran or was paid again,
        and each finished run answered as the uninterrupted one. Each run is a child
        forked from an interpreter that imported LangGraph and letitloop's adapter, the
        crash test's hook installed in the child (tests/forked_commands.py's ``hooked``):
        a fresh one spends about 0.4 s of CPU on those imports."""
        modules = ("langgraph.prebuilt", "letitloop.adapters.langgraph")
        with (
            Preloaded(*modules, with_letitloop=True) as langgraph,
            ForkedCommands(langgraph, hooked=True) as forked,
        ):
            report = crashtest_example("langgraph_agent", forked=forked)
        assert report.expected == "answer: Done: booked Hotel Central Porto, confirmation 7F3Q."
