"""Commands that run ``python SCRIPT ARGS`` in a child forked from a preloaded interpreter,
for a program that starts its own processes by command: ``lil crashtest`` (its reference
run, each killed run and each rerun are processes it starts, judges by exit status and
output, and runs again).

The command (:meth:`ForkedCommands.command`) runs a small relay, ``python -S -c RELAY``
(no site, no letitloop: a few ms of CPU; started by a ``python`` shell script of a
temporary folder), that hands its argv, folder and environment to
this test process over a Unix socket; this process forks the script's child from its
:class:`preloaded.Preloaded` (the framework imported once, letitloop not: the child
imports it, so that its import-time look at the environment, the crash test's ledger,
happens in the child as in a fresh interpreter) and replies with the child's output and
exit status. The relay prints that output and ends as the child did: with its exit code,
or killed by the same signal (the crash test's kill is a real SIGKILL of the forked
child; its caller sees the relay SIGKILLed). A fresh interpreter that imports an agent
framework costs 1-3 s of CPU; a relay and a fork about 0.05 s besides the run.

``children=True`` does the same for the processes the program starts itself as
``[sys.executable, SCRIPT, ...]`` (an example that runs its agent in a child): the command's
interpreter, and each forked child's ``sys.executable``, is then a ``python`` of this
folder, a shell script that execs the relay.

``hooked=True``: the forker imported letitloop too (``Preloaded(..., with_letitloop=True)``),
and each child first does what letitloop's import does with the crash test's variables
in a fresh interpreter (:data:`HOOKED`): the child costs its run only, not the import of
letitloop (about 80 ms of CPU).
"""

from __future__ import annotations

import json
import shlex
import socket
import sys
import tempfile
import threading
import time
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


#: Run in each forked child when ``children``: ``SHIM PYTHON SCRIPT ARGS`` runs SCRIPT as
#: ``python SCRIPT ARGS`` would, with PYTHON (the relay's ``python``) as its sys.executable.
SHIM = """
import os, runpy, sys
sys.executable = sys.argv[1]
sys.argv = sys.argv[2:]
sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
runpy.run_path(sys.argv[0], run_name="__main__")
"""


#: Run in each forked child when ``hooked``: ``HOOKED SCRIPT ARGS`` runs SCRIPT as ``python
#: SCRIPT ARGS`` would, after what letitloop/run/journal.py does at its import in a fresh
#: interpreter (the forker imported it before the crash test's variables were set): with
#: a ledger, the crash test's hook installed, killing where told.
HOOKED = """
import os, runpy, sys
from letitloop.run import crashhook, journal

if os.environ.get(crashhook.LEDGER_ENV):
    crashhook.install(journal.Journal)
sys.argv = sys.argv[1:]
sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
runpy.run_path(sys.argv[0], run_name="__main__")
"""


class ForkedCommands:
    """Serves relays' requests with children of ``forker`` (which must not import
    letitloop, unless ``hooked``) until closed; ``children``: the programs' own
    ``sys.executable`` children too."""

    def __init__(self, forker: Preloaded, *, children: bool = False, hooked: bool = False) -> None:
        self.forker = forker
        self.folder = tempfile.TemporaryDirectory(prefix="forked-")
        self.address = str(Path(self.folder.name) / "socket")
        self.shim: Path | None = None
        self.hooked: Path | None = None
        if hooked:
            self.hooked = Path(self.folder.name) / "hooked.py"
            self.hooked.write_text(HOOKED)
        self.python = Path(self.folder.name) / "python"
        relay = " ".join(shlex.quote(a) for a in [sys.executable, "-S", "-c", RELAY, self.address])
        self.python.write_text(f'#!/bin/sh\nexec {relay} "$@"\n')
        self.python.chmod(0o755)
        if children:
            self.shim = Path(self.folder.name) / "shim.py"
            self.shim.write_text(SHIM)
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(self.address)
        self.server.listen()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def command(self, argv: list[str]) -> list[str]:
        """The command that runs ``python *argv`` forked (``argv[0]``: the script)."""
        return [str(self.python), *argv]

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
            if self.hooked is not None:
                argv = [str(self.hooked), *argv]
            if self.shim is not None:
                argv = [str(self.shim), str(self.python), *argv]
            child = self.forker.start(
                Path(argv[0]), *argv[1:], env=request["env"], cwd=Path(request["cwd"]),
                unbuffered=False,
            )  # fmt: skip
            # Waited for without holding the forker (Child.wait does): a child's own
            # child is forked by another of these threads meanwhile.
            while child.running():
                time.sleep(0.02)
            done = child.wait()
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
