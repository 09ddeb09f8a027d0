"""A program and ``lil`` find the same journal from any folder of the project, as git finds .git.

Each test runs real programs and the real ``lil`` in real folders: the
nearest ``.letitloop/journal.db`` in the current folder or above is used,
else the nearest at the script's folder or above, else a new one is made
beside the script (in the current folder for ``python -c``/``-m``); the
search stops after a repository's root and at ``$LETITLOOP_CEILING_DIRECTORIES``.
A script killed with SIGKILL and run again from another folder (cron, a
service, an IDE) resumes its run in the same journal.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import lil_forked, run_forked, start_forked

PROGRAM = """
import os, sys, time
from letitloop import Journal

def fetch(n):
    with open(os.environ["CALLS"], "a") as log:
        log.write(f"fetch {n}\\n")
    return n

def summarize(n):
    if os.environ.get("DIE"):
        os._exit(9)  # the process dies inside the step
    if os.environ.get("WAIT_TO_BE_KILLED"):
        open(os.environ["WAIT_TO_BE_KILLED"], "w").close()
        time.sleep(60)  # SIGKILLed here, inside the step
    return f"summary of {n}"

with Journal("sync") as j:
    n = j.step("fetch", fetch, 1)
    print(j.step("summarize", summarize, n))
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder (``proj``, with the program) and a subfolder ``proj/src/jobs``."""
    monkeypatch.delenv("LETITLOOP_DB", raising=False)
    monkeypatch.setenv("LETITLOOP_CEILING_DIRECTORIES", str(tmp_path))  # never above the test
    proj = tmp_path / "proj"
    (proj / "src" / "jobs").mkdir(parents=True)
    (proj / "sync.py").write_text(PROGRAM, encoding="utf-8")
    return proj


def run(folder: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python ARGV`` run from ``folder``: a script (``sync.py``) or ``-m letitloop`` (lil)
    in a child forked from an interpreter that imported letitloop (helpers.run_forked: the
    program's own process, folder and ``__main__``; about a tenth of a fresh interpreter's
    CPU), anything else (``-c``) in a fresh interpreter (:func:`run_fresh`)."""
    whole_env = {**os.environ, "CALLS": str(folder / "calls.log"), **env}
    if argv[:2] == ("-m", "letitloop"):
        return lil_forked(*argv[2:], cwd=folder, env=whole_env)
    if argv[0].endswith(".py"):
        return run_forked(Path(argv[0]), *argv[1:], cwd=folder, env=whole_env)
    return run_fresh(folder, *argv, **env)


def run_fresh(folder: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python ARGV`` run from ``folder`` by a fresh interpreter."""
    return subprocess.run(
        [sys.executable, *argv],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "CALLS": str(folder / "calls.log"), **env},
    )


class TestAProgramRunFromASubfolder:
    def test_it_resumes_the_run_of_the_journal_above_instead_of_starting_over(
        self, project: Path
    ) -> None:
        died = run(project, "sync.py", DIE="1")
        assert died.returncode == 9
        sub = project / "src" / "jobs"
        again = run(sub, str(project / "sync.py"))
        assert again.returncode == 0 and again.stdout == "summary of 1\n", again.stderr
        assert not (sub / ".letitloop").exists()  # no second journal
        assert not (sub / "calls.log").exists()  # fetch was replayed, not called

    def test_with_no_journal_anywhere_it_makes_one_beside_the_script(self, project: Path) -> None:
        sub = project / "src" / "jobs"
        assert run(sub, str(project / "sync.py")).returncode == 0
        assert (project / ".letitloop" / "journal.db").is_file()
        assert not (sub / ".letitloop").exists()


def killed_inside_summarize(folder: Path, script: Path, calls: Path) -> None:
    """``python SCRIPT`` run from ``folder``, SIGKILLed from outside inside its step 'summarize'."""
    inside = folder / "inside.flag"
    env = {**os.environ, "CALLS": str(calls), "WAIT_TO_BE_KILLED": str(inside)}
    child = start_forked(script, cwd=folder, env=env)
    deadline = time.monotonic() + 60
    while not inside.exists():
        if not child.running() or time.monotonic() > deadline:
            os.kill(child.pid, signal.SIGKILL)
            raise AssertionError(child.wait())
        time.sleep(0.01)
    os.kill(child.pid, signal.SIGKILL)
    assert child.wait().returncode == -signal.SIGKILL


class TestAScriptRunFromAnotherFolder:
    """cron, a systemd unit, an IDE: the script's folder is not the current one."""

    def test_killed_in_a_step_it_resumes_from_a_third_folder_without_calling_the_finished_one(
        self, project: Path, tmp_path: Path
    ) -> None:
        calls = tmp_path / "calls.log"
        first, second = tmp_path / "cron", tmp_path / "ide"
        first.mkdir()
        second.mkdir()
        killed_inside_summarize(first, project / "sync.py", calls)
        assert calls.read_text() == "fetch 1\n"
        again = run(second, str(project / "sync.py"), CALLS=str(calls))
        assert again.returncode == 0, again.stderr
        assert again.stdout == "summary of 1\n" and again.stderr == ""
        assert calls.read_text() == "fetch 1\n"  # fetch was replayed, not called again
        assert not (first / ".letitloop").exists() and not (second / ".letitloop").exists()
        shown = run(project, "-m", "letitloop", "show", "sync")
        assert "state     completed; 2 attempts" in shown.stdout, shown.stdout

    def test_lil_watch_from_another_folder_uses_the_scripts_journal(
        self, project: Path, tmp_path: Path
    ) -> None:
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        assert run(project, "sync.py").returncode == 0  # the journal, beside the script
        watched = run(elsewhere, "-m", "letitloop", "watch", str(project / "sync.py"))
        assert watched.returncode == 0, watched.stderr
        assert not (elsewhere / ".letitloop").exists()
        runs = run(project, "-m", "letitloop", "runs", "--json")
        assert runs.stdout.count('"goal": "sync"') == 2

    def test_its_first_run_says_once_on_stderr_where_the_new_journal_is(
        self, project: Path, tmp_path: Path
    ) -> None:
        journal = project / ".letitloop" / "journal.db"
        first = run(tmp_path, str(project / "sync.py"))
        assert first.returncode == 0 and first.stdout == "summary of 1\n"
        assert first.stderr == (
            f"letitloop: new journal {journal} (lil finds it from {project} and the folders "
            f"below it)\n"
        )
        second = run(tmp_path, str(project / "sync.py"))
        assert (second.stdout, second.stderr) == ("summary of 1\n", "")

    def test_lil_check_of_the_script_from_another_folder_checks_its_journal(
        self, project: Path, tmp_path: Path
    ) -> None:
        (project / "flow.py").write_text(
            "import os\n"
            "from letitloop import durable, step\n"
            "def fetch(n):\n"
            "    return n\n"
            "def summarize(n):\n"
            "    if os.environ.get('DIE'):\n"
            "        os._exit(9)\n"
            "    return n\n"
            "@durable('flow')\n"
            "def flow(n):\n"
            "    return step('summarize', summarize, step('fetch', fetch, n))\n"
            "if __name__ == '__main__':\n"
            "    print(flow(1))\n",
            encoding="utf-8",
        )
        assert run(project, "flow.py", DIE="1").returncode == 9
        checked = run(tmp_path, "-m", "letitloop", "check", str(project / "flow.py"))
        assert checked.returncode == 0, checked.stderr
        journal = project / ".letitloop" / "journal.db"
        assert f"checked 1 unfinished run of __main__.flow in {journal}" in checked.stdout
        assert "replays 1 step, then runs 'summarize' fresh" in checked.stdout

    def test_a_journal_in_the_current_folder_stays_the_one_used(
        self, project: Path, tmp_path: Path
    ) -> None:
        here = tmp_path / "here"
        here.mkdir()
        assert (
            run(here, "-c", "from letitloop import Journal; Journal('x').open().close()").returncode
            == 0
        )
        assert (here / ".letitloop" / "journal.db").is_file()  # -c: the current folder's
        assert run(here, str(project / "sync.py")).returncode == 0
        assert not (project / ".letitloop").exists()
        runs = run(here, "-m", "letitloop", "runs", "--json")
        assert '"goal": "sync"' in runs.stdout

    def test_a_command_of_the_python_installation_is_not_a_script_of_the_users(self) -> None:
        from letitloop.stores.discovery import script_folder

        assert script_folder(sys.executable) is None  # under sys.prefix: pytest, uvicorn, lil
        assert script_folder(__file__) == str(Path(__file__).parent)
        assert script_folder(str(Path(__file__).parent)) is None  # a folder is not a script


class TestLilFromAnotherFolder:
    def test_it_finds_the_journal_above_and_names_it(self, project: Path) -> None:
        assert run(project, "sync.py").returncode == 0
        # The real entry point, in a fresh interpreter, as a user in a subfolder runs it.
        r = run_fresh(project / "src" / "jobs", "-m", "letitloop", "runs")
        assert r.returncode == 0, r.stderr
        journal = project / ".letitloop" / "journal.db"
        assert "sync" in r.stdout and "completed" in r.stdout
        assert r.stdout.splitlines()[-1] == f"journal: {journal}"
        assert r.stderr == f"lil: journal {journal} (found above this folder)\n"

    def test_in_the_journals_own_folder_it_names_it_without_a_warning(self, project: Path) -> None:
        assert run(project, "sync.py").returncode == 0
        r = run(project, "-m", "letitloop", "runs")
        assert r.stdout.splitlines()[-1] == f"journal: {project / '.letitloop' / 'journal.db'}"
        assert r.stderr == ""

    def test_lil_send_reaches_a_run_waiting_in_the_journal_above(self, project: Path) -> None:
        (project / "wait.py").write_text(
            "from letitloop import Journal\n"
            "with Journal('deploy') as j:\n"
            "    print(j.wait_for('approval', stop_after=0))\n",
            encoding="utf-8",
        )
        assert run(project, "wait.py").returncode == 75
        sent = run(project / "src", "-m", "letitloop", "send", "deploy", "approval", "true")
        assert sent.returncode == 0, sent.stderr
        assert run(project, "wait.py").stdout == "True\n"

    def test_with_no_journal_anywhere_it_says_where_it_looked(self, project: Path) -> None:
        r = run(project / "src", "-m", "letitloop", "runs")
        assert r.returncode == 1
        assert r.stderr.startswith(f"Error: no journal in {project / 'src'} or the folders above")


class TestWhereTheSearchStops:
    def test_a_journal_above_a_repositorys_root_is_not_taken(self, project: Path) -> None:
        assert run(project, "sync.py").returncode == 0
        repo = project / "src"
        (repo / ".git").mkdir()
        (repo / "jobs" / "sync.py").write_text(PROGRAM, encoding="utf-8")
        assert run(repo / "jobs", "sync.py").returncode == 0
        assert (repo / "jobs" / ".letitloop" / "journal.db").is_file()

    def test_a_ceiling_folder_is_not_looked_in(self, project: Path) -> None:
        assert run(project, "sync.py").returncode == 0
        sub = project / "src"
        (sub / "sync.py").write_text(PROGRAM, encoding="utf-8")
        r = run(sub, "sync.py", LETITLOOP_CEILING_DIRECTORIES=str(project))
        assert r.returncode == 0
        assert (sub / ".letitloop" / "journal.db").is_file()

    def test_the_home_folders_journal_is_not_shared_with_the_projects_under_it(
        self, project: Path
    ) -> None:
        home = project.parent
        env = {"HOME": str(home), "LETITLOOP_CEILING_DIRECTORIES": str(home.parent)}
        (home / "job.py").write_text(PROGRAM, encoding="utf-8")
        assert run(home, "job.py", **env).returncode == 0
        assert (home / ".letitloop" / "journal.db").is_file()  # home's own, run there
        assert run(project, "sync.py", **env).returncode == 0
        assert (project / ".letitloop" / "journal.db").is_file()  # not home's

    def test_letitloop_db_still_wins(self, project: Path) -> None:
        assert run(project, "sync.py").returncode == 0
        other = project / "other.db"
        assert (
            run(project / "src", str(project / "sync.py"), LETITLOOP_DB=str(other)).returncode == 0
        )
        assert other.is_file()


def on_a_terminal(folder: Path, *argv: str) -> tuple[int, str]:
    """Run ``python ARGV`` with stdout and stderr on a pseudo-terminal: (status, output)."""
    import pty
    import select

    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, *argv],
        cwd=folder,
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        env={**os.environ, "CALLS": str(folder / "calls.log")},
    )
    os.close(follower)
    chunks = []
    while True:
        ready, _, _ = select.select([leader], [], [], 30)
        if not ready:
            break
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return proc.wait(timeout=30), b"".join(chunks).decode().replace("\r\n", "\n")


class TestTheFirstRunOfAProgram:
    def test_on_a_terminal_it_says_once_where_it_made_the_journal(self, project: Path) -> None:
        status, out = on_a_terminal(project, "sync.py")
        journal = project / ".letitloop" / "journal.db"
        assert status == 0
        assert out == (
            f"letitloop: new journal {journal} (lil finds it from {project} and the folders "
            f"below it)\nsummary of 1\n"
        )
        assert on_a_terminal(project, "sync.py") == (0, "summary of 1\n")  # once only

    def test_to_a_pipe_it_says_it_on_stderr_once_too(self, project: Path) -> None:
        journal = project / ".letitloop" / "journal.db"
        r = run(project, "sync.py")
        assert r.stdout == "summary of 1\n"
        assert r.stderr == (
            f"letitloop: new journal {journal} (lil finds it from {project} and the folders "
            f"below it)\n"
        )
        again = run(project, "sync.py")
        assert (again.stdout, again.stderr) == ("summary of 1\n", "")

    def test_without_a_stderr_it_says_nothing_and_runs(self, project: Path) -> None:
        """A daemon started with its stderr closed: the line goes nowhere, never to stdout."""
        r = subprocess.run(
            ["bash", "-c", f"{sys.executable} sync.py 2>&-"],
            cwd=project,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "CALLS": str(project / "calls.log")},
        )
        assert (r.returncode, r.stdout) == (0, "summary of 1\n")
        assert (project / ".letitloop" / "journal.db").is_file()
