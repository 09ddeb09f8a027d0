"""``benchmarks/web.py`` runs, and reports every page it says it measures (never its timings)."""

from __future__ import annotations

import pytest
from helpers import run_benchmark

pytest.importorskip("starlette")


class TestTheWebBenchmark:
    def test_it_reports_the_long_run_and_the_many_runs_pages_with_the_versions(self) -> None:
        out = run_benchmark("web.py", "--steps", "300", "--runs", "120", "--repeats", "1")
        rows = {line.split("|")[1].strip() for line in out.splitlines() if line.startswith("| ")}
        for label in (
            "run of 300 steps, page 1",
            "run of 300 steps, live check (unchanged: 204)",
            "lil export --format html, 300 steps whole",
            "runs page of 120 runs, first page",
            "runs page of 120 runs, page at offset 70",
        ):
            assert label in rows, out
        assert "(the journal of 120 runs took" in out
