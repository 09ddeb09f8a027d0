"""CrewAI's own test environment: made from its pins, then tests/test_crewai.py run in it.

    python tests/crewai_env.py [-h] [--fresh] [--make] [PYTEST ARGS...]

CrewAI 1.15 pins ``openai<3`` and ``mcp<2``, which the main environment's
other frameworks outgrew; in one environment pip silently picks far older
versions instead of failing. So CrewAI's tests get a virtual environment of
their own, ``.venvs/crewai`` in the checkout: made with ``python -m venv``,
``'.[crewai]'``, pytest and the plugins the suite uses (pytest-timeout,
pytest-xdist) installed under ``.ci/crewai-constraints.txt`` (every package
pinned; pip refuses a resolution that differs), ``pip check``ed, then
``python -m pytest tests/test_crewai.py`` run in it in one process (``-n 2``
after the command: on two xdist workers),
with ``LETITLOOP_CREWAI_ENV=1`` (there a missing CrewAI fails instead of
skipping, and the test checks the framework versions against the pins). The
main suite runs this command as one test, beside its other tests
(tests/test_crewai_env.py).

The environment is made again when the pins or pyproject.toml changed since
it was made (a stamp file records their digest), or always with ``--fresh``
(CI). ``--make`` makes (or keeps) the environment and runs no test
(.ci/run type-checks the CrewAI files against it first); ``-h`` or ``--help`` first
prints this and makes nothing (pytest's help: ``--help`` after another argument).
Exits with pytest's status.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venvs" / "crewai"
CONSTRAINTS = ROOT / ".ci" / "crewai-constraints.txt"
STAMP = VENV / "letitloop-pins.sha256"


def digest() -> str:
    h = hashlib.sha256()
    for path in (CONSTRAINTS, ROOT / "pyproject.toml"):
        h.update(path.read_bytes())
    return h.hexdigest()


def make(python: Path) -> None:
    """The environment from scratch: venv, the pinned install, pip check, the stamp."""
    shutil.rmtree(VENV, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    pip = [str(python), "-m", "pip", "--disable-pip-version-check"]
    subprocess.run(
        [*pip, "install", "--quiet", "-c", str(CONSTRAINTS), "-e", ".[crewai]",
         "pytest", "pytest-timeout", "pytest-xdist"],
        check=True, cwd=ROOT,
    )  # fmt: skip
    subprocess.run([*pip, "check"], check=True, cwd=ROOT)
    STAMP.write_text(digest(), encoding="utf-8")


def main(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):  # this command's help; pytest's: after another flag
        print(__doc__)
        return 0
    fresh, make_only = "--fresh" in argv, "--make" in argv
    args = [a for a in argv if a not in ("--fresh", "--make")]
    python = VENV / "bin" / "python"
    started = time.monotonic()
    if fresh or not python.exists() or not STAMP.exists() or STAMP.read_text() != digest():
        print(f"crewai_env: making {VENV.relative_to(ROOT)} from {CONSTRAINTS.name}", flush=True)
        make(python)
        print(f"crewai_env: made in {time.monotonic() - started:.0f}s", flush=True)
    if make_only:
        return 0
    env = {**os.environ, "LETITLOOP_CREWAI_ENV": "1"}
    # pyproject's addopts but Hypothesis's plugin (CrewAI's tests use none, and this
    # environment does not install it) and -n auto: one process, no xdist worker. The main
    # suite runs this beside its own workers (tests/test_crewai_env.py), on a machine
    # their tests keep busy, so CPU saved is time saved: one process forks every child from
    # one import of CrewAI, and costs no second worker's start and import (about 86 s of CPU
    # against 93 s on two workers, run side by side; its wall time, about 1.5 times two
    # workers', stays well within the main suite's). ``-n 2`` after the command: two workers.
    addopts = "-ra -n 0 --dist loadscope --disable-plugin-autoload -p xdist -p timeout"
    tests = subprocess.run(
        [str(python), "-m", "pytest", "-p", "no:cacheprovider", "-o", f"addopts={addopts}",
         "tests/test_crewai.py", *args],
        cwd=ROOT, env=env,
    )  # fmt: skip
    print(f"crewai_env: install and tests took {time.monotonic() - started:.0f}s", flush=True)
    return tests.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
