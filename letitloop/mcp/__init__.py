"""MCP both ways: ``lil mcp`` serves the journal to agents, and :class:`DurableMCP` journals
an agent's MCP tool calls so that a side effect never runs twice unasked.

Needs the ``mcp`` extra (``pip install -e '.[mcp]'`` in a checkout); ``import
letitloop`` never loads it. Its modules, bottom up (each imports only the
ones before it): ``sessions`` (a client session renewed after a failed
round trip), ``calls`` (:class:`DurableMCP`, calls as steps, and the policy
for a call in doubt), ``server`` (the tools of ``lil mcp``).
See docs/mcp.md.
"""

from __future__ import annotations

from .calls import RERUN, DurableMCP, ToolCallInDoubt, may_send_again
from .server import build_server, serve
from .sessions import Session, Sessions

__all__ = [
    "RERUN",
    "DurableMCP",
    "Session",
    "Sessions",
    "ToolCallInDoubt",
    "build_server",
    "may_send_again",
    "serve",
]
