"""Journals for the web view's tests, made the way users make them: real child interpreters
(one SIGKILLed in a step, then resumed), and a run whose recorded text is hostile."""

from __future__ import annotations

import os
import signal
import textwrap
import time
from pathlib import Path

from helpers import ForkedProcess, spawn_forked

from letitloop import Journal
from letitloop.errors import JournalFileError
from letitloop.inspection import list_runs, open_inspector

#: What a forking interpreter for ``lil ui`` imports (with letitloop): ``lil``'s commands
#: and the web view's modules (tests/test_web_browser.py).
WEB_MODULES = (
    "letitloop.cli",
    "letitloop.web.app",
    "letitloop.web.pages",
    "letitloop.web.server",
    "letitloop.web.timeline",
    "letitloop.web.values",
    "letitloop.web.views",
)

#: A pipeline whose ``slow*`` steps wait for a gate file named after them (so a test
#: decides when each ends, or kills the process in it).
PIPELINE = """
import os, sys, time
from letitloop import Journal
from letitloop.errors import JournalFileError

db, gates, goal, steps = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(",")

def work(key):
    print("start", key, flush=True)
    if key.startswith("slow"):
        while not os.path.exists(os.path.join(gates, key)):
            time.sleep(0.02)
    return {"key": key, "note": "result of " + key}

with Journal(goal, path=db) as j:
    for key in steps:
        j.step(key, work, key)
print("finished", flush=True)
"""


class Pipeline:
    """The pipeline script beside a journal, and its gates."""

    def __init__(self, folder: Path) -> None:
        self.db = folder / "journal.db"
        self.gates = folder / "gates"
        self.gates.mkdir(exist_ok=True)
        self.script = folder / "pipeline.py"
        self.script.write_text(textwrap.dedent(PIPELINE), encoding="utf-8")

    def spawn(self, goal: str, steps: str) -> ForkedProcess:
        """The pipeline run as ``python -u pipeline.py ...``, in a forked child."""
        return spawn_forked(self.script, str(self.db), str(self.gates), goal, steps)

    def open(self, key: str) -> None:
        (self.gates / key).touch()

    def wait_in_flight(self, goal: str, key: str, proc: ForkedProcess) -> None:
        """Until a reader sees ``key`` in flight (its ``running`` row, after about 1 s)."""
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, proc.communicate()
            runs = []
            try:
                journal = open_inspector(self.db)
            except JournalFileError:  # not made yet, or its tables not yet
                pass
            else:
                try:
                    runs = list_runs(journal, goal) if journal.has_goal(goal) else []
                finally:
                    journal.close()
                if any(f.key == key and f.live for r in runs for f in r.in_flight):
                    return
            assert time.monotonic() < deadline, f"{key} never showed as in flight"
            time.sleep(0.05)

    def kill_in(self, goal: str, steps: str, key: str) -> None:
        """Run the pipeline and SIGKILL it while it is in step ``key``."""
        child = self.spawn(goal, steps)
        try:
            self.wait_in_flight(goal, key, child)
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.communicate(timeout=30)

    def finish(self, goal: str, steps: str) -> str:
        """Run the pipeline to its end (its gates open); what it printed."""
        for key in steps.split(","):
            self.open(key)
        out, err = self.spawn(goal, steps).communicate(timeout=60)
        assert "finished" in out, err
        return out


def crashed_and_resumed(folder: Path) -> Pipeline:
    """Goal ``resumed``: attempt 1 SIGKILLed in ``slow``, attempt 2 replays ``fetch`` and
    finishes. Goal ``crashed``: killed in ``slow_left`` and left so."""
    p = Pipeline(folder)
    p.kill_in("resumed", "fetch,slow,after", "slow")
    out = p.finish("resumed", "fetch,slow,after")
    assert "start fetch" not in out  # attempt 2 got fetch back from the journal
    p.kill_in("crashed", "fetch,slow_left", "slow_left")
    return p


#: Text a browser must show as text and a terminal must not obey.
SCRIPT = "<script>window.pwned = 1</script>"
IMG = '<img src=x onerror="window.pwned = 2">'
LINK = "javascript:window.pwned=3"
ESCAPES = "\x1b[31mred\x1b[0m\x1b]0;title\x07"
SURROGATE = "half \ud800 a pair"
BIG = 5 * 1024 * 1024


def failing(text: str) -> None:
    raise RuntimeError(text)


def hostile(db: Path) -> str:
    """A completed run whose name, keys and results are hostile, one result 5 MB (its id is
    returned); and a failed run of goal ``hostile-error`` whose step raised an error holding
    terminal escapes and a lone surrogate (its error and traceback are text, not JSON)."""
    try:
        with Journal("hostile-error", path=db) as j:
            j.step("raises", failing, f"{SCRIPT}{ESCAPES}{SURROGATE}")
    except RuntimeError:
        pass
    with Journal("hostile", path=db, run=f"{SCRIPT}{IMG}") as j:
        j.step(SCRIPT, lambda: {"html": SCRIPT, "img": IMG, "href": LINK})
        j.step(IMG, lambda: ESCAPES)
        j.step("surrogate", lambda: SURROGATE)
        j.step("big", lambda: "x" * BIG)
        j.step("after", lambda: "still here")
        return j.run_id
