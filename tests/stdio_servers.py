"""Stdio servers (an MCP server a client starts as its child, on its stdin and stdout) forked
from an interpreter that imported them once, for the tests whose clients start dozens.

A fresh interpreter that imports the MCP SDK's server spends about 0.85 s of CPU before it
serves; test_mcp_calls.py's shop alone started about thirty. Here the client's command is
tests/stdio_launcher.py (``python -S -I``, about 10 ms): it hands the client's pipes to the
forking interpreter of a :class:`StdioServers`, which forks a child that runs the server's
``python`` arguments on them (a script, or ``-m module``) as ``python ARGS`` would: as
``__main__``, its ``sys.argv``, ``sys.path[0]``, folder and environment those of the
launcher, atexit handlers and non-daemon threads at its end. The server is a process of its
own, reading and writing the client's real pipes; killed (SIGKILL, by its pid), its client
sees the connection closed. The launcher stands for it: the client's signals reach the
server, and it ends as the server did (see tests/stdio_launcher.py). What it shares with its
siblings is what the imports made (frozen, ``gc.freeze``, as tests/preloaded.py's forker).

A test about the server's own start (the installed command, a fresh interpreter's imports)
starts it fresh instead.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from preloaded import RUN_AS_MAIN

#: The client's command for a forked server: the launcher, in an interpreter without site.
LAUNCHER = Path(__file__).with_name("stdio_launcher.py")

#: The forking interpreter: imports argv[2:], listens on the socket argv[1], says "ready";
#: for each launcher that connects (its request and its three descriptors in one message),
#: forks a server, answers "pid N", and "exit CODE" once the server ended. It stops when its
#: stdin closes, killing the servers still running.
FORK_SERVER = (
    r"""
import atexit, gc, io, json, os, runpy, select, signal, socket, sys, threading, traceback
import concurrent.futures.thread  # asyncio's default executor (a server's to_thread)
"""
    + RUN_AS_MAIN
    + r"""

gc.disable()  # the imports' objects live as long as this interpreter: no collection meanwhile
path, names = sys.argv[1], sys.argv[2:]
for name in names:
    __import__(name)
gc.collect()
gc.freeze()
gc.enable()

listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
listener.bind(path)
listener.listen(64)
wake_r, wake_w = os.pipe()
os.set_blocking(wake_w, False)
signal.set_wakeup_fd(wake_w)
signal.signal(signal.SIGCHLD, lambda *_: None)
launchers = {}  # a running server's pid: the connection of the launcher standing for it


def serve(request, fds, conn):
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for s in (listener, conn, *launchers.values()):
            s.close()
        os.close(wake_r)
        os.close(wake_w)
        for fd, target in zip(fds, (0, 1, 2)):
            os.dup2(fd, target)
            os.close(fd)
        take_environment(request["env"], request["cwd"])
        # As the interpreter makes them off a terminal: stdin and stdout buffered, stderr
        # line-buffered.
        sys.stdin = sys.__stdin__ = io.TextIOWrapper(
            io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8"
        )
        sys.stdout = sys.__stdout__ = io.TextIOWrapper(
            io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8"
        )
        sys.stderr = sys.__stderr__ = io.TextIOWrapper(
            io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
            encoding="utf-8", errors="backslashreplace", line_buffering=True,
        )
        code = run_as_main(request["argv"])
    finally:
        exit_now(code)


def ended(pid, status):
    conn = launchers.pop(pid)
    try:
        conn.send(b"exit %d" % os.waitstatus_to_exitcode(status))
    except OSError:  # the launcher is gone
        pass
    conn.close()


print("ready", flush=True)
while True:
    ready = select.select([0, listener, wake_r], [], [])[0]
    if 0 in ready and not os.read(0, 1 << 16):
        break
    if listener in ready:
        conn, _ = listener.accept()
        try:
            message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
            request = json.loads(message)
        except (OSError, ValueError):
            conn.close()
        else:
            pid = os.fork()
            if pid == 0:
                serve(request, fds, conn)
            for fd in fds:
                os.close(fd)
            launchers[pid] = conn
            conn.send(b"pid %d" % pid)
    if wake_r in ready:
        os.read(wake_r, 1 << 16)
    for pid in list(launchers):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            ended(pid, status)
for pid in list(launchers):  # a server a test left running
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    ended(pid, os.waitpid(pid, 0)[1])
"""
)


class StdioServers:
    """A forking interpreter that imported ``modules`` (a stdio server's) once, and the
    commands that start a server forked from it (:meth:`command`); stopped by :meth:`close`
    (the servers still running are killed)."""

    def __init__(self, *modules: str) -> None:
        #: The socket's folder: a short path of its own (a socket's path is at most 107 bytes).
        self.folder = Path(tempfile.mkdtemp(prefix="stdio-"))
        self.socket = self.folder / "fork.sock"
        self.process = subprocess.Popen(
            [sys.executable, "-c", FORK_SERVER, str(self.socket), *modules],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        said = self.process.stdout.readline()
        assert said == "ready\n", f"the forking interpreter did not start ({said!r})"

    def command(self, *argv: str) -> list[str]:
        """The client's command for the server ``python ARGV`` (``script args`` or ``-m
        module args``), forked from this interpreter: the launcher's, ``[python, ...]``."""
        return [sys.executable, "-S", "-I", str(LAUNCHER), str(self.socket), *argv]

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> StdioServers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
