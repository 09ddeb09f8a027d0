"""MCP client sessions that are renewed after a call's round trip failed (:class:`Sessions`).

A session that died after it opened (its stdio server exited, its
connection dropped) is found out by a call, not by a health check: a
tool's own error comes back as a result flagged ``is_error``, and an
exception out of the round trip is the transport failing. The rules, as
an agent kernel that keeps MCP sessions well ships them (loom-kernel 2.2.1's
renewal):

- the call that raised is raised as it is and never repeated: it may have
  run on the server;
- the next call opens a new session first (over stdio: a new server
  process), once, even when several concurrent calls found the old one dead;
- a renewal that cannot connect raises, and leaves the old session suspect,
  so the call after it tries again;
- suspecting a healthy session costs one reconnection, nothing more.

The first session is opened by the first call that needs one, so a caller
that only replays recorded calls opens none. Each session is owned by a
task of its own (the SDK's client must be closed in the task that opened it,
and a renewal happens in whichever task calls next); a replaced session is
closed in the background, and :meth:`Sessions.aclose` closes them all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from mcp import Client
from mcp.types import Tool

log = logging.getLogger("letitloop.mcp")

#: How many pages of ``tools/list`` a new session reads at most (a server that pages
#: forever cannot hang a call).
MAX_TOOL_PAGES = 100


class Session:
    """One open MCP client session, the tools its server listed, and the task that owns it."""

    def __init__(self, client: Client, tools: dict[str, Tool], owner: asyncio.Task[None]) -> None:
        self.client = client
        self.tools = tools
        """The server's tools by name, as listed when the session opened."""
        self.owner = owner
        self.stop = asyncio.Event()
        """Set to close the session: its owner task leaves the client's context."""
        self.number = 0
        """1 for the first session of a :class:`Sessions`, 2 for its first renewal, …"""


class Sessions:
    """The session calls go through, renewed after a failed round trip (rules above).

    ``connect`` makes a new, not yet entered ``mcp.Client`` for each session
    (a client cannot be entered twice). Not thread-safe: use it from one
    event loop.
    """

    def __init__(self, connect: Callable[[], Client]) -> None:
        self._connect = connect
        self._current: Session | None = None
        self._suspect: Session | None = None
        self._renewing = asyncio.Lock()
        self._all: list[Session] = []
        self.opened = 0
        """How many sessions were opened (renewals included)."""

    async def live(self) -> Session:
        """The session to call through: the current one, or a new one if it is suspect.

        Opens the first session on first use. A renewal happens at most once
        for one suspect session, however many callers find it suspect; one
        that cannot connect raises and leaves the suspect in place.
        """
        current = self._current
        if current is not None and self._suspect is not current:
            return current
        async with self._renewing:
            if self._current is not current and self._current is not None:
                return self._current  # renewed by a concurrent caller meanwhile
            fresh = await self._open()
            self._current = fresh
            if current is not None:
                log.warning("letitloop: MCP session renewed after a failed call")
                current.stop.set()  # the old one is closed by its own task
            return fresh

    def suspect(self, session: Session) -> None:
        """A call's round trip through ``session`` raised: the next call renews it."""
        self._suspect = session

    async def _open(self) -> Session:
        ready: asyncio.Future[Session] = asyncio.get_running_loop().create_future()

        async def own() -> None:
            try:
                async with self._connect() as client:
                    tools = await listed_tools(client)
                    session = Session(client, tools, task)
                    ready.set_result(session)
                    await session.stop.wait()
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc)  # the caller that opens it gets the error
                elif isinstance(exc, Exception):  # closing a dead session: nothing to tell
                    log.debug("letitloop: an MCP session did not close cleanly", exc_info=True)
                else:
                    raise

        task = asyncio.get_running_loop().create_task(own())
        try:
            session = await ready
        except asyncio.CancelledError:  # the caller gave up: so does the session it opens
            task.cancel()
            raise
        self.opened += 1
        session.number = self.opened
        self._all.append(session)
        return session

    async def aclose(self) -> None:
        """Close every session this opened (the caller waits for their owner tasks)."""
        sessions, self._all = self._all, []
        self._current = self._suspect = None
        for session in sessions:
            session.stop.set()
        for session in sessions:
            with contextlib.suppress(BaseException):
                await session.owner


async def listed_tools(client: Client) -> dict[str, Tool]:
    """Every tool the server lists, by name (all pages, at most :data:`MAX_TOOL_PAGES`)."""
    tools: dict[str, Tool] = {}
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.update((t.name, t) for t in page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def annotations_of(tool: Tool | None) -> dict[str, Any] | None:
    """A tool's annotations as plain JSON (None: the server gave none, or does not list it)."""
    if tool is None or tool.annotations is None:
        return None
    return tool.annotations.model_dump(mode="json", exclude_none=True)
