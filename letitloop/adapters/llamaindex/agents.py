"""LlamaIndex's agents (``FunctionAgent``, ``ReActAgent``) take ``runtime=`` as workflows do.

llama-index-core's agents are workflows, but their constructor passes only
some keywords on to ``Workflow.__init__`` (``timeout``, ``verbose``, …) and
hands the rest to pydantic, which drops what it does not know: an agent made
with ``runtime=LetItLoopRuntime()`` ran on the engine's default runtime and
journaled nothing. :func:`accept_runtime` adds ``runtime`` to the keywords the
agents pass on, once llama-index-core's agent module is imported; the adapter
calls it when it is imported and when a ``LetItLoopRuntime`` is made, so
either order of imports works. It changes nothing else.
"""

from __future__ import annotations

import sys

#: The module of llama-index-core whose constructor sorts an agent's keywords.
AGENT_MODULE = "llama_index.core.agent.workflow.base_agent"


def accept_runtime() -> None:
    """Let the agents pass ``runtime=`` on to their workflow, if their module is loaded."""
    module = sys.modules.get(AGENT_MODULE)
    names = getattr(module, "WORKFLOW_KWARGS", None)
    if isinstance(names, tuple) and "runtime" not in names:
        module.WORKFLOW_KWARGS = (*names, "runtime")  # type: ignore[union-attr]
