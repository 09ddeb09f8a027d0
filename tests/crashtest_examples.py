"""Every program of ``examples/`` as ``lil crashtest`` runs it, and the drivers of those that
need one (tests/test_crashtest_examples.py, the adapters' tests, and
benchmarks/crashtest_examples.py, which kills each at every point).

An example that runs on its own is its own command, with a journal at a
relative path (``--db journal.db``) where its default is a new temporary
folder (each rerun would start afresh). The others are driven by this file
as a script, ``python tests/crashtest_examples.py NAME``, in the trial's
folder, each as a reader uses it:

- ``autogen_human``: the example, then ``lil send`` of the person's answer
  to the wait it stopped at, again, until the poem is approved;
- ``shop_server``: docs/mcp.md's ``DurableMCP`` program (its ``checkout.py``)
  against the example's MCP server, which keeps its record of charges in
  ``charges.log`` (the side effects the crash test counts), again after
  deciding about a call of ``charge`` in doubt from that record (``SHOP_SERVER_PYTHON``
  set, a JSON list: the command that stands for ``python`` when it starts the server, a
  forking interpreter's in tests/test_mcp_calls.py, tests/stdio_servers.py);
- ``starlette_app`` and ``fastapi_app``: the app under Starlette's
  ``TestClient`` (its lifespan runs the queue's worker): a POST with an
  ``Idempotency-Key``, then the run polled until it completed.

A driver that sees the example killed exits 1, so the crash test reruns it.

The tests run an example or driver that imports a heavy framework (``preload``) in
children forked from an interpreter that imported it once (tests/preloaded.py), and
a driver runs the example and ``lil`` in children forked from itself: each a process
of its own, SIGKILLed by the crash test's hook as a fresh one is, for a tenth of the
CPU. The benchmark runs every example as ``lil crashtest`` does, each run fresh.
"""

from __future__ import annotations

import functools
import io
import json
import os
import re
import runpy
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from forked_commands import ForkedCommands
    from preloaded import Preloaded

    from letitloop.supervision.crashtest import Program, Report

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
HERE = Path(__file__).resolve()


@dataclass(frozen=True)
class Example:
    """One example program and how the crash test runs it."""

    #: The example's file under examples/.
    file: str
    #: The command after the interpreter: the example's file and arguments, or this driver.
    argv: tuple[str, ...]
    #: What of its output must equal the reference's (crashtest's ``output``).
    output: str
    #: The module it needs (a test skips without it).
    needs: str
    #: The virtual environment it runs in: the main one, or CrewAI's (tests/crewai_env.py).
    env: str = "main"
    #: The side-effect file the crash test compares with the reference's (its ``effects``).
    effects: str | None = None
    #: The heavy modules its command imports (never letitloop: each run imports it, and
    #: the crash test's hook is installed then), imported once by the tests' forking
    #: interpreter; none: each run a fresh interpreter.
    preload: tuple[str, ...] = ()
    #: For an example whose command runs its steps in a child of its own (the process the
    #: crash test kills and reruns), the arguments that run that child alone: the tests
    #: crash-test it, forked (its whole command's parent is tested apart); none: the command.
    steps_only: tuple[str, ...] = ()
    #: The environment variables the command's parent gives that child (with ``steps_only``).
    steps_env: tuple[tuple[str, str], ...] = ()
    #: Statements the forking interpreter runs after its imports (tests/preloaded.py).
    warm: str = ""

    @property
    def name(self) -> str:
        return self.file.removesuffix(".py").replace("/", "_")

    def command(self, python: str = sys.executable, argv: tuple[str, ...] = ()) -> list[str]:
        """The command the crash test runs (paths absolute: it runs in a fresh folder)."""
        head, *rest = argv or self.argv
        script = str(HERE) if head == "driver" else str(EXAMPLES / head)
        return [python, script, *rest]


#: Every example program, in the order of examples/ (tests/test_crashtest_examples.py
#: checks that none is left out).
ALL = [
    Example(
        "autogen_human.py", ("driver", "autogen_human"), "match:^approved", "autogen_agentchat",
        preload=("autogen_agentchat.agents", "autogen_agentchat.conditions",
                 "autogen_agentchat.teams", "autogen_ext.models.replay"),
    ),
    Example("autogen_resume.py", ("autogen_resume.py",), "match:^answer: ", "autogen_agentchat"),
    Example("crewai_resume.py", ("crewai_resume.py",), "match:^report: ", "crewai", env="crewai"),
    Example("dspy_resume.py", ("dspy_resume.py", "--db", "journal.db"), "match:^answer: ", "dspy"),
    Example(
        "fastapi_app.py", ("driver", "fastapi_app"), "match:^{.id.: ", "fastapi",
        preload=("fastapi", "starlette.testclient"),
    ),
    Example("langgraph_agent.py", ("langgraph_agent.py",), "match:^answer: ", "langgraph"),
    Example(
        "langgraph_resume.py",
        ("langgraph_resume.py", "--db", "journal.db"),
        "ignore",  # it prints process ids and what ran in each; its exit status is compared
        "langgraph",
        preload=("langgraph.graph", "langgraph.checkpoint.base", "langgraph.pregel",
                 "langgraph.types", "langchain_core.runnables"),
        steps_only=("langgraph_resume.py", "--db", "journal.db", "--phase", "once"),
        steps_env=(("EXAMPLE_PHASE", "once"), ("EXAMPLE_LEDGER", "ledger.jsonl")),
    ),
    Example(
        "llamaindex_resume.py",
        ("llamaindex_resume.py", "--db", "journal.db"),
        "match:^result: ",
        "llama_index.core",
        preload=("llama_index.core.agent.workflow",),
        steps_only=("llamaindex_resume.py", "--agents", "--db", "journal.db",
                    "--ledger", "ledger.txt"),
        warm="from llama_index.core.utils import get_tokenizer; get_tokenizer()",
    ),
    Example(
        "openai_agents_resume.py",
        ("openai_agents_resume.py",),
        "match:^(answer|history): ",
        "agents",
    ),
    Example(
        "pydantic_ai_resume.py",
        ("pydantic_ai_resume.py", "--db", "journal.db"),
        "match:^answer: ",
        "pydantic_ai",
    ),
    Example("replay_test/triage.py", ("replay_test/triage.py",), "exact", "letitloop"),
    Example(
        "shop_server.py", ("driver", "shop_server"), "exact", "mcp", effects="charges.log",
        preload=("mcp", "mcp.client.stdio", "mcp.client.session", "jsonschema.validators"),
    ),
    Example("smolagents_resume.py", ("smolagents_resume.py",), "match:^answer: ", "smolagents"),
    Example(
        "starlette_app.py", ("driver", "starlette_app"), "match:^{.id.: ", "httpx",
        preload=("starlette.applications", "starlette.testclient"),
    ),
]  # fmt: skip

BY_NAME = {example.name: example for example in ALL}


def crashtest_example(
    name: str, *, max_kills: int = 3, seed: int = 56, forked: ForkedCommands | None = None
) -> Report:
    """The crash test of example ``name`` at ``max_kills`` of its kill points, drawn at
    random with ``seed``, run with this interpreter from the current folder (an example with
    ``preload``: each run forked from an interpreter that imported it; ``forked``: each
    run relayed to a child forked from its preloaded interpreter); fails
    (AssertionError, with the report) when anything ran or was paid twice, a trial did not
    finish, or its compared output differs from the reference's. Returns the report."""
    from preloaded import Preloaded

    from letitloop.supervision.crashtest import Program, crashtest, describe

    example = BY_NAME[name]
    command = example.command(argv=example.steps_only)
    with Preloaded(*example.preload, warm=example.warm) as preloaded:
        program = example_program(name, preloaded)
        if forked is not None:  # each run relayed to the test's own forking interpreter
            command = forked.command(command[1:])
            program = Program(command, timeout=240)
        report = crashtest(
            command, max_kills=max_kills, seed=seed, order="random", output=example.output,
            effects=example.effects, timeout=240, program=program,
        )  # fmt: skip
    said = "\n".join(describe(report, command))
    assert report.tried == min(max_kills, report.points), said
    assert report.repeats == [] and report.problems == [], said
    return report


def example_program(name: str, preloaded: Preloaded) -> Program:
    """How the tests run example ``name``'s command: each run a child forked from
    ``preloaded`` (which imported its ``preload``), or a fresh process (none)."""
    from letitloop.supervision.crashtest import Program

    example = BY_NAME[name]

    class Forked(Program):
        def execute(self, folder: Path, env: dict[str, str], kill: str) -> tuple[int, bytes]:
            script, *args = self.command[1:]
            if example.steps_only:
                env = {**env, **dict(example.steps_env)}
            done = preloaded.run(Path(script), *args, env=env, cwd=folder)
            return done.returncode, done.stdout.encode("utf-8")

    command = example.command(argv=example.steps_only)
    if not example.preload:
        return Program(command, timeout=240)
    return Forked(command, timeout=240)


def run_here(argv: list[str], main: Callable[[], object]) -> subprocess.CompletedProcess[str]:
    """``main()`` run to its end in a child forked from this driver, as ``python ARGV``
    would run it (``sys.argv`` ARGV, stdin empty, stdout and stderr captured, atexit
    handlers at its end): a process of its own, killed for real by the crash test's hook
    (this driver never imports letitloop: the child imports it, the hook installed then).
    Its exit status is negative when a signal ended it, as ``subprocess.run`` says."""
    assert "letitloop" not in sys.modules, "the driver must not import letitloop"
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:  # the child
            code = 1
            try:
                null = os.open(os.devnull, os.O_RDONLY)
                for fd, target in ((null, 0), (out.fileno(), 1), (err.fileno(), 2)):
                    os.dup2(fd, target)
                sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), "utf-8")
                sys.stderr = io.TextIOWrapper(
                    io.FileIO(2, "w", closefd=False), "utf-8", "backslashreplace",
                    line_buffering=True,
                )  # fmt: skip
                sys.argv = list(argv)
                try:
                    main()
                    code = 0
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
                threading._shutdown()  # type: ignore[attr-defined]
                import atexit

                atexit._run_exitfuncs()
            except BaseException:
                import traceback

                traceback.print_exc()
            finally:
                for stream in (sys.stdout, sys.stderr):
                    stream.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(
            argv,
            os.waitstatus_to_exitcode(status),
            out.read().decode("utf-8", "replace"),
            err.read().decode("utf-8", "replace"),
        )


def run_example(*argv: str) -> subprocess.CompletedProcess[str]:
    """An example in a child forked from this driver (the crash test's variables
    inherited: it is killed there)."""
    script = str(EXAMPLES / argv[0])

    def main() -> None:
        sys.path[0] = str(EXAMPLES)  # as python puts the script's folder first
        runpy.run_path(script, run_name="__main__")

    return run_here([script, *argv[1:]], main)


def lil(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m letitloop ARGS`` (``lil``) in a child forked from this driver."""
    return run_here(
        ["lil", *args], lambda: runpy.run_module("letitloop", run_name="__main__", alter_sys=True)
    )


def drive_autogen_human() -> int:
    """The poem team, answered as its docstring says: shorter, then approved."""
    answers = {"user_proxy.input:1": '"Shorter, please."', "user_proxy.input:2": '"APPROVE"'}
    for _ in range(len(answers) + 1):
        done = run_example("autogen_human.py")
        if done.returncode == 0:
            print(done.stdout, end="")
            return 0
        waiting = re.search(r"stopped to wait for '([^']+)'", done.stderr)
        if done.returncode != 75 or waiting is None:
            return 1  # killed: the crash test runs this driver again
        sent = lil("send", "poem", waiting[1], answers[waiting[1]], "--db", ".letitloop/journal.db")
        if sent.returncode != 0:
            print(sent.stderr, file=sys.stderr)
            return 1
    return 1


#: docs/mcp.md's checkout.py, its server's path made absolute and the shop keeping its record
#: of charges (``--charges``) in the program's folder.
CHECKOUT = """\
import asyncio
import sys

from mcp import StdioServerParameters

from letitloop.mcp import DurableMCP

shop = StdioServerParameters(command=sys.executable, args=[SERVER, "--charges", "charges.log"])


async def main():
    async with DurableMCP(shop, goal="checkout", run="order-7") as tools:
        found = await tools.call_tool("lookup", {"order": 7})  # step mcp:lookup
        charged = await tools.call_tool("charge", {"order": 7})  # step mcp:charge
        print(found.content[0].text, charged.content[0].text)


asyncio.run(main())
"""


def drive_shop_server() -> int:
    """docs/mcp.md's program (as tests/test_mcp_calls.py checks it is printed there), run
    until it finishes. A call of ``charge`` in doubt (the program stopped to wait, exit
    status 75) is decided as docs/mcp.md tells a person to, after checking the shop's
    record of charges: a charge of the order recorded there is what the call did (its line
    sent as the call's result: nothing is sent again); none, and the call is sent once more
    (``"rerun"``)."""
    program = CHECKOUT.replace("[SERVER,", f"[{str(EXAMPLES / 'shop_server.py')!r},")
    if os.environ.get("SHOP_SERVER_PYTHON"):
        python, *options = json.loads(os.environ["SHOP_SERVER_PYTHON"])
        program = program.replace(
            "command=sys.executable, args=[", f"command={python!r}, args=[*{options!r}, "
        )
    for _ in range(3):
        done = run_here(["-c"], lambda: exec(program, {"__name__": "__main__"}))
        if done.returncode == 0:
            print(done.stdout, end="")
            return 0
        # "... the call of MCP tool 'charge' ... either send it once more: lil send RUN KEY ..."
        waiting = re.search(r"MCP tool 'charge' .*? lil send (\S+) (\S+) ", done.stderr)
        if done.returncode != 75 or waiting is None:
            return 1  # killed: the crash test runs this driver again
        record = Path("charges.log")
        charged = record.read_text("utf-8").splitlines() if record.exists() else []
        decision = {"result": "charged order 7"} if "charged order 7" in charged else "rerun"
        sent = lil("send", waiting[1], waiting[2], json.dumps(decision))
        if sent.returncode != 0:
            print(sent.stderr, file=sys.stderr)
            return 1
    return 1


def drive_web_app(module: str) -> int:
    """A report requested once (its Idempotency-Key names it) and awaited, in the app of
    ``examples/{module}.py`` (Starlette's or FastAPI's: the same routes)."""
    import importlib
    import time

    from starlette.testclient import TestClient

    sys.path.insert(0, str(EXAMPLES))
    app = importlib.import_module(module).app

    with TestClient(app) as client:
        made = client.post("/reports", headers={"Idempotency-Key": "order-1"})
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            run = client.get("/jobs/runs/order-1").json()
            if run.get("status") == "completed":
                print(made.json(), run["result"])
                return 0
            time.sleep(0.05)
    return 1


DRIVERS: dict[str, Callable[[], int]] = {
    "autogen_human": drive_autogen_human,
    "shop_server": drive_shop_server,
    "starlette_app": functools.partial(drive_web_app, "starlette_app"),
    "fastapi_app": functools.partial(drive_web_app, "fastapi_app"),
}

if __name__ == "__main__":
    sys.exit(DRIVERS[sys.argv[1]]())
