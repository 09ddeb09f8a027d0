"""A smoke run of the codec benchmark (the figures come from benchmarks/bench_codec.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class TestTheCodecBenchmarkSmokeRun:
    def test_it_round_trips_its_three_payloads_and_reports_each_contender(self) -> None:
        done = subprocess.run(
            [sys.executable, "benchmarks/bench_codec.py", "--repeats", "3"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr  # it asserts each payload round-trips
        for contender in ("letitloop codec", "raw msgspec.json", "json (stdlib)", "pickle"):
            assert done.stdout.count(contender) == 3, done.stdout
        assert "typed: datetime, UUID" in done.stdout
