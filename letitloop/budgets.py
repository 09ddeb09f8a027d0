"""A run's budget: the tokens and money its steps may spend, checked before each step that runs.

``Journal(goal, budget=Budget(tokens=100_000, cost=2.50))`` (or a dict of the
same keys; ``@durable(..., budget=...)``): when the journal opens, it reads what
the run has spent so far from the usage the storage holds (its steps' rows and
their tries: calls that failed, and calls cut short by a process that died;
``Storage.run_spend``), then adds each ``letitloop.usage`` report as it is
made. Before a step that would run (not one that replays: a replay spends
nothing), a run whose spend has reached either limit stops with
BudgetExceededError, naming what was spent and by which steps. A replayed
step's usage is counted once, from its row; a report is counted once, when
made. The budget in effect is recorded as a step row
``letitloop:budget:tokens=…,cost=…`` (its result the budget as JSON), which
``lil show`` reads; a run resumed with another budget records a row for it.

A journal without a budget pays one ``is not None`` test per fresh step.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from .errors import BudgetExceededError, LetItLoopError

if TYPE_CHECKING:
    from .costs import Usage
    from .journal import Journal

#: The key prefix of the row recording a run's budget (``lil show`` looks for it).
ROW_PREFIX = "letitloop:budget:"


# A frozen msgspec Struct, not a frozen dataclass: equal, hashable, immutable
# and picklable alike, but made in C, where @dataclass compiles its methods and
# imports dataclasses (and inspect) into every `import letitloop` (issue 30).
class Budget(msgspec.Struct, frozen=True):
    """At most ``tokens`` (input plus output) and/or ``cost`` (in your currency) per run."""

    tokens: int | None = None
    cost: float | None = None

    def __post_init__(self) -> None:
        if self.tokens is not None and (
            isinstance(self.tokens, bool) or not isinstance(self.tokens, int) or self.tokens < 0
        ):
            raise LetItLoopError(
                f"budget: tokens must be a whole number >= 0, got {self.tokens!r}; "
                f"pass Budget(tokens=100_000) or leave it out"
            )
        if self.cost is not None and (
            isinstance(self.cost, bool)
            or not isinstance(self.cost, (int, float))
            or not math.isfinite(self.cost)
            or self.cost < 0
        ):
            raise LetItLoopError(
                f"budget: cost must be a finite number >= 0 (in the currency your usage() "
                f"reports), got {self.cost!r}"
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


def _tokens(n: int) -> str:
    return f"{n:,} tokens"


def _money(cost: float) -> str:
    """As ``lil`` writes money (render.money): ``$0.16``, ``$0.0012`` below a cent."""
    return f"${cost:.4f}" if cost != 0 and abs(cost) < 0.01 else f"${cost:,.2f}"


def _plus(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else a + b


class Spend:
    """A journal's budget and what its run spent, per step key: the one owner of both.

    ``load`` is called by the thread that opens the journal, before any step
    runs; ``add`` by any thread or task whose step reports usage; ``over``
    and ``error`` by any. The totals are changed and read under ``lock``.
    """

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.lock = threading.Lock()
        #: key -> [input_tokens, output_tokens, cost] (None where none reported).
        self.by_key: dict[str, list[Any]] = {}
        self.tokens = 0
        self.cost = 0.0
        self.reached = False

    def load(self, rows: Iterable[tuple[str, int | None, int | None, float | None]]) -> None:
        """Start from the run's recorded spend (``Storage.run_spend``)."""
        with self.lock:
            self.by_key, self.tokens, self.cost = {}, 0, 0.0
            for key, inp, outp, cost in rows:
                self.by_key[key] = [inp, outp, cost]
                self.tokens += (inp or 0) + (outp or 0)
                self.cost += cost or 0.0
            self.reached = self._reached()

    def add(self, key: str, spent: Usage) -> None:
        """One ``usage()`` report of step ``key``'s call, made now."""
        with self.lock:
            mine = self.by_key.setdefault(key, [None, None, None])
            mine[0] = _plus(mine[0], spent.input_tokens)
            mine[1] = _plus(mine[1], spent.output_tokens)
            mine[2] = _plus(mine[2], spent.cost)
            self.tokens += (spent.input_tokens or 0) + (spent.output_tokens or 0)
            self.cost += spent.cost or 0.0
            self.reached = self._reached()

    def _reached(self) -> bool:
        b = self.budget
        return (b.tokens is not None and self.tokens >= b.tokens) or (
            b.cost is not None and self.cost >= b.cost
        )

    def error(self, j: Journal, key: str) -> BudgetExceededError:
        """The error for step ``key``, not started because the budget is reached."""
        with self.lock:
            steps = sorted(
                ((k, (v[0] or 0) + (v[1] or 0), v[2] or 0.0) for k, v in self.by_key.items()),
                key=lambda s: (-s[2], -s[1], s[0]),
            )
            tokens, cost = self.tokens, self.cost
        b = self.budget
        limits = " and ".join(
            part
            for part in (
                None if b.tokens is None else _tokens(b.tokens),
                None if b.cost is None else _money(b.cost),
            )
            if part
        )
        shown = ", ".join(f"{k} ({_tokens(t)}, {_money(c)})" for k, t, c in steps[:5]) + (
            f", and {len(steps) - 5} more" if len(steps) > 5 else ""
        )
        return BudgetExceededError(
            f"run {j.run_id} of goal {j.goal!r} reached its budget of {limits}: it spent "
            f"{_tokens(tokens)} and {_money(cost)} over all its attempts, by "
            f"{shown or 'no step'}; step {key!r} was not started. Raise the budget "
            f"(Journal(..., budget=Budget(...))) and run again to resume, or reset the run",
            run_id=j.run_id,
            key=key,
            tokens=tokens,
            cost=cost,
            budget=b.as_dict(),
            steps=steps,
        )


def record_budget(budget: dict[str, Any]) -> dict[str, Any]:
    """The budget row's function: the budget in effect, as its result."""
    return budget


def opened(j: Journal) -> None:
    """Load the run's spend into ``j``'s budget and record the budget row (``Journal.open``)."""
    spend = j._budget
    storage = j._storage
    if spend is None or storage is None:
        return
    spend.load(storage.run_spend(j.run_id))
    j.step(ROW_PREFIX + spend.budget.label(), record_budget, spend.budget.as_dict())


def check(j: Journal, key: str) -> None:
    """Raise BudgetExceededError before step ``key`` runs if ``j``'s run reached its budget."""
    spend = j._budget
    if spend is not None and spend.reached and not key.startswith(ROW_PREFIX):
        raise spend.error(j, key)
