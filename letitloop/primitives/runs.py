"""The run a primitive is handed: narrow protocols of the journal, each what one primitive reads.

A budget (``budgets.py``, ``shared_budgets.py``), a pause (``timers.py``) and
a patch (``patches.py``) are handed the journal whose run they serve, and read a few of its
attributes; they name these protocols, not ``Journal`` (``run/journal.py``),
so what each reads is written down and nothing above ``run/`` is named.
``Journal`` is each of them. Types only: no module imports this one at run
time (``if TYPE_CHECKING:``), so its Protocol classes cost no import.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from ..run.cancellation import Cancel
    from ..stores.storage_runs import RunEnds
    from ..stores.storage_spend import SpendRows
    from .budgets import Spend

T = TypeVar("T")


class SpendingAttempt(Protocol):
    """What a budget reads of its journal's attempt (``run/attempt.py``): its storage."""

    @property
    def storage(self) -> SpendRows | None: ...


class CallsInFlight(Protocol):
    """What a budget reads of its journal's steps in flight (``run/inflight.py``)."""

    @property
    def calls(self) -> Mapping[str, tuple[float, str, str]]: ...


class BudgetedRun(Protocol):
    """What a budget reads and calls of the journal whose run it bounds: the run, its clock,
    its ``Spend``, its attempt's storage, its steps in flight, and ``step`` (the budget's
    own row)."""

    @property
    def run_id(self) -> str: ...
    @property
    def goal(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def clock(self) -> Callable[[], float]: ...
    @property
    def _budget(self) -> Spend | None: ...
    @property
    def _opened(self) -> SpendingAttempt: ...
    @property
    def _flight(self) -> CallsInFlight: ...
    def step(self, name: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T: ...


class PausingRun(Protocol):
    """What a pause (``timers.py``) reads of its journal: its clock, and what a cancel's
    check reads (``CancellableRun``, run/cancellation.py: its run, cancel and storage)."""

    @property
    def run_id(self) -> str: ...
    @property
    def goal(self) -> str: ...
    @property
    def clock(self) -> Callable[[], float]: ...
    @property
    def _cancel(self) -> Cancel: ...
    def _require_storage(self) -> RunEnds: ...


class RecordedKeys(Protocol):
    """What a patch asks of its journal's attempt's keys (``identity/keys.py``)."""

    def recorded_unclaimed(self, prefix: str) -> bool: ...


class KeyedAttempt(Protocol):
    """What a patch reads of its journal's attempt (``run/attempt.py``): its keys."""

    @property
    def keys(self) -> RecordedKeys: ...


class PatchedRun(Protocol):
    """What a patch (``patches.py``) reads and calls of its journal: the run, whether it only
    replays, the attempt's keys, and ``step``/``async_step`` (its decision's row)."""

    @property
    def run_id(self) -> str: ...
    @property
    def goal(self) -> str: ...
    @property
    def replay_only(self) -> bool: ...
    @property
    def _opened(self) -> KeyedAttempt: ...
    def step(self, name: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T: ...
    async def async_step(
        self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> Any: ...
