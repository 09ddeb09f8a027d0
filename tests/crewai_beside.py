"""CrewAI's tests run beside the whole suite, started by the suite's first process.

``python tests/crewai_env.py`` (CrewAI's tests in their own environment) takes about three
minutes, most of it waiting on its own children. Run as a test, it held an xdist worker
for all of them: on 2 cores one of the three workers then ran nothing else for a third of
the run. Now the suite's first process (the controller under xdist) starts it at
configure when the whole suite runs (README's command: no ``-k``, no ``-m``, the file
selected), writes its exit status when it ends, and tests/test_crewai_env.py, handed
out last, only waits for that status and reads its output. Run any other way (the file
alone, a selection), the test runs the command itself, as before.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: The folder of the run started beside this suite: its output (``log``) and, once it
#: ended, its exit status (``status``); unset when none was started.
FOLDER = "LETITLOOP_TESTS_CREWAI_BESIDE"
TEST_FILE = ROOT / "tests" / "test_crewai_env.py"

_started: list[subprocess.Popen[bytes]] = []


def command_env() -> dict[str, str]:
    """Its own pytest session: none of this one's variables (an xdist worker's name)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_") and k != FOLDER}


def start_if_whole(config: Any) -> None:
    """Start CrewAI's tests in the background when this session runs the whole of
    tests/test_crewai_env.py unfiltered; the folder goes to the workers in FOLDER."""
    if FOLDER in os.environ or config.option.markexpr or config.option.keyword:
        return
    here = Path(config.invocation_params.dir)
    chosen = [(here / arg.split("::", 1)[0]).resolve() for arg in config.args]
    if not any(arg == TEST_FILE or arg in TEST_FILE.parents for arg in chosen):
        return
    if any("::" in arg for arg in config.args if arg.split("::", 1)[0].endswith(TEST_FILE.name)):
        return  # one test of it named: it runs it
    folder = Path(tempfile.mkdtemp(prefix="letitloop-crewai-"))
    with (folder / "log").open("wb") as log:
        popen = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "crewai_env.py")],
            cwd=ROOT,
            env=command_env(),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its whole tree is stopped at once (stop_if_running)
        )
    _started.append(popen)

    def note_its_end() -> None:
        code = popen.wait()
        (folder / "status.part").write_text(str(code))
        (folder / "status.part").replace(folder / "status")  # whole, or not there

    threading.Thread(target=note_its_end, name="crewai-beside", daemon=True).start()
    os.environ[FOLDER] = str(folder)


def stop_if_running() -> None:
    """At the session's end: a run nobody waited for (the test deselected, the session
    interrupted) is stopped, not left running, and its folder removed."""
    for popen in _started:
        if popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(popen.pid, signal.SIGKILL)
            popen.wait()
    if _started and FOLDER in os.environ:
        shutil.rmtree(os.environ.pop(FOLDER), ignore_errors=True)
