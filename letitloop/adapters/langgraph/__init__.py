"""LangGraph checkpoints in the letitloop journal file, and nodes whose inner calls are steps.

Install with ``pip install -e '.[langgraph]'`` from a checkout of this repository
(the name ``letitloop`` on the package index is another project); the core package never
imports this package.

- ``LetItLoopCheckpointSaver`` (``saver.py``): a LangGraph
  ``BaseCheckpointSaver`` whose checkpoints and pending writes are rows of the
  journal file; strict about what it rebuilds from a row (``serde.py``), and
  deleting or pruning a thread retires its durable-node runs (``retire.py``);
  it waits for SQLite's locks in short polls, so a durable node's commits
  never hold LangGraph's writes back for long (``polled.py``).
- ``durable_node`` (``node.py``): the ``step()`` calls inside a node are
  journaled, so a node killed half-way replays its finished calls and runs
  only the interrupted one again. Which journal run one execution of a node
  is (``identity.py``) survives the checkpoints LangGraph loses in its
  ``"async"`` and ``"exit"`` durability modes.
- A graph compiled with the saver runs one invocation of a thread at a
  time, whole, and answers the same request asked again from the thread's
  checkpoints (``invocations.py``, which wraps ``Pregel.stream`` and
  ``astream``; ``requests.py`` says which request an invocation is).
- ``durable_middleware()`` (``middleware.py``, ``agents.py``): LangChain 1.x's
  ``create_agent`` given it as a middleware journals each model call and
  each tool call, as ``durable_model`` and ``durable_node(ToolNode(...))`` do
  for ``create_react_agent``; LangChain's agents package is imported when it
  is called.
- LangChain's message types are registered with the codec as soon as this
  package is imported (``messages.py``), so a step may return an
  ``AIMessage``.
"""

from __future__ import annotations

try:
    import langchain_core  # noqa: F401  (langgraph depends on it)
    import langgraph.checkpoint.base  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        f"letitloop.adapters.langgraph needs LangGraph, which is not installed ({exc}); "
        f"install it from your letitloop checkout with: pip install -e '.[langgraph]'"
    ) from exc

from .approvals import approved_step
from .identity import NODE_KEY, node_run_key
from .invocations import FRESH, install
from .messages import register_langchain_types
from .middleware import durable_middleware
from .node import durable_model, durable_node
from .resuming import resume, wait_for_answers
from .retire import delete_node_runs
from .saver import LetItLoopCheckpointSaver
from .serde import strict_serde

register_langchain_types()
install()

__all__ = [
    "FRESH",
    "NODE_KEY",
    "LetItLoopCheckpointSaver",
    "approved_step",
    "delete_node_runs",
    "durable_middleware",
    "durable_model",
    "durable_node",
    "node_run_key",
    "register_langchain_types",
    "resume",
    "strict_serde",
    "wait_for_answers",
]
