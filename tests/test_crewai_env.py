"""CrewAI's tests, run in CrewAI's own environment from the main suite, as one test.

CrewAI pins ``openai<3`` and ``mcp<2``, so its tests (tests/test_crewai.py) run in an
environment of their own, ``.venvs/crewai`` (``python tests/crewai_env.py`` makes it
when it is missing or its pins changed, then runs them there in one process).
The main suite runs that command as one test: when the whole suite runs, its first
process starts the command at once (tests/crewai_beside.py), so that CrewAI's processes,
which wait on their own children most of the time, run beside the main suite's tests
without holding a worker, and this test, handed out last, waits for its end; run
otherwise, this test runs the command itself. It passes when every
CrewAI test passed; its output is printed when it fails, and its closing line at the
end of the main suite's report when it passes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import crewai_beside
import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.timeout(1800)  # the environment made (pip) when missing, then 41 tests
def test_crewais_tests_pass_in_their_own_environment(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    beside = os.environ.get(crewai_beside.FOLDER)
    if beside:  # started by the suite's first process (tests/crewai_beside.py): its end
        log, status = Path(beside) / "log", Path(beside) / "status"
        while not status.exists():
            time.sleep(0.5)
        returncode = int(status.read_text())
    else:
        log = tmp_path / "crewai_env.log"
        with log.open("w", encoding="utf-8") as out:
            returncode = subprocess.run(
                [sys.executable, str(ROOT / "tests" / "crewai_env.py")],
                cwd=ROOT,
                env=crewai_beside.command_env(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            ).returncode
    printed = log.read_text(encoding="utf-8", errors="replace")
    assert returncode == 0, f"python tests/crewai_env.py failed:\n{printed}"
    # Its pytest's closing line, without the rule around it (the main suite's is the last).
    closing = [
        ln.strip("= ") for ln in printed.splitlines() if " passed" in ln or "crewai_env:" in ln
    ]
    assert any(" passed" in ln for ln in closing), f"no test ran:\n{printed}"
    # Carried to the controller's report (tests/conftest.py's pytest_terminal_summary).
    request.node.user_properties.append(("crewai_env", "\n".join(closing)))


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_its_help_says_how_to_run_it_and_makes_nothing(flag: str) -> None:
    stamp = ROOT / ".venvs" / "crewai" / "letitloop-pins.sha256"
    before = stamp.stat().st_mtime_ns if stamp.exists() else None
    got = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "crewai_env.py"), flag],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert got.returncode == 0, got.stderr
    assert "python tests/crewai_env.py [-h] [--fresh] [--make] [PYTEST ARGS...]" in got.stdout
    assert "making" not in got.stdout and got.stderr == ""
    assert (stamp.stat().st_mtime_ns if stamp.exists() else None) == before
