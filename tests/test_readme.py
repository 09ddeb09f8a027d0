"""README's code runs as printed, and its links work in a clone.

Each ``python`` block runs in a fresh interpreter in a fresh folder (so its
journal is ``.letitloop/journal.db`` there, as for a reader). The Quickstart
must run exactly as pasted; a block that continues a program the reader
already has (a journal ``j``, a LangGraph ``workflow``) gets the least
setup that makes it run, here beside the block's first line. The ``lil``
commands of "See, fix and replay runs" then run against the Quickstart's
journal on a pseudo-terminal, answering the questions they ask.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_cli_agree import terminal

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")

#: Setup (before) and checks (after) for blocks that continue the reader's own program,
#: keyed by a line of the block.
AROUND: dict[str, tuple[str, str]] = {
    'with Journal("deploy", retry=RetryPolicy(max_attempts=5)) as j:': (
        # The reader's `lil send deploy approval true`, from another thread.
        "import threading, time, letitloop\n"
        "from letitloop.errors import LetItLoopError\n"
        "def _approve():\n"
        "    while True:\n"
        "        try:\n"
        "            return letitloop.send('deploy', 'approval', True)\n"
        "        except LetItLoopError:  # no journal yet, or not waiting yet\n"
        "            time.sleep(0.02)\n"
        "threading.Thread(target=_approve, daemon=True).start()\n",
        "import sqlite3\n"
        "db = sqlite3.connect('.letitloop/journal.db')\n"
        "assert db.execute('SELECT status FROM runs').fetchall() == [('completed',)]\n"
        'assert db.execute("SELECT sum(cost) FROM journal_deploy").fetchone() == (0.004,)\n',
    ),
    'with j.atomic_marker("slack_notification") as should_execute:': (
        "from letitloop import Journal\n"
        "sent = []\n"
        "def send_slack(summary, idempotency_key):\n"
        "    sent.append(idempotency_key)\n"
        "summary = 'a summary'\n"
        "j = Journal('notify').open()\n",
        "j.close()\nassert len(sent) == 1 and sent[0].endswith(':slack_notification'), sent\n",
    ),
    "app = workflow.compile(checkpointer=LetItLoopCheckpointSaver())": (
        "from typing import TypedDict\n"
        "from langgraph.graph import END, START, StateGraph\n"
        "class State(TypedDict):\n"
        "    n: int\n"
        "workflow = StateGraph(State)\n"
        "workflow.add_node('add', lambda s: {'n': s['n'] + 1})\n"
        "workflow.add_edge(START, 'add')\n"
        "workflow.add_edge('add', END)\n",
        "out = app.invoke({'n': 1}, {'configurable': {'thread_id': 't'}})\n"
        "assert out == {'n': 2}, out\n",
    ),
}


def blocks(kind: str, text: str = README) -> list[str]:
    """The bodies of the fenced blocks whose info string is ``kind`` ('' for none), in order."""
    found: list[str] = []
    body: list[str] = []
    info: str | None = None
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            if info is None:
                info, body = line[3:].strip(), []
            else:
                if info == kind:
                    found.append("".join(body))
                info = None
        elif info is not None:
            body.append(line)
    return found


def around(code: str) -> tuple[str, str]:
    """The setup and checks of a block (see AROUND), or nothing."""
    lines = code.splitlines()
    return next((v for k, v in AROUND.items() if any(ln.startswith(k) for ln in lines)), ("", ""))


def section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end > 0 else None]


def run_python(code: str, folder: Path) -> subprocess.CompletedProcess[str]:
    script = folder / "block.py"
    script.write_text(code, encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=folder
    )


#: Put before a Quickstart program, as it is, to see its calls: each call of one of its
#: functions is a line of calls.log, and the call named by $KILL_IN stops and waits to be
#: SIGKILLed (killed.flag says it is there). The program itself is not changed.
SPY = """\
import os, sys, time
def _spy(frame, event, arg):
    if event == "call" and frame.f_code.co_filename == __file__:
        name = frame.f_code.co_name
        if name in ("fetch_crm_record", "call_llm"):
            with open("calls.log", "a") as log:
                log.write(name + "\\n")
            if name == os.environ.get("KILL_IN"):
                open("killed.flag", "w").close()
                time.sleep(60)
sys.setprofile(_spy)
"""


def quickstart_programs() -> list[str]:
    """The Quickstart's two programs: the ``with Journal`` one, then the decorated one."""
    found = blocks("python", section("Quickstart"))[:2]
    assert "with Journal(" in found[0] and "@durable(" in found[1]
    return found


@pytest.fixture
def quickstart(tmp_path: Path) -> Path:
    """A folder where both Quickstart programs ran as pasted (their journal in .letitloop/)."""
    for code in quickstart_programs():
        r = run_python(code, tmp_path)
        assert r.returncode == 0, r.stderr
        assert r.stdout == "Ada placed 12 orders\n"
    return tmp_path


class TestTheQuickstart:
    @pytest.mark.parametrize("which", [0, 1], ids=["with_journal", "durable"])
    def test_killed_in_summarize_it_resumes_without_fetching_again(
        self, tmp_path: Path, which: int
    ) -> None:
        """README: "Kill it with kill -9 in the middle of summarize and run it again:
        fetch_crm_record is not called again ... and summarize runs"."""
        script = tmp_path / "sync.py"
        script.write_text(SPY + quickstart_programs()[which], encoding="utf-8")
        child = subprocess.Popen(
            [sys.executable, str(script)],
            cwd=tmp_path,
            env={**os.environ, "KILL_IN": "call_llm"},
            stdout=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while not (tmp_path / "killed.flag").exists():
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        child.kill()  # SIGKILL, inside summarize
        assert child.wait() == -signal.SIGKILL
        log = tmp_path / "calls.log"
        assert log.read_text().split() == ["fetch_crm_record", "call_llm"]
        log.unlink()
        again = subprocess.run(
            [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True
        )
        assert again.returncode == 0, again.stderr
        assert again.stdout == "Ada placed 12 orders\n"
        assert log.read_text().split() == ["call_llm"]  # fetch_crm_record replayed
        log.unlink()
        # "Run it after it completed and a new run starts."
        third = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True)
        assert third.returncode == 0
        assert log.read_text().split() == ["fetch_crm_record", "call_llm"]

    def test_the_two_programs_do_not_take_each_others_runs(self, tmp_path: Path) -> None:
        """Killed in summarize, each is resumed by itself even when the other ran between."""
        first, second = quickstart_programs()
        for killed, other in ((first, second), (second, first)):
            folder = tmp_path / str(len(list(tmp_path.iterdir())))
            folder.mkdir()
            (folder / "a.py").write_text(SPY + killed, encoding="utf-8")
            (folder / "b.py").write_text(SPY + other, encoding="utf-8")
            child = subprocess.Popen(
                [sys.executable, "a.py"], cwd=folder, env={**os.environ, "KILL_IN": "call_llm"}
            )
            while not (folder / "killed.flag").exists():
                assert child.poll() is None
                time.sleep(0.01)
            child.kill()
            child.wait()
            for name in ("b.py", "a.py"):
                (folder / "calls.log").unlink()
                r = subprocess.run([sys.executable, name], cwd=folder, capture_output=True)
                assert r.returncode == 0
                calls = (folder / "calls.log").read_text().split()
                assert calls == (
                    ["fetch_crm_record", "call_llm"] if name == "b.py" else ["call_llm"]
                )


class TestThePythonBlocks:
    def test_the_quickstart_runs_as_pasted_and_replays_when_run_again(
        self, quickstart: Path
    ) -> None:
        for code in quickstart_programs():
            again = run_python(code, quickstart)
            assert again.returncode == 0 and again.stdout == "Ada placed 12 orders\n"
        runs = terminal(["runs", "--json", "--limit", "0"], cwd=quickstart)[1]
        assert runs.count('"goal": "customer_sync"') == 4  # each run completed: a new one each time

    def test_every_block_runs(self, tmp_path: Path) -> None:
        found = blocks("python")
        assert len(found) >= 5
        for i, code in enumerate(found):
            before, after = around(code)
            if "langgraph" in code:
                pytest.importorskip("langgraph")
            folder = tmp_path / f"block{i}"
            folder.mkdir()
            r = run_python(before + code + after, folder)
            assert r.returncode == 0, f"block {i}:\n{code}\n{r.stderr}"

    def test_every_setup_above_is_for_a_block_that_exists(self) -> None:
        found = [around(code) for code in blocks("python")]
        assert all(v in found for v in AROUND.values())


class TestTheLilCommands:
    def test_see_fix_and_replay_runs_as_printed(self, quickstart: Path) -> None:
        (shell,) = blocks("", section("See, fix and replay runs"))
        commands = [ln.split("  #")[0].strip() for ln in shell.splitlines() if ln.strip()]
        assert [c.split()[1] for c in commands] == [
            "runs",
            "show",
            "show",
            "fork",
            "reset",
            "gc",
            "export",
            "upgrade",
        ]
        newest = terminal(["runs", "--jsonl", "--limit", "1"], cwd=quickstart)[1]
        run_id = re.search(r'"id": "(\w+)"', newest)
        assert run_id is not None
        seen = {}
        for command in commands:
            argv = command.replace("01JD…", run_id.group(1)).split()[1:]
            status, out = terminal(argv, answer="y", cwd=quickstart)
            assert status == 0, (command, out)
            seen[command] = out
        assert "customer_sync" in seen[commands[0]] and "completed" in seen[commands[0]]
        assert 'input     {"user_id": 123}' in seen[commands[1]]
        assert 'result    "Ada placed 12 orders"' in seen[commands[1]]
        assert "new run" in seen[commands[3]] and "keeps 1 recorded result " in seen[commands[3]]
        assert "Forget run" in seen[commands[4]] and "forgot run" in seen[commands[4]]
        assert "removed 0 runs" in seen[commands[5]]
        assert seen[commands[6]].startswith('{"record": "run"')
        assert "schema at" in seen[commands[7]]

    @pytest.mark.skipif(shutil.which("sqlite3") is None, reason="no sqlite3 shell here")
    def test_the_sqlite3_lines_run_against_the_quickstart_journal(self, quickstart: Path) -> None:
        (shell,) = [b for b in blocks("") if b.startswith("sqlite3 ")]
        for line in shell.splitlines():
            r = subprocess.run(line, shell=True, capture_output=True, text=True, cwd=quickstart)
            assert r.returncode == 0 and r.stdout.strip(), (line, r.stderr)


#: An installer's command: what follows it names what to install.
INSTALL = re.compile(r"\b(?:pip3?|pipx|uv pip|uv|poetry|pdm) +(?:install|add)\b([^\n`]*)")
#: A requirement that names the package index's ``letitloop``, which is another project.
FROM_THE_INDEX = re.compile(r"^letitloop(?:$|[\[=<>~!;@ ])")


def index_installs(text: str) -> list[str]:
    """The install commands in ``text`` that would fetch ``letitloop`` from the package index."""
    found = []
    for match in INSTALL.finditer(text):
        args = [a.strip("'\"\\,.;:)(") for a in match.group(1).split()]
        if any(FROM_THE_INDEX.match(a) for a in args if not a.startswith("-")):
            found.append(match.group(0).strip())
    return found


class TestTheInstallCommands:
    """The name ``letitloop`` on the package index is an unrelated project (0.7.0, another
    author, no ``langgraph`` extra): every instruction installs from the checkout."""

    def test_the_check_finds_a_command_that_fetches_the_index_package(self) -> None:
        for text in (
            "pip install 'letitloop[langgraph]'",
            'run: pip install -U "letitloop>=0.1"',
            "python -m pip install letitloop",
            "uv add letitloop",
        ):
            assert index_installs(text), text
        for text in ("pip install -e '.[langgraph]'", "pip install -e . && lil demo"):
            assert not index_installs(text), text

    def test_no_doc_message_or_example_gives_one(self) -> None:
        files = [ROOT / "README.md", ROOT / "pyproject.toml"]
        for folder, pattern in (
            ("docs", "*.md"),
            ("letitloop", "*.py"),
            ("examples", "*.py"),
            ("benchmarks", "*.py"),
            ("benchmarks", "*.md"),
        ):
            files += sorted((ROOT / folder).rglob(pattern))
        found = {
            f"{path.relative_to(ROOT)}: {command}"
            for path in files
            for command in index_installs(path.read_text(encoding="utf-8"))
        }
        assert not found, found

    def test_readme_says_where_the_package_installs_from(self) -> None:
        head = README[: README.index("\n## ")]
        assert "installs from a clone of this repository" in head
        assert "`pip install -e .`" in head


class TestTheLinks:
    def test_every_link_is_relative_and_names_a_file_of_this_repository(self) -> None:
        """A clone (or its GitHub page) follows them; an absolute URL would lead away."""
        links = re.findall(r"\]\(([^)]+)\)", README)
        assert links
        for link in links:
            assert "://" not in link and not link.startswith("/"), link
            assert (ROOT / link.split("#")[0]).exists(), link

    def test_the_package_metadata_is_complete(self) -> None:
        tomllib = pytest.importorskip("tomllib")
        meta = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
        classifiers = set(meta["classifiers"])
        assert any(c.startswith("Development Status :: ") for c in classifiers)
        assert any(c.startswith("Operating System :: ") for c in classifiers)
        low = tuple(int(x) for x in meta["requires-python"].removeprefix(">=").split("."))
        assert f"Programming Language :: Python :: {low[0]}.{low[1]}" in classifiers
        assert meta["license"] == "MIT"
