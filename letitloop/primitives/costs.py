"""What a step consumed: tokens and money its function reports with ``letitloop.usage(...)``.

A step's usage is four plain columns of its row (``input_tokens``,
``output_tokens``, ``cost``, ``model``), so any SQLite browser can sum them.
This module reads a report (plain numbers, or the usage object of an
OpenAI-, Anthropic-, Gemini- or LangChain-style response) into a
:class:`Usage` and adds reports up; it does no I/O. The journal keeps one
:class:`Usage` per step in flight and writes it with the step's row.

letitloop keeps no price list: ``cost`` is whatever number the caller
reports, in the caller's currency.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import LetItLoopError

#: The usage columns of a row that reported nothing.
NO_USAGE: tuple[None, None, None, None] = (None, None, None, None)

#: Input-token fields, first match wins: OpenAI Chat Completions counts cached
#: tokens inside ``prompt_tokens``; OpenAI Responses, Anthropic and LangChain's
#: ``usage_metadata`` call it ``input_tokens``; Gemini ``prompt_token_count``.
_INPUT = ("input_tokens", "prompt_tokens", "prompt_token_count")
_OUTPUT = ("output_tokens", "completion_tokens", "candidates_token_count")
#: Anthropic counts tokens written to and read from its prompt cache apart from
#: ``input_tokens``; they are input all the same, and billed.
_ANTHROPIC_CACHE = ("cache_creation_input_tokens", "cache_read_input_tokens")
#: Where a response object keeps its usage.
_CONTAINERS = ("usage", "usage_metadata")


@dataclass(slots=True)
class Usage:
    """Tokens, cost and model(s) of one step (or one try), added up over its reports."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cost: float | None = None
    #: Distinct models in the order first reported, comma-separated.
    model: str | None = None

    def add(self, other: Usage) -> None:
        """Add ``other``'s figures to these (a step that makes several calls)."""
        if other.input_tokens is not None:
            self.input_tokens = (self.input_tokens or 0) + other.input_tokens
        if other.output_tokens is not None:
            self.output_tokens = (self.output_tokens or 0) + other.output_tokens
        if other.cost is not None:
            self.cost = (self.cost or 0.0) + other.cost
        if other.model:
            mine = self.model.split(", ") if self.model else []
            for m in other.model.split(", "):
                if m not in mine:
                    mine.append(m)
            self.model = ", ".join(mine)

    def columns(self) -> tuple[int | None, int | None, float | None, str | None]:
        """``(input_tokens, output_tokens, cost, model)`` as the row stores them."""
        return (self.input_tokens, self.output_tokens, self.cost, self.model)

    @property
    def tokens(self) -> int | None:
        if self.input_tokens is None and self.output_tokens is None:
            return None
        return (self.input_tokens or 0) + (self.output_tokens or 0)


def _field(source: Any, name: str) -> Any:
    if isinstance(source, Mapping):
        return source.get(name)
    return getattr(source, name, None)


def _count(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer() and value >= 0:
            return int(value)
        raise LetItLoopError(
            f"usage(): {what} must be a whole number of tokens >= 0, got "
            f"{type(value).__name__} {value!r}; pass the count the API reported"
        )
    if value < 0:
        raise LetItLoopError(f"usage(): {what} must be >= 0, got {value}")
    return value


def _money(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:
            value = float(value)  # a Decimal
        except (TypeError, ValueError):
            raise LetItLoopError(
                f"usage(): cost must be a number (what the call cost, in your currency), "
                f"got {type(value).__name__} {value!r}"
            ) from None
    if not math.isfinite(value):
        raise LetItLoopError(f"usage(): cost must be a finite number, got {value!r}")
    return float(value)


def _from_object(source: Any) -> tuple[Usage, bool]:
    """Usage read from a response or a usage object/dict; and whether any field was found."""
    model = _field(source, "model")
    for name in _CONTAINERS:
        inner = _field(source, name)
        if inner is not None and not isinstance(inner, (int, float, str)):
            source = inner
            break
    found = False
    u = Usage(model=model if isinstance(model, str) and model else None)
    for name in _INPUT:
        value = _field(source, name)
        if value is not None:
            u.input_tokens, found = _count(value, name), True
            break
    for name in _OUTPUT:
        value = _field(source, name)
        if value is not None:
            u.output_tokens, found = _count(value, name), True
            break
    for name in _ANTHROPIC_CACHE:
        extra = _count(_field(source, name), name)
        if extra:
            u.input_tokens = (u.input_tokens or 0) + extra
    return u, found


def reported(
    source: Any = None,
    *,
    input_tokens: Any = None,
    output_tokens: Any = None,
    cost: Any = None,
    model: Any = None,
) -> Usage:
    """One report as a :class:`Usage`: from ``source``, then the keyword arguments over it.

    ``source`` may be a response (anything with a ``usage`` or
    ``usage_metadata`` attribute or key, and perhaps a ``model``), or a usage
    object or dict itself: OpenAI (``prompt_tokens``/``completion_tokens``, or
    ``input_tokens``/``output_tokens``), Anthropic (``input_tokens``,
    ``output_tokens``, plus its cache reads and writes, counted as input),
    Gemini (``prompt_token_count``/``candidates_token_count``) and LangChain's
    ``usage_metadata``. A keyword argument given replaces what ``source`` said.
    Raises LetItLoopError for a negative or non-whole token count, a cost that
    is not a finite number, or a ``source`` with none of those fields.
    """
    if source is None:
        u = Usage()
    else:
        u, found = _from_object(source)
        if not found:
            raise LetItLoopError(
                f"usage(): expected a response or usage object with token counts "
                f"(input_tokens/output_tokens, prompt_tokens/completion_tokens), got "
                f"{type(source).__name__} without them; pass the counts as keywords: "
                f"usage(input_tokens=..., output_tokens=..., cost=..., model=...)"
            )
    if input_tokens is not None:
        u.input_tokens = _count(input_tokens, "input_tokens")
    if output_tokens is not None:
        u.output_tokens = _count(output_tokens, "output_tokens")
    if cost is not None:
        u.cost = _money(cost)
    if model is not None:
        if not isinstance(model, str):
            raise LetItLoopError(
                f"usage(): model must be text such as 'gpt-4o', got {type(model).__name__}"
            )
        u.model = model or None
    return u


def total(rows: Any) -> Usage:
    """The sum of ``(input_tokens, output_tokens, cost, model)`` tuples (None where none)."""
    out = Usage()
    for inp, outp, cost, model in rows:
        out.add(Usage(inp, outp, cost, model))
    return out
