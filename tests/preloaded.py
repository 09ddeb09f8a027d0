"""Scripts run in child processes forked from an interpreter that imported their SDK once.

Importing the OpenAI Agents SDK costs a fresh interpreter about 3 s of CPU (the
OpenAI client's types, MCP's two protocol versions of pydantic models), and the
tests run its scripts in a few dozen processes. A :class:`Preloaded` is a fresh
interpreter (``sys.executable``) that imported the SDK and nothing of letitloop,
then forks a child per script run: each child is a process of its own (its own
pid, SIGKILLed for real, its exit status as its parent sees it) that runs the
script as ``python SCRIPT ARGS`` would: as ``__main__``, with its ``sys.argv``
and ``sys.path[0]``, the environment and folder given, stdin from /dev/null, its
stdout and stderr captured, atexit handlers and non-daemon threads at its end.
What it shares with its siblings is what the SDK's import made, and the hash
seed (test_identity.py runs processes under different seeds).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

#: The forking interpreter: imports argv[1:] (and runs the ``--warm=`` statements among
#: them), then, for each request line on stdin
#: (argv, cwd, env, the stdout and stderr files), forks a child, writes "pid N" to
#: stdout, and "exit CODE" (negative: the signal) once the child ended.
FORKER = r"""
import atexit, io, json, os, runpy, sys, threading, traceback

names = sys.argv[1:]
with_letitloop = names[:1] == ["--with-letitloop"]
warm = [n for n in names if n.startswith("--warm=")]
for name in names[with_letitloop:]:
    if not name.startswith("--warm="):
        __import__(name)
for code in warm:
    exec(code.removeprefix("--warm="), {})
assert with_letitloop or "letitloop" not in sys.modules, "the forker must not import letitloop"
requests, replies = sys.stdin.buffer, sys.stdout.buffer


def stream(fd, unbuffered):
    # As the interpreter makes them off a terminal: stdout buffered unless unbuffered
    # (python -u, PYTHONUNBUFFERED), stderr line-buffered.
    raw = io.FileIO(fd, "w", closefd=False)
    errors = "strict" if fd == 1 else "backslashreplace"
    if unbuffered:
        return io.TextIOWrapper(raw, encoding="utf-8", errors=errors, write_through=True)
    return io.TextIOWrapper(
        io.BufferedWriter(raw), encoding="utf-8", errors=errors, line_buffering=fd == 2
    )


def child(request):
    code = 1
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        out = os.open(request["out"], os.O_WRONLY | os.O_TRUNC)
        err = os.open(request["err"], os.O_WRONLY | os.O_TRUNC)
        for fd, target in ((null, 0), (out, 1), (err, 2)):
            os.dup2(fd, target)
            os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        unbuffered = request["unbuffered"] or bool(os.environ.get("PYTHONUNBUFFERED"))
        sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        sys.stdout = sys.__stdout__ = stream(1, unbuffered)
        sys.stderr = sys.__stderr__ = stream(2, unbuffered)
        script = request["argv"][0]
        sys.argv = list(request["argv"])
        sys.path[0] = os.path.dirname(os.path.abspath(script))
        try:
            runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as exc:
            if exc.code is None:
                code = 0
            elif isinstance(exc.code, int):
                code = exc.code
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except BaseException:
            traceback.print_exc()
            code = 1
        threading._shutdown()
        atexit._run_exitfuncs()
    finally:
        for s in (sys.stdout, sys.stderr):
            try:
                s.flush()
            except BaseException:
                pass
        os._exit(code)


for line in requests:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        child(request)
    replies.write(b"pid %d\n" % pid)
    replies.flush()
    _, status = os.waitpid(pid, 0)
    replies.write(b"exit %d\n" % os.waitstatus_to_exitcode(status))
    replies.flush()
"""


#: What a child that opens a journal file imports of letitloop besides its package (the
#: SQLite storage, its migrations, async steps): a forker ``with_letitloop`` imports them
#: too, so that each child does not (about 8 ms of CPU a child; a thousand children).
JOURNAL_MODULES = (
    "letitloop.sqlite_storage",
    "letitloop.stores",
    "letitloop.migrate",
    "letitloop.compact_migration",
    "letitloop.schema_file",
    "letitloop.migration_sql",
    "letitloop.async_steps",
    "letitloop.commits",
    "letitloop.costs",
    "letitloop.otel",
)


#: Per SDK, for :func:`for_sdk`: what a forker of its scripts imports (the SDK, its
#: adapter, and what a run of theirs imports at its first call: a client's HTTP stack,
#: a price table) and runs (``warm``: a validator the SDK builds at its first call).
SDKS: dict[str, tuple[tuple[str, ...], str]] = {
    "agents": (
        (
            "agents",
            "agents.memory.sqlite_session",
            "letitloop.adapters.openai_agents",
            "anyio.streams.tls",
            "h11",
            "h2.connection",
            "httpcore2",
            "truststore",
        ),
        "",
    ),
    "pydantic_ai": (
        (
            "pydantic_ai",
            "pydantic_ai.models.function",
            "letitloop.adapters.pydantic_ai",
            "anyio._backends._asyncio",
            "genai_prices.data",
            "queue",
        ),
        # The JSON codec's validators of a model's response and of a tool's result
        # (about 60 ms of CPU at a child's first call), built and cached once.
        "from pydantic_ai.durable_exec import JSON_CODEC, CallToolResult\n"
        "from pydantic_ai.messages import ModelResponse\n"
        "JSON_CODEC.dump(ModelResponse, ModelResponse(parts=[]))\n"
        "JSON_CODEC.load(CallToolResult, {'kind': 'model_retry', 'message': 'warm'})\n",
    ),
}


def for_sdk(sdk: str, *more: str) -> Preloaded:
    """A :class:`Preloaded` for the scripts of ``sdk`` (a key of :data:`SDKS`) and letitloop,
    which also imports ``more``."""
    modules, warm = SDKS[sdk]
    return Preloaded(*modules, *more, with_letitloop=True, warm=warm)


class Preloaded:
    """A forking interpreter that imported ``modules``; started on first use, stopped by
    :meth:`close`. One script runs at a time.

    ``with_letitloop``: ``modules`` may import letitloop (an adapter), for a harness of
    hundreds of short runs whose children should cost only their run (the forker opens
    no journal; a child is a fresh process to letitloop all the same). ``warm``: Python
    statements the forker runs after its imports, to load once what every child would
    load at its first call (a tokenizer's tables, a framework's cached validators); they
    must open no journal and start no thread.
    """

    def __init__(self, *modules: str, with_letitloop: bool = False, warm: str = "") -> None:
        self.modules = (
            ("--with-letitloop", *modules, *JOURNAL_MODULES) if with_letitloop else modules
        )
        if warm:
            self.modules += (f"--warm={warm}",)
        self.forker: subprocess.Popen[bytes] | None = None
        self.last: Child | None = None

    def start(
        self,
        script: Path,
        *args: str,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        unbuffered: bool = True,
    ) -> Child:
        """Fork a child that runs ``python -u script args`` (``env``: its whole environment,
        this process's by default; ``cwd``: this process's folder by default; not
        ``unbuffered``: ``python script args``, its stdout buffered as off a terminal)."""
        if self.forker is None or self.forker.poll() is not None:
            self.forker = subprocess.Popen(
                [sys.executable, "-c", FORKER, *self.modules],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
        out = tempfile.NamedTemporaryFile(prefix="preloaded-", suffix=".out")  # noqa: SIM115
        err = tempfile.NamedTemporaryFile(prefix="preloaded-", suffix=".err")  # noqa: SIM115
        request = {
            "argv": [str(script), *args],
            "cwd": str(cwd or Path.cwd()),
            "env": dict(os.environ if env is None else env),
            "out": out.name,
            "err": err.name,
            "unbuffered": unbuffered,
        }
        assert self.forker.stdin is not None and self.forker.stdout is not None
        self.forker.stdin.write(json.dumps(request).encode() + b"\n")
        self.forker.stdin.flush()
        self.last = Child(self.forker.stdout, [sys.executable, str(script), *args], out, err)
        return self.last

    def run(
        self,
        script: Path,
        *args: str,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        unbuffered: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        """:meth:`start` (``python script args`` by default, as ``subprocess.run`` would
        start it), then wait for the child's end."""
        return self.start(script, *args, env=env, cwd=cwd, unbuffered=unbuffered).wait()

    def __enter__(self) -> Preloaded:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the forking interpreter; a child a failed test left running is killed."""
        if self.forker is not None:
            assert self.forker.stdin is not None
            self.forker.stdin.close()
            try:
                self.forker.wait(10)
            except subprocess.TimeoutExpired:
                if self.last is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(self.last.pid, signal.SIGKILL)
                self.forker.wait(60)
            self.forker = None


class Child:
    """A child forked by :class:`Preloaded`: its pid, and its end as a CompletedProcess."""

    def __init__(self, replies: IO[bytes], args: list[str], out: Any, err: Any) -> None:
        self.replies, self.args, self.out, self.err = replies, args, out, err
        line = replies.readline().decode()
        if not line.startswith("pid "):
            raise RuntimeError(f"the forking interpreter did not fork: {line!r}")
        self.pid = int(line.split()[1])

    def running(self) -> bool:
        """Whether the child is alive (Linux's /proc: not gone, not a zombie)."""
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] != "Z"

    def wait(self) -> subprocess.CompletedProcess[str]:
        line = self.replies.readline().decode()
        if not line.startswith("exit "):
            raise RuntimeError(f"the forking interpreter ended: {line!r}")
        with self.out, self.err:
            stdout = Path(self.out.name).read_text(encoding="utf-8")
            stderr = Path(self.err.name).read_text(encoding="utf-8", errors="replace")
        return subprocess.CompletedProcess(self.args, int(line.split()[1]), stdout, stderr)
