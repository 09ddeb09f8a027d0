"""``benchmarks/queue_vs_dbos.py`` runs (with the bench extra's DBOS) and reports what it
says it measures: each system's figures, and every kill recovered where it should be
(never its timings)."""

from __future__ import annotations

import json

import pytest
from helpers import run_benchmark


class TestTheQueueComparison:
    def test_it_measures_both_systems_and_letitloop_takes_a_killed_run_over(self) -> None:
        pytest.importorskip("dbos", reason="the bench extra: pip install -e '.[bench]'")
        out = run_benchmark(
            "queue_vs_dbos.py",
            *("--stores", "file", "--enqueues", "5", "--rounds", "1", "--latency", "1"),
            *("--kills", "1", "--give-up", "3", "--settle", "0.5", "--no-write"),
            header_words=("DBOS",),
        )
        found = json.loads(out.strip().splitlines()[-1])["file"]
        for system in ("lil", "dbos"):
            assert found[system]["enqueues_per_s"] > 0, out
            assert found[system]["enqueue_to_start_s"] is not None, out
            assert found[system]["recovery_restart_recovered"] == "1/1", out
            assert found[system]["ran_again_while_holder_lived"] == "0/1", out
        # Another worker took the killed one's run over; DBOS leaves it to a restart.
        assert found["lil"]["recovery_other_recovered"] == "1/1", out
        assert found["dbos"]["recovery_other_recovered"] == "0/1", out
