"""Durable background work for FastAPI apps: ``letitloop.integrations.starlette``'s, FastAPI's way.

``Background(queue)`` is Starlette's (its ``lifespan`` serves the queue in each
server process and drains it on shutdown) with ``router()``: the status routes
as an ``APIRouter``, for ``app.include_router(background.router(), prefix=...)``.
``DurableTasks`` is the handler's parameter, shaped as FastAPI's
``BackgroundTasks``: ``tasks.add_task(fn, *args)`` enqueues a durable run and
returns its id (``await tasks.async_start(...)`` in an ``async def`` handler);
the request's ``Idempotency-Key`` header (declared, so the OpenAPI schema shows
it) names the run. Needs the ``fastapi`` extra; the core never imports this module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from .idempotency import IDEMPOTENCY_HEADER, check_key
from .starlette import Background as StarletteBackground
from .starlette import async_start, background_of

try:
    from fastapi import APIRouter, Depends, Header, Request
    from fastapi.responses import JSONResponse, StreamingResponse
except ImportError as exc:  # the extra is missing: say what to install
    raise ImportError(
        "letitloop.integrations.fastapi needs FastAPI: pip install -e '.[fastapi]' (in your clone)"
    ) from exc

#: What the routes answer besides their JSON: an unknown run.
_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"description": "No such run"}}


class Background(StarletteBackground):
    """``letitloop.integrations.starlette.Background`` with its routes as an ``APIRouter``."""

    def router(self, *, tags: list[str] | None = None) -> APIRouter:
        """The status routes, opt-in: ``GET /runs/{id}`` and ``GET /runs/{id}/events`` (as
        ``routes()`` says), in the app's OpenAPI schema under ``tags`` (default ``["runs"]``).
        Mount it under a prefix: ``app.include_router(background.router(), prefix="/jobs")``."""
        router = APIRouter(tags=list(tags) if tags is not None else ["runs"])

        async def run_status(id: str) -> JSONResponse:
            """A run's status, steps (no arguments, no step results), result and error."""
            return await self.status_response(id)

        async def run_events(
            id: str, last_event_id: Annotated[str | None, Header()] = None
        ) -> JSONResponse | StreamingResponse:
            """A run's finished steps, and its streams' chunks as they are journaled, as
            Server-Sent Events (after ``Last-Event-ID``), then ``end``; a ``: keep-alive``
            comment while nothing happens."""
            return await self.events_response(id, last_event_id)

        router.add_api_route(
            "/runs/{id}", run_status, methods=["GET"], responses=_NOT_FOUND, response_model=None
        )
        router.add_api_route(
            "/runs/{id}/events",
            run_events,
            methods=["GET"],
            responses={**_NOT_FOUND, 200: {"content": {"text/event-stream": {}}}},
            response_model=None,
        )
        return router


class Tasks:
    """A request's durable background tasks (FastAPI injects it as ``DurableTasks``).

    ``key`` is the request's ``Idempotency-Key`` header as it came (checked
    when a run is started: a key that breaks the rule is a 400).
    """

    def __init__(self, request: Request, key: str | None) -> None:
        self.request = request
        self.key = key

    def __repr__(self) -> str:
        return f"Tasks(key={self.key!r})"

    def _key(self, idempotency_key: str | None) -> str | None:
        if idempotency_key is not None or self.key is None:
            return idempotency_key
        return check_key(self.key)

    def start(
        self,
        fn: Callable[..., Any] | str,
        /,
        *args: Any,
        idempotency_key: str | None = None,
        **kwargs: Any,
    ) -> str:
        """Run task ``fn`` (a ``@queue.task`` of the app's ``Background``'s queue) durably
        in the background; its run's id, at once. The request's ``Idempotency-Key``
        names the run unless ``idempotency_key=`` does. For a ``def`` handler (FastAPI
        runs it in a thread); an ``async def`` one awaits ``async_start``."""
        key = self._key(idempotency_key)
        background = background_of(self.request)
        return background.start(fn, *args, idempotency_key=key, **kwargs)

    #: ``BackgroundTasks.add_task``'s name: the same call, which returns the run's id.
    add_task = start

    async def async_start(
        self,
        fn: Callable[..., Any] | str,
        /,
        *args: Any,
        idempotency_key: str | None = None,
        **kwargs: Any,
    ) -> str:
        """``start`` for an ``async def`` handler: the journal write runs in a thread."""
        key = self._key(idempotency_key)
        return await async_start(self.request, fn, *args, idempotency_key=key, **kwargs)


def _tasks(
    request: Request,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias=IDEMPOTENCY_HEADER,
            description="Names the run: a retried request with the same key gets the same run.",
        ),
    ] = None,
) -> Tasks:
    return Tasks(request, idempotency_key)


#: A handler's parameter, as ``BackgroundTasks`` is: ``def create(tasks: DurableTasks)``.
DurableTasks = Annotated[Tasks, Depends(_tasks)]
