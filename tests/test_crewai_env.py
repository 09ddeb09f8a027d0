"""CrewAI's tests, run in CrewAI's own environment from the main suite, as one test.

CrewAI pins ``openai<3`` and ``mcp<2``, so its tests (tests/test_crewai.py) run in an
environment of their own, ``.venvs/crewai`` (``python tests/crewai_env.py`` makes it
when it is missing or its pins changed, then runs them there in one process).
The main suite runs that command here, as one test: tests/conftest.py's scheduler
starts it first, so that CrewAI's processes, which wait on their own children most of
the time, run beside the main suite's tests instead of after them. It passes when every
CrewAI test passed; its output is printed when it fails, and its closing line at the
end of the main suite's report when it passes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.timeout(1800)  # the environment made (pip) when missing, then 41 tests
def test_crewais_tests_pass_in_their_own_environment(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    log = tmp_path / "crewai_env.log"
    # Its own pytest session: none of this one's variables (an xdist worker's name).
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    with log.open("w", encoding="utf-8") as out:
        done = subprocess.run(
            [sys.executable, str(ROOT / "tests" / "crewai_env.py")],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    printed = log.read_text(encoding="utf-8", errors="replace")
    assert done.returncode == 0, f"python tests/crewai_env.py failed:\n{printed}"
    # Its pytest's closing line, without the rule around it (the main suite's is the last).
    closing = [
        ln.strip("= ") for ln in printed.splitlines() if " passed" in ln or "crewai_env:" in ln
    ]
    assert any(" passed" in ln for ln in closing), f"no test ran:\n{printed}"
    # Carried to the controller's report (tests/conftest.py's pytest_terminal_summary).
    request.node.user_properties.append(("crewai_env", "\n".join(closing)))
