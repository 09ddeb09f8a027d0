"""The run a primitive is handed: narrow protocols of the journal, each what one primitive reads.

A budget (``budgets.py``, ``shared_budgets.py``), a pause (``timers.py``), a
patch (``patches.py``), a sleep and a wait (``sleeps.py``, ``waits.py``) and a
marker (``markers.py``) are handed the journal whose run they serve, and read a few of its
attributes; they name these protocols, not ``Journal`` (``run/journal.py``),
so what each reads is written down and nothing above ``run/`` is named.
``Journal`` is each of them. Types only: no module imports this one at run
time (``if TYPE_CHECKING:``), so its Protocol classes cost no import.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..stores.storage_pauses import PauseStore
from ..stores.storage_runs import RunEnds

if TYPE_CHECKING:
    from pathlib import Path

    from ..codec import CodecRegistry
    from ..errors import StepMismatchError
    from ..identity.keys import Recorded
    from ..integrity.chains import SealedRows
    from ..integrity.encryption import Cipher
    from ..run.cancellation import Cancel
    from ..run.otel import AttemptSpans
    from ..stores.storage_holding import Holding
    from ..stores.storage_markers import MarkerStore
    from ..stores.storage_seals import SealRows
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


class PausedKeys(Protocol):
    """What a sleep or a wait asks of its journal's attempt's keys (``identity/keys.py``)."""

    def release(self, name: str, owner: object) -> None: ...


class PausedAttempt(Protocol):
    """What a sleep or a wait reads of its journal's attempt (``run/attempt.py``): its keys,
    and a sealed run's chain and the storage its entries are read from (sealcheck.py)."""

    @property
    def keys(self) -> PausedKeys: ...
    @property
    def sealed(self) -> SealedRows | None: ...
    @property
    def storage(self) -> SealRows | None: ...


class PausedStorage(PauseStore, RunEnds, Protocol):
    """A pause's rows and seal (``PauseStore``), and the run's cancel request (``RunEnds``)."""


class PausedRun(Protocol):
    """What a sleep or a wait (``sleeps.py``, ``waits.py``) reads and calls of its journal:
    the run and attempt, its clock and settings, its cancel and spans, its attempt's keys
    and seal, its store, and what keys and replays a step (``run/steps.py``, ``run/replay.py``:
    a pause is keyed and replayed as a step is); a wait records what it expects as a step."""

    @property
    def run_id(self) -> str: ...
    @property
    def goal(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def path(self) -> Path: ...
    @property
    def clock(self) -> Callable[[], float]: ...
    @property
    def replay_only(self) -> bool: ...
    @property
    def registry(self) -> CodecRegistry | None: ...
    @property
    def _cipher(self) -> Cipher | None: ...
    @property
    def _cancel(self) -> Cancel: ...
    @property
    def _trace(self) -> AttemptSpans | None: ...
    @property
    def _opened(self) -> PausedAttempt: ...
    def _require_open(self) -> Holding: ...
    def _require_storage(self) -> PausedStorage: ...
    def _owner(self) -> object: ...
    def _key_for(
        self, name: str, fp: str, owner: object
    ) -> tuple[str, str, Recorded | None, Recorded | None]: ...
    def _mismatch(
        self,
        key: str,
        fn_name: str,
        fp: str,
        recorded: Recorded,
        call: tuple[tuple[Any, ...], dict[str, Any]] | None = None,
    ) -> StepMismatchError: ...
    def _replay(self, key: str, fn_name: str, recorded: Recorded) -> Any: ...
    def step(self, name: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T: ...
    async def async_step(
        self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> Any: ...


class Opened(Protocol):
    """What a marker reads of the process that opened its journal (``run/ownership.py``)."""

    @property
    def disowned(self) -> bool: ...


class SealedAttempt(Protocol):
    """What a marker reads of its journal's attempt (``run/attempt.py``): a sealed run's chain
    and the storage its entries are read from (sealcheck.py)."""

    @property
    def sealed(self) -> SealedRows | None: ...
    @property
    def storage(self) -> SealRows | None: ...


class MarkedRun(Protocol):
    """What a marker (``markers.py``) reads and calls of its journal: the run and attempt,
    its clock and settings, its spans, whether this process opened it, its attempt's seal,
    and its store (the marker's lock) and storage (the marker's row)."""

    @property
    def run_id(self) -> str: ...
    @property
    def goal(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def path(self) -> Path: ...
    @property
    def clock(self) -> Callable[[], float]: ...
    @property
    def replay_only(self) -> bool: ...
    @property
    def _cipher(self) -> Cipher | None: ...
    @property
    def _trace(self) -> AttemptSpans | None: ...
    @property
    def _opener(self) -> Opened: ...
    @property
    def _opened(self) -> SealedAttempt: ...
    def _require_open(self) -> Holding: ...
    def _require_storage(self) -> MarkerStore: ...
