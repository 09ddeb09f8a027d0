"""Commands that run ``python SCRIPT ARGS`` in a child forked from a preloaded interpreter,
for a program that starts its own processes by command: ``lil crashtest`` (its reference
run, each killed run and each rerun are processes it starts, judges by exit status and
output, and runs again).

The command (:meth:`ForkedCommands.command`) is a small relay, ``python -S -c RELAY``
(no site, no letitloop: a few ms of CPU), that hands its argv, folder and environment to
this test process over a Unix socket; this process forks the script's child from its
:class:`preloaded.Preloaded` (the framework imported once, letitloop not: the child
imports it, so that its import-time look at the environment, the crash test's ledger,
happens in the child as in a fresh interpreter) and replies with the child's output and
exit status. The relay prints that output and ends as the child did: with its exit code,
or killed by the same signal (the crash test's kill is a real SIGKILL of the forked
child; its caller sees the relay SIGKILLed). A fresh interpreter that imports an agent
framework costs 1-3 s of CPU; a relay and a fork about 0.05 s besides the run.
"""

from __future__ import annotations

import json
import socket
import sys
import tempfile
import threading
from pathlib import Path

from preloaded import Preloaded

RELAY = r"""
import json, os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(json.dumps({"argv": sys.argv[2:], "cwd": os.getcwd(), "env": dict(os.environ)}).encode())
s.shutdown(socket.SHUT_WR)
chunks = []
while chunk := s.recv(1 << 16):
    chunks.append(chunk)
reply = json.loads(b"".join(chunks))
sys.stdout.buffer.write(reply["stdout"].encode())
sys.stdout.flush()
sys.stderr.buffer.write(reply["stderr"].encode())
sys.stderr.flush()
if reply["code"] < 0:
    os.kill(os.getpid(), -reply["code"])
sys.exit(reply["code"])
"""


class ForkedCommands:
    """Serves relays' requests with children of ``forker`` (which must not import
    letitloop) until closed."""

    def __init__(self, forker: Preloaded) -> None:
        self.forker = forker
        self.folder = tempfile.TemporaryDirectory(prefix="forked-")
        self.address = str(Path(self.folder.name) / "socket")
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(self.address)
        self.server.listen()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def command(self, argv: list[str]) -> list[str]:
        """The command that runs ``python *argv`` forked (``argv[0]``: the script)."""
        return [sys.executable, "-S", "-c", RELAY, self.address, *argv]

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        with connection:
            chunks = []
            while chunk := connection.recv(1 << 16):
                chunks.append(chunk)
            request = json.loads(b"".join(chunks))
            argv = request["argv"]
            done = self.forker.run(
                Path(argv[0]), *argv[1:], env=request["env"], cwd=Path(request["cwd"])
            )
            reply = {"code": done.returncode, "stdout": done.stdout, "stderr": done.stderr}
            connection.sendall(json.dumps(reply).encode())

    def close(self) -> None:
        self.server.shutdown(socket.SHUT_RDWR)  # wakes the accept() of _serve
        self.server.close()
        self.folder.cleanup()

    def __enter__(self) -> ForkedCommands:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
