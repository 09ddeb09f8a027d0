"""LlamaIndex workflows made durable by the journal: ``LetItLoopRuntime``.

Install with ``pip install -e '.[llamaindex]'`` from a checkout of this
repository (it installs ``llama-index-workflows``, the home of ``Workflow``
that ``llama-index-core`` re-exports); the core package never imports this
package.

- ``LetItLoopRuntime`` (``runtime.py``): a workflow runtime (the
  ``workflows`` Runtime API) whose every tick, a step's result included, is a
  step of the open journal; a workflow run killed half-way resumes at the
  steps that had not returned, with its context state restored.
"""

from __future__ import annotations

try:
    import workflows.plugins.basic  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        f"letitloop.adapters.llamaindex needs llama-index-workflows, which is not installed "
        f"({exc}); install the extra: pip install -e '.[llamaindex]'"
    ) from exc

from .agents import accept_runtime
from .runtime import LetItLoopRuntime

accept_runtime()

__all__ = ["LetItLoopRuntime"]
