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

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

#: The forking interpreter: imports argv[1:], then, for each request line on stdin
#: (argv, cwd, env, the stdout and stderr files), forks a child, writes "pid N" to
#: stdout, and "exit CODE" (negative: the signal) once the child ended.
FORKER = r"""
import atexit, io, json, os, runpy, sys, threading, traceback

for name in sys.argv[1:]:
    __import__(name)
assert "letitloop" not in sys.modules, "the forker must not import letitloop"
requests, replies = sys.stdin.buffer, sys.stdout.buffer


def stream(fd, unbuffered):
    raw = io.FileIO(fd, "w", closefd=False)
    buffered = io.BufferedWriter(raw)
    errors = "strict" if fd == 1 else "backslashreplace"
    return io.TextIOWrapper(buffered, encoding="utf-8", errors=errors, write_through=unbuffered)


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
        unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
        sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        sys.stdout = sys.__stdout__ = stream(1, unbuffered)
        sys.stderr = sys.__stderr__ = stream(2, True)
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


class Preloaded:
    """A forking interpreter that imported ``modules``; started on first use, stopped by
    :meth:`close`. One script runs at a time."""

    def __init__(self, *modules: str) -> None:
        self.modules = modules
        self.forker: subprocess.Popen[bytes] | None = None

    def start(
        self, script: Path, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> Child:
        """Fork a child that runs ``python script args`` (``env``: its whole environment,
        this process's by default; ``cwd``: this process's folder by default)."""
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
        }
        assert self.forker.stdin is not None and self.forker.stdout is not None
        self.forker.stdin.write(json.dumps(request).encode() + b"\n")
        self.forker.stdin.flush()
        return Child(self.forker.stdout, [sys.executable, str(script), *args], out, err)

    def run(
        self, script: Path, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        """:meth:`start`, then wait for the child's end."""
        return self.start(script, *args, env=env, cwd=cwd).wait()

    def close(self) -> None:
        if self.forker is not None:
            assert self.forker.stdin is not None
            self.forker.stdin.close()
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
