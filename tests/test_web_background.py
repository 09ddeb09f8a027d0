"""Durable background work in a Starlette app (letitloop.integrations.starlette) under a real
uvicorn: 2 worker processes on one journal file, the one running a 5-step task SIGKILLed
mid-task, the server stopped mid-task and started again. uvicorn spawns its worker
processes itself (multiprocessing's spawn), so they are fresh interpreters, not forks of
tests/preloaded.py; the killed worker's test and the one after it share a server (per
journal), the drain starts two."""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from web_server import ROOT, Server, events, free_port, ledger, outside, wait_for_lines

pytestmark = pytest.mark.timeout(120)

#: The example app, run as it is: each part of a report prints its number and process
#: (the side effect a step that ran twice would repeat) and takes 0.4 s.
EXAMPLE = ROOT / "examples" / "starlette_app.py"


def uvicorn(folder: Path, workers: int, db: str | None = None) -> Server:
    """``uvicorn starlette_app:app --workers N`` in ``folder``, on a free port."""
    port = free_port()
    argv = [sys.executable, "-m", "uvicorn", "starlette_app:app", "--workers", str(workers),
            "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]  # fmt: skip
    return Server(folder, argv, port, db)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "starlette_app.py").write_text(EXAMPLE.read_text())
    return tmp_path


def journal(store: str, folder: Path) -> str:
    """Where the example's journal is: its default file, or ``LETITLOOP_DB`` on PostgreSQL."""
    if store == "file":
        return str(folder / ".letitloop" / "journal.db")
    from pg_server import location

    return location()


@pytest.fixture(params=["file", "postgres"])
def db(request: pytest.FixtureRequest, folder: Path) -> str:
    """:func:`journal`, for a test's own servers."""
    return journal(request.param, folder)


@pytest.fixture(scope="class", params=["file", "postgres"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Server, str]]:
    """One server (2 workers) and its journal for a class's tests, in their order: the first
    kills a worker mid-task and waits until its run completed; what follows only needs a
    server that answers."""
    folder = tmp_path_factory.mktemp("starlette")
    (folder / "starlette_app.py").write_text(EXAMPLE.read_text())
    db = journal(request.param, folder)
    s = uvicorn(folder, workers=2, db=None if db.endswith("journal.db") else db)
    yield s, db
    s.stop()


class TestAWorkerKilledMidTask:
    def test_its_run_finishes_elsewhere_no_finished_step_runs_twice_a_retry_gets_it(
        self, served: tuple[Server, str]
    ) -> None:
        server, db = served
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

    def test_a_request_without_a_key_gets_a_run_of_its_own(
        self, served: tuple[Server, str]
    ) -> None:
        server, _ = served
        answers = [server.client.post("/reports").json()["id"] for _ in range(2)]
        assert answers[0] != answers[1]
        assert server.status(answers[0])["status"] in {"queued", "running", "completed"}
        assert server.client.get("/jobs/runs/none-such").status_code == 404


class TestShutdownDrains:
    def test_a_run_in_progress_is_released_and_the_next_start_finishes_it(
        self, folder: Path, db: str
    ) -> None:
        url = None if db.endswith("journal.db") else db
        first = uvicorn(folder, workers=2, db=url)
        run = first.post("order-2")
        wait_for_lines(first, 2)
        out = first.stop()
        assert first.process.returncode == 0, out
        # Released, not failed: queued again, its finished steps kept.
        assert outside(db, run) == "queued"
        drained = ledger(first)
        assert 2 <= len(drained) < 5
        second = uvicorn(folder, workers=1, db=url)
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
    from letitloop.integrations.starlette import Background, async_start

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
        return JSONResponse({"id": await async_start(request, task, *args)}, status_code=202)

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

    def test_a_key_that_breaks_the_rule_is_answered_400_before_anything_is_queued(
        self, tmp_path: Path
    ) -> None:
        from starlette.testclient import TestClient

        with TestClient(small_app(tmp_path / "j.db")) as client:
            answer = client.post("/", headers={"Idempotency-Key": "a\tb"})
            assert answer.status_code == 400
            assert answer.text.startswith(
                "Idempotency-Key header: expected printable ASCII, got the byte 0x09 at "
                "character 2 of 'a\\tb'; send 1 to 255 printable ASCII characters"
            )
            assert client.get("/runs/a%09b").status_code == 404  # nothing queued
            # A quoted key (the IETF draft's structured-field string) is the text inside.
            quoted = client.post("/", headers={"Idempotency-Key": '"order-\\"7\\""'})
            assert quoted.json()["id"] == 'order-"7"'
            assert client.post("/", headers={"Idempotency-Key": 'order-"7"'}).json() == {
                "id": 'order-"7"'
            }

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


class TestTheIdempotencyKeyRule:
    @pytest.mark.parametrize(
        ("header", "key"),
        [("order-1", "order-1"), ("k" * 255, "k" * 255), ("a b~!", "a b~!"), ('"x y"', "x y"),
         ('"a\\\\b"', "a\\b"), ('"', '"'), ("'q'", "'q'")],
    )  # fmt: skip
    def test_a_key_that_keeps_it_names_the_run(self, header: str, key: str) -> None:
        from letitloop.integrations.idempotency import check_key

        assert check_key(header) == key

    @pytest.mark.parametrize(
        ("header", "why"),
        [("k" * 256, "expected at most 255 characters, got 256"), ("", "got a blank value"),
         ("   ", "got a blank value"), ('""', "got a blank value"), (" a", "no space at either"),
         ("a\x7f", "got the byte 0x7F at character 2"),
         ("caf\xc3\xa9", "the byte 0xC3 at character 4"),
         ("a\u2028", "got U+2028"), ('"a"b"', 'with \\" for a quote inside'),
         ('"a\\nb"', "after a backslash")],
    )  # fmt: skip
    def test_a_key_that_breaks_it_is_a_400_saying_why(self, header: str, why: str) -> None:
        import pickle

        from letitloop.errors import QueueError
        from letitloop.integrations.idempotency import IdempotencyKeyError, check_key

        with pytest.raises(IdempotencyKeyError) as caught:
            check_key(header)
        assert why in str(caught.value) and str(caught.value).startswith("Idempotency-Key header")
        assert caught.value.status_code == 400 and isinstance(caught.value, QueueError)
        again = pickle.loads(pickle.dumps(caught.value))
        assert (str(again), again.status_code) == (str(caught.value), 400)


class TestAnIdleEventsStream:
    def test_it_sends_a_comment_line_while_a_step_runs_then_the_step_and_the_end(
        self, tmp_path: Path
    ) -> None:
        import asyncio

        from starlette.applications import Starlette

        from letitloop import Queue, step
        from letitloop.errors import QueueError
        from letitloop.integrations.starlette import Background, async_start

        queue = Queue("idle", path=tmp_path / "j.db")
        gate = threading.Event()

        @queue.task
        def slow() -> bool:
            return step("wait", gate.wait, 60)  # until the stream has sent a comment

        background = Background(queue, keepalive=0.05)
        app = Starlette(lifespan=background.lifespan)

        async def read() -> list[str]:
            got: list[str] = []
            async with background.serving(app):
                run = await async_start(app, slow)
                async for chunk in background.events(run):
                    got.append(chunk)
                    gate.set()
            return got

        got = asyncio.run(read())
        assert got[0] == ": keep-alive\n\n"  # nothing else can be sent while the step waits
        sent = [line for c in got for line in c.split("\n") if line.startswith("event:")]
        assert sent == ["event: step", "event: end"], got
        assert '"status": "completed"' in got[-1]
        with pytest.raises(QueueError, match="keepalive must be a number of seconds above 0"):
            Background(queue, keepalive=0)


class TestTheDocs:
    def test_the_page_s_app_is_the_example_s(self) -> None:
        """docs/fastapi.md's Starlette app is examples/starlette_app.py's, line for line."""
        page = (ROOT / "docs" / "fastapi.md").read_text()
        block = page.split("```python\nfrom starlette.", 1)[1].split("```", 1)[0]
        example = EXAMPLE.read_text()
        for line in block.splitlines():
            assert line.split("  #", 1)[0].rstrip() in example, line
