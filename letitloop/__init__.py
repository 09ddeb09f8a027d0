"""letitloop: the SQLite of durable execution."""

from typing import TYPE_CHECKING

from .errors import (
    BudgetExceededError,
    LetItLoopError,
    RateLimited,
    RunCancelledError,
    WaitTimeoutError,
)
from .identity.fingerprint_hooks import register_fingerprint
from .identity.unchecked import unchecked
from .identity.versions import LIBRARY_VERSION as __version__
from .primitives.budgets import Budget
from .primitives.estimates import PaidCall, Reservation
from .run.durable import (
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
from .run.journal import Journal

if TYPE_CHECKING:
    from .primitives.reservations import reserve
    from .primitives.waits import RunWaiting
    from .queueing.queue_worker import Worker
    from .queueing.queues import Queue
    from .run.retry import RetryPolicy
    from .scheduling.scheduler import run_schedules
    from .scheduling.schedules import Schedule, schedule
    from .supervision.control import cancel, send
    from .supervision.supervisor import supervise


def __getattr__(name: str) -> object:
    # PEP 562: the supervisor (subprocess, signals, the process tree) is loaded
    # only by programs that supervise, and send/cancel (inspection, json) only by
    # programs that call them, RetryPolicy (retry.py) by programs that retry, and
    # RunWaiting (waits.py) by programs that wait; `import letitloop` stays on
    # the step path.
    if name == "RunWaiting":
        from .primitives.waits import RunWaiting

        return RunWaiting
    if name == "RetryPolicy":
        from .run.retry import RetryPolicy

        return RetryPolicy
    if name == "reserve":  # programs whose budget bounds paid calls (reservations.py)
        from .primitives.reservations import reserve

        return reserve
    if name == "supervise":
        from .supervision.supervisor import supervise

        return supervise
    if name == "Queue":  # programs with work queues (queues.py, queue_worker.py)
        from .queueing.queues import Queue

        return Queue
    if name == "Worker":
        from .queueing.queue_worker import Worker

        return Worker
    if name in ("schedule", "Schedule"):  # programs with schedules (cronsim, the extra)
        from .scheduling import schedules

        return getattr(schedules, name)
    if name == "run_schedules":
        from .scheduling.scheduler import run_schedules

        return run_schedules
    if name in ("send", "cancel"):
        from .supervision import control

        return getattr(control, name)
    raise AttributeError(f"module 'letitloop' has no attribute {name!r}")


__all__ = [
    "Budget",
    "BudgetExceededError",
    "Journal",
    "LetItLoopError",
    "PaidCall",
    "Queue",
    "RateLimited",
    "Reservation",
    "RetryPolicy",
    "RunCancelledError",
    "RunWaiting",
    "Schedule",
    "WaitTimeoutError",
    "Worker",
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
