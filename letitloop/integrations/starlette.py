"""Durable background work for Starlette and FastAPI apps: a queue's runs, served in the app.

``Background(queue)`` hooks a work queue (``letitloop.Queue``) into an app's
``lifespan``: on startup it starts a worker in the app's process (its threads
claim the queue's entries: ones queued while no worker ran, and ones whose
worker died, taken over at once); on shutdown it drains them (each run in
progress stops at its next step and goes back to the queue, never marked
failed). ``start(request, fn, *args)`` enqueues a run and returns its id at
once; a request's ``Idempotency-Key`` header is the run's name and the queue's
``dedup_key``, so a retried request gets the same run (a key that breaks the
header's rule is answered 400); ``async_start`` is the same for an ``async def``
handler. ``Background.routes()`` are the opt-in status routes (a run's state,
and its steps and streams' chunks as Server-Sent Events, with a keep-alive
comment while idle: ``events.py``).
FastAPI's own face (a dependency, an ``APIRouter``) is
``letitloop.integrations.fastapi``, on these same objects.
Needs the ``web`` extra (Starlette); the core never imports this module.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable, Collection
from typing import TYPE_CHECKING, Any

from ..errors import QueueError
from ..identity.names import check_name
from ..inspection import open_inspector
from ..inspection.results import decode_result
from ..integrity.redaction import redact_text
from ..queueing.queue_records import ENDED, POLL_SECONDS
from ..streams.chunks import Chunk
from .events import chunk_events, cursor, event_id
from .idempotency import IDEMPOTENCY_HEADER, check_key

try:
    from starlette.requests import Request
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route
except ImportError as exc:  # the extra is missing: say what to install
    raise ImportError(
        "letitloop.integrations.starlette needs Starlette (FastAPI installs it): "
        "pip install -e '.[web]' (in your clone)"
    ) from exc

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from ..queueing.queue_worker import Worker
    from ..queueing.queues import Queue

#: Where ``Background.lifespan`` leaves itself on the app (``app.state``), for ``start``.
STATE_NAME = "letitloop_background"

#: What the status route shows of a step: no arguments and no step results.
STEP_FIELDS = (
    "seq",
    "key",
    "kind",
    "status",
    "started_at",
    "finished_at",
    "duration_ms",
    "attempt",
    "error",
)

#: Seconds between two looks of an events stream at its run.
EVENTS_POLL = 2 * POLL_SECONDS

#: Seconds an events stream may send nothing before it sends a comment line (``: keep-alive``),
#: so that a proxy does not close it as idle while a long step runs: nginx's
#: proxy_read_timeout and most load balancers' idle timeouts are 60 s.
KEEPALIVE = 15.0

#: A handle's word for an entry's row status.
_SAID = {"claimed": "running"}


class Background:
    """A queue's runs as an app's durable background work; one per app.

    ``threads``: runs at once in each app process (0: none here, the queue is served
    by workers elsewhere: ``lil worker MODULE --queue NAME``). ``drain_timeout``: seconds
    shutdown waits for the runs in progress to reach their next step.
    ``redact``: dict keys whose values the status route replaces by
    ``"[redacted]"`` in a run's result (as ``lil export --redact``). ``keepalive``:
    seconds an events stream stays silent before it sends a comment line (None: never).
    """

    def __init__(
        self,
        queue: Queue,
        *,
        threads: int = 1,
        drain_timeout: float = 30.0,
        redact: Collection[str] = (),
        keepalive: float | None = KEEPALIVE,
    ) -> None:
        if type(threads) is not int or threads < 0:
            raise QueueError(
                f"Background: threads must be a whole number, 0 (workers elsewhere) or more; "
                f"got {threads!r}"
            )
        self.queue = queue
        self.threads = threads
        self.drain_timeout = drain_timeout
        self.redact = frozenset(redact)
        number = isinstance(keepalive, (int, float)) and not isinstance(keepalive, bool)
        if keepalive is not None and not (number and keepalive > 0):
            raise QueueError(
                f"Background: keepalive must be a number of seconds above 0, or None for no "
                f"keep-alive comments; got {keepalive!r}"
            )
        self.keepalive = keepalive
        self.worker: Worker | None = None

    def __repr__(self) -> str:
        return f"Background({self.queue!r}, threads={self.threads})"

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        """The app's ``lifespan=``: a worker while the app serves, drained when it stops."""
        async with self.serving(app):
            yield

    @contextlib.asynccontextmanager
    async def serving(self, app: Starlette) -> AsyncIterator[Background]:
        """What ``lifespan`` does, for an app's own lifespan to enter: ``async with
        background.serving(app): yield``."""
        setattr(app.state, STATE_NAME, self)
        # The worker is made here, in the serving process (after any fork of the server).
        if self.threads:
            self.worker = self.queue.worker(threads=self.threads).start()
        try:
            yield self
        finally:
            worker, self.worker = self.worker, None
            if worker is not None:
                await asyncio.to_thread(worker.stop, self.drain_timeout)

    def start(
        self,
        fn: Callable[..., Any] | str,
        /,
        *args: Any,
        idempotency_key: str | None = None,
        **kwargs: Any,
    ) -> str:
        """Enqueue a run of task ``fn`` with these arguments; its id (its run's name), at once.

        ``idempotency_key``: the run's name and dedup key: while that run is
        queued or running, or once it completed, no other is added and the
        same id comes back (a failed one is queued again: it resumes).
        """
        if idempotency_key is None:
            return self.queue.enqueue(fn, *args, **kwargs).id
        idempotency_key = check_name("idempotency key", idempotency_key)  # it names the run
        entry = self.queue.store.named(self.queue.name, idempotency_key)
        if entry is not None and self.queue.handle(entry).status() == "completed":
            return idempotency_key
        handle = self.queue.enqueue(
            fn, *args, dedup_key=idempotency_key, run=idempotency_key, **kwargs
        )
        return handle.run or idempotency_key

    def status(self, run: str) -> dict[str, Any] | None:
        """What the status route answers for run ``run`` (its id or name); None: no such run."""
        queue = self.queue
        entry = queue.store.named(queue.name, run)
        found = None if entry is None else queue.store.state(entry)
        if found is None:
            return None
        out: dict[str, Any] = {
            "id": run,
            "status": _SAID.get(found.status, found.status),
            "run_id": found.run_id,
            "steps": [],
            "result": None,
            "error": found.error,
        }
        if found.result is not None:
            out["result"], _ = decode_result(redact_text(found.result, self.redact), queue.registry)
        if found.run_id is not None:
            out["steps"] = self._steps(found.run_id)
        return out

    def _steps(self, run_id: str) -> list[dict[str, Any]]:
        path = self.queue.path
        inspector = open_inspector(None if path is None else str(path))
        try:
            info = inspector.run(run_id)
            rows = [] if info is None else inspector.rows(info)
        finally:
            inspector.close()
        return [{f: getattr(r, f) for f in STEP_FIELDS} for r in rows if r.kind == "step"]

    async def status_response(self, run: str) -> JSONResponse:
        """The status route's answer for run ``run``: its status as JSON, or 404."""
        found = await asyncio.to_thread(self.status, run)
        if found is None:
            return JSONResponse({"error": f"no run {run!r}"}, status_code=404)
        return JSONResponse(found)

    async def events_response(
        self, run: str, last_event_id: str | None
    ) -> JSONResponse | StreamingResponse:
        """The events route's answer for run ``run``: its steps and chunks after
        ``last_event_id`` (the ``Last-Event-ID`` header) as Server-Sent Events, or 404."""
        if await asyncio.to_thread(self.status, run) is None:
            return JSONResponse({"error": f"no run {run!r}"}, status_code=404)
        return StreamingResponse(
            self.events(run, last_event_id or ""),
            media_type="text/event-stream",
            # no-store: a cache must not answer a reconnect with the old stream; X-Accel-
            # Buffering: nginx passes each event on at once rather than buffer the stream.
            headers={"cache-control": "no-store", "x-accel-buffering": "no"},
        )

    def routes(self, prefix: str = "") -> list[Route]:
        """The status routes, opt-in: ``GET {prefix}/runs/{id}`` (its status, steps, result
        and error as JSON; 404 for an unknown id) and ``GET {prefix}/runs/{id}/events``
        (its steps and its streams' chunks as Server-Sent Events, resumed after
        ``Last-Event-ID``; ``end`` last).
        Add them to the app's routes (FastAPI: ``letitloop.integrations.fastapi``'s
        ``Background.router()``)."""

        async def run_status(request: Request) -> JSONResponse:
            return await self.status_response(request.path_params["id"])

        async def run_events(request: Request) -> JSONResponse | StreamingResponse:
            last = request.headers.get("last-event-id")
            return await self.events_response(request.path_params["id"], last)

        return [
            Route(f"{prefix}/runs/{{id}}", run_status, methods=["GET"]),
            Route(f"{prefix}/runs/{{id}}/events", run_events, methods=["GET"]),
        ]

    async def events(self, run: str, after: int | str = 0) -> AsyncIterator[str]:
        """The run's steps, and its streams' chunks, as Server-Sent Events, in journal order
        from after ``after`` (a step's ``seq``, or an event's id as a ``Last-Event-ID``
        header carries it), then ``end`` once the run ended. A step is sent once it and
        every step before it are done, so the steps sent are always the start of the run's
        final list. Each chunk of a stream (``letitloop.streams``) is sent as it is
        journaled (``event: chunk``; ``event: reset`` when the call restarted), every chunk
        of a streamed step before the step itself. Each event's id says what was sent up to
        it: a client that reconnects with ``Last-Event-ID`` misses none and gets none twice.
        After ``keepalive`` seconds with nothing sent, a comment line (``: keep-alive``),
        which clients ignore."""
        done, sent_of = event_id(after) if isinstance(after, str) else (after, {})
        sent = time.monotonic()
        while True:
            found = await asyncio.to_thread(self.status, run)
            if found is None:  # gone meanwhile (lil gc)
                return
            ended = found["status"] in ENDED
            steps = found.pop("steps")
            closed = {s["key"] for s in steps if s["seq"] <= done}
            chunks: dict[str, list[Chunk]] = {}
            if found["run_id"] is not None:  # read after the steps: a done step's are whole
                chunks = await asyncio.to_thread(self._chunks, found["run_id"], closed, sent_of)
            events: list[str] = []
            for s in steps:
                if s["seq"] <= done:
                    continue
                if s["status"] != "done" and not ended:
                    break
                events += chunk_events(s["key"], chunks.pop(s["key"], []), done, sent_of)
                sent_of.pop(s["key"], None)  # closed by its step: its chunks all precede it
                done = s["seq"]
                data = json.dumps(s)
                events.append(f"id: {cursor(done, sent_of)}\nevent: step\ndata: {data}\n\n")
            for key in sorted(chunks):  # the streams whose step is not done (yet)
                events += chunk_events(key, chunks[key], done, sent_of)
            for event in events:
                yield event
            if events:
                sent = time.monotonic()
            if ended:
                yield f"event: end\ndata: {json.dumps(found)}\n\n"
                return
            if self.keepalive is not None and time.monotonic() - sent >= self.keepalive:
                sent = time.monotonic()
                yield ": keep-alive\n\n"
            await asyncio.sleep(EVENTS_POLL)

    def _chunks(
        self, run_id: str, closed: Collection[str], sent_of: dict[str, int]
    ) -> dict[str, list[Chunk]]:
        """The chunks of the run's streams not closed by a step sent, after those sent."""
        path = self.queue.path
        inspector = open_inspector(None if path is None else str(path))
        try:
            return {
                key: [
                    Chunk.of_row(r)
                    for r in inspector.stream_chunks(run_id, key, sent_of.get(key, -1))
                ]
                for key in inspector.stream_keys(run_id)
                if key not in closed
            }
        finally:
            inspector.close()


def background_of(request_or_app: Request | Starlette) -> Background:
    """The ``Background`` whose lifespan serves this request's app (or this app)."""
    app = request_or_app.app if isinstance(request_or_app, Request) else request_or_app
    found = getattr(app.state, STATE_NAME, None)
    if not isinstance(found, Background):
        raise QueueError(
            "start: this app has no letitloop Background running; pass "
            "lifespan=background.lifespan to Starlette(...) or FastAPI(...) (or enter "
            "background.serving(app) in the app's own lifespan)"
        )
    return found


def key_of(request_or_app: Request | Starlette, idempotency_key: str | None) -> str | None:
    """The run name a call of ``start`` asks for: ``idempotency_key`` if given (the app's,
    checked as any run name), else the request's header (the client's: ``check_key``)."""
    if idempotency_key is not None or not isinstance(request_or_app, Request):
        return idempotency_key
    header = request_or_app.headers.get(IDEMPOTENCY_HEADER)
    return None if header is None else check_key(header)


def start(
    request_or_app: Request | Starlette,
    fn: Callable[..., Any] | str,
    /,
    *args: Any,
    idempotency_key: str | None = None,
    **kwargs: Any,
) -> str:
    """Run task ``fn`` durably in the background; its run's id, at once.

    Given a request, its ``Idempotency-Key`` header is the key unless
    ``idempotency_key=`` is passed; a header that breaks the rule
    (``check_key``) raises ``IdempotencyKeyError``, a 400, before anything is
    queued. One short write to the journal, made in the calling thread: an
    ``async def`` handler awaits ``async_start`` instead.
    """
    key = key_of(request_or_app, idempotency_key)
    return background_of(request_or_app).start(fn, *args, idempotency_key=key, **kwargs)


async def async_start(
    request_or_app: Request | Starlette,
    fn: Callable[..., Any] | str,
    /,
    *args: Any,
    idempotency_key: str | None = None,
    **kwargs: Any,
) -> str:
    """``start`` for an ``async def`` handler: the journal write runs in a thread, so the
    event loop serves other requests meanwhile (a commit on a busy file, or a PostgreSQL
    round trip, would hold it)."""
    key = key_of(request_or_app, idempotency_key)
    background = background_of(request_or_app)
    return await asyncio.to_thread(
        lambda: background.start(fn, *args, idempotency_key=key, **kwargs)
    )
