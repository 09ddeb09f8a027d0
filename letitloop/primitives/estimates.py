"""What a paid call may cost at most, reserved before it is made: ``Reservation`` and its estimate.

A call's reservation (``letitloop.reserve``, reservations.py) is given in
amounts, or estimated from the call (:class:`PaidCall`) by the budget's
``estimate=`` or by :func:`default_estimate`: the prompt's size plus the
call's ``max_tokens``, priced by the adapter's ``cost=`` function. No I/O.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec

from ..errors import LetItLoopError


def check_amounts(
    who: str, tokens: object, cost: object, *, tokens_advice: str, currency: str
) -> None:
    """Refuse a ``tokens`` that is not a whole number >= 0, or a ``cost`` that is not a finite
    number >= 0 (None is no bound): a budget's limits and a reservation's amounts alike."""
    if tokens is not None and (
        isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0
    ):
        raise LetItLoopError(
            f"{who}: tokens must be a whole number >= 0, got {tokens!r}; {tokens_advice}"
        )
    if cost is not None and (
        isinstance(cost, bool)
        or not isinstance(cost, (int, float))
        or not math.isfinite(cost)
        or cost < 0
    ):
        raise LetItLoopError(f"{who}: cost must be a finite number >= 0 ({currency}), got {cost!r}")


class Reservation(msgspec.Struct, frozen=True):
    """What one paid call may cost at most: ``tokens`` and/or ``cost``.

    A part left None is not bounded: against a budget with that limit, the
    call reserves all that remains of it (it runs alone, and if its process
    dies in it, the run has spent its budget). Give ``max_tokens`` to the
    call, or ``Budget(estimate=...)``, to reserve less.
    """

    tokens: int | None = None
    cost: float | None = None

    def __post_init__(self) -> None:
        check_amounts(
            "reserve",
            self.tokens,
            self.cost,
            tokens_advice=(
                "pass the most the call may spend (its prompt's tokens plus its max_tokens)"
            ),
            currency="in your budget's currency",
        )


class PaidCall(msgspec.Struct, frozen=True):
    """What is known of a paid call before it starts, for ``Budget(estimate=fn)``.

    ``prompt_tokens`` is the default estimate of its input (:func:`prompt_tokens`),
    ``max_tokens`` the most output it may produce (None: not bounded), ``model``
    its model's name, ``price`` the adapter's ``cost=`` function (model, input
    tokens, output tokens) -> money, or None.
    """

    prompt_tokens: int
    max_tokens: int | None = None
    model: str | None = None
    price: Any = None


def prompt_tokens(prompt: Any) -> int:
    """An upper bound of the tokens of ``prompt``: the bytes of its text (UTF-8).

    Text as it is; anything else (messages, dicts) as its JSON (or ``str``),
    without the fields that are null (a framework's message objects carry many,
    and no provider is sent them): the JSON's quotes, keys and brackets stand
    for the few tokens of framing a chat template adds per message. Every
    byte-level BPE tokenizer (OpenAI's, Llama's, Anthropic's) makes at most
    one token of each byte, so this never
    counts too few for text; it counts up to about four times too many, which
    only matters until the call's usage settles the reservation.
    """
    if prompt is None:
        return 0
    if isinstance(prompt, bytes):
        return len(prompt)
    if not isinstance(prompt, str):
        try:
            plain = msgspec.to_builtins(prompt, enc_hook=str, str_keys=True)
            return len(msgspec.json.encode(_without_nulls(plain)))
        except Exception:  # what cannot be encoded is measured as its text
            prompt = str(prompt)
    return len(prompt.encode("utf-8", "surrogatepass"))


def _without_nulls(value: Any) -> Any:
    """Plain data with the null fields of its dicts left out, at any depth."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_without_nulls(v) for v in value]
    return value


def default_estimate(call: PaidCall) -> Reservation:
    """The prompt's bytes plus ``max_tokens``, in tokens, and priced by ``call.price``;
    a part that has no bound (no ``max_tokens``, or no price for money) is None."""
    if call.max_tokens is None:
        return Reservation()
    cost = None
    if call.price is not None:
        cost = float(call.price(call.model, call.prompt_tokens, call.max_tokens))
    return Reservation(tokens=call.prompt_tokens + call.max_tokens, cost=cost)
