"""A small MCP server for docs/mcp.md's ``DurableMCP`` example: a shop with two tools.

    python examples/shop_server.py   # speaks MCP on stdin/stdout; a client starts it

``lookup`` only reads (its annotations say ``read_only_hint``), so a call of it
that was in flight when the agent died is sent again on its own; ``charge``
changes things (``destructive_hint``, not idempotent), so such a call is in
doubt and the run waits for a person's decision (docs/mcp.md). Needs the
``mcp`` extra (``pip install -e '.[mcp]'`` in a checkout).
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

shop = MCPServer("shop")


@shop.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup(order: int) -> str:
    """The state of an order."""
    return f"order {order} is open"


@shop.tool(annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=False))
def charge(order: int) -> str:
    """Charge an order's card (a real shop would call its payment provider here)."""
    return f"charged order {order}"


if __name__ == "__main__":
    shop.run()
