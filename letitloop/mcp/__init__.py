"""MCP both ways: ``lil mcp`` serves the journal to agents.

Needs the ``mcp`` extra (``pip install -e '.[mcp]'`` in a checkout); ``import
letitloop`` never loads it. Its modules: ``server`` (the tools of ``lil
mcp``). See docs/mcp.md.
"""

from __future__ import annotations

from .server import build_server, serve

__all__ = ["build_server", "serve"]
