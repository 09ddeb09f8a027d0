"""smolagents agents whose model calls and tool calls are journal steps.

Install with ``pip install -e '.[smolagents]'`` from a checkout of this
repository; the core package never imports this package.

- ``durable_agent(agent)`` / ``SmolagentsWALCallback(session_id).wrap_agent(agent)``
  (``agent.py``): the agent's model, tools and managed agents journaled, its
  run inside a journal; a rerun replays what finished.
- ``DurableModel`` (``model.py``): a ``Model`` whose replies are steps.
- ``AgentCalls`` (``calls.py``): which journal and context an agent's calls
  go to, and their keys.
"""

from __future__ import annotations

try:
    import smolagents  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        f"letitloop.adapters.smolagents needs smolagents, which is not installed ({exc}); "
        f"install it from your letitloop checkout with: pip install -e '.[smolagents]'"
    ) from exc

from .agent import SmolagentsWALCallback, durable_agent
from .calls import AgentCalls
from .model import DurableModel

__all__ = ["AgentCalls", "DurableModel", "SmolagentsWALCallback", "durable_agent"]
