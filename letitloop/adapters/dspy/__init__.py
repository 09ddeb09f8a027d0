"""DSPy programs made durable by the journal: ``JournaledLM`` and ``journaled_tool``.

Install with ``pip install -e '.[dspy]'`` from a checkout of this repository;
the core package never imports this package.

- ``JournaledLM`` (``lm.py``): wraps any DSPy LM so that each call, inside an
  open journal, is a step whose outputs replay after a kill; its tokens are
  recorded once through ``letitloop.usage``.
- ``journaled_tool`` (``tools.py``): a ``dspy.Tool`` whose calls are steps.
"""

from __future__ import annotations

try:
    import dspy  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        f"letitloop.adapters.dspy needs DSPy, which is not installed ({exc}); "
        "install the extra: pip install -e '.[dspy]'"
    ) from exc

from .lm import JournaledLM
from .program import durable_program
from .tools import journaled_tool

__all__ = ["JournaledLM", "durable_program", "journaled_tool"]
