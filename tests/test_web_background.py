"""Durable background work in a Starlette app (letitloop.integrations.starlette) under a real
uvicorn: 2 worker processes on one journal file, the one running a 5-step task SIGKILLed
mid-task, the server stopped mid-task and started again. uvicorn spawns its worker
processes itself (multiprocessing's spawn), so they are fresh interpreters, not forks of
tests/preloaded.py; each test starts one server (two for the drain)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parent.parent

#: The example app, run as it is: each part of a report prints its number and process
#: (the side effect a step that ran twice would repeat) and takes 0.4 s.
EXAMPLE = ROOT / "examples" / "starlette_app.py"

PART = re.compile(r"^part (\d+) in process (\d+)$")


class Server:
    """``uvicorn app:app --workers N`` in a folder of its own, on a free port."""

    def __init__(self, folder: Path, workers: int, db: str | None = None) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(ROOT)])}
        env.pop("LETITLOOP_DB", None)  # the example's default: .letitloop/journal.db here
        if db is not None:
            env["LETITLOOP_DB"] = db
        self.process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "starlette_app:app", "--workers", str(workers),
             "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning"],
            cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
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

    def post(self, key: str) -> Any:
        answer = self.send("POST", "/reports", headers={"Idempotency-Key": key})
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


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "starlette_app.py").write_text(EXAMPLE.read_text())
    return tmp_path


@pytest.fixture(params=["file", "postgres"])
def db(request: pytest.FixtureRequest, folder: Path) -> str:
    """Where the example's journal is: its default file, or ``LETITLOOP_DB`` on PostgreSQL."""
    if request.param == "file":
        return str(folder / ".letitloop" / "journal.db")
    from pg_server import location

    return location()


@pytest.fixture
def server(folder: Path, db: str) -> Iterator[Server]:
    s = Server(folder, workers=2, db=None if db.endswith("journal.db") else db)
    yield s
    s.stop()


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
    ``stop_after``, until that many: then the client disconnects."""
    headers = {} if last is None else {"Last-Event-ID": last}
    got: list[Any] = []
    fields: dict[str, str] = {}
    with server.client.stream("GET", f"/jobs/runs/{run}/events", headers=headers) as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        for line in answer.iter_lines():
            if line:
                name, _, value = line.partition(": ")
                fields[name] = value
                continue
            got.append((fields.get("id"), fields["event"], json.loads(fields["data"])))
            fields = {}
            if got[-1][1] == "end" or len(got) == stop_after:
                break
    return got


def outside(db: str, run: str) -> str:
    """The run's entry status, read by a fresh process (not the server's)."""
    code = (
        "import sys; from letitloop import Queue; "
        "q = Queue('reports', path=sys.argv[1]); "
        "print(q.handle(q.store.named('reports', sys.argv[2])).status())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, db, run],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True,
    )  # fmt: skip
    return done.stdout.strip()


class TestAWorkerKilledMidTask:
    def test_its_run_finishes_elsewhere_no_finished_step_runs_twice_a_retry_gets_it(
        self, server: Server, db: str
    ) -> None:
        run = server.post("order-1")
        assert run == "order-1"
        # An events client that reads the first step, then disconnects.
        first = events(server, run, stop_after=1)
        assert [(e, d["key"]) for _, e, d in first] == [("step", "part0")]
        before = wait_for_lines(server, 2)  # part0 recorded, part1 in flight
        killed = before[-1][1]
        os.kill(killed, signal.SIGKILL)
        assert server.post("order-1") == run  # a retry while it runs: the same run
        # The client reconnects mid-run with Last-Event-ID: the rest, nothing missed or repeated.
        rest = events(server, run, last=first[0][0])
        assert [d.get("key") for _, e, d in rest if e == "step"] == [
            f"part{i}" for i in range(1, 5)
        ]
        assert rest[-1][1] == "end" and rest[-1][2]["status"] == "completed"
        assert [d["key"] for _, _, d in events(server, run)[:-1]] == [f"part{i}" for i in range(5)]
        found = server.wait_for(run, "completed")
        assert found["result"] == {"total": 30}
        assert [s["key"] for s in found["steps"]] == [f"part{i}" for i in range(5)]
        assert {s["status"] for s in found["steps"]} == {"done"}
        started = ledger(server)
        counts = Counter(i for i, _ in started)
        assert set(counts) == set(range(5))
        # Only the step the killed worker was running (its last) ran again; every other once.
        in_flight = max(i for i, pid in started if pid == killed)
        assert all(n == 1 for i, n in counts.items() if i != in_flight), started
        assert counts[in_flight] <= 2, started
        assert started[-1][1] != killed, started
        # A retry once it completed: the same run, nothing runs again.
        assert server.post("order-1") == run
        assert server.status(run)["status"] == "completed"
        assert ledger(server) == started
        assert outside(db, run) == "completed"

    def test_a_request_without_a_key_gets_a_run_of_its_own(self, server: Server) -> None:
        answers = [server.client.post("/reports").json()["id"] for _ in range(2)]
        assert answers[0] != answers[1]
        assert server.status(answers[0])["status"] in {"queued", "running", "completed"}
        assert server.client.get("/jobs/runs/none-such").status_code == 404


class TestShutdownDrains:
    def test_a_run_in_progress_is_released_and_the_next_start_finishes_it(
        self, folder: Path, db: str
    ) -> None:
        url = None if db.endswith("journal.db") else db
        first = Server(folder, workers=2, db=url)
        run = first.post("order-2")
        wait_for_lines(first, 2)
        out = first.stop()
        assert first.process.returncode == 0, out
        # Released, not failed: queued again, its finished steps kept.
        assert outside(db, run) == "queued"
        drained = ledger(first)
        assert 2 <= len(drained) < 5
        second = Server(folder, workers=1, db=url)
        try:
            found = second.wait_for(run, "completed")
        finally:
            second.stop()
        assert found["result"] == {"total": 30}
        # The step in flight at the drain finished and was recorded: nothing ran twice.
        started = ledger(first, second)
        assert sorted(i for i, _ in started) == list(range(5)), started


#: A small app in this process (Starlette's TestClient runs its lifespan): a result with a
#: key the app redacts, a task that fails.
def small_app(path: Path, threads: int = 1) -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from letitloop import Queue
    from letitloop.integrations.starlette import Background, start

    queue = Queue("small", path=path)

    @queue.task
    def sign(user: str) -> dict[str, str]:
        return {"user": user, "token": "s3cret"}

    @queue.task
    def broken() -> None:
        raise ValueError("no such user")

    background = Background(queue, threads=threads, redact=["token"])

    async def create(request: Request) -> JSONResponse:
        task = sign if request.query_params.get("task") != "broken" else broken
        args = ("ada",) if task is sign else ()
        return JSONResponse({"id": start(request, task, *args)}, status_code=202)

    return Starlette(
        routes=[Route("/", create, methods=["POST"]), *background.routes()],
        lifespan=background.lifespan,
    )


def wait_in(client: Any, run: str, status: str) -> Any:
    deadline = time.monotonic() + 20
    while (found := client.get(f"/runs/{run}").json())["status"] != status:
        assert time.monotonic() < deadline, found
        time.sleep(0.02)
    return found


class TestTheStatusRoute:
    def test_it_redacts_what_the_app_names_and_says_why_a_run_failed(self, tmp_path: Path) -> None:
        from starlette.testclient import TestClient

        with TestClient(small_app(tmp_path / "j.db")) as client:
            run = client.post("/").json()["id"]
            done = wait_in(client, run, "completed")
            assert done["result"] == {"user": "ada", "token": "[redacted]"}
            assert done["id"] == run and done["run_id"]
            key = {"Idempotency-Key": "broken-1"}
            failed = wait_in(
                client, client.post("/?task=broken", headers=key).json()["id"], "failed"
            )
            assert failed["id"] == "broken-1"
            assert "ValueError: no such user" in failed["error"]
            # A retry of a failed run: the same run, queued again (it resumes, and fails again).
            assert client.post("/?task=broken", headers=key).json()["id"] == "broken-1"
            again = wait_in(client, "broken-1", "failed")
            assert again["run_id"] == failed["run_id"]
            assert client.get("/runs/nothing").status_code == 404

    def test_a_key_that_cannot_name_a_run_is_refused_before_anything_is_queued(
        self, tmp_path: Path
    ) -> None:
        from starlette.testclient import TestClient

        from letitloop.errors import InvalidNameError

        with TestClient(small_app(tmp_path / "j.db")) as client:
            with pytest.raises(
                InvalidNameError, match="idempotency key name must not contain control"
            ):
                client.post("/", headers={"Idempotency-Key": "a\tb"})
            assert client.get("/runs/a%09b").status_code == 404  # nothing queued

    def test_with_no_threads_here_a_worker_elsewhere_runs_it(self, tmp_path: Path) -> None:
        from starlette.testclient import TestClient

        from letitloop import Queue

        with TestClient(small_app(tmp_path / "j.db", threads=0)) as client:
            run = client.post("/").json()["id"]
            time.sleep(0.3)
            assert client.get(f"/runs/{run}").json()["status"] == "queued"
            worker = Queue("small", path=tmp_path / "j.db").worker()
            worker.queue.task(lambda user: {"user": user}, name="sign")
            worker.start()
            try:
                assert wait_in(client, run, "completed")["result"] == {"user": "ada"}
            finally:
                worker.stop()

    def test_start_without_the_lifespan_says_what_to_pass(self, tmp_path: Path) -> None:
        from starlette.testclient import TestClient

        from letitloop.errors import QueueError

        app = small_app(tmp_path / "j.db")
        client = TestClient(app, raise_server_exceptions=True)  # no `with`: no lifespan
        with pytest.raises(QueueError, match=re.escape("lifespan=background.lifespan")):
            client.post("/")


class TestTheDocs:
    def test_the_page_s_app_is_the_example_s(self) -> None:
        """docs/fastapi.md's Starlette app is examples/starlette_app.py's, line for line."""
        page = (ROOT / "docs" / "fastapi.md").read_text()
        block = page.split("```python\n", 1)[1].split("```", 1)[0]
        example = EXAMPLE.read_text()
        for line in block.splitlines():
            assert line.split("  #", 1)[0].rstrip() in example, line
