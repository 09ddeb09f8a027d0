"""A smoke run of the primitives under random SIGKILL (in full: benchmarks/primitives_crash.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class TestThePrimitivesUnderRandomSigkill:
    def test_four_trials_sync_and_async_keep_every_promise(self) -> None:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks.primitives_crash",
                "--trials",
                "4",
                "--no-write",
                "--seed",
                "smoke",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        got = json.loads(done.stdout.strip().splitlines()[-1])
        assert got["trials"] == 4 and got["kills"] >= 4, got
        # Trial 3 is cancelled at a random moment: it ends cancelled, or completed first.
        assert set(got["outcomes"]) <= {"completed", "cancelled"}, got
        assert sum(got["outcomes"].values()) == 4 and got["unexpected_exits"] == [], got
        for counter in (
            "returned_then_rerun",
            "backoff_skipped",
            "sleep_early",
            "wrong_value",
            "usage_wrong",
            "resumed_after_cancel",
        ):
            assert got[counter] == 0, (counter, got)
