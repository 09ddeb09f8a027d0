"""letitloop: the SQLite of durable execution."""

from .durable import atomic_marker, durable, step
from .errors import LetItLoopError
from .journal import Journal
from .supervisor import supervise

__version__ = "0.1.0"

__all__ = [
    "Journal",
    "LetItLoopError",
    "__version__",
    "atomic_marker",
    "durable",
    "step",
    "supervise",
]
