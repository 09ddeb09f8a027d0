"""The ASGI app of ``lil ui`` (Starlette): read-only pages over one journal.

Every request opens the journal read-only through
:func:`~letitloop.inspection.open_inspector` (no write, no migration, no lock file) and
closes it before answering, so the app holds nothing between requests and sees what
others wrote a moment ago. Only GET and HEAD are served: there is no action that changes
the journal. Every answer carries a Content-Security-Policy that allows only the
package's own script and stylesheet (no inline script, nothing from elsewhere), and the
app answers only to the host names it was started for (a page of another site cannot
reach it by rebinding a name of its own to 127.0.0.1).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import LetItLoopError, RunNotFoundError
from ..inspection import Inspector, open_inspector
from . import pages

#: What a page may load and run: its own script and stylesheet, requests to this server;
#: no inline script or style, no frame around it, forms only to itself.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)

#: Headers on every answer.
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]

#: The names a server on the loopback interface answers to.
LOOPBACK_NAMES = ["127.0.0.1", "localhost", "::1", "[::1]"]


class SecurityHeaders:
    """Adds :data:`HEADERS` to every answer, and ``no-store`` to pages (a run's page is
    never stale from a cache)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.extend(HEADERS)
                if not str(scope.get("path", "")).startswith("/static/"):
                    headers.append((b"cache-control", b"no-store"))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)


#: The cookie a browser keeps the token of ``lil ui --allow-remote`` in, once it has
#: opened the printed address (``?token=…``).
TOKEN_COOKIE = "lil_ui_token"


class RequireToken:
    """Answer only requests that carry the token: ``?token=…`` (which sets a cookie for
    the rest of the visit, same-site only) or that cookie; anything else is 403.

    For a non-loopback bind (``lil ui --allow-remote``), where the Host header cannot be
    pinned: a page elsewhere (DNS rebinding included) cannot know the token.
    """

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.token = token.encode("ascii")

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from urllib.parse import parse_qs

        given = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token", [""])[0]
        cookies = b"; ".join(v for k, v in scope["headers"] if k == b"cookie")
        kept = f"{TOKEN_COOKIE}=".encode() + self.token
        if secrets.compare_digest(given.encode("latin-1"), self.token):

            async def with_cookie(message: Any) -> None:
                if message["type"] == "http.response.start":
                    cookie = kept + b"; HttpOnly; SameSite=Strict; Path=/"
                    message["headers"] = [*message.get("headers", []), (b"set-cookie", cookie)]
                await send(message)

            await self.app(scope, receive, with_cookie)
            return
        if any(secrets.compare_digest(part.strip(), kept) for part in cookies.split(b";")):
            await self.app(scope, receive, send)
            return
        response = Response(
            "lil ui: this address needs the token lil ui printed (open the address it "
            "printed, with ?token=…)",
            403,
            media_type="text/plain",
        )
        await response(scope, receive, send)


def create_app(
    path: str | Path | None = None,
    *,
    allowed_hosts: Iterable[str] | None = None,
    token: str | None = None,
) -> Starlette:
    """The app over the journal at ``path`` (default: as for ``Journal``).

    ``allowed_hosts``: the Host header values it answers (default: the loopback names;
    ``["*"]`` for any). ``token``: required of every request (:class:`RequireToken`).
    The journal is opened read-only for each request.
    """

    def page(render: Callable[[Inspector, Request], Response]) -> Callable[[Request], Response]:
        def endpoint(request: Request) -> Response:
            try:
                journal = open_inspector(path)
            except LetItLoopError as exc:
                return HTMLResponse(pages.error_page(str(path or ""), 503, str(exc)), 503)
            try:
                return render(journal, request)
            except RunNotFoundError as exc:
                return HTMLResponse(pages.error_page(str(journal.path), 404, str(exc)), 404)
            except LetItLoopError as exc:
                return HTMLResponse(pages.error_page(str(journal.path), 400, str(exc)), 400)
            finally:
                journal.close()

        return endpoint

    def query(request: Request) -> dict[str, list[str]]:
        q: dict[str, list[str]] = {}
        for k, v in request.query_params.multi_items():
            q.setdefault(k, []).append(v)
        return q

    def runs(journal: Inspector, request: Request) -> Response:
        status, html = pages.runs_page(journal, query(request))
        return HTMLResponse(html, status)

    def run(journal: Inspector, request: Request) -> Response:
        return HTMLResponse(pages.run_page(journal, request.path_params["run"], query(request)))

    def live(journal: Inspector, request: Request) -> Response:
        stamp, html = pages.run_update(journal, request.path_params["run"], query(request))
        if html is None:
            return Response(status_code=204, headers={"X-Lil-Stamp": stamp})
        return HTMLResponse(html, headers={"X-Lil-Stamp": stamp})

    def row(journal: Inspector, request: Request) -> Response:
        return HTMLResponse(
            pages.row_page(journal, request.path_params["run"], request.path_params["seq"])
        )

    def not_found(request: Request, exc: Any) -> Response:
        return HTMLResponse(pages.error_page(str(path or ""), 404, "no such page"), 404)

    def no_icon(request: Request) -> Response:
        return Response(status_code=204)  # the browser asks; there is none

    hosts = list(allowed_hosts) if allowed_hosts is not None else LOOPBACK_NAMES
    return Starlette(
        routes=[
            Route("/", page(runs)),
            Route("/runs/{run}", page(run)),
            Route("/runs/{run}/live", page(live)),
            Route("/runs/{run}/rows/{seq:int}", page(row)),
            Route("/favicon.ico", no_icon),
            Mount("/static", StaticFiles(directory=pages.HERE / "static"), name="static"),
        ],
        middleware=[
            Middleware(SecurityHeaders),
            Middleware(TrustedHostMiddleware, allowed_hosts=hosts),
            *([Middleware(RequireToken, token=token)] if token is not None else []),
        ],
        exception_handlers={404: not_found},
    )
