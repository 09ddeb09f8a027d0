"""LangGraph's crash test: examples/langgraph_agent.py (the prebuilt agent, its model and tool
calls steps, its checkpoints in the journal) under ``lil crashtest``'s machinery."""

from __future__ import annotations

import pytest
from crashtest_examples import crashtest_example

pytest.importorskip("langgraph.prebuilt")


#: Its trials are a dozen programs run one after another: minutes on a loaded machine.
@pytest.mark.timeout(900)
class TestTheCrashTest:
    def test_the_prebuilt_agent_killed_at_three_seeded_points_books_once(self) -> None:
        """Killed with SIGKILL at three of its kill points, rerun until it finishes (its
        ``resume(agent, config)``): no recorded model or tool call ran or was paid again,
        and each finished run answered as the uninterrupted one."""
        report = crashtest_example("langgraph_agent")
        assert report.expected == "answer: Done: booked Hotel Central Porto, confirmation 7F3Q."
