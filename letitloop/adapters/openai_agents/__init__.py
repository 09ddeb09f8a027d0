"""OpenAI Agents SDK agents made durable by the journal.

Install with ``pip install -e '.[openai-agents]'`` from a checkout of this
repository; the core package never imports this package.

- ``DurableModel`` / ``DurableModelProvider`` (``model.py``): each
  ``get_response`` a step, the response kept as JSON data (pydantic's
  ``TypeAdapter``), its usage reported once through ``letitloop.usage``.
- ``wrap_tool`` (``tools.py``): each function tool call a step keyed by its
  ``tool_call_id``; ``durable_agent`` (``agent.py``) wraps an agent's model
  and tools and those of the agents it hands off to.
- ``JournalSession`` (``session.py``): a session whose reads and writes are
  steps, so a resumed run does not add its history twice.
- ``run_durably`` (``approvals.py``): tool approvals that wait through the
  journal (``lil send``), the interrupted state kept with ``RunState.to_json``.
"""

from __future__ import annotations

try:
    import agents  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        f"letitloop.adapters.openai_agents needs the OpenAI Agents SDK, which is not installed "
        f"({exc}); install the extra: pip install -e '.[openai-agents]'"
    ) from exc

from .agent import durable_agent
from .approvals import run_durably
from .model import DurableModel, DurableModelProvider
from .session import JournalSession
from .tools import JournaledInvoker, wrap_tool

__all__ = [
    "DurableModel",
    "DurableModelProvider",
    "JournalSession",
    "JournaledInvoker",
    "durable_agent",
    "run_durably",
    "wrap_tool",
]
