"""A smoke run of the crash-conformance benchmark (the full run is benchmarks/crash.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class TestTheCrashBenchmarkSmokeRun:
    def test_ten_crashed_trials_all_recover_without_repeating_returned_work(self) -> None:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks.crash",
                "--trials",
                "5",
                "--no-write",
                "--durability",
                "process,power",
                "--seed",
                "smoke",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert done.returncode == 0, done.stderr
        outcome = json.loads(done.stdout.strip().splitlines()[-1])
        for mode in ("process", "power"):
            got = outcome[mode]
            assert got["trials"] == 5
            assert got["recovered"] == 5, got
            assert got["duplicate_marker_bodies"] == 0, got
            assert got["returned_then_rerun"] == 0, got
        assert sum(outcome[m]["kills"] for m in outcome) >= 5
