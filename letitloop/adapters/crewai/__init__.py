"""CrewAI crews made crash-proof: every model call and tool call a journal step.

Install with ``pip install -e '.[crewai]'`` from a checkout of this repository
(the name ``letitloop`` on the package index is another project); the core
package never imports this package. CrewAI cannot share an environment with
openai 3.x or mcp 2.x: give it one of its own (docs/adapters.md).

- ``CrewAIDurabilityHandler`` and ``durable_crew`` (``handler.py``): wrap a
  crew; its kickoff is a journal run.
- ``wrap_llm`` (``llms.py``): a model's calls as steps, answers and token
  usage recorded.
- ``wrap_tool`` (``tools.py``): a tool's executions as steps.
- ``calls.py``: the session a kickoff makes current, and the step of one call.
"""

from __future__ import annotations

try:
    import crewai  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        f"letitloop.adapters.crewai needs CrewAI, which is not installed ({exc}); "
        f"install it from your letitloop checkout with: pip install -e '.[crewai]' "
        f"(in an environment of its own: CrewAI pins openai<3 and mcp<2)"
    ) from exc

from .handler import CrewAIDurabilityHandler, durable_crew
from .llms import wrap_llm
from .tools import wrap_tool

__all__ = ["CrewAIDurabilityHandler", "durable_crew", "wrap_llm", "wrap_tool"]
