"""patched(): a run recorded under old code finishes the old way; new runs take the new way.

Real child processes run a script whose source changes between runs (old
code without the patch, new code with it); the old run is SIGKILLed mid-way.
"""

from __future__ import annotations

import asyncio
import json
import signal
import textwrap
import threading
from functools import partial
from pathlib import Path

import pytest
from helpers import lil_forked, run_forked

import letitloop
from letitloop import Journal
from letitloop.errors import PatchDeprecatedError

#: The old code: fetch, draft (old prompt), send; killed after ``KILL_AFTER`` steps.
OLD = """
import json, os, signal, sys
from letitloop import Journal

path, run, kill_after, log = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
done = 0

def note(what):
    global done
    with open(log, "a") as f:
        f.write(json.dumps(what) + "\\n")

def after_step():
    global done
    done += 1
    if done == kill_after:
        os.kill(os.getpid(), signal.SIGKILL)

with Journal("mail", run=run, path=path) as j:
    j.step("fetch", lambda: note("fetch") or "inbox")
    after_step()
    j.step("draft", lambda: note("draft-old") or "old draft")
    after_step()
    j.step("send", lambda: note("send") or "sent")
    after_step()
"""

#: The new code: the draft goes through patch "new-prompt".
NEW = """
import json, os, signal, sys
from letitloop import Journal, patched

path, run, kill_after, log = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
done = 0

def note(what):
    with open(log, "a") as f:
        f.write(json.dumps(what) + "\\n")

def after_step():
    global done
    done += 1
    if done == kill_after:
        os.kill(os.getpid(), signal.SIGKILL)

with Journal("mail", run=run, path=path) as j:
    j.step("fetch", lambda: note("fetch") or "inbox")
    after_step()
    if patched("new-prompt"):
        note("path-new")
        j.step("draft-v2", lambda: note("draft-new") or "new draft")
    else:
        note("path-old")
        j.step("draft", lambda: note("draft-old") or "old draft")
    after_step()
    j.step("send", lambda: note("send") or "sent")
    after_step()
    note("finished")
"""


def run_script(tmp: Path, source: str, db: Path, run: str, kill_after: int = 0) -> list[str]:
    """Run ``source`` as a child process; the log lines it wrote in this attempt."""
    script = tmp / "pipeline.py"
    script.write_text(textwrap.dedent(source))
    log = tmp / f"log-{run}.jsonl"
    before = len(log.read_text().splitlines()) if log.exists() else 0
    proc = run_forked(script, str(db), run, str(kill_after), str(log))
    if kill_after:
        assert proc.returncode == -signal.SIGKILL, proc.stderr
    else:
        assert proc.returncode == 0, proc.stderr
    lines = log.read_text().splitlines() if log.exists() else []
    return [json.loads(x) for x in lines[before:]]


class TestARunRecordedUnderTheOldCode:
    def test_it_takes_the_old_path_and_finishes_without_a_mismatch(self, tmp_path: Path) -> None:
        db = tmp_path / "j.db"
        assert run_script(tmp_path, OLD, db, "r1", kill_after=2) == ["fetch", "draft-old"]
        # Resumed under the new code: fetch and draft replay, send runs.
        assert run_script(tmp_path, NEW, db, "r1") == ["path-old", "send", "finished"]

    def test_the_old_path_is_taken_again_on_a_third_resume(self, tmp_path: Path) -> None:
        db = tmp_path / "j.db"
        run_script(tmp_path, OLD, db, "r1", kill_after=2)
        # Killed under the new code after the patch was decided (and draft replayed).
        assert run_script(tmp_path, NEW, db, "r1", kill_after=2) == ["path-old"]
        assert run_script(tmp_path, NEW, db, "r1") == ["path-old", "send", "finished"]
        assert run_script(tmp_path, NEW, db, "r1") == ["path-old", "finished"]


class TestARunThatRecordedNothingPastThePatch:
    def test_it_takes_the_new_path(self, tmp_path: Path) -> None:
        db = tmp_path / "j.db"
        assert run_script(tmp_path, OLD, db, "r1", kill_after=1) == ["fetch"]
        assert run_script(tmp_path, NEW, db, "r1") == [
            "path-new",
            "draft-new",
            "send",
            "finished",
        ]

    def test_the_new_path_is_taken_again_on_a_third_resume(self, tmp_path: Path) -> None:
        db = tmp_path / "j.db"
        run_script(tmp_path, OLD, db, "r1", kill_after=1)
        assert run_script(tmp_path, NEW, db, "r1", kill_after=2) == ["path-new", "draft-new"]
        assert run_script(tmp_path, NEW, db, "r1") == ["path-new", "send", "finished"]


class TestANewRun:
    def test_it_takes_the_new_path_and_keeps_it_on_resume(self, tmp_path: Path) -> None:
        db = tmp_path / "j.db"
        assert run_script(tmp_path, NEW, db, "r2", kill_after=1) == ["fetch"]
        assert run_script(tmp_path, NEW, db, "r2", kill_after=2) == ["path-new", "draft-new"]
        assert run_script(tmp_path, NEW, db, "r2") == ["path-new", "send", "finished"]


class TestTheDecisionIsJournaled:
    def test_it_is_a_step_row_named_after_the_patch_with_its_decision(self, tmp_path: Path) -> None:
        db = tmp_path / "j.db"
        run_script(tmp_path, OLD, db, "old", kill_after=2)
        run_script(tmp_path, NEW, db, "old")
        run_script(tmp_path, NEW, db, "new")
        shown = {}
        for run in ("old", "new"):
            proc = lil_forked("show", run, "--db", str(db))
            assert proc.returncode == 0, proc.stderr
            shown[run] = proc.stdout
        rows = {
            run: [line.split() for line in text.splitlines() if "patched:new-prompt" in line]
            for run, text in shown.items()
        }
        assert [r[-1] for r in rows["old"]] == ["false"]
        assert [r[-1] for r in rows["new"]] == ["true"]

    def test_a_patch_inside_a_step_is_keyed_under_it(self, tmp_path: Path) -> None:
        with Journal("g", run="r", path=tmp_path / "j.db") as j:
            assert j.step("outer", lambda: j.patched("p")) is True
            assert j._opened.keys.used("outer/patched:p")


class TestDeprecatePatch:
    def test_a_run_that_took_the_new_path_goes_on(self, tmp_path: Path) -> None:
        with Journal("g", run="r", path=tmp_path / "j.db") as j:
            assert j.patched("p") is True
        with Journal("g", run="r", path=tmp_path / "j.db") as j:
            j.deprecate_patch("p")
            assert j.step("after", lambda: 1) == 1

    def test_a_run_that_took_the_old_path_is_refused(self, tmp_path: Path) -> None:
        db = tmp_path / "j.db"
        with Journal("g", run="r", path=db) as j:
            j.step("a", lambda: 1)
            j.step("b", lambda: 2)
        with Journal("g", run="r", path=db) as j, pytest.raises(PatchDeprecatedError) as err:
            j.step("a", lambda: 1)
            j.deprecate_patch("p")
        assert "took the old path" in str(err.value)


def one() -> int:
    return 1


def two() -> int:
    return 2


def job(j: Journal, n: int, decided: dict[int, bool] | None) -> int:
    """Old code (``decided`` None): a, b, then it dies; new: a, patch "p", b on its old path."""
    j.step("a", one)
    if decided is None:
        j.step("b", two)
        raise RuntimeError("killed")
    decided[n] = j.patched("p")
    if not decided[n]:
        j.step("b", two)
    return n


class TestAsyncCode:
    def test_async_patched_decides_and_replays_like_patched(self, tmp_path: Path) -> None:
        db = tmp_path / "j.db"
        with Journal("g", run="old", path=db) as j:
            j.step("a", one)
            j.step("b", two)

        async def main(run: str) -> bool:
            async with Journal("g", run=run, path=db) as j:
                await j.async_step("a", one)
                return await letitloop.async_patched("p")

        assert asyncio.run(main("old")) is False
        assert asyncio.run(main("new")) is True
        assert asyncio.run(main("old")) is False
        assert asyncio.run(main("new")) is True


class TestThreadsAndStores:
    def test_a_patch_inside_each_threads_step_is_decided_by_that_steps_rows(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "j.db"
        with Journal("g", run="r", path=db) as j, pytest.raises(RuntimeError):
            j.step("job:1", partial(job, j, 1, None))  # old code: a, b, then it died
        with Journal("g", run="r", path=db) as j:
            decided: dict[int, bool] = {}
            # job:2 (a new step) decides while job:1's recorded rows are still to be met.
            for n in (2, 1):
                t = threading.Thread(target=j.step, args=(f"job:{n}", partial(job, j, n, decided)))
                t.start()
                t.join()
        # job:1 had recorded b past its patch; job:2's patch sees only job:2's rows.
        assert decided == {1: False, 2: True}

    def test_the_in_memory_store_journals_the_decision_too(self) -> None:
        path = "memory://patches-test"
        with Journal("g", run="r", path=path) as j:
            j.step("a", one)
            j.step("b", two)
            j.close(RuntimeError("killed"))
        with Journal("g", run="r", path=path) as j:
            j.step("a", one)
            assert j.patched("p") is False
            j.close(RuntimeError("killed again"))
        with Journal("g", run="r", path=path) as j:
            assert j.patched("p") is False
