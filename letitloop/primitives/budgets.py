"""A run's budget: the tokens and money its steps may spend, checked before each step that runs.

``Journal(goal, budget=Budget(tokens=100_000, cost=2.50))`` (or a dict of the
same keys; ``@durable(..., budget=...)``): when the journal opens, it reads what
the run has spent so far from the usage the storage holds (its steps' rows and
their tries: calls that failed, and calls cut short by a process that died;
``SpendRows.run_spend``), then adds each ``letitloop.usage`` report as it is
made. Before a step that would run (not one that replays: a replay spends
nothing), a run whose spend has reached either limit stops with
BudgetExceededError, naming what was spent and by which steps.

A paid call reserves what it may cost before it starts
(``letitloop.reserve``, reservations.py; every adapter's model call does):
the reservation is committed as a row of ``reservations`` and counted as
spent until the call's ``usage()`` report settles it (replaces it with the
real usage). A reservation its process did not survive is never settled and
stays counted on every later attempt, so the provider's bill, not only the
record, stays within the budget. :class:`Spend` holds both. A replayed
step's usage is counted once, from its row; a report is counted once, when
made. The budget in effect is recorded as a step row
``letitloop:budget:tokens=…,cost=…`` (its result the budget as JSON), which
``lil show`` reads; a run resumed with another budget records a row for it.
A journal without a budget pays one ``is not None`` test per fresh step."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from ..errors import BudgetExceededError, LetItLoopError
from ..identity.step_names import named
from .budget_refusals import refusal
from .clock import utc_iso
from .estimates import Reservation, check_amounts

if TYPE_CHECKING:
    from ..stores.storage_spend import SpendRows
    from .costs import Usage
    from .runs import BudgetedRun

#: The key prefix of the row recording a run's budget (``lil show`` looks for it).
ROW_PREFIX = "letitloop:budget:"


# A frozen msgspec Struct, not a frozen dataclass: equal, hashable, immutable
# and picklable alike, but made in C, where @dataclass compiles its methods and
# imports dataclasses (and inspect) into every `import letitloop` (issue 30).
class Budget(msgspec.Struct, frozen=True):
    """At most ``tokens`` (input plus output) and/or ``cost`` (in your currency) per run."""

    tokens: int | None = None
    cost: float | None = None
    #: What a paid call reserves before it starts, when the caller of ``reserve()``
    #: gives no amounts: None (the default estimate, see :func:`default_estimate`), a
    #: fixed :class:`Reservation` per call, or a function of the :class:`PaidCall`
    #: that returns one. Not recorded: only ``tokens`` and ``cost`` are.
    estimate: Any = None

    def __post_init__(self) -> None:
        if self.estimate is not None and not (
            isinstance(self.estimate, Reservation) or callable(self.estimate)
        ):
            raise LetItLoopError(
                f"budget: estimate must be a Reservation(tokens=..., cost=...) reserved for "
                f"every paid call, or a function of the PaidCall that returns one, got "
                f"{type(self.estimate).__name__} {self.estimate!r}"
            )
        check_amounts(
            "budget",
            self.tokens,
            self.cost,
            tokens_advice="pass Budget(tokens=100_000) or leave it out",
            currency="in the currency your usage() reports",
        )
        if self.tokens is None and self.cost is None:
            raise LetItLoopError(
                "budget: expected tokens=, cost= or both, got neither; "
                "pass Budget(tokens=..., cost=...), or no budget at all"
            )

    def as_dict(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "cost": self.cost}

    def label(self) -> str:
        """``tokens=1000,cost=0.5`` (the parts set), the tail of its row's key."""
        return ",".join(f"{k}={v}" for k, v in self.as_dict().items() if v is not None)


def spend_for(value: Budget | Mapping[str, Any] | Spend) -> Spend:
    """What a journal opened with ``budget=value`` counts against: a Spend of its own, or
    ``value`` itself when it is a Spend shared by several runs (shared_budgets.py)."""
    return value if isinstance(value, Spend) else Spend(budget_of(value))


def budget_of(value: Budget | Mapping[str, Any]) -> Budget:
    """``value`` as a Budget: a Budget, or a dict with ``tokens`` and/or ``cost``."""
    if isinstance(value, Budget):
        return value
    if isinstance(value, Mapping) and set(value) <= {"tokens", "cost"}:
        return Budget(tokens=value.get("tokens"), cost=value.get("cost"))
    raise LetItLoopError(
        f"budget: expected Budget(tokens=..., cost=...) or a dict with the keys 'tokens' "
        f"and/or 'cost', got {value!r}"
    )


def _plus(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else a + b


#: Rounding slack when money reserved is compared with a budget in money.
_CENT_SLACK = 1e-9


class Spend:
    """A journal's budget and what its run spent and reserved, per step key: the one owner.

    ``load`` is called by the thread that opens the journal, before any step
    runs; ``add``, ``take`` and ``release`` by any thread or task whose step
    reports usage or reserves; ``over`` and ``error`` by any. Everything is
    changed and read under ``lock``.

    Reserved spend is ``left`` (reservations of earlier attempts never
    settled: their calls were cut short by a dead process, and stay counted)
    plus ``open`` (this attempt's reservations of calls in flight).
    """

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.lock = threading.Lock()
        #: key -> [input_tokens, output_tokens, cost] (None where none reported).
        self.by_key: dict[str, list[Any]] = {}
        self.tokens = 0
        self.cost = 0.0
        #: Tokens and money reserved and not settled (left and open).
        self.reserved_tokens = 0
        self.reserved_cost = 0.0
        #: Earlier attempts' reservations never settled: (key, call, tokens, cost).
        self.left: list[tuple[str, int, int | None, float | None]] = []
        #: This attempt's reservations in flight: key -> [[call, tokens, cost], ...], oldest first.
        self.open: dict[str, list[list[Any]]] = {}
        #: The run's last reservation's number (each is numbered 1, 2, … in its run).
        self.calls = 0
        self.reached = False

    def load(
        self,
        rows: Iterable[tuple[str, int | None, int | None, float | None]],
        reservations: tuple[int, list[tuple[str, int, int | None, float | None]]] = (0, []),
    ) -> None:
        """Start from the run's recorded spend (``SpendRows.run_spend``) and its reservations
        never settled (``SpendRows.run_reservations``)."""
        with self.lock:
            self.by_key, self.tokens, self.cost = {}, 0, 0.0
            for key, inp, outp, cost in rows:
                self.by_key[key] = [inp, outp, cost]
                self.tokens += (inp or 0) + (outp or 0)
                self.cost += cost or 0.0
            self.calls, self.left, self.open = reservations[0], list(reservations[1]), {}
            self.reserved_tokens = sum(t or 0 for _, _, t, _ in self.left)
            self.reserved_cost = sum(c or 0.0 for _, _, _, c in self.left)
            self.reached = self._reached()

    def add(self, key: str, spent: Usage) -> int | None:
        """One ``usage()`` report of step ``key``'s call, made now; it settles the step's
        oldest reservation in flight, whose number is returned (None: it had none)."""
        with self.lock:
            mine = self.by_key.setdefault(key, [None, None, None])
            mine[0] = _plus(mine[0], spent.input_tokens)
            mine[1] = _plus(mine[1], spent.output_tokens)
            mine[2] = _plus(mine[2], spent.cost)
            self.tokens += (spent.input_tokens or 0) + (spent.output_tokens or 0)
            self.cost += spent.cost or 0.0
            settled = None
            pending = self.open.get(key)
            if pending:
                settled = self._drop(key, pending, 1)[0]
            self.reached = self._reached()
            return settled

    def take(
        self, key: str, tokens: int | None, cost: float | None
    ) -> tuple[int, int | None, float | None] | None:
        """Reserve ``tokens`` and ``cost`` for a call of step ``key``: ``(number, tokens,
        cost)`` as reserved (a part None against a limit of that kind: all that remains
        of it), or None when spent plus reserved plus this would pass the budget."""
        b = self.budget
        with self.lock:
            if b.tokens is not None:
                used = self.tokens + self.reserved_tokens
                if tokens is None:
                    tokens = b.tokens - used
                if used >= b.tokens or used + tokens > b.tokens:
                    return None
            if b.cost is not None:
                used_cost = self.cost + self.reserved_cost
                if cost is None:
                    cost = b.cost - used_cost
                if used_cost >= b.cost or used_cost + cost > b.cost + _CENT_SLACK:
                    return None
            self.calls += 1
            self.open.setdefault(key, []).append([self.calls, tokens, cost])
            self.reserved_tokens += tokens or 0
            self.reserved_cost += cost or 0.0
            self.reached = self._reached()
            return self.calls, tokens, cost

    def release(self, key: str) -> list[int]:
        """Step ``key``'s call is over: its reservations still in flight are dropped (its
        usage, if it reported any, is counted); their numbers."""
        with self.lock:
            pending = self.open.get(key)
            if not pending:
                return []
            calls = self._drop(key, pending, len(pending))
            self.reached = self._reached()
            return calls

    def cancel(self, key: str, call: int) -> None:
        """Reservation ``call`` of ``key`` was not committed: forget it (its call is not made)."""
        with self.lock:
            pending = self.open.get(key, [])
            for i, (number, tokens, cost) in enumerate(pending):
                if number == call:
                    del pending[i]
                    self.reserved_tokens -= tokens or 0
                    self.reserved_cost -= cost or 0.0
                    break
            if not pending:
                self.open.pop(key, None)
            self.reached = self._reached()

    def keep(self, key: str) -> None:
        """Step ``key``'s calls were cut short (cancelled): their reservations stay counted,
        as those of a dead process (``left``)."""
        with self.lock:
            for call, tokens, cost in self.open.pop(key, []):
                self.left.append((key, call, tokens, cost))

    def _drop(self, key: str, pending: list[list[Any]], n: int) -> list[int]:
        """Under ``lock``: forget the first ``n`` reservations in flight of ``key``."""
        gone, pending[:] = pending[:n], pending[n:]
        if not pending:
            del self.open[key]
        for _, tokens, cost in gone:
            self.reserved_tokens -= tokens or 0
            self.reserved_cost -= cost or 0.0
        return [call for call, _, _ in gone]

    # -- what a budget shared by several runs (shared_budgets.py) does otherwise ---------

    def key_of(self, j: BudgetedRun, key: str) -> str:
        """The key under which step ``key`` of ``j``'s run is counted."""
        return key

    def opened(self, j: BudgetedRun, rows: Any, reservations: Any) -> None:
        """``j``'s run was opened with this budget: start from its recorded spend (``load``)."""
        self.load(rows, reservations)

    def step_of(self, key: str) -> str:
        """Step ``key`` as its error names it (``key_of`` undone)."""
        return key

    def scope(self, j: BudgetedRun) -> str:
        """What the budget bounds, as its error names it."""
        return f"run {j.run_id} of goal {j.goal!r}"

    def row(self) -> tuple[str, dict[str, Any]]:
        """The budget row's key after ``letitloop:budget:``, and its result."""
        return self.budget.label(), self.budget.as_dict()

    #: What its error advises.
    advice = "Raise the budget (Journal(..., budget=Budget(...))) and run again to resume, or reset the run"  # fmt: skip  # noqa: E501

    def _reached(self) -> bool:
        b = self.budget
        return (b.tokens is not None and self.tokens + self.reserved_tokens >= b.tokens) or (
            b.cost is not None and self.cost + self.reserved_cost >= b.cost
        )

    def error(
        self, j: BudgetedRun, key: str, wanted: tuple[int | None, float | None] | None = None
    ) -> BudgetExceededError:
        """The error for step ``key``, not started because the budget is reached; with
        ``wanted`` (the tokens and cost its call asked to reserve), its call not made."""
        with self.lock:
            steps = sorted(
                ((k, (v[0] or 0) + (v[1] or 0), v[2] or 0.0) for k, v in self.by_key.items()),
                key=lambda s: (-s[2], -s[1], s[0]),
            )
            tokens, cost = self.tokens, self.cost
            held = [(k, t, c, "cut short by a dead process") for k, _, t, c in self.left]
            held += [(k, t, c, "in flight") for k, p in self.open.items() for _, t, c in p]
            reserved_tokens, reserved_cost = self.reserved_tokens, self.reserved_cost
        return refusal(
            self.scope(j),
            self.advice,
            self.budget.as_dict(),
            (j.run_id, self.step_of(key)),
            wanted,
            steps,
            (tokens, cost),
            held,
            (reserved_tokens, reserved_cost),
        )


@named("letitloop:budget")
def record_budget(budget: dict[str, Any]) -> dict[str, Any]:
    """The budget row's function: the budget in effect, as its result."""
    return budget


def carried(
    storage: SpendRows, run_id: str
) -> tuple[list[tuple[str, int | None, int | None, float | None]], list[Any]]:
    """What a run made by ``lil fork`` carries from its source: the source's spend
    (``run_spend``) and reservations never settled (``run_reservations``) of the steps
    before the fork point, and what the source itself carried; nothing for another run."""
    point = storage.fork_point(run_id)
    if point is None:
        return [], []
    source, keys = point
    before = set(keys)
    rows, left = carried(storage, source)
    rows += storage.run_spend(source)
    left += storage.run_reservations(source)[1]
    return [r for r in rows if r[0] in before], [r for r in left if r[0] in before]


def opened(j: BudgetedRun) -> None:
    """Load the run's spend into ``j``'s budget and record the budget row (``Journal.open``);
    a fork's counts its history's (:func:`carried`): the budget bounds that bill too."""
    spend = j._budget
    storage = j._opened.storage
    if spend is None or storage is None:
        return
    rows, left = carried(storage, j.run_id)
    last, held = storage.run_reservations(j.run_id)
    spend.opened(j, [*storage.run_spend(j.run_id), *rows], (last, [*held, *left]))
    label, row = spend.row()
    j.step(ROW_PREFIX + label, record_budget, row)


def settled(j: BudgetedRun, key: str, spent: Usage, total: Usage) -> bool:
    """Count the ``usage()`` report ``spent`` of step ``key``; when it settles one of the
    call's reservations, commit that with ``total`` (all the call reported so far) on its
    row, in one transaction, and return True. False: ``durable.keep_reported`` commits it."""
    spend = j._budget
    if spend is None:
        return False
    call = spend.add(spend.key_of(j, key), spent)
    storage = j._opened.storage
    if call is None or storage is None:
        return False
    row = None
    flight = j._flight.calls.get(key)
    if flight is not None:
        started, fn_name, fp = flight
        row = (j.run_id, key, fn_name, utc_iso(started), j.attempt, fp, *total.columns())
    at = utc_iso(j.clock())
    storage.settle(j.run_id, [call], at, (spent.tokens, spent.cost), row)
    return True


def release(j: BudgetedRun, key: str, exc: BaseException | None) -> None:
    """Step ``key``'s function returned (``exc`` None) or raised ``exc``: settle what its
    calls reserved and did not report, with no usage. A call cut short by a cancellation
    (an exception that is not an ``Exception``) keeps its reservation, counted."""
    spend = j._budget
    if spend is None:
        return
    if exc is not None and not isinstance(exc, Exception):
        spend.keep(spend.key_of(j, key))
        return
    calls = spend.release(spend.key_of(j, key))
    storage = j._opened.storage
    if calls and storage is not None:
        # Left unsettled in the file when this fails: counted again, never too little.
        with contextlib.suppress(LetItLoopError):
            storage.settle(j.run_id, calls, utc_iso(j.clock()), (None, None), None)


def check(j: BudgetedRun, key: str) -> None:
    """Raise BudgetExceededError before step ``key`` runs if ``j``'s run reached its budget."""
    spend = j._budget
    if spend is not None and spend.reached and not key.startswith(ROW_PREFIX):
        raise spend.error(j, spend.key_of(j, key))
