"""letitloop: the SQLite of durable execution."""

from .durable import async_step, atomic_marker, durable, durable_async, step
from .errors import LetItLoopError
from .fingerprint import unchecked
from .journal import Journal
from .supervisor import supervise

__version__ = "0.1.0"

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
