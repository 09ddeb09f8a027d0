"""What every adapter's model call reserves before it is made, when its run has a budget.

Each adapter's model-call step calls :func:`reserve_call` just before the
framework's model call, and reports the call's usage after it: the report
settles the reservation (letitloop/reservations.py). The prompt is measured
only when the run has a budget: without one this is one context-variable
read and one attribute test.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from letitloop.estimates import Reservation
from letitloop.reservations import reserve
from letitloop.steps import parent_step

#: The names frameworks give the most output a call may produce, first match wins.
MAX_TOKENS_KEYS = ("max_tokens", "max_completion_tokens", "max_output_tokens", "max_new_tokens")


def max_tokens_of(*sources: Any) -> int | None:
    """The first output limit found in ``sources`` (dicts or objects: call arguments, model
    settings, a model's own settings), None when none sets one."""
    for source in sources:
        if source is None:
            continue
        for name in MAX_TOKENS_KEYS:
            found = source.get(name) if isinstance(source, Mapping) else None
            value = found if isinstance(source, Mapping) else getattr(source, name, None)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                return value
    return None


def reserve_call(
    prompt: Any,
    max_tokens: Callable[[], int | None],
    model: str | None,
    price: Callable[[str | None, int, int], float] | None,
) -> Reservation | None:
    """Reserve the model call about to be made on the journal of the step running it
    (``letitloop.reserve``); None, and nothing measured, when its run has no budget.

    ``max_tokens`` is asked only then. Raises BudgetExceededError when the call
    does not fit in what remains of the budget: the call must not be made.
    """
    running = parent_step.get()
    if running is None or running[0]._budget is None:
        return None
    return reserve(prompt, max_tokens=max_tokens(), model=model, price=price)
