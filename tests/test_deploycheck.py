"""``lil check``: before a deploy, which unfinished runs resume under the new code.

Runs are recorded by real child processes under the old code (killed with
SIGKILL or failed mid-way); the source is then changed and the real ``lil
check`` replays them. Every step function appends to a side file, so a check
that called one would show.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from helpers import lil_forked, run_benchmark, run_forked

from letitloop.deploycheck import check

#: The old code. ``DIE_IN`` names a step whose function SIGKILLs its process; ``FAIL_IN``
#: one that raises. Each call of a step function is appended to ``calls.txt``.
OLD = """
import os, signal, sys
from letitloop import durable, step

def called(what):
    with open(os.path.join(os.path.dirname(__file__), "calls.txt"), "a") as f:
        f.write(what + "\\n")
    if os.environ.get("DIE_IN") == what:
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get("FAIL_IN") == what:
        raise RuntimeError("failed in " + what)

def fetch(user):
    called("fetch")
    return f"mail of {user}"

def lookup(user):
    called("lookup")
    return f"profile of {user}"

def draft(mail):
    called("draft")
    return f"draft of {mail}"

def draft_v2(mail):
    called("draft_v2")
    return f"better draft of {mail}"

def send(text):
    called("send")
    return f"sent {text}"

@durable(goal_id="digest", run=lambda user: f"user-{user}")
def digest(user):
    mail = step("fetch", fetch, user)
    step("info", lookup, user)
    # DRAFT
    text = step("draft", draft, mail)
    return step("send", send, text)

if __name__ == "__main__":
    print(digest(sys.argv[1]))
"""

#: The replacement of ``# DRAFT`` plus the draft line, per change under test.
DRAFT = '    # DRAFT\n    text = step("draft", draft, mail)\n'


def lil(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return lil_forked(*args, cwd=folder)


def record(folder: Path, user: str, **env: str) -> None:
    """Run ``flows.py`` for ``user`` under its current code, to its end or its death."""
    env = {**os.environ, "LETITLOOP_DB": "", **env}
    done = run_forked(folder / "flows.py", user, env=env)
    assert done.returncode in (0, 1, -signal.SIGKILL), done.stderr
    (folder / "calls.txt").unlink(missing_ok=True)  # what the check calls, if anything, shows


def calls(folder: Path) -> list[str]:
    path = folder / "calls.txt"
    return path.read_text().split() if path.exists() else []


def file_digest(folder: Path) -> str:
    found = hashlib.sha256()
    for name in sorted(os.listdir(folder / ".letitloop")):
        if name.startswith("journal.db") and not name.endswith("-locks"):
            found.update((folder / ".letitloop" / name).read_bytes())
    return found.hexdigest()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project folder with ``flows.py`` (the old code) and its journal, runs in flight:
    ``clean`` killed in draft, ``early`` killed in info, ``failed`` failed in send,
    ``done`` completed. Recorded once for the module; :func:`folder` copies it."""
    folder = tmp_path_factory.mktemp("recorded")
    (folder / ".git").mkdir()  # the journal is found here, not above
    (folder / "flows.py").write_text(OLD, encoding="utf-8")
    record(folder, "clean", DIE_IN="draft")
    record(folder, "early", DIE_IN="lookup")
    record(folder, "failed", FAIL_IN="send")
    record(folder, "done")
    return folder


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recorded: Path) -> Path:
    """A copy of :func:`recorded`'s folder (no process has its journal open) for one test."""
    monkeypatch.delenv("LETITLOOP_DB", raising=False)
    shutil.copytree(recorded, tmp_path, dirs_exist_ok=True)
    return tmp_path


def change(where: Path, old: str, new: str) -> None:
    """Edit ``where`` (a project folder's ``flows.py``, or a file): ``old`` becomes ``new``."""
    path = where / "flows.py" if where.is_dir() else where
    source = path.read_text()
    assert old in source
    path.write_text(source.replace(old, new), encoding="utf-8")


def verdicts(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """Per run name: the outcome ``lil check --json`` gave."""
    return {r["name"]: r["outcome"] for r in json.loads(done.stdout)}


class TestUnchangedCode:
    def test_every_unfinished_run_resumes_and_nothing_is_called_or_written(
        self, folder: Path
    ) -> None:
        before = file_digest(folder)
        done = lil(folder, "check", "flows.py", "--json")
        assert done.returncode == 0, done.stderr
        found = {r["name"]: r for r in json.loads(done.stdout)}
        assert set(found) == {"user-clean", "user-early", "user-failed"}  # not the completed one
        assert (found["user-clean"]["outcome"], found["user-clean"]["key"]) == ("resumes", "draft")
        assert found["user-clean"]["replayed"] == 2
        assert (found["user-early"]["key"], found["user-failed"]["key"]) == ("info", "send")
        assert calls(folder) == []  # no step function was called
        assert file_digest(folder) == before  # the journal was not written

    def test_the_report_says_so_in_words_and_exits_0(self, folder: Path) -> None:
        done = lil(folder, "check", "flows.py")
        assert done.returncode == 0, done.stderr
        assert "checked 3 unfinished runs of __main__.digest" in done.stdout
        assert "resumes cleanly: replays 2 steps, then runs 'draft' fresh" in done.stdout
        assert "every unfinished run resumes under this code" in done.stdout


class TestAChangedStep:
    def test_another_function_under_a_recorded_key_strands_the_runs_that_recorded_it(
        self, folder: Path
    ) -> None:
        change(folder, 'step("info", lookup, user)', 'step("info", fetch, user)')
        done = lil(folder, "check", "flows.py")
        assert done.returncode == 1
        assert re.search(
            r"WOULD STOP at step 'info' after 1 step: recorded by __main__\.lookup, "
            r"now called with __main__\.fetch",
            done.stdout,
        ), done.stdout
        assert verdicts(lil(folder, "check", "flows.py", "--json")) == {
            "user-clean": "stops",
            "user-failed": "stops",
            "user-early": "resumes",  # killed in info: nothing recorded there yet
        }
        assert calls(folder) == []

    def test_other_arguments_strand_it_and_say_which_argument_differs(self, folder: Path) -> None:
        change(folder, 'step("fetch", fetch, user)', 'step("fetch", fetch, user.upper())')
        done = lil(folder, "check", "flows.py", "--json")
        assert done.returncode == 1
        found = json.loads(done.stdout)
        assert {r["outcome"] for r in found} == {"stops"}
        assert all(r["key"] == "fetch" and "argument" in r["detail"] for r in found)

    def test_reordered_calls_of_one_name_strand_it(self, folder: Path) -> None:
        change(
            folder,
            '    mail = step("fetch", fetch, user)\n    step("info", lookup, user)\n',
            '    mail = step("call", fetch, user)\n    step("call", lookup, user)\n',
        )
        record(folder, "order", DIE_IN="draft")  # recorded: call = fetch, call#2 = lookup
        change(
            folder,
            '    mail = step("call", fetch, user)\n    step("call", lookup, user)\n',
            '    step("call", lookup, user)\n    mail = step("call", fetch, user)\n',
        )
        done = lil(folder, "check", "flows.py:digest", "--json")
        assert done.returncode == 1
        (order,) = [r for r in json.loads(done.stdout) if r["name"] == "user-order"]
        assert order["outcome"] == "stops" and "lookup" in order["detail"]


class TestAChangeBehindAPatch:
    PATCHED = (
        '    if patched("better-draft"):\n'
        '        text = step("draft-v2", draft_v2, mail)\n'
        "    else:\n"
        '        text = step("draft", draft, mail)\n'
    )

    def test_runs_past_the_patch_take_its_old_path_and_the_others_its_new_one(
        self, folder: Path
    ) -> None:
        record(folder, "drafted", DIE_IN="send")  # recorded draft: past the patch's point
        change(folder, DRAFT, self.PATCHED)
        change(folder, "from letitloop import durable, step", "from letitloop import *")
        done = lil(folder, "check", "flows.py", "--json")
        assert done.returncode == 0, done.stdout + done.stderr
        found = {r["name"]: r for r in json.loads(done.stdout)}
        assert found["user-drafted"]["old_patches"] == ["better-draft"]
        assert found["user-failed"]["old_patches"] == ["better-draft"]  # failed in send
        assert found["user-drafted"]["key"] == "send"  # replayed the old draft, then send
        assert found["user-clean"]["new_patches"] == ["better-draft"]  # killed in draft
        assert found["user-clean"]["key"] == "draft-v2"
        assert calls(folder) == []

    def test_lil_check_patches_says_when_deprecating_it_is_safe(self, folder: Path) -> None:
        record(folder, "drafted", DIE_IN="send")
        change(folder, DRAFT, self.PATCHED)
        change(folder, "from letitloop import durable, step", "from letitloop import *")
        still = lil(folder, "check", "flows.py", "--patches")
        # drafted, and failed (it failed in send, after its draft): both past the patch.
        assert "patch 'better-draft': 2 unfinished runs take its old path" in still.stdout
        record(folder, "drafted")  # the old runs finish (the old way)
        record(folder, "failed")
        safe = lil(folder, "check", "flows.py", "--patches")
        assert "no unfinished run takes its old path: deprecate_patch('better-draft') is safe" in (
            safe.stdout
        )

    def test_deprecating_it_while_an_old_path_run_remains_strands_that_run(
        self, folder: Path
    ) -> None:
        record(folder, "drafted", DIE_IN="send")
        change(
            folder,
            DRAFT,
            '    deprecate_patch("better-draft")\n    text = step("draft-v2", draft_v2, mail)\n',
        )
        change(folder, "from letitloop import durable, step", "from letitloop import *")
        done = lil(folder, "check", "flows.py", "--json")
        assert done.returncode == 1
        assert verdicts(done)["user-drafted"] == "stops"


class TestThePythonApi:
    def test_check_returns_a_report_per_run(
        self, folder: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.chdir(folder)
        report = check(str(folder / "flows.py"))
        assert sorted(r.name or "" for r in report.runs) == [
            "user-clean",
            "user-early",
            "user-failed",
        ]
        assert not report.strands
        assert calls(folder) == []


class TestBadTargets:
    def test_a_module_without_durable_functions_is_one_line(self, tmp_path: Path) -> None:
        (tmp_path / "plain.py").write_text("x = 1\n")
        done = lil(tmp_path, "check", "plain")
        assert done.returncode == 1
        assert done.stderr.strip().splitlines() == [
            "Error: plain has no @durable or @durable_async function; lil check replays their "
            "runs (decorate the function, or name a module that has one)"
        ]

    def test_a_missing_module_is_one_line(self, tmp_path: Path) -> None:
        done = lil(tmp_path, "check", "nowhere_to_be_found")
        assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1
        assert "nowhere_to_be_found" in done.stderr


#: Runs a script and SIGKILLs its process as it enters ``call_llm`` (README's model call).
KILL_IN_CALL_LLM = """
import os, runpy, signal, sys

def kill_in_call_llm(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "call_llm":
        os.kill(os.getpid(), signal.SIGKILL)

sys.setprofile(kill_in_call_llm)
runpy.run_path(sys.argv[1], run_name="__main__")
"""


class TestTheReadmeExample:
    def readme_block(self) -> str:
        readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
        blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
        (block,) = [b for b in blocks if "def sync_workflow(user_id)" in b]
        return str(block)

    def test_a_run_killed_in_summarize_resumes_and_changed_arguments_would_stop_it(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("LETITLOOP_DB", raising=False)
        (tmp_path / ".git").mkdir()
        (tmp_path / "sync_workflow.py").write_text(self.readme_block())
        (tmp_path / "killer.py").write_text(KILL_IN_CALL_LLM)
        died = run_forked(tmp_path / "killer.py", "sync_workflow.py", cwd=tmp_path)
        assert died.returncode == -signal.SIGKILL
        done = lil(tmp_path, "check", "sync_workflow.py")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "resumes cleanly: replays 1 step, then runs 'summarize' fresh" in done.stdout
        change(tmp_path / "sync_workflow.py", "user_id=user_id)", "user_id=user_id + 1)")
        stopped = lil(tmp_path, "check", "sync_workflow.py")
        assert stopped.returncode == 1
        assert "WOULD STOP at step 'fetch_user' after 0 steps" in stopped.stdout


class TestTheBenchmark:
    def test_it_checks_a_recorded_run_and_prints_its_cost(self) -> None:
        out = run_benchmark("bench_check.py", "--steps", "50", "--repeats", "1")
        assert "| 50 recorded steps" in out and "per 1,000 steps" in out
