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
seed (test_identity.py runs processes under different seeds). What the imports made
is frozen (``gc.freeze``) before the first fork: a child's collections skip it instead
of writing to, and so copying, every page that holds it (CrewAI's children: about
60 ms of CPU each).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

#: What a forked child does around its program, in FORKER's and in tests/stdio_servers.py's
#: FORK_SERVER (which import ``atexit, os, runpy, sys, threading, traceback`` first): it takes
#: the environment and the folder it was asked for, runs ``python ARGV`` (a script, or
#: ``-m MODULE``) as ``__main__`` and ends as the interpreter would (its threads joined, its
#: exit functions run), its output flushed.
RUN_AS_MAIN = r"""
def take_environment(env, cwd):
    for name in [name for name in os.environ if name not in env]:
        del os.environ[name]
    for name, value in env.items():
        if os.environ.get(name) != value:
            os.environ[name] = value
    os.chdir(cwd)
    if "tempfile" in sys.modules:  # its temporary folder found anew, from its own TMPDIR
        sys.modules["tempfile"].tempdir = None


def run_as_main(argv):
    try:
        if argv[0] == "-m":  # python -m MODULE ARGS: the folder first on the path
            sys.argv = [argv[1], *argv[2:]]
            sys.path[0] = os.getcwd()
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(argv)
            sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
            runpy.run_path(argv[0], run_name="__main__")
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
    return code


def exit_now(code):
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except BaseException:
            pass
    os._exit(code)
"""


#: The forking interpreter: imports argv[1:] (and runs the ``--warm=`` statements among
#: them), then, for each request line on stdin
#: (argv, cwd, env, the stdout and stderr files), forks a child, writes "pid N" to
#: stdout, and "exit CODE" (negative: the signal) once the child ended.
FORKER = (
    r"""
import atexit, gc, io, json, os, pkgutil, runpy, select, signal, sys, threading, traceback
import concurrent.futures.thread  # asyncio's default executor: a child's to_thread
"""
    + RUN_AS_MAIN
    + r"""

gc.disable()  # the imports' objects live as long as the forker: no collection meanwhile
names = sys.argv[1:]
with_letitloop = names[:1] == ["--with-letitloop"]
warm = [n for n in names if n.startswith("--warm=")]
for name in names[with_letitloop:]:
    if not name.startswith("--warm="):
        __import__(name)
for code in warm:
    exec(code.removeprefix("--warm="), {})
assert with_letitloop or "letitloop" not in sys.modules, "the forker must not import letitloop"
# What the imports made is moved out of the collector's sight before the first fork: a
# child's collections then skip it, and do not write to (copy) every page that holds it.
gc.collect()
gc.freeze()
gc.enable()
# Its memory moved onto huge pages, where Linux has them (MADV_COLLAPSE, 6.1 and later;
# elsewhere nothing happens): a fork, and a child's end, then copy and drop one entry per
# 2 MiB of it instead of 512 (CrewAI's forker, 190 MB, 110 MB of it moved: about 3 ms of
# CPU less a fork and 3 ms less a child's end). A first write to one of them, in a child
# or in the forker while a child shares it, splits it and copies only its 4 KiB page.
def collapse():
    import ctypes

    madvise = ctypes.CDLL(None, use_errno=True).madvise
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    with open("/proc/self/maps") as maps:
        for line in maps.read().splitlines():
            fields = line.split()
            if fields[1] != "rw-p" or (len(fields) > 5 and fields[5] != "[heap]"):
                continue  # the anonymous memory (the heap and the allocator's arenas) only
            start, end = (int(x, 16) for x in fields[0].split("-"))
            start, end = -(-start // (2 << 20)) * (2 << 20), end // (2 << 20) * (2 << 20)
            if end > start:
                madvise(start, end - start, 25)  # MADV_COLLAPSE


if sys.platform == "linux":
    collapse()
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
        take_environment(request["env"], request["cwd"])  # the forker's, but for a few
        unbuffered = request["unbuffered"] or bool(os.environ.get("PYTHONUNBUFFERED"))
        sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        sys.stdout = sys.__stdout__ = stream(1, unbuffered)
        sys.stderr = sys.__stderr__ = stream(2, unbuffered)
        code = run_as_main(request["argv"])
    finally:
        exit_now(code)


# Children run side by side: "pid N" is written as each is forked, "exit N CODE" as each
# ends (a SIGCHLD wakes the loop).
wake_r, wake_w = os.pipe()
os.set_blocking(wake_w, False)
signal.set_wakeup_fd(wake_w)
signal.signal(signal.SIGCHLD, lambda *_: None)
running, pending, reading = set(), b"", True
while reading or running:
    ready = select.select([0, wake_r] if reading else [wake_r], [], [])[0]
    if 0 in ready:
        chunk = os.read(0, 1 << 16)
        reading = bool(chunk)
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            request = json.loads(line)
            pid = os.fork()
            if pid == 0:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                os.close(wake_r)
                os.close(wake_w)
                child(request)
            running.add(pid)
            replies.write(b"pid %d\n" % pid)
            replies.flush()
    if wake_r in ready:
        os.read(wake_r, 1 << 16)
    for pid in list(running):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            running.discard(pid)
            replies.write(b"exit %d %d\n" % (pid, os.waitstatus_to_exitcode(status)))
            replies.flush()
"""
)


#: What a child that opens a journal file imports of letitloop besides its package (the
#: SQLite storage, its migrations, async steps, the search for a journal, the inspector
#: that streams and ``lil`` read with): a forker ``with_letitloop`` imports them too, so
#: that each child does not (about 8 ms of CPU a child; a thousand children; the
#: inspector's 40 modules about 20 ms more in a child of LangGraph's or of ``lil``).
JOURNAL_MODULES = (
    "letitloop.stores.sqlite.storage",
    "letitloop.stores.sqlite.pool",
    "letitloop.stores.sqlite.migrate",
    "letitloop.stores.sqlite.compact_migration",
    "letitloop.stores.sqlite.schema_file",
    "letitloop.stores.sqlite.migration_sql",
    "letitloop.run.async_steps",
    "letitloop.run.commits",
    "letitloop.primitives.costs",
    "letitloop.run.otel",
    "letitloop.stores.discovery",
    "letitloop.inspection",
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
        "JSON_CODEC.load(CallToolResult, {'kind': 'model_retry', 'message': 'warm'})\n"
        # The regular expressions a run compiles at its first use (held in re's cache):
        # genai-prices' providers' patterns, matched against each response's model name
        # (not found: a function model); a graph's node names; a capability's name.
        "import genai_prices\n"
        "from pydantic.alias_generators import to_snake\n"
        "from pydantic_graph.id_types import replace_placeholder_id\n"
        "try:\n"
        "    genai_prices.calc_price(genai_prices.Usage(), 'function:model:')\n"
        "except LookupError:\n"
        "    pass\n"
        "to_snake('WarmName1')\n"
        "replace_placeholder_id('__placeholder__:warm:0')\n",
    ),
}


#: What a forker of LangGraph's graphs imports, the same in each file that forks them
#: (tests/test_langgraph.py, _forgetful.py, _streams.py, _subgraphs.py: the checkpointer's
#: ids, the in-memory saver, the adapter's streams besides the graph and the adapter), so
#: that one forker kept idle (:data:`IDLE_KEPT`) serves them all in a worker.
LANGGRAPH = (
    "langgraph.graph",
    "langgraph.checkpoint.base.id",
    "langgraph.checkpoint.memory",
    "letitloop.adapters.langgraph",
    "letitloop.streams",
)


#: What a forker of LangGraph's prebuilt agents imports: LangGraph, the adapter and its
#: agents, and what an agent's run imports at its first call (LangChain's tracers and
#: message translators, the durable model's streaming): tests/test_langgraph_prebuilt.py's
#: and tests/test_langgraph_answers.py's forkers, each with its own program's module.
LANGGRAPH_AGENTS = (
    "langgraph.graph",
    "langgraph.prebuilt",
    "letitloop.adapters.langgraph",
    "letitloop.adapters.langgraph.agents",
    "letitloop.adapters.langgraph.streaming",
    "langchain_core.messages.block_translators.langchain_v0",
    "langchain_core.tracers.context",
    "langchain_core.tracers.run_collector",
    "langchain_core.tracers.stdout",
)


def for_sdk(sdk: str, *more: str) -> Preloaded:
    """A :class:`Preloaded` for the scripts of ``sdk`` (a key of :data:`SDKS`) and letitloop,
    which also imports ``more``."""
    modules, warm = SDKS[sdk]
    return Preloaded(*modules, *more, with_letitloop=True, warm=warm)


class Preloaded:
    """A forking interpreter that imported ``modules``; started on first use (or taken from
    those a closed :class:`Preloaded` of the same modules left idle), let go by
    :meth:`close`. Its children may run side by side (two copies of a program at once);
    :meth:`sibling` gives a second handle on the same interpreter (a fixture's second
    forker, for the second copy, costs no second import of the framework).

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
        self.shared = _Shared()
        self.shared.users += 1
        self.closed = False

    def sibling(self) -> Preloaded:
        """Another handle on this forking interpreter, closed on its own: the interpreter
        stops when the last of them is closed."""
        other = Preloaded.__new__(Preloaded)
        other.modules, other.shared, other.closed = self.modules, self.shared, False
        self.shared.users += 1
        return other

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
        if self.shared.forker is None or self.shared.forker.popen.poll() is not None:
            self.shared.forker = _idle.pop(_start_key(self.modules), None) or _Forker(
                [sys.executable, "-c", FORKER, *self.modules], self.modules
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
        forker = self.shared.forker
        return Child(forker, forker.fork(request), [sys.executable, str(script), *args], out, err)

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
        """Let go of the forking interpreter; the last handle closed keeps it idle for the
        next :class:`Preloaded` of the same modules (:func:`_keep_idle`), or stops it and
        kills a child a failed test left running."""
        if self.closed:
            return
        self.closed = True
        self.shared.users -= 1
        if self.shared.users == 0 and self.shared.forker is not None:
            _keep_idle(self.shared.forker)
            self.shared.forker = None


#: Forking interpreters whose last handle was closed with none of their children left,
#: kept for the next :class:`Preloaded` of the same modules in this process (the next test
#: module's fixture), at most :data:`IDLE_KEPT` of them and :data:`IDLE_MEMORY` bytes of
#: their resident memory, the least recently used stopped first; :func:`stop_idle` stops
#: them (tests/conftest.py, at the session's end, through helpers.stop_forker). A forker
#: for a framework costs 0.2-2 s of CPU to start (its imports) and holds 30-90 MB (every
#: golden program's frameworks: 270 MB); the suite's files start the same ones again and
#: again (Pydantic AI's in six files, the OpenAI Agents SDK's in four), a worker running
#: a few dozen files with forkers between two of the same: four kept were too few.
_idle: OrderedDict[tuple[str, ...], _Forker] = OrderedDict()
IDLE_KEPT = 16
IDLE_MEMORY = 1 << 30


def _start_key(modules: tuple[str, ...]) -> tuple[str, ...]:
    """What a forker's children inherit from its start besides its imports: this process,
    and the ``PYTHON…`` variables its interpreter read (the hash seed, the path)."""
    python_vars = sorted(f"{k}={v}" for k, v in os.environ.items() if k.startswith("PYTHON"))
    return (str(os.getpid()), *modules, *python_vars)


def _keep_idle(forker: _Forker) -> None:
    """Keep ``forker`` for the next :class:`Preloaded` of its modules, or stop it when a
    child of its is still running or unwaited (a failed test's), or it ended."""
    key = forker.key
    if forker.running or forker.popen.poll() is not None or key[0] != str(os.getpid()):
        forker.stop()
        return
    displaced = _idle.pop(key, None)
    if displaced is not None:
        displaced.stop()
    _idle[key] = forker
    while len(_idle) > IDLE_KEPT or (
        len(_idle) > 1 and sum(f.resident() for f in _idle.values()) > IDLE_MEMORY
    ):
        _idle.popitem(last=False)[1].stop()


def stop_idle() -> None:
    """Stop the forking interpreters kept idle (:func:`_keep_idle`)."""
    while _idle:
        _idle.popitem()[1].stop()


atexit.register(stop_idle)


class _Shared:
    """What a :class:`Preloaded` and its siblings share: the forking interpreter."""

    def __init__(self) -> None:
        self.forker: _Forker | None = None
        self.users = 0


class _Forker:
    """The forking interpreter's process and its replies: a child's pid as it is forked,
    its exit status when it ended (kept until asked for; children end in any order)."""

    def __init__(self, argv: list[str], modules: tuple[str, ...]) -> None:
        self.popen = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.key = _start_key(modules)
        self.exits: dict[int, int] = {}
        self.running: set[int] = set()
        self.lock = threading.Lock()

    def fork(self, request: dict[str, Any]) -> int:
        assert self.popen.stdin is not None
        with self.lock:
            self.popen.stdin.write(json.dumps(request).encode() + b"\n")
            self.popen.stdin.flush()
            while True:
                reply = self._reply("pid")
                if reply[0] == "pid":
                    self.running.add(int(reply[1]))
                    return int(reply[1])

    def wait(self, pid: int) -> int:
        with self.lock:
            while pid not in self.exits:
                self._reply("exit")
            self.running.discard(pid)
            return self.exits.pop(pid)

    def _reply(self, expected: str) -> list[str]:
        assert self.popen.stdout is not None
        line = self.popen.stdout.readline().decode()
        reply = line.split()
        if not reply or reply[0] not in ("pid", "exit"):
            what = "fork" if expected == "pid" else "wait"
            raise RuntimeError(f"the forking interpreter did not {what}: {line!r}")
        if reply[0] == "exit":
            self.exits[int(reply[1])] = int(reply[2])
        return reply

    def resident(self) -> int:
        """Its resident memory in bytes (Linux's /proc; 0 elsewhere, or once it ended)."""
        try:
            status = Path(f"/proc/{self.popen.pid}/status").read_text()
        except OSError:
            return 0
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def stop(self) -> None:
        """Close its requests: it ends once its children have; those still running after
        10 s (a failed test's) are killed."""
        assert self.popen.stdin is not None
        self.popen.stdin.close()
        try:
            self.popen.wait(10)
        except subprocess.TimeoutExpired:
            for pid in self.running:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self.popen.wait(60)


class Child:
    """A child forked by :class:`Preloaded`: its pid, and its end as a CompletedProcess."""

    def __init__(self, forker: _Forker, pid: int, args: list[str], out: Any, err: Any) -> None:
        self.forker, self.pid, self.args, self.out, self.err = forker, pid, args, out, err

    def running(self) -> bool:
        """Whether the child is alive (Linux's /proc: not gone, not a zombie)."""
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] != "Z"

    def printed(self) -> str:
        """What the child wrote to its stdout so far (unbuffered: all it printed)."""
        return Path(self.out.name).read_text(encoding="utf-8")

    def wait(self) -> subprocess.CompletedProcess[str]:
        code = self.forker.wait(self.pid)
        with self.out, self.err:
            stdout = Path(self.out.name).read_text(encoding="utf-8")
            stderr = Path(self.err.name).read_text(encoding="utf-8", errors="replace")
        return subprocess.CompletedProcess(self.args, code, stdout, stderr)
