"""A real web server running an example app of examples/, for tests/test_web_background.py
(uvicorn, Starlette) and tests/test_web_fastapi.py (gunicorn, FastAPI): the server, what
the example's parts printed, its events stream, a run's status read by a fresh process.

Each example prints ``part I in process PID`` when a part of a report starts: the side
effect a step that ran twice would repeat."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from helpers import run_forked, write_script

ROOT = Path(__file__).resolve().parent.parent

PART = re.compile(r"^part (\d+) in process (\d+)$")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``argv`` (a server of the example app, on ``port``) in a folder of its own."""

    def __init__(self, folder: Path, argv: list[str], port: int, db: str | None = None) -> None:
        self.port = port
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(ROOT)])}
        env.pop("LETITLOOP_DB", None)  # the example's default: .letitloop/journal.db here
        if db is not None:
            env["LETITLOOP_DB"] = db
        self.process = subprocess.Popen(
            argv, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=10)
        deadline = time.monotonic() + 60
        while True:
            try:
                if self.client.get("/jobs/runs/nothing").status_code == 404:
                    return
            except httpx.TransportError:
                pass
            assert self.process.poll() is None, self.output()
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.1)

    def read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def send(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        """One request; again once if its connection was to a process killed meanwhile."""
        try:
            return self.client.request(method, url, **kwargs)
        except httpx.TransportError:
            return self.client.request(method, url, **kwargs)

    def post(self, key: str, url: str = "/reports") -> Any:
        answer = self.send("POST", url, headers={"Idempotency-Key": key})
        assert answer.status_code == 202, answer.text
        return answer.json()["id"]

    def status(self, run: str) -> dict[str, Any]:
        answer = self.send("GET", f"/jobs/runs/{run}")
        assert answer.status_code == 200, answer.text
        found: dict[str, Any] = answer.json()
        return found

    def wait_for(self, run: str, status: str, within: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + within
        while (found := self.status(run))["status"] != status:
            assert time.monotonic() < deadline, found
            time.sleep(0.1)
        return found

    def stop(self) -> str:
        """SIGTERM, as a deploy stops it; what it printed."""
        self.client.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.output()

    def output(self) -> str:
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.reader.join(10)
        return "\n".join(self.lines)


def ledger(*servers: Server) -> list[tuple[int, int]]:
    """Each part started, in order: (its number, the process that ran it)."""
    found = [PART.match(line) for s in servers for line in list(s.lines)]
    return [(int(m[1]), int(m[2])) for m in found if m]


def wait_for_lines(server: Server, n: int, within: float = 30) -> list[tuple[int, int]]:
    deadline = time.monotonic() + within
    while len(found := ledger(server)) < n:
        assert time.monotonic() < deadline, found
        time.sleep(0.02)
    return found


def events(server: Server, run: str, last: str | None = None, stop_after: int = 0) -> list[Any]:
    """The run's Server-Sent Events as (id, event, data), read until ``end`` or, with
    ``stop_after``, until that many: then the client disconnects. Comments are skipped."""
    headers = {} if last is None else {"Last-Event-ID": last}
    got: list[Any] = []
    fields: dict[str, str] = {}
    with server.client.stream("GET", f"/jobs/runs/{run}/events", headers=headers) as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        for line in answer.iter_lines():
            if line.startswith(":"):
                continue
            if line:
                name, _, value = line.partition(": ")
                fields[name] = value
                continue
            got.append((fields.get("id"), fields["event"], json.loads(fields["data"])))
            fields = {}
            if got[-1][1] == "end" or len(got) == stop_after:
                break
    return got


#: :func:`outside`'s program: the status of the queue's entry named ARGV[2], on ARGV[1].
STATUS = """
import sys
from letitloop import Queue
q = Queue("reports", path=sys.argv[1])
print(q.handle(q.store.named("reports", sys.argv[2])).status())
"""


def outside(db: str, run: str) -> str:
    """The run's entry status, read by another process than the server's (a child forked
    from the tests' interpreter that imported letitloop and opened nothing: helpers.py)."""
    with tempfile.TemporaryDirectory() as folder:
        done = run_forked(write_script(Path(folder), "status.py", STATUS), db, run)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()
