"""Durable background work in a FastAPI app (letitloop.integrations.fastapi) under a real
gunicorn with 2 uvicorn workers (``-k uvicorn.workers.UvicornWorker``): on the journal
file, with and without ``--preload`` (gunicorn imports the app, and so the queue, in its
master, then forks the workers: each opens its journal after the fork), and on
PostgreSQL with ``--preload``. One server per configuration, for the module: the worker
running a 5-step task SIGKILLed mid-task, gunicorn starting another, retries with the
same Idempotency-Key, an events client that reconnects."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from web_server import ROOT, Server, events, free_port, ledger, outside, wait_for_lines

pytestmark = pytest.mark.timeout(120)

#: The example app, run as it is: each part of a report prints its number and process
#: and takes 0.4 s.
EXAMPLE = ROOT / "examples" / "fastapi_app.py"

#: (store, --preload): the configurations, one server each.
CONFIGURATIONS = [("file", True), ("file", False), ("postgres", True)]


class Gunicorn(Server):
    """``gunicorn fastapi_app:app -k uvicorn.workers.UvicornWorker -w 2`` and its journal."""

    def __init__(self, folder: Path, store: str, preload: bool) -> None:
        self.folder = folder
        self.db = str(folder / ".letitloop" / "journal.db")
        if store == "postgres":
            from pg_server import location

            self.db = location()
        port = free_port()
        argv = [sys.executable, "-m", "gunicorn", "fastapi_app:app",
                "-k", "uvicorn.workers.UvicornWorker", "-w", "2", "-b", f"127.0.0.1:{port}",
                "--log-level", "warning", *(["--preload"] if preload else [])]  # fmt: skip
        super().__init__(folder, argv, port, None if store == "file" else self.db)

    def workers(self, but: int = 0) -> set[int]:
        """The master's 2 worker processes, none of them ``but``: once gunicorn forked them
        (it forks one, sleeps up to 0.1 s, forks the next; and after a worker died)."""
        pid = self.process.pid
        deadline = time.monotonic() + 30
        while True:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            found = {int(c) for c in children}
            if len(found) == 2 and but not in found:
                return found
            assert time.monotonic() < deadline, found
            time.sleep(0.05)


@pytest.fixture(scope="module", params=CONFIGURATIONS, ids=lambda c: f"{c[0]}-preload{c[1]}")
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gunicorn]:
    folder = tmp_path_factory.mktemp("fastapi")
    (folder / "fastapi_app.py").write_text(EXAMPLE.read_text())
    s = Gunicorn(folder, *request.param)
    yield s
    s.stop()


class TestAWorkerKilledMidTask:
    def test_its_run_finishes_no_finished_step_runs_twice_retries_and_events_get_it(
        self, server: Gunicorn
    ) -> None:
        workers = server.workers()
        run = server.post("order-1")
        assert run == "order-1"
        # An events client that reads the first step, then disconnects.
        first = events(server, run, stop_after=1)
        assert [(e, d["key"]) for _, e, d in first] == [("step", "part0")]
        before = wait_for_lines(server, 2)  # part0 recorded, part1 in flight
        killed = before[-1][1]
        assert killed in workers
        os.kill(killed, signal.SIGKILL)
        assert server.post("order-1") == run  # a retry while it runs: the same run
        # The client reconnects mid-run with Last-Event-ID: the rest, nothing missed or repeated.
        rest = events(server, run, last=first[0][0])
        assert [d.get("key") for _, e, d in rest if e == "step"] == [
            f"part{i}" for i in range(1, 5)
        ]
        assert rest[-1][1] == "end" and rest[-1][2]["status"] == "completed"
        assert rest[-1][2]["result"] == {"total": 30}
        started = ledger(server)
        counts = Counter(i for i, _ in started)
        assert set(counts) == set(range(5))
        # Only the step the killed worker was running (its last) ran again; every other once.
        in_flight = max(i for i, pid in started if pid == killed)
        assert all(n == 1 for i, n in counts.items() if i != in_flight), started
        assert counts[in_flight] <= 2, started
        assert started[-1][1] != killed, started
        # gunicorn started a worker in the killed one's place.
        assert killed not in server.workers(but=killed)
        # A retry once it completed, through the def handler (add_task): the same run,
        # nothing runs again.
        assert server.post("order-1", "/reports/sync") == run
        found = server.status(run)
        assert found["status"] == "completed"
        assert [(s["key"], s["status"]) for s in found["steps"]] == [
            (f"part{i}", "done") for i in range(5)
        ]
        assert ledger(server) == started
        assert outside(server.db, run) == "completed"

    def test_a_key_that_breaks_the_rule_is_answered_400_and_nothing_is_queued(
        self, server: Gunicorn
    ) -> None:
        answer = server.send("POST", "/reports", headers={"Idempotency-Key": "k" * 256})
        assert answer.status_code == 400
        assert answer.json()["detail"].startswith(
            "Idempotency-Key header: expected at most 255 characters, got 256"
        )
        assert server.send("GET", f"/jobs/runs/{'k' * 256}").status_code == 404

    def test_the_master_holds_no_connection_to_the_journal(self, server: Gunicorn) -> None:
        """The fork rule (docs/processes.md): with --preload too, the app's import opens
        nothing; each worker opens its journal after the fork."""
        if not server.db.endswith("journal.db"):
            pytest.skip("a file's descriptors are what can be looked at")
        pid = server.process.pid
        held = {os.path.realpath(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
        assert not [f for f in held if f.startswith(str(server.folder / ".letitloop"))], held
        opened = {
            os.path.realpath(f"/proc/{worker}/fd/{fd}")
            for worker in server.workers()
            for fd in os.listdir(f"/proc/{worker}/fd")
        }
        assert os.path.realpath(server.db) in opened  # the worker that ran a run, at least


class TestShutdownDrains:
    """Last in the file: it stops the module's server."""

    def test_sigterm_mid_run_releases_the_run_with_its_finished_steps(
        self, server: Gunicorn
    ) -> None:
        already = len(ledger(server))
        run = server.post("order-2")
        wait_for_lines(server, already + 2)  # part0 recorded, part1 in flight
        out = server.stop()
        assert server.process.returncode == 0, out
        # Released, not failed: queued again, read by a fresh process.
        assert outside(server.db, run) == "queued"
        drained = [i for i, _ in ledger(server)[already:]]
        assert drained == list(range(len(drained))) and 2 <= len(drained) < 5, drained


class TestTheApp:
    def test_its_openapi_schema_shows_the_key_header_and_the_routes(self) -> None:
        """In this process (FastAPI's TestClient): the schema a client generates from."""
        import importlib.util

        from fastapi.testclient import TestClient

        spec = importlib.util.spec_from_file_location("fastapi_app_schema", EXAMPLE)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        schema = TestClient(module.app).get("/openapi.json").json()  # no `with`: no lifespan
        paths = schema["paths"]
        assert {"/jobs/runs/{id}", "/jobs/runs/{id}/events", "/reports"} <= set(paths)
        headers = [p["name"] for p in paths["/reports"]["post"]["parameters"]]
        assert headers == ["Idempotency-Key"]
        events_get = paths["/jobs/runs/{id}/events"]["get"]
        assert [p["name"] for p in events_get["parameters"]] == ["id", "last-event-id"]
        assert "text/event-stream" in events_get["responses"]["200"]["content"]
        assert "404" in paths["/jobs/runs/{id}"]["get"]["responses"]

    def test_the_page_s_app_is_the_example_s(self) -> None:
        """docs/fastapi.md's FastAPI app is examples/fastapi_app.py's, line for line."""
        page = (ROOT / "docs" / "fastapi.md").read_text()
        block = page.split("```python\nfrom fastapi ", 1)[1].split("```", 1)[0]
        example = EXAMPLE.read_text()
        for line in block.splitlines():
            assert line.split("  #", 1)[0].rstrip() in example, line
