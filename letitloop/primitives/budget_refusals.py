"""What a budget's refusal says: ``BudgetExceededError``, its message and its details.

``budgets.Spend.error`` gathers what the run (or the runs sharing a budget,
shared_budgets.py) spent and reserved, under its lock; :func:`refusal` writes
it for people: the limits, the spend, the five costliest steps, the calls
whose reservations are not settled, which call was not made, and what to do.
"""

from __future__ import annotations

from typing import Any

from ..errors import BudgetExceededError


def tokens_text(n: int) -> str:
    return f"{n:,} tokens"


def money_text(cost: float) -> str:
    """As ``lil`` writes money (render.money): ``$0.16``, ``$0.0012`` below a cent."""
    return f"${cost:.4f}" if cost != 0 and abs(cost) < 0.01 else f"${cost:,.2f}"


def refusal(
    scope: str,
    advice: str,
    budget: dict[str, Any],
    where: tuple[str, str],
    wanted: tuple[int | None, float | None] | None,
    steps: list[tuple[str, int, float]],
    spent: tuple[int, float],
    held: list[tuple[str, int | None, float | None, str]],
    reserved: tuple[int, float],
) -> BudgetExceededError:
    """The error for step ``where[1]`` of run ``where[0]``, not started because ``scope``
    reached ``budget``; with ``wanted`` (what its call asked to reserve), its call not
    made. ``steps``: ``(key, tokens, cost)`` costliest first; ``held``: the reservations
    not settled, ``(key, tokens, cost, why)``."""
    run_id, key = where
    tokens, cost = spent
    limits = " and ".join(
        part
        for part in (
            None if budget["tokens"] is None else tokens_text(budget["tokens"]),
            None if budget["cost"] is None else money_text(budget["cost"]),
        )
        if part
    )
    shown = ", ".join(f"{k} ({tokens_text(t)}, {money_text(c)})" for k, t, c in steps[:5]) + (
        f", and {len(steps) - 5} more" if len(steps) > 5 else ""
    )
    unsettled = ""
    if held:
        calls = ", ".join(
            f"{k} ({tokens_text(t or 0)}, {money_text(c or 0.0)}, {why})"
            for k, t, c, why in held[:5]
        ) + (f", and {len(held) - 5} more" if len(held) > 5 else "")
        unsettled = (
            f", and has {tokens_text(reserved[0])} and {money_text(reserved[1])} reserved by "
            f"calls not settled: {calls}"
        )
    if wanted is None:
        stopped = f"step {key!r} was not started"
    else:
        asked = [tokens_text(wanted[0]) if wanted[0] is not None else None]
        asked.append(money_text(wanted[1]) if wanted[1] is not None else None)
        ask = " and ".join(a for a in asked if a) or "all that remains"
        stopped = f"the paid call of step {key!r} (reserving {ask}) was not made"
    return BudgetExceededError(
        f"{scope} reached its budget of {limits}: it spent "
        f"{tokens_text(tokens)} and {money_text(cost)} over all its attempts, by "
        f"{shown or 'no step'}{unsettled}; {stopped}. {advice}",
        run_id=run_id,
        key=key,
        tokens=tokens,
        cost=cost,
        budget=budget,
        steps=steps,
        reserved_tokens=reserved[0],
        reserved_cost=reserved[1],
    )
