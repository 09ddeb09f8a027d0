"""A run's streamed step on the events route (letitloop.integrations.starlette) under a real
uvicorn with 2 worker processes, on a journal file and on PostgreSQL: each chunk sent as
it is journaled, a client that disconnects mid-stream and reconnects with
``Last-Event-ID`` missing none and getting none twice, and the worker streaming it
SIGKILLed: the other restarts the call, and the client gets a ``reset`` event, then the
new answer."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from pathlib import Path

import pytest
from helpers import run_forked, write_script
from web_server import Server, events, free_port

pytestmark = pytest.mark.timeout(120)

APP = """
import os
import time

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from letitloop import Queue
from letitloop.integrations.starlette import Background, start
from letitloop.streams import stream

stories = Queue("stories")
WORDS = [f"w{i} " for i in range(30)]


def tell():
    print(f"streaming in process {os.getpid()}", flush=True)
    for word in WORDS:
        time.sleep(0.05)  # a model's pace: 20 chunks a second
        yield word


@stories.task
def story() -> str:
    return stream("story", tell).result.text


background = Background(stories)


async def create(request: Request) -> JSONResponse:
    return JSONResponse({"id": start(request, story)}, status_code=202)


app = Starlette(
    routes=[Route("/reports", create, methods=["POST"]), *background.routes("/jobs")],
    lifespan=background.lifespan,
)
"""

STREAMING = re.compile(r"^streaming in process (\d+)$")


def streamers(server: Server) -> list[int]:
    return [int(m[1]) for line in list(server.lines) if (m := STREAMING.match(line))]


@pytest.fixture(params=["file", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where the app's journal is: its default file, or ``LETITLOOP_DB`` on PostgreSQL."""
    if request.param == "file":
        return str(tmp_path / ".letitloop" / "journal.db")
    from pg_server import location

    return location()


#: :func:`journaled`'s program: the chunks of run ARGV[2] on ARGV[1], as JSON.
CHUNKS = """
import sys, json
from letitloop.streams import read
print(json.dumps([(c.seq, c.kind, c.text) for c in read(sys.argv[2], path=sys.argv[1])]))
"""


def journaled(db: str, run: str, folder: Path) -> list[tuple[int, str, str]]:
    """The run's chunks as another process than the server's reads them
    (``letitloop.streams.read``; forked from the tests' interpreter that imported letitloop
    and opened nothing: helpers.py)."""
    done = run_forked(write_script(folder, "chunks.py", CHUNKS), db, run)
    assert done.returncode == 0, done.stderr
    return [tuple(c) for c in json.loads(done.stdout)]


def test_a_client_resumes_a_stream_exactly_across_a_disconnect_and_a_killed_worker(
    tmp_path: Path, db: str
) -> None:
    (tmp_path / "stories_app.py").write_text(APP)
    port = free_port()
    argv = [sys.executable, "-m", "uvicorn", "stories_app:app", "--workers", "2",
            "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]  # fmt: skip
    server = Server(tmp_path, argv, port, None if db.endswith("journal.db") else db)
    try:
        run = server.post("tale")
        # A client reads the first chunks as they are journaled, then disconnects.
        first = events(server, run, stop_after=5)
        assert [(e, d["seq"], d["text"]) for _, e, d in first] == [
            ("chunk", i, f"w{i} ") for i in range(5)
        ], first
        assert streamers(server), server.lines
        # The worker streaming it is killed mid-stream; the other takes the run over.
        os.kill(streamers(server)[0], signal.SIGKILL)
        rest = events(server, run, last=first[-1][0])
        assert rest[-1][1] == "end" and rest[-1][2]["status"] == "completed", rest[-3:]
        assert rest[-2][1] == "step" and rest[-2][2]["key"] == "story"
        got = [d for _, e, d in first + rest if e in ("chunk", "reset")]
        # Every chunk journaled reached the client once, in order, the reset included.
        chunks = journaled(db, run, tmp_path)
        assert [(d["seq"], d["kind"], d["text"]) for d in got] == chunks
        kinds = [c[1] for c in chunks]
        assert kinds.count("reset") == 1 and kinds[-1] == "end", kinds
        assert [e for _, e, d in rest if d.get("kind") == "reset"] == ["reset"]
        answer = "".join(c[2] for c in chunks[kinds.index("reset") :])
        assert answer == "".join(f"w{i} " for i in range(30))
        assert server.status(run)["result"] == answer
        assert len(streamers(server)) == 2  # the killed one's, the restart's
    finally:
        server.stop()


def test_an_event_id_reads_back_as_what_was_sent_and_a_damaged_one_starts_over() -> None:
    from letitloop.integrations.events import cursor, event_id

    assert event_id(cursor(7, {"story": 41, "a/b": 0})) == (7, {"story": 41, "a/b": 0})
    assert event_id(cursor(3, {})) == (3, {}) and cursor(3, {}) == "3"
    for damaged in ("", "x", "[1]", '[1,{"s":"2"}]', "[true,{}]", "{}", "1.5", "-4"):
        assert event_id(damaged) == (0, {}), damaged
