"""README's code runs as printed, and its links work in a clone.

Each ``python`` block runs as ``python block.py`` in a fresh folder (so its
journal is ``.letitloop/journal.db`` there, as for a reader), in a process of its
own forked from the interpreter the docs' blocks are forked from (below), as
the Quickstart's programs are (as ``python sync.py``, killed and run again); its
console session runs in a shell as the reader types it. The Quickstart
must run exactly as pasted; a block that continues a program the reader
already has (a journal ``j``, a LangGraph ``workflow``) gets the least
setup that makes it run, here beside the block's first line. The ``lil``
commands of "See, fix and replay runs" then run against the Quickstart's
journal on a pseudo-terminal, answering the questions they ask.

Every ``python`` block of ``docs/*.md`` runs too, in the same way (as
``python block.py`` in a fresh folder, as pasted; each in a process of its
own forked from one interpreter that imported letitloop and the frameworks
of several blocks once, tests/preloaded.py, but a block about its process
itself, ``OWN_PROCESS``, in a fresh interpreter): with the least setup that
makes a block that continues the reader's program run as printed
(``DOCS_AROUND``), or listed in ``ILLUSTRATIVE`` with the reason it is not
a program on its own (a fragment, or a ten-minute sleep) and the test
that runs its calls instead. A new block that is in neither fails.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from helpers import lil_forked
from preloaded import Child, Preloaded
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


#: What README's and docs/adapters.md's smolagents block uses: a model that answers
#: with code calling the tool, and the tool; then the answer checked, and replayed.
SMOLAGENTS_AROUND = (
    "from smolagents import CodeAgent, tool\n"
    "from smolagents.models import ChatMessage, MessageRole, Model\n"
    "class Scripted(Model):\n"
    "    def generate(self, messages, **kw):\n"
    "        code = \"final_answer(get_weather(city='Paris'))\"\n"
    "        return ChatMessage(role=MessageRole.ASSISTANT, content=f'<code>\\n{code}\\n</code>')\n"
    "model = Scripted()\n"
    "@tool\n"
    "def get_weather(city: str) -> str:\n"
    '    """The weather.\n\n    Args:\n        city: the city\n    """\n'
    "    return f'sunny in {city}'\n",
    "assert answer == 'sunny in Paris', answer\n"
    "from letitloop import Journal\n"
    "with Journal('research') as j:\n"
    "    assert j.attempt == 1  # the run completed: this is a new one\n",
)

#: What the AutoGen block uses: a replay model client and the tool; then the answer.
AUTOGEN_AROUND = (
    "import asyncio\n"
    "from autogen_agentchat.agents import AssistantAgent\n"
    "from autogen_ext.models.replay import ReplayChatCompletionClient\n"
    "info = {'vision': False, 'function_calling': True, 'json_output': False,\n"
    "    'family': 'x', 'structured_output': False}\n"
    "model_client = ReplayChatCompletionClient(['It is sunny.'], model_info=info)\n"
    "def get_weather(city: str) -> str:\n"
    "    return f'sunny in {city}'\n",
    "assert result.messages[-1].to_text() == 'It is sunny.', result.messages\n",
)

AROUND["from letitloop.adapters.smolagents import SmolagentsWALCallback"] = SMOLAGENTS_AROUND
# "Test it from a recording": the test function as printed, its pipeline a stand-in; the
# marker is the plugin's (tests/test_example_replay.py runs the whole flow under pytest).
AROUND['@pytest.mark.letitloop_replay("tests/fixtures/triage.db")'] = (
    "import pytest\ndef triage(ticket):\n    return 'billing: on it'\n",
    "test_triage()\n"
    "from letitloop.pytest_plugin import MARKER\n"
    "assert [m.name for m in test_triage.pytestmark] == [MARKER]\n",
)
AROUND["from letitloop.adapters.autogen import AutoGenStateSerializer"] = AUTOGEN_AROUND


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


def write_block(code: str, folder: Path) -> Path:
    script = folder / "block.py"
    script.write_text(code, encoding="utf-8")
    return script


def run_python(code: str, folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(write_block(code, folder))],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=folder,
    )


def run_pythons(
    scripts: dict[int, tuple[str, Path]],
    at_once: int = 4,
    forker: Preloaded | None = None,
    fresh: frozenset[int] = frozenset(),
) -> dict[int, subprocess.CompletedProcess[str]]:
    """:func:`run_python` for each (code, folder), ``at_once`` of them running together (each
    in a folder of its own; most of a block's time is spent waiting for its file): the
    results by the same keys, in their order. With ``forker``, each but those of ``fresh``
    runs as ``python block.py`` in its folder in a child forked from it (tests/preloaded.py)
    instead of a fresh interpreter, ``at_once`` of those running together too."""
    results: dict[int, subprocess.CompletedProcess[str]] = {}
    with ThreadPoolExecutor(at_once) as pool:
        running = {
            i: pool.submit(run_python, code, folder)
            for i, (code, folder) in scripts.items()
            if forker is None or i in fresh
        }
        children: deque[tuple[int, Child]] = deque()
        for i, (code, folder) in scripts.items():
            if i in running or forker is None:
                continue
            if len(children) == at_once:
                first, child = children.popleft()
                results[first] = child.wait()
            children.append(
                (i, forker.start(write_block(code, folder), cwd=folder, unbuffered=False))
            )
        for i, child in children:
            results[i] = child.wait()
        results.update({i: done.result() for i, done in running.items()})
    return {i: results[i] for i in scripts}


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


#: What each Quickstart program prints when its run is new (the first says that it fetched).
QUICKSTART_OUT = ("fetch_crm_record(123) called\nAda placed 12 orders\n", "Ada placed 12 orders\n")


@pytest.fixture(scope="module")
def quickstart_ran(tmp_path_factory: pytest.TempPathFactory, docs_forker: Preloaded) -> Path:
    """A folder where both Quickstart programs ran as pasted (their journal in .letitloop/)."""
    folder = tmp_path_factory.mktemp("quickstart")
    for code, out in zip(quickstart_programs(), QUICKSTART_OUT, strict=True):
        r = docs_forker.run(write_block(code, folder), cwd=folder)
        assert r.returncode == 0, r.stderr
        assert r.stdout == out
    return folder


@pytest.fixture
def quickstart(quickstart_ran: Path, tmp_path: Path) -> Path:
    """A copy of :func:`quickstart_ran`'s folder, for a test that runs more in it (the two
    programs ran once for the module, their processes ended)."""
    shutil.copytree(quickstart_ran, tmp_path, dirs_exist_ok=True)
    return tmp_path


def quickstart_session() -> list[tuple[str, list[str]]]:
    """The Quickstart's console block: each ``$`` command with the lines shown after it."""
    (block,) = blocks("console", section("Quickstart"))
    session: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            session.append((line[2:], []))
        else:
            session[-1][1].append(line)
    return session


def shell_line(command: str, folder: Path, **kw: Any) -> subprocess.Popen[str]:
    """``command`` in a shell in ``folder``, with this Python first on PATH (as ``python``),
    stdout and stderr together as a terminal shows them."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.Popen(
        ["bash", "-c", command],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kw,
    )


def killed_in_summarize(forker: Preloaded, script: Path) -> None:
    """``python script`` in its folder (a process of its own, forked from ``forker``), SIGKILLed
    in ``call_llm`` (summarize) once :data:`SPY` says it is there."""
    child = forker.start(script, cwd=script.parent, env={**os.environ, "KILL_IN": "call_llm"})
    deadline = time.monotonic() + 60
    while not (script.parent / "killed.flag").exists():
        assert child.running() and time.monotonic() < deadline, child.wait()
        time.sleep(0.01)
    os.kill(child.pid, signal.SIGKILL)  # inside summarize
    assert child.wait().returncode == -signal.SIGKILL


class TestTheQuickstart:
    def test_killed_with_the_kill_it_prints_it_resumes_without_fetching_again(
        self, tmp_path: Path
    ) -> None:
        """README: run it with --slow, type the kill -9 it prints, run it again: the session
        shown, line by line, with a real SIGKILL sent to the pid the program printed."""
        (tmp_path / "sync.py").write_text(quickstart_programs()[0], encoding="utf-8")
        (slow, shown), (again, shown_again) = quickstart_session()
        assert slow == "python sync.py --slow" and again == "python sync.py"
        assert shown[-1] == "Killed"  # the shell's word for a job that got SIGKILL
        journal = tmp_path / ".letitloop" / "journal.db"
        expected = [
            line.replace("/home/you/proj/.letitloop/journal.db", str(journal)).replace(
                "/home/you/proj", str(tmp_path)
            )
            for line in shown[:-1]
        ]
        child = shell_line(slow, tmp_path)
        assert child.stdout is not None
        seen = []
        for line in child.stdout:
            seen.append(line.rstrip("\n"))
            if line.startswith("summarize is running"):
                break
        pid = int(seen[-1].rsplit(" ", 1)[1])
        assert seen == [*expected[:-1], expected[-1].replace("4242", str(pid))]
        os.kill(pid, signal.SIGKILL)  # what the reader types: kill -9 PID
        assert child.wait(timeout=30) in (-signal.SIGKILL, 128 + signal.SIGKILL)
        assert child.stdout.read() == ""
        child.stdout.close()
        resumed = shell_line(again, tmp_path)
        out, _ = resumed.communicate(timeout=60)
        assert resumed.returncode == 0
        assert out.splitlines() == shown_again  # no "fetch_crm_record(123) called": replayed
        # "Run it after it completed and a new run starts (fetch_crm_record(123) called, ...)"
        third = shell_line(again, tmp_path)
        assert third.communicate(timeout=60)[0] == QUICKSTART_OUT[0]

    @pytest.mark.parametrize("which", [0, 1], ids=["with_journal", "durable"])
    def test_killed_in_summarize_it_resumes_without_fetching_again(
        self, tmp_path: Path, which: int, docs_forker: Preloaded
    ) -> None:
        """README: "Kill it with kill -9 in the middle of summarize and run it again:
        fetch_crm_record is not called again ... and summarize runs"."""
        script = tmp_path / "sync.py"
        script.write_text(SPY + quickstart_programs()[which], encoding="utf-8")
        killed_in_summarize(docs_forker, script)
        log = tmp_path / "calls.log"
        assert log.read_text().split() == ["fetch_crm_record", "call_llm"]
        log.unlink()
        again = docs_forker.run(script, cwd=tmp_path)
        assert again.returncode == 0, again.stderr
        assert again.stdout == "Ada placed 12 orders\n"
        assert log.read_text().split() == ["call_llm"]  # fetch_crm_record replayed
        log.unlink()
        # "Run it after it completed and a new run starts."
        third = docs_forker.run(script, cwd=tmp_path)
        assert third.returncode == 0, third.stderr
        assert log.read_text().split() == ["fetch_crm_record", "call_llm"]

    def test_the_two_programs_do_not_take_each_others_runs(
        self, tmp_path: Path, docs_forker: Preloaded
    ) -> None:
        """Killed in summarize, each is resumed by itself even when the other ran between."""
        first, second = quickstart_programs()
        for killed, other in ((first, second), (second, first)):
            folder = tmp_path / str(len(list(tmp_path.iterdir())))
            folder.mkdir()
            (folder / "a.py").write_text(SPY + killed, encoding="utf-8")
            (folder / "b.py").write_text(SPY + other, encoding="utf-8")
            killed_in_summarize(docs_forker, folder / "a.py")
            for name in ("b.py", "a.py"):
                (folder / "calls.log").unlink()
                r = docs_forker.run(folder / name, cwd=folder)
                assert r.returncode == 0, r.stderr
                calls = (folder / "calls.log").read_text().split()
                assert calls == (
                    ["fetch_crm_record", "call_llm"] if name == "b.py" else ["call_llm"]
                )


class TestThePythonBlocks:
    def test_the_quickstart_runs_as_pasted_and_replays_when_run_again(
        self, quickstart: Path, docs_forker: Preloaded
    ) -> None:
        for which, code in enumerate(quickstart_programs()):
            again = docs_forker.run(write_block(code, quickstart), cwd=quickstart)
            assert again.returncode == 0 and again.stdout == QUICKSTART_OUT[which], again.stderr
        runs = lil_forked("runs", "--json", "--limit", "0", cwd=quickstart).stdout
        assert runs.count('"goal": "customer_sync"') == 4  # each run completed: a new one each time

    def test_every_block_runs(self, tmp_path: Path, docs_forker: Preloaded) -> None:
        found = blocks("python")
        assert len(found) >= 5
        scripts = {}
        for i, code in enumerate(found):
            before, after = around(code)
            if "langgraph" in code:
                pytest.importorskip("langgraph")
            if CREWAI_BLOCK in code:  # tests/test_crewai.py runs it, in CrewAI's environment
                continue
            folder = tmp_path / f"block{i}"
            folder.mkdir()
            scripts[i] = (before + code + after, folder)
        for i, r in run_pythons(scripts, forker=docs_forker).items():
            assert r.returncode == 0, f"block {i}:\n{found[i]}\n{r.stderr}"

    def test_every_setup_above_is_for_a_block_that_exists(self) -> None:
        found = [around(code) for code in blocks("python")]
        assert all(v in found for v in AROUND.values())


#: The first line of the README's and docs/adapters.md's CrewAI block, which needs CrewAI's
#: own environment: tests/test_crewai.py runs it there.
CREWAI_BLOCK = "from letitloop.adapters.crewai import CrewAIDurabilityHandler"


class TestTheTestCommand:
    def test_ci_runs_the_readme_test_command_exactly(self) -> None:
        (command,) = [b.strip() for b in blocks("") if "python -m pytest" in b]
        ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
        assert command in [ln.strip() for ln in ci], "README's test command is not .ci/run's"

    def test_it_runs_the_main_suite_and_crewais_environment(self) -> None:
        (command,) = [b.strip() for b in blocks("") if "python -m pytest" in b]
        assert command.split(" && ") == [
            "pip install -e '.[test]' -c constraints.txt",
            "python -m pytest",
        ]
        # The suite runs CrewAI's tests in their own environment, as one test of its own.
        import conftest

        beside = (ROOT / "tests" / "test_crewai_env.py").read_text(encoding="utf-8")
        assert 'str(ROOT / "tests" / "crewai_env.py")' in beside
        assert "test_crewai_env.py" in conftest.SLOW_FILES
        assert "test_crewai_env.py" in conftest.LAST_FILES  # it waits for the run started beside

    def test_docs_testing_md_gives_it_as_the_full_suite(self) -> None:
        (command,) = [b.strip() for b in blocks("") if "python -m pytest" in b]
        page = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
        section = page[page.index("### Before a merge: the full suite") :]
        assert section.split("```")[1].strip() == command


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
        newest = lil_forked("runs", "--jsonl", "--limit", "1", cwd=quickstart).stdout
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


# -- the pages of docs/ ------------------------------------------------------------------

DOCS = ROOT / "docs"

#: The reader's model and tools for docs/langgraph.md's prebuilt agent: an offline chat
#: model that books room 12 then answers, and the tool (``crash``: it dies once, as killed).
LANGGRAPH_AGENT = """\
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
calls, crash = [], [False]
class Model(BaseChatModel):
    def _generate(self, messages, stop=None, run_manager=None, **kw):
        calls.append('model')
        if isinstance(messages[-1], ToolMessage):
            reply = AIMessage(f'done: {messages[-1].content}')
        else:
            call = {'name': 'book', 'args': {'room': '12'}, 'id': 'call-1'}
            reply = AIMessage('', tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=reply)])
    @property
    def _llm_type(self):
        return 'offline'
    def bind_tools(self, tools, **kw):
        return self.bind(tools=[t.name for t in tools])
@tool
def book(room: str) -> str:
    \"\"\"Book a room.\"\"\"
    calls.append('book')
    if crash[0]:
        crash[0] = False
        raise KeyboardInterrupt
    return f'room {room} booked'
model, tools = Model(), [book]
"""

#: A check of docs/langgraph.md's agents (``create_react_agent``'s and ``create_agent``'s):
#: the booking answered, each call made once, and the same request again answered without one.
LANGGRAPH_ANSWERED = (
    "assert answer['messages'][-1].content == 'done: room 12 booked', answer\n"
    "assert calls == ['model', 'book', 'model'], calls\n"
    "again = agent.invoke({'messages': [('user', 'book a room')]}, config)\n"
    "assert again == answer and len(calls) == 3, calls  # the same request: no call\n"
)

#: A check that the prebuilt agent's calls are steps: the tool's by its call id.
LANGGRAPH_STEPS = """\
import sqlite3
db = sqlite3.connect('.letitloop/journal.db')
views = dict(db.execute("SELECT goal, journal_table FROM goals"))
assert db.execute(f"SELECT key FROM [{{views['langgraph:tools']}}]").fetchall() == [
    ('tool:call-1',)
]
assert len(db.execute(f"SELECT key FROM [{{views['langgraph:{model}']}}]").fetchall()) == 2
"""


#: What docs/streams.md's OpenAI blocks run against: tests/openai_server.py's fake server.
_FAKE_OPENAI = (
    "import os, sys\n"
    f"sys.path.insert(0, {str(ROOT / 'tests')!r})\n"
    "from openai_server import FakeOpenAI\n"
    "os.environ['OPENAI_BASE_URL'] = FakeOpenAI().start().url\n"
    "os.environ['OPENAI_API_KEY'] = 'sk-fake'\n"
)

#: Setup (before) and checks (after) for the docs' blocks that continue the reader's own
#: program, keyed by (page, the block's first line): the least setup that makes the block
#: run as printed, and a check that it did what the page says.
DOCS_AROUND: dict[tuple[str, str], tuple[str, str]] = {
    ("observability.md", "from opentelemetry import trace"): (
        # The console exporter writes to sys.stdout as it is when the block makes it.
        "import io, sys\n_real, sys.stdout = sys.stdout, io.StringIO()\n",
        "_printed, sys.stdout = sys.stdout.getvalue(), _real\n"
        "for _name in ('step fetch', 'step summarize', 'run digest'):\n"
        '    assert f\'"name": "{_name}"\' in _printed, _printed\n'
        "assert '\"gen_ai.usage.input_tokens\": 812' in _printed, _printed\n",
    ),
    ("async.md", "import asyncio"): (
        "def fetch(topic):\n    return f'page on {topic}'\n"
        "def summarize(pages):\n    return ' / '.join(pages)\n",
        "assert asyncio.run(research(['sqlite', 'wal', 'fsync'])).startswith('page on sqlite')\n"
        "asyncio.run(main())\n",
    ),
    ("langgraph.md", "graph = builder.compile(checkpointer=LetItLoopCheckpointSaver())"): (
        "from langgraph.graph import START, MessagesState, StateGraph\n"
        "from letitloop.adapters.langgraph import LetItLoopCheckpointSaver\n"
        "calls = []\n"
        "def model(state):\n"
        "    calls.append(state['messages'][-1].content)\n"
        "    return {'messages': [('ai', 'booked')]}\n"
        "builder = StateGraph(MessagesState)\n"
        "builder.add_node('model', model)\n"
        "builder.add_edge(START, 'model')\n",
        "assert answer['messages'][-1].content == 'booked', answer\n"
        "again = graph.invoke({'messages': [('user', 'book a room')]}, config)\n"
        "assert again['messages'][-1].content == 'booked', again\n"
        "assert calls == ['book a room'], calls  # the same request: answered, not run\n",
    ),
    ("langgraph.md", "from letitloop import step"): (
        "from typing import TypedDict\n"
        "from langgraph.graph import END, START, StateGraph\n"
        "class State(TypedDict, total=False):\n    topic: str\n    summary: str\n"
        "def search_web(topic):\n    return f'notes on {topic}'\n"
        "class _Llm:\n    def invoke(self, notes):\n        return f'summary of {notes}'\n"
        "llm = _Llm()\n"
        "class _Workflow:  # the reader's graph, with the node the block defines\n"
        "    def compile(self, checkpointer):\n"
        "        g = StateGraph(State)\n"
        "        g.add_node('research', research)\n"
        "        g.add_edge(START, 'research')\n"
        "        g.add_edge('research', END)\n"
        "        return g.compile(checkpointer=checkpointer)\n"
        "workflow = _Workflow()\n",
        "out = app.invoke(None, {'configurable': {'thread_id': 't1'}})\n"
        "assert out['summary'] == 'summary of notes on ...', out\n",
    ),
    ("langgraph.md", "from langgraph.prebuilt import ToolNode, create_react_agent"): (
        LANGGRAPH_AGENT,
        LANGGRAPH_ANSWERED + LANGGRAPH_STEPS.format(model="agent"),
    ),
    ("langgraph.md", "from langchain.agents import create_agent"): (
        LANGGRAPH_AGENT,
        LANGGRAPH_ANSWERED + LANGGRAPH_STEPS.format(model="model"),
    ),
    ("langgraph.md", "from langgraph.prebuilt import ToolNode, tools_condition"): (
        LANGGRAPH_AGENT,
        "assert answer['messages'][-1].content == 'done: room 12 booked', answer\n"
        "assert calls == ['model', 'book', 'model'], calls\n"
        + LANGGRAPH_STEPS.format(model="chatbot"),
    ),
    ("langgraph.md", "from letitloop.adapters.langgraph import resume"): (
        # A request killed in its tool call (KeyboardInterrupt stands for the kill).
        LANGGRAPH_AGENT + "from langgraph.prebuilt import ToolNode, create_react_agent\n"
        "from letitloop.adapters.langgraph import LetItLoopCheckpointSaver, durable_model, "
        "durable_node\n"
        "graph = create_react_agent(durable_model(model), durable_node(ToolNode(tools)), "
        "checkpointer=LetItLoopCheckpointSaver())\n"
        "crash[0] = True\n"
        "try:\n"
        "    graph.invoke({'messages': [('user', 'book a room')]},\n"
        "                 {'configurable': {'thread_id': 'order-42'}})\n"
        "except KeyboardInterrupt:\n"
        "    pass\n"
        "unfinished = ['order-42']\n",
        "assert answer['messages'][-1].content == 'done: room 12 booked', answer\n"
        "assert calls == ['model', 'book', 'book', 'model'], calls  # the model: replayed\n",
    ),
    ("markers.md", "from letitloop import Journal"): (
        "sent = []\nrows = [1, 2]\n"
        "def summarize(rows):\n    return f'{len(rows)} rows'\n"
        "def send_slack(summary, idempotency_key):\n    sent.append(idempotency_key)\n",
        "assert len(sent) == 1 and sent[0].endswith(':slack_notification'), sent\n",
    ),
    ("markers.md", "from letitloop import atomic_marker, durable"): (
        "charged = []\n"
        "def stripe_charge(order_id, idempotency_key):\n    charged.append(idempotency_key)\n",
        "bill(7)\nbill(7)\nassert charged == ['billing:charge:7'], charged\n",
    ),
    ("markers.md", "for order in orders:"): (
        "from types import SimpleNamespace\nfrom letitloop import Journal\n"
        "orders = [SimpleNamespace(id=1), SimpleNamespace(id=2)]\ncharged = []\n"
        "def charge(order):\n    charged.append(order.id)\n"
        "j = Journal('billing').open()\n",
        "j.close()\nassert charged == [1, 2], charged\n",
    ),
    (
        "primitives.md",
        'letitloop.send("deploy", "approval", True)  # from Python, in any process',
    ): (
        "import letitloop\nfrom letitloop import Journal, RunWaiting\n"
        "try:\n"
        "    with Journal('deploy') as j:\n"
        "        j.wait_for('approval', stop_after=0)\n"
        "except RunWaiting:\n    pass\n",
        "with Journal('deploy') as j:\n    assert j.wait_for('approval', stop_after=0) is True\n",
    ),
    ("primitives.md", 'letitloop.cancel(run_id, reason="wrong input file")'): (
        "import letitloop\nfrom letitloop import Journal, RunWaiting\n"
        "try:\n"
        "    with Journal('deploy') as j:\n"
        "        run_id = j.run_id\n"
        "        j.wait_for('approval', stop_after=0)\n"
        "except RunWaiting:\n    pass\n",
        "import sqlite3\n"
        "db = sqlite3.connect('.letitloop/journal.db')\n"
        "assert db.execute('SELECT status FROM runs').fetchall() == [('cancelled',)]\n",
    ),
    ("primitives.md", "def ask(prompt):"): (
        "from types import SimpleNamespace as NS\nfrom letitloop import Journal, usage\n"
        "class _Messages:  # an Anthropic-style client\n"
        "    def create(self, model, **request):\n"
        "        return NS(model=model, content=[NS(text='an answer')],\n"
        "                  usage=NS(input_tokens=1000, output_tokens=200))\n"
        "client = NS(messages=_Messages())\n",
        "with Journal('g') as j:\n    assert j.step('ask', ask, 'q') == 'an answer'\n"
        "import sqlite3\n"
        "db = sqlite3.connect('.letitloop/journal.db')\n"
        "row = db.execute('SELECT input_tokens, output_tokens, cost FROM journal_g').fetchone()\n"
        "assert row == (1120, 230, 0.0009), row\n",
    ),
    ("mcp.md", "import asyncio"): (
        # The reader runs it in the clone's root, where examples/shop_server.py is; its
        # journal goes to this block's folder.
        "import os\n"
        "os.environ['LETITLOOP_DB'] = os.path.abspath('.letitloop/journal.db')\n"
        f"os.chdir({str(ROOT)!r})\n",
        "import os, sqlite3\n"
        "db = sqlite3.connect(os.environ['LETITLOOP_DB'])\n"
        "sql = \"SELECT key FROM journal_checkout WHERE status = 'done'\"\n"
        "done = {r[0] for r in db.execute(sql)}\n"
        "assert done == {'mcp:lookup/sent', 'mcp:lookup', 'mcp:charge/sent', 'mcp:charge'}, done\n",
    ),
    ("supervision.md", "from letitloop import durable, step, supervise"): ("", ""),
    ("pydantic_ai.md", "import asyncio"): (
        "",
        "import subprocess, sys\n"
        "shown = subprocess.run([sys.executable, '-m', 'letitloop', 'show', 'support'],\n"
        "                       capture_output=True, text=True, check=True).stdout\n"
        "assert '0001:support__function_toolset__<agent>.call_tool:order_status' in shown\n",
    ),
    ("versioning.md", "from letitloop import Journal, patched"): ("", ""),
    # The OpenAI client's streams, against the fake OpenAI-compatible server the streams'
    # tests kill programs under (tests/openai_server.py), served in the block's process.
    ("streams.md", "import openai"): (
        _FAKE_OPENAI,
        "from openai_server import answer\n"
        "assert story.result.text == ''.join(answer(question[0]['content']))\n"
        "assert summary.result.state['response_id'].startswith('resp_')\n",
    ),
    ("streams.md", "import asyncio"): (_FAKE_OPENAI, ""),
    ("streams.md", "from letitloop import Journal"): (
        "",
        "assert [c.kind for c in chunks][-1] == 'end' and s.result.recoveries == ()\n",
    ),
    ("types.md", "import letitloop.codec"): (
        "from dataclasses import dataclass\nfrom datetime import datetime, timezone\nLine = str\n",
        "from letitloop.codec import decode, encode\n"
        "o = Order(1, datetime(2026, 11, 30, tzinfo=timezone.utc), ('a',))\n"
        "assert decode(encode(o)) == o\n",
    ),
}

DOCS_AROUND[("adapters.md", "from letitloop.adapters.smolagents import SmolagentsWALCallback")] = (
    SMOLAGENTS_AROUND
)
DOCS_AROUND[("adapters.md", "from letitloop.adapters.autogen import AutoGenStateSerializer")] = (
    AUTOGEN_AROUND
)
DOCS_AROUND[("schedules.md", "from datetime import datetime")] = (
    "",
    # The run name the page gives for the tick 09:15 Paris time.
    "from zoneinfo import ZoneInfo\n"
    "(_s,) = report.__letitloop_schedules__\n"
    "_tick = datetime(2026, 12, 7, 9, 15, tzinfo=ZoneInfo('Europe/Paris'))\n"
    "assert _s.run_name(_tick) == 'report@2026-12-07T08:15:00+00:00', _s.run_name(_tick)\n"
    "assert (_s.catch_up, _s.overlap, _s.tz) == ('latest', 'skip', 'Europe/Paris')\n",
)
DOCS_AROUND[("testing.md", "from letitloop import Journal")] = ("", "")
DOCS_AROUND[("testing.md", "import time")] = ("", "")
DOCS_AROUND[
    ("primitives.md", "from letitloop import Budget, BudgetExceededError, Journal, usage")
] = (
    "",
    "",
)
DOCS_AROUND[
    ("primitives.md", "from letitloop import Budget, BudgetExceededError, Journal, reserve, usage")
] = (
    "def call_model(prompt, max_tokens):\n"
    "    return {'text': 'an answer', 'usage': {'input_tokens': 60, 'output_tokens': 40}}\n",
    "import sqlite3\n"
    "db = sqlite3.connect('.letitloop/journal.db')\n"
    "held = db.execute('SELECT count(*), count(settled_at), max(tokens) FROM reservations')\n"
    "assert held.fetchone() == (16, 16, 413)\n",
)
DOCS_AROUND[("adapters.md", "from agents import Agent, Runner, SQLiteSession")] = (
    "from agents import Agent, function_tool, set_tracing_disabled\n"
    "from agents.items import ModelResponse\n"
    "from agents.models.interface import Model\n"
    "from agents.usage import Usage\n"
    "from openai.types.responses import ResponseOutputMessage, ResponseOutputText\n"
    "set_tracing_disabled(True)\n"
    "class Scripted(Model):\n"
    "    async def get_response(self, *a, **kw):\n"
    "        text = ResponseOutputText(text='Refunded.', type='output_text', annotations=[])\n"
    "        message = ResponseOutputMessage(id='m', role='assistant', status='completed',\n"
    "            type='message', content=[text])\n"
    "        return ModelResponse(output=[message], usage=Usage(), response_id=None)\n"
    "    def stream_response(self, *a, **kw):\n"
    "        raise NotImplementedError\n"
    "model = Scripted()\n"
    "@function_tool\n"
    "def look_up_order(order_id: str) -> str:\n"
    "    return 'a kettle'\n"
    "refunds = Agent(name='refunds', model=model)\n",
    "import asyncio\n"
    "assert asyncio.run(support('Please refund order A17')) == 'Refunded.'\n"
    "assert asyncio.run(support('Please refund order A17')) == 'Refunded.'\n",
)
DOCS_AROUND[("queues.md", "# tasks.py")] = ("", "")  # a module: it declares, and runs nothing
# The FastAPI app as printed (tests/test_web_fastapi.py serves it under gunicorn): its routes.
DOCS_AROUND[("fastapi.md", "from fastapi import FastAPI")] = (
    "",
    "assert set(app.openapi()['paths']) == "
    "{'/reports', '/reports/sync', '/jobs/runs/{id}', '/jobs/runs/{id}/events'}\n",
)
# The app as printed (tests/test_web_background.py serves it under uvicorn): its routes.
DOCS_AROUND[("fastapi.md", "from starlette.applications import Starlette")] = (
    "",
    "assert [r.path for r in app.routes] == "
    "['/reports', '/jobs/runs/{id}', '/jobs/runs/{id}/events']\n",
)
# An app's own lifespan entering the background's: its worker runs while the app does.
DOCS_AROUND[("fastapi.md", "@contextlib.asynccontextmanager")] = (
    "import contextlib\nfrom letitloop import Queue\n"
    "from letitloop.integrations.starlette import Background\n"
    "background = Background(Queue('q'))\n",
    "from starlette.applications import Starlette\n"
    "from starlette.testclient import TestClient\n"
    "_app = Starlette(lifespan=lifespan)\n"
    "with TestClient(_app):\n"
    "    assert _app.state.letitloop_background is background and background.worker.alive\n"
    "assert background.worker is None\n",
)
DOCS_AROUND[("adapters.md", "import asyncio")] = ("", "")  # LlamaIndex: a whole program
# A parent task enqueueing children: served by a worker, its result the children's.
DOCS_AROUND[("queues.md", "@emails.task")] = (
    "from letitloop import Queue, step\nemails = Queue('emails', path='jobs.db')\n"
    "@emails.task\ndef send(to, subject):\n"
    "    return step('deliver', lambda: f'{subject} to {to}')\n",
    "worker = emails.worker(threads=3).start()\n"
    "try:\n"
    "    _got = emails.enqueue(campaign, ['a@x', 'b@x']).result(timeout=60)\n"
    "finally:\n"
    "    worker.stop(timeout=30)\n"
    "assert _got == ['news to a@x', 'news to b@x'], _got\n",
)
# A whole program (tests/test_crashtest.py crash-tests it and checks the page's report).
DOCS_AROUND[
    (
        "crashtest.md",
        "# bills.py: a broken tool, its send in a step but not guarded by a marker.",
    )
] = ("", "")

#: The docs' blocks that are not programs, keyed like DOCS_AROUND, with the reason.
ILLUSTRATIVE: dict[tuple[str, str], str] = {
    ("queues.md", "from tasks import emails, send"): (
        "a program that waits for a worker of the tasks.py above: tests/test_queues.py "
        "(TestTheQueuesPage) runs both blocks as printed, with lil worker as the page says"
    ),
    ("langgraph.md", "from langgraph.types import interrupt"): (
        "a program that stops to wait (exit 75) until lil send answers it: "
        "tests/test_langgraph_answers.py runs it (tests/langgraph_answers.py) through the "
        "stop, the refused and the accepted lil send, and kills"
    ),
    ("adapters.md", CREWAI_BLOCK): (
        "needs CrewAI, which has an environment of its own: tests/test_crewai.py runs it "
        "there on the example's crew"
    ),
    ("processes.md", "import multiprocessing"): (
        "a spawn pool's program, which must run as a file (spawn workers import its "
        "__main__); tests/test_forked_child.py runs it as printed, twice, and counts the rows"
    ),
    ("mcp.md", 'async with j.atomic_marker("charge") as offer:'): (
        "lines of an async function with an open journal j and a DurableMCP; "
        "tests/test_mcp_calls.py (TestACallInDoubtGuardedByAMarkerAndItsKey) runs the same "
        "calls, killed mid-call and resumed"
    ),
    ("pydantic_ai.md", 'durable = LetItLoopDurability(goal="desk", stop_after=0.2)'): (
        "three lines of an agent's program (its model and ask are the reader's); "
        "tests/test_pydantic_ai.py (TestAnAgentWaitingForAnApproval) runs the whole "
        "program: stopped, answered with lil send, resumed"
    ),
    ("adapters.md", "from autogen_agentchat.agents import AssistantAgent, UserProxyAgent"): (
        "lines of an async function (its model_client is the reader's); "
        "tests/autogen_human.py is this team as a program, and tests/test_autogen.py "
        "(TestATeamWithAPersonInItKilledAroundItsWaits) runs it: stopped, answered with "
        "letitloop.send and lil send, killed, resumed"
    ),
    ("testing.md", "import pytest"): (
        "a pytest test of the example's pipeline, run by pytest with its fixture file: "
        "tests/test_example_replay.py runs examples/replay_test/tests/test_triage.py so"
    ),
    ("testing.md", "# tests/test_pipeline.py: run with pytest --letitloop-crash"): (
        "a pytest test that needs pytest's fixture and a pipeline.py: "
        "tests/test_pytest_plugin.py (TestTheCrashTestFixture) runs tests like it under "
        "--letitloop-crash and without it"
    ),
    ("adapters.md", "import dspy"): (
        "needs a real model (an API key); tests/test_dspy.py runs the same calls on DSPy's "
        "DummyLM, killed mid-call and resumed, and examples/dspy_resume.py is runnable"
    ),
    ("async.md", "# refused: two tasks, one name"): (
        "two lines of an async function (top-level await) contrasting a refused call with "
        "the right one; tests/test_async.py runs both"
    ),
    ("primitives.md", "from letitloop import Journal, RetryPolicy, usage"): (
        "sleeps ten minutes and waits a day for a human; README's block of the same calls "
        "runs (a 2 s sleep, the approval sent from a thread)"
    ),
    (
        "primitives.md",
        'j.step("fetch", fetch, url, retry=RetryPolicy(max_attempts=5, initial_backoff=1.0))',
    ): (
        "three alternative lines, one a decorator without its function: not one program; "
        "tests/test_retry.py runs each form"
    ),
    (
        "primitives.md",
        'j.sleep("cool_down", 600)  # await j.async_sleep(...); letitloop.sleep(...)',
    ): ("one line of the program above it, which sleeps ten minutes; tests/test_sleeps.py"),
    (
        "primitives.md",
        'verdict = j.wait_for("approval", timeout=86400)  # await j.async_wait_for(...)',
    ): ("one line of the program above it, which waits a day; tests/test_waits.py"),
}


def docs_blocks() -> list[tuple[str, str]]:
    """Every ``python`` block of docs/*.md, as (page, code)."""
    return [
        (page.name, code)
        for page in sorted(DOCS.glob("*.md"))
        for code in blocks("python", page.read_text(encoding="utf-8"))
    ]


#: The docs' blocks about their process itself, run in a fresh interpreter of their own
#: (the others run in children forked from one that imported their frameworks once),
#: keyed like DOCS_AROUND, with the reason.
OWN_PROCESS: dict[tuple[str, str], str] = {
    ("supervision.md", "from letitloop import durable, step, supervise"): (
        "@supervise starts the program again as its child from the command line that "
        "started its process (sys.orig_argv): a forked child's is its forker's"
    ),
}

#: What the docs' and README's blocks import, once, in the interpreter their children are
#: forked from: each framework that two blocks or more import (smolagents' and AutoGen's
#: blocks are in README and docs/adapters.md; openai in three blocks of the docs).
DOCS_IMPORTS = (
    "langgraph.graph",
    "langgraph.prebuilt",
    "letitloop.adapters.langgraph",
    "workflows",
    "llama_index.core.agent.workflow",
    "llama_index.core.llms.mock",
    "letitloop.adapters.llamaindex",
    "smolagents",
    "letitloop.adapters.smolagents",
    "autogen_agentchat.agents",
    "autogen_ext.models.replay",
    "letitloop.adapters.autogen",
    "openai",
)


@pytest.fixture(scope="module")
def docs_forker() -> Iterator[Preloaded]:
    """Forks the docs' blocks (all but :data:`OWN_PROCESS`) and README's from an interpreter that
    imported letitloop and :data:`DOCS_IMPORTS` once."""
    with Preloaded(*DOCS_IMPORTS, with_letitloop=True) as forker:
        yield forker


def block_key(page: str, code: str) -> tuple[str, str]:
    return page, code.splitlines()[0]


class TestTheDocsPages:
    def test_every_python_block_runs_as_printed_or_says_why_not(
        self, tmp_path: Path, docs_forker: Preloaded
    ) -> None:
        found = docs_blocks()
        assert len(found) >= 15
        scripts = {}
        fresh = set()
        for i, (page, code) in enumerate(found):
            key = block_key(page, code)
            if key in ILLUSTRATIVE:
                continue
            assert key in DOCS_AROUND, f"{page}: a new block, neither run nor explained: {key}"
            if "langgraph" in code:
                pytest.importorskip("langgraph")
            if "pydantic_ai" in code:
                pytest.importorskip("pydantic_ai.durable_exec")
            if "llamaindex" in code:
                pytest.importorskip("workflows")
            if "llama_index.core" in code:
                pytest.importorskip("llama_index.core.agent.workflow")
            before, after = DOCS_AROUND[key]
            folder = tmp_path / f"block{i}"
            folder.mkdir()
            scripts[i] = (before + code + after, folder)
            if key in OWN_PROCESS:
                fresh.add(i)
        for i, r in run_pythons(scripts, forker=docs_forker, fresh=frozenset(fresh)).items():
            page, code = found[i]
            assert r.returncode == 0, f"{page}:\n{code}\n{r.stderr}"

    def test_every_setup_and_reason_is_for_a_block_that_exists(self) -> None:
        keys = {block_key(page, code) for page, code in docs_blocks()}
        assert set(DOCS_AROUND) <= keys, set(DOCS_AROUND) - keys
        assert set(ILLUSTRATIVE) <= keys, set(ILLUSTRATIVE) - keys
        assert not set(DOCS_AROUND) & set(ILLUSTRATIVE)
        assert set(OWN_PROCESS) <= set(DOCS_AROUND), set(OWN_PROCESS) - set(DOCS_AROUND)
