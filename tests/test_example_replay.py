"""The worked example of docs/testing.md (examples/replay_test/), run as a reader would: record a
run, make a redacted fixture with ``lil fixture``, test it with pytest (the plugin from the
installed package's entry point), change the pipeline, and see the test name the drifted step.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from helpers import UNUSED_PYTEST_PLUGINS

PYTEST_OPTIONS = ("-p", "no:cacheprovider", *UNUSED_PYTEST_PLUGINS)

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "replay_test"
SECRET = "sk-live-0c5e1f00d"


def sh(folder: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("LETITLOOP_", "MODEL_"))}
    return subprocess.run(
        [sys.executable, *args],
        cwd=folder,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


class TestTheWorkedExample:
    def test_record_fixture_test_change_and_the_test_names_the_drifted_step(
        self, tmp_path: Path
    ) -> None:
        folder = tmp_path / "replay_test"
        shutil.copytree(EXAMPLE, folder)
        ticket = "I was charged twice for March"

        recorded = sh(
            folder, "triage.py", ticket, LETITLOOP_DB="recordings.db", MODEL_API_KEY=SECRET
        )
        assert recorded.returncode == 0, recorded.stderr
        assert recorded.stdout.startswith("billing: ")

        (folder / "tests" / "fixtures").mkdir()
        made = sh(
            folder,
            "-m",
            "letitloop",
            "--db",
            "recordings.db",
            "fixture",
            "triage",
            "--to",
            "tests/fixtures/triage.db",
            "--redact",
            "api_key",
        )
        assert made.returncode == 0, made.stderr
        assert SECRET.encode() in (folder / "recordings.db").read_bytes()
        assert SECRET.encode() not in (folder / "tests" / "fixtures" / "triage.db").read_bytes()
        (folder / "recordings.db").unlink()  # the test reads the fixture, nothing else

        passed = sh(folder, "-m", "pytest", *PYTEST_OPTIONS, "tests")
        assert passed.returncode == 0, passed.stdout + passed.stderr
        assert "1 passed" in passed.stdout

        source = folder / "triage.py"
        source.write_text(source.read_text().replace('TONE = "friendly"', 'TONE = "formal"'))
        failed = sh(folder, "-m", "pytest", *PYTEST_OPTIONS, "tests")
        assert failed.returncode == 1
        out = failed.stdout
        assert "step 'draft' drifted from the recording" in out
        assert "tone=formal" in out and "<- differs" in out
        assert "unchecked(…)" in out  # the key is not shown
        assert "'classify'" not in out.split("drifted")[0]  # the first step still replays
