"""A small MCP server for docs/mcp.md's ``DurableMCP`` example: a shop with two tools.

    python examples/shop_server.py [--charges FILE]   # MCP on stdin/stdout; a client starts it

``lookup`` only reads (its annotations say ``read_only_hint``), so a call of it
that was in flight when the agent died is sent again on its own; ``charge``
changes things (``destructive_hint``, not idempotent), so such a call is in
doubt and the run waits for a person's decision (docs/mcp.md). With
``--charges FILE`` the shop keeps its record of charges there: ``charge``
appends the line it answers (``charged order 7``) before it answers, so
whoever decides about a call in doubt can check whether it ran
(tests/crashtest_examples.py does). Needs the ``mcp`` extra (``pip install
-e '.[mcp]'`` in a checkout).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

shop = MCPServer("shop")
#: The shop's record of charges (--charges), or None: none kept.
charges: Path | None = None


@shop.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup(order: int) -> str:
    """The state of an order."""
    return f"order {order} is open"


@shop.tool(annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=False))
def charge(order: int) -> str:
    """Charge an order's card (a real shop would call its payment provider here)."""
    done = f"charged order {order}"
    if charges is not None:
        with charges.open("a", encoding="utf-8") as record:
            record.write(done + "\n")
    return done


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="A shop's MCP server (stdio).")
    parser.add_argument("--charges", type=Path, help="append each charge made to this file")
    charges = parser.parse_args().charges
    shop.run()
