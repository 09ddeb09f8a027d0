"""Pydantic AI agents made durable by the journal: ``LetItLoopDurability``.

Install with ``pip install -e '.[pydantic-ai]'`` from a checkout of this
repository; the core package never imports this package.

- ``LetItLoopDurability`` (``capability.py``): a Pydantic AI durability
  capability (``pydantic_ai.durable_exec``, the API Temporal, DBOS and Prefect
  plug into) whose engine is named ``letitloop``.
- Each durable unit (model request, tool call, toolset discovery) is one step,
  keyed by its number in the agent run and its name (``units.py``); a model
  request records its usage once (``letitloop.usage``).
- A wait for outside input (``RequestInput``, ``wait_for_external_event``) is a
  journal wait answered by ``lil send`` (``waiter.py``).
"""

from __future__ import annotations

try:
    import pydantic_ai.durable_exec  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        f"letitloop.adapters.pydantic_ai needs Pydantic AI, which is not installed ({exc}); "
        "install the extra: pip install -e '.[pydantic-ai]'"
    ) from exc

from .capability import LetItLoopDurability
from .units import LetItLoopBackend, StoppedToWait
from .waiter import JournalWaiter

__all__ = ["JournalWaiter", "LetItLoopBackend", "LetItLoopDurability", "StoppedToWait"]
