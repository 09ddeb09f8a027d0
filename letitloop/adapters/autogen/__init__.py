"""AutoGen (autogen-agentchat) agents and teams whose model and tool calls are journal steps.

Install with ``pip install -e '.[autogen]'`` from a checkout of this
repository; the core package never imports this package.

- ``AutoGenStateSerializer(session_id)`` (``serializer.py``): ``wrap_agent``
  and ``wrap_team`` journal every model call and tool call and run the
  agent or team inside a journal; a rerun replays what finished.
- ``DurableChatCompletionClient`` (``client.py``): a model client whose
  ``create`` calls are steps.
- ``calls.py``: the keys (``{agent}.model:{n}``, ``….tool:{name}:{call id}``)
  and the journal a call goes to; ``tools.py``: tools and workbenches.
"""

from __future__ import annotations

try:
    import autogen_agentchat  # noqa: F401
    import autogen_core  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        f"letitloop.adapters.autogen needs AutoGen (autogen-agentchat), which is not "
        f"installed ({exc}); install it from your letitloop checkout with: "
        f"pip install -e '.[autogen]'"
    ) from exc

from .calls import AgentCalls, JournalHolder
from .client import DurableChatCompletionClient
from .serializer import AutoGenStateSerializer
from .tools import wrap_tool, wrap_workbench

__all__ = [
    "AgentCalls",
    "AutoGenStateSerializer",
    "DurableChatCompletionClient",
    "JournalHolder",
    "wrap_tool",
    "wrap_workbench",
]
