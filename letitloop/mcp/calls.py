"""Journaled MCP tool calls: :class:`DurableMCP`, whose every ``call_tool`` is a step.

``await tools.call_tool("charge", {...})`` inside an open journal is the step
``mcp:charge`` (numbered on repeat, ``mcp:charge#2``; ``key=`` names it):

- a call that returned is recorded, its ``CallToolResult`` (a tool's own
  error, flagged ``is_error``, included), and replayed on every later
  attempt without contacting the server; a replay that needs no call opens
  no session and starts no server;
- before the request goes out, the step records that it is about to send it
  (a child step ``mcp:charge/sent``, with the tool's annotations as the
  server listed them), so a later attempt knows a call that was in flight
  when its attempt ended — the process killed, the session dead — from
  one that never started;
- such a call is *in doubt*: it may have run on the server. A tool that is
  read-only or idempotent (its annotations say so), or a call given the
  ``idempotency_key`` its server deduplicates by, is sent again. Any other
  tool is not sent again silently: the run stops, ``waiting`` for a person's
  decision in the wait ``mcp:charge/decision`` (:class:`ToolCallInDoubt`,
  exit status 75; ``lil watch`` does not restart it). ``lil send RUN
  mcp:charge/decision '"rerun"'`` allows one more send;
  ``lil send RUN mcp:charge/decision '{"result": "what it did"}'`` records a
  result without sending anything. Each decision is used once: a re-run that
  is in doubt in its turn asks again.

The sessions follow :mod:`letitloop.mcp.sessions`: an exception out of a
call's round trip is raised as it is and never repeated in this attempt,
and the next call opens a new session first.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from mcp import Client
from mcp.types import CallToolResult, TextContent, Tool
from pydantic import ValidationError

from ..adapters.agentcalls import DEFAULT_TIMEOUT, agent_mismatch, request_options
from ..errors import StepMismatchError
from ..identity.step_names import Named
from ..primitives.waits import RunWaiting
from ..run import closing
from ..run.generations import reuse_seconds
from ..run.journal import current_journal
from .sessions import Session, Sessions, annotations_of

if TYPE_CHECKING:
    from ..run.journal import Journal

#: The value ``lil send`` gives a call in doubt to send it once more.
RERUN = "rerun"

#: The child step that records a call about to be sent, and the wait for a person's
#: decision about a call in doubt (``mcp:charge/sent``, ``mcp:charge/decision``).
SENT = "sent"
DECISION = "decision"


class ToolCallInDoubt(RunWaiting):
    """A call of a tool that may change things was in flight when an earlier attempt ended.

    It may have run on the server, and letitloop does not send it again on
    its own: the run is left ``waiting`` for a person's decision (a
    ``SystemExit`` with status 75, as every wait that stops). The message
    names the run, the call and the two ``lil send`` commands that decide.
    """

    def __init__(self, message: str, run_id: str, key: str, tool: str) -> None:
        super().__init__(message, run_id, key)
        self.tool = tool


def open_journal() -> Journal | None:
    """The journal open in this task (or context), or None."""
    journal = current_journal.get()
    return journal if journal is not None and journal.is_open else None


def may_send_again(annotations: dict[str, Any] | None, idempotency_key: str | None) -> bool:
    """Whether a call in doubt is sent again without asking: read-only, idempotent, or keyed.

    Annotations are the server's hints (MCP's defaults when it gave none:
    not read-only, destructive, not idempotent). A tool that is neither
    read-only nor idempotent is asked about even when it says it is not
    destructive: a second send of an additive call adds twice.
    """
    if idempotency_key is not None:
        return True
    hints = annotations or {}
    return hints.get("read_only_hint") is True or hints.get("idempotent_hint") is True


def decided(value: Any) -> str | dict[str, Any] | None:
    """A person's decision sent to a call in doubt: :data:`RERUN`, a result, or None (neither).

    A result is ``{"result": TEXT}`` (one text item) or ``{"result": {...}}``
    (a ``CallToolResult`` as MCP writes it: ``content``, ``structuredContent``,
    ``isError``).
    """
    if value == RERUN:
        return RERUN
    if not isinstance(value, dict) or set(value) != {"result"}:
        return None
    given = value["result"]
    if isinstance(given, str):
        return recorded(CallToolResult(content=[TextContent(type="text", text=given)]))
    try:
        return recorded(CallToolResult.model_validate(given))
    except ValidationError:
        return None


def recorded(result: CallToolResult) -> dict[str, Any]:
    """A tool's result as the step records it: JSON as MCP writes it on the wire."""
    out: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return out


class DurableMCP:
    """An MCP server's tools called as steps of a journal run (see the module's text).

    ``server`` is what ``mcp.Client`` takes: ``StdioServerParameters`` (each
    session starts the server as a child process), a URL, a ``Transport``,
    or an ``MCPServer`` (in-process). ``client_options`` go to every
    ``mcp.Client`` it makes (``read_timeout_seconds=``, callbacks).

    Which run a call goes into: ``journal`` if given, else the journal open in
    this task (``async with Journal(...)``, ``@durable_async``); else, with
    ``run=``, that run of goal ``goal`` (default ``"mcp"``), opened by the
    first call and completed by :meth:`aclose`; else each call is a run of
    its own, named by the request: the tool's name and its arguments. The
    same request is then the same run: resumed after a kill, replayed without
    contacting the server once it completed (for ``reuse`` seconds, default
    the adapters' window; ``fresh=True`` asks again), waited for while another
    process makes it (up to ``timeout`` seconds). ``path``: the journal file
    (default ``$LETITLOOP_DB``, else ``.letitloop/journal.db``). Use it from
    one event loop; close it with ``async with`` or :meth:`aclose` (that ends
    its sessions and servers).
    """

    def __init__(
        self,
        server: Any,
        *,
        journal: Journal | None = None,
        goal: str | None = None,
        run: str | None = None,
        reuse: float | timedelta | None = None,
        fresh: bool = False,
        path: str | os.PathLike[str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        prefix: str = "mcp",
        **client_options: Any,
    ) -> None:
        reuse_seconds(reuse, fresh)  # refused here, not at the first call
        self.server = server
        self.prefix = prefix
        self.goal = goal or prefix
        self.run, self.reuse, self.fresh, self.path, self.timeout = run, reuse, fresh, path, timeout
        self._journal = journal
        #: The run named ``run``, once a call opened it (closed by aclose).
        self._named: Journal | None = None
        self._options = client_options
        self.sessions = Sessions(self._client)

    def _client(self) -> Client:
        return Client(self.server, **self._options)

    async def __aenter__(self) -> DurableMCP:
        return self

    async def __aexit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        await self.aclose(exc)

    async def aclose(self, exc: BaseException | None = None) -> None:
        """Close every session this opened (a stdio server's process ends with its session),
        and the run named ``run`` if a call opened it: completed, or failed with ``exc``."""
        try:
            await self.sessions.aclose()
        finally:
            named, self._named = self._named, None
            if named is not None:
                await closing.aclose(named, exc)

    def _new_journal(self, options: dict[str, Any]) -> Journal:
        from ..run.journal import Journal

        return Journal(self.goal, path=self.path, timeout=self.timeout, **options)

    @contextlib.asynccontextmanager
    async def _journal_for(self, tool: str, identity: Any) -> AsyncIterator[Journal]:
        """The journal a call goes into (see the class), opened for it if it is its own run."""
        journal = self._journal or open_journal()
        if journal is None and self.run is not None:
            if self._named is None:
                named = self._new_journal(
                    {"run": self.run, "reuse": self.reuse, "fresh": self.fresh}
                )
                await asyncio.to_thread(named.open)  # the loop runs while it waits
                self._named = named
            journal = self._named
        if journal is not None:
            yield journal
            return
        options = request_options(
            tool, identity, None, run=None, turn=1, reuse=self.reuse, fresh=self.fresh
        )
        async with self._new_journal(options) as journal:
            yield journal

    async def list_tools(self, *, key: str | None = None) -> list[Tool]:
        """The server's tools, recorded once (step ``mcp:tools``) and replayed ever after."""
        async with self._journal_for("tools", {"tools": True}) as j:
            listed = await j.async_step(
                key or f"{self.prefix}:tools", Named("letitloop:mcp.tools", self._listed)
            )
        return [Tool.model_validate(t) for t in listed]

    async def _listed(self) -> list[dict[str, Any]]:
        session = await self.sessions.live()
        return [
            t.model_dump(mode="json", by_alias=True, exclude_none=True)
            for t in session.tools.values()
        ]

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        key: str | None = None,
        idempotency_key: str | None = None,
    ) -> CallToolResult:
        """Call tool ``name`` as the step ``key`` (default ``mcp:<name>``); see the module.

        ``idempotency_key``: the key the server deduplicates this call by,
        which the arguments carry as the server expects (an
        ``atomic_marker``'s ``offer.idempotency_key`` is one): a call in doubt
        is then sent again without asking. Concurrent calls of one tool in one
        run need distinct keys (``key=f"mcp:search:{q}"``), as concurrent steps do.

        Returns the tool's result (``is_error`` set for a tool's own error),
        fresh or replayed. Raises what the round trip raised (``MCPError``:
        the connection closed, a timeout; the call is not repeated), what
        opening a session raised, and :class:`ToolCallInDoubt`.
        """
        args = dict(arguments or {})
        step = key or f"{self.prefix}:{name}"
        identity = {"tool": name, "arguments": args}
        async with self._journal_for(name, identity) as j:
            try:
                result = await j.async_step(
                    step,
                    Named("letitloop:mcp.call", partial(self._call, j)),
                    name,
                    args,
                    idempotency_key,
                )
            except StepMismatchError as error:
                # Recorded for other arguments at this place of an open run (its call
                # was not sent): the tool, the arguments and the ways out.
                raise agent_mismatch(error, self.prefix, error.key or step, identity) from None
        return CallToolResult.model_validate(result)

    async def _call(
        self, j: Journal, name: str, arguments: dict[str, Any], idempotency_key: str | None
    ) -> dict[str, Any]:
        """The step's function: record the send, then send; or decide about a call in doubt."""
        while True:
            held: list[Session] = []
            intent = await j.async_step(
                SENT, Named("letitloop:mcp.sent", partial(self._sending, held)), name
            )
            if held:
                break  # recorded now: this attempt sends it
            # Recorded by an earlier attempt (or try) that never recorded the result.
            if may_send_again(intent.get("annotations"), idempotency_key):
                continue  # a new record of the send, then the send
            decision = await self._decision(j, name, intent)
            if decision != RERUN:
                assert isinstance(decision, dict)
                return decision
        session = held[0]
        try:
            result = await session.client.call_tool(name, arguments)
        except Exception:
            self.sessions.suspect(session)
            raise
        return recorded(result)

    async def _sending(self, held: list[Session], name: str) -> dict[str, Any]:
        """The record of a call about to be sent: its tool and annotations (opens a session)."""
        session = await self.sessions.live()
        held.append(session)
        return {"tool": name, "annotations": annotations_of(session.tools.get(name))}

    async def _decision(self, j: Journal, name: str, intent: dict[str, Any]) -> Any:
        """A person's decision about a call in doubt: replayed, or the run stops to wait for it."""
        while True:
            try:
                value = await j.async_wait_for(DECISION, stop_after=0)
            except RunWaiting as exc:
                message = in_doubt_text(exc.run_id, j.goal, name, exc.key, intent)
                print(message, file=sys.stderr)
                raise ToolCallInDoubt(message, exc.run_id, exc.key, name) from None
            decision = decided(value)
            if decision is not None:
                return decision
            # Neither decision: the next wait (decision#2) asks again.


def in_doubt_text(run_id: str, goal: str, tool: str, wait_key: str, intent: dict[str, Any]) -> str:
    """Why the run stopped at a call in doubt, and the two commands that decide."""
    step = wait_key.rsplit("/", 1)[0]
    hints = intent.get("annotations")
    said = (
        "its annotations say it may change things and is not idempotent"
        if hints
        else "its server gave no annotations, so it may change things"
    )
    key = shlex.quote(wait_key)
    rerun = shlex.quote(json.dumps(RERUN))
    result = shlex.quote(json.dumps({"result": "what the call did"}))
    return (
        f"letitloop: run {run_id} of goal {goal!r} stopped: the call of MCP tool {tool!r} "
        f"(step {step!r}) was in flight when an earlier attempt ended, so it may have run on "
        f"the server; {said}, so it is not sent again without a person's decision. Check "
        f"the server, then either send it once more: lil send {run_id} {key} {rerun}, or "
        f"record what it did without sending it: lil send {run_id} {key} {result}; then run "
        f"the program again"
    )
