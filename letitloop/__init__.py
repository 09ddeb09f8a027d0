"""letitloop: the SQLite of durable execution."""

from typing import TYPE_CHECKING

from .budgets import Budget
from .durable import (
    async_deprecate_patch,
    async_patched,
    async_sleep,
    async_step,
    async_wait_for,
    atomic_marker,
    deprecate_patch,
    durable,
    durable_async,
    patched,
    sleep,
    step,
    usage,
    wait_for,
)
from .errors import BudgetExceededError, LetItLoopError, RunCancelledError, WaitTimeoutError
from .estimates import PaidCall, Reservation
from .fingerprint_hooks import register_fingerprint
from .journal import Journal
from .unchecked import unchecked

if TYPE_CHECKING:
    from .control import cancel, send
    from .reservations import reserve
    from .retry import RetryPolicy
    from .scheduler import run_schedules
    from .schedules import Schedule, schedule
    from .supervisor import supervise
    from .waits import RunWaiting

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # PEP 562: the supervisor (subprocess, signals, the process tree) is loaded
    # only by programs that supervise, and send/cancel (inspection, json) only by
    # programs that call them, RetryPolicy (retry.py) by programs that retry, and
    # RunWaiting (waits.py) by programs that wait; `import letitloop` stays on
    # the step path.
    if name == "RunWaiting":
        from .waits import RunWaiting

        return RunWaiting
    if name == "RetryPolicy":
        from .retry import RetryPolicy

        return RetryPolicy
    if name == "reserve":  # programs whose budget bounds paid calls (reservations.py)
        from .reservations import reserve

        return reserve
    if name == "supervise":
        from .supervisor import supervise

        return supervise
    if name in ("schedule", "Schedule"):  # programs with schedules (cronsim, the extra)
        from . import schedules

        return getattr(schedules, name)
    if name == "run_schedules":
        from .scheduler import run_schedules

        return run_schedules
    if name in ("send", "cancel"):
        from . import control

        return getattr(control, name)
    raise AttributeError(f"module 'letitloop' has no attribute {name!r}")


__all__ = [
    "Budget",
    "BudgetExceededError",
    "Journal",
    "LetItLoopError",
    "PaidCall",
    "Reservation",
    "RetryPolicy",
    "RunCancelledError",
    "RunWaiting",
    "Schedule",
    "WaitTimeoutError",
    "__version__",
    "async_deprecate_patch",
    "async_patched",
    "async_sleep",
    "async_step",
    "async_wait_for",
    "atomic_marker",
    "cancel",
    "deprecate_patch",
    "durable",
    "durable_async",
    "patched",
    "register_fingerprint",
    "reserve",
    "run_schedules",
    "schedule",
    "send",
    "sleep",
    "step",
    "supervise",
    "unchecked",
    "usage",
    "wait_for",
]
