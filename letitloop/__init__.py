"""letitloop: the SQLite of durable execution."""

from typing import TYPE_CHECKING

from .durable import async_step, atomic_marker, durable, durable_async, step
from .errors import LetItLoopError
from .fingerprint import unchecked
from .journal import Journal

if TYPE_CHECKING:
    from .supervisor import supervise

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # PEP 562: the supervisor (subprocess, signals, the process tree) is loaded
    # only by programs that supervise; `import letitloop` stays on the step path.
    if name == "supervise":
        from .supervisor import supervise

        return supervise
    raise AttributeError(f"module 'letitloop' has no attribute {name!r}")


__all__ = [
    "Journal",
    "LetItLoopError",
    "__version__",
    "async_step",
    "atomic_marker",
    "durable",
    "durable_async",
    "step",
    "supervise",
    "unchecked",
]
