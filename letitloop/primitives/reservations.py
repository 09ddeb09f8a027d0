"""A paid call's reservation: committed before the call, settled by its usage, kept if cut short.

``letitloop.reserve(...)`` inside a step's function, before a paid call
(every adapter's model call makes one), reserves what the call may cost:
the journal's :class:`~letitloop.primitives.budgets.Spend` checks that what the run
spent, plus what is reserved and not settled, plus this reservation stays
within the budget (else BudgetExceededError, and the call is not made), and
the storage commits the reservation as a row of ``reservations`` before
``reserve`` returns. The call's ``usage()`` report settles it: the real
usage replaces it, in the same commit as the report (``budgets.settled``). A
step whose function returns or raises releases what it left unsettled
(``budgets.release``). A reservation whose process died during its call, or whose
call was cancelled, is never settled: every later attempt counts it as
spent, so the provider's bill stays within the budget however often the run
is killed. Without a budget, ``reserve`` does nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import LetItLoopError, NoJournalError
from ..run.steps import parent_step
from .clock import utc_iso
from .estimates import PaidCall, Reservation, default_estimate, prompt_tokens

if TYPE_CHECKING:
    pass


def reserve(
    prompt: Any = None,
    /,
    *,
    max_tokens: int | None = None,
    model: str | None = None,
    price: Callable[[str | None, int, int], float] | None = None,
    tokens: int | None = None,
    cost: float | None = None,
) -> Reservation | None:
    """Reserve what the paid call about to be made may cost, before making it.

    Call it inside a step's function, just before the call, and report the
    call's usage with ``usage()`` after it: the report settles the
    reservation. ``tokens=``/``cost=`` reserve those amounts; else the
    journal's ``Budget(estimate=...)`` decides, else the default estimate:
    the prompt's size (its UTF-8 bytes, an upper bound of its tokens) plus
    ``max_tokens``, priced by ``price(model, input_tokens, output_tokens)``
    when given. A part with no bound (no ``max_tokens``; no ``price`` for a
    budget in money) reserves all that remains of that limit. Returns the
    reservation made, None when the journal has no budget (nothing is
    reserved). Raises BudgetExceededError when spent plus reserved plus this
    reservation would pass the budget (nothing reserved: do not make the
    call), NoJournalError outside a step's function, LetItLoopError for
    amounts that are not amounts.
    """
    parent = parent_step.get()
    if parent is None:
        raise NoJournalError(
            "reserve() was called outside a step's function; call it inside the function a "
            "step runs, just before its paid call (j.step('ask', ask_model, ...))"
        )
    j, key = parent
    spend = j._budget
    if spend is None:
        return None
    counted = spend.key_of(j, key)
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 0
    ):
        raise LetItLoopError(
            f"reserve(): max_tokens must be a whole number >= 0 or None, got {max_tokens!r}"
        )
    if tokens is not None or cost is not None:
        asked = Reservation(tokens=tokens, cost=cost)
    elif isinstance(spend.budget.estimate, Reservation):
        asked = spend.budget.estimate
    else:
        estimate = spend.budget.estimate or default_estimate
        asked = estimate(PaidCall(prompt_tokens(prompt), max_tokens, model, price))
        if not isinstance(asked, Reservation):
            raise LetItLoopError(
                f"budget: estimate {estimate!r} returned {type(asked).__name__} {asked!r}; "
                f"expected Reservation(tokens=..., cost=...)"
            )
    taken = spend.take(counted, asked.tokens, asked.cost)
    if taken is None:
        raise spend.error(j, counted, (asked.tokens, asked.cost))
    call, reserved_tokens, reserved_cost = taken
    storage = j._opened.storage
    try:
        if storage is None:
            raise LetItLoopError(f"reserve(): the journal of run {j.run_id} is closed")
        at = utc_iso(j.clock())
        storage.reserve((j.run_id, call, key, j.attempt, at, reserved_tokens, reserved_cost, model))
    except BaseException:
        spend.cancel(counted, call)  # not committed: the call must not be made
        raise
    return Reservation(tokens=reserved_tokens, cost=reserved_cost)
