"""``unchecked(x)``: a part of a call left out of its identity, and taken off before the call.

The fingerprint (``canon.py``) counts an ``Unchecked`` as a fixed
placeholder; :func:`unwrap` replaces each one by its value, at any depth of
the containers and objects it rebuilds (:func:`unwrappable`), so the
function receives exactly what it would have without ``unchecked()``.
"""

from __future__ import annotations

import sys
from typing import Any, Generic, TypeVar

import msgspec

T = TypeVar("T")


class Unchecked(Generic[T]):
    """An argument left out of the step's fingerprint; see :func:`unchecked`."""

    __slots__ = ("value",)

    def __init__(self, value: T) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"unchecked({self.value!r})"


def unchecked(value: T) -> T:
    """Pass ``value`` to a step's function, but leave it out of the call's identity.

    ``step("ask", llm, unchecked(f"today is {date.today()}"), question)``: the
    first argument may differ on a later attempt and the recorded result still
    replays; ``question`` must still match. It works at any depth
    (``[{"role": "system", "content": unchecked(prompt)}]``): the function
    receives the value without the wrapper. Typed as returning ``T`` so that
    type checkers accept it in place of the value.
    """
    return Unchecked(value)  # type: ignore[return-value]


def unwrappable(t: type) -> bool:
    """Whether :func:`unwrap` rebuilds a value of ``t`` with other field values."""
    if hasattr(t, "__dataclass_fields__") or issubclass(t, msgspec.Struct):
        return True
    if issubclass(t, tuple) and hasattr(t, "_fields") and hasattr(t, "_replace"):
        return True
    pydantic = sys.modules.get("pydantic")
    base = getattr(pydantic, "BaseModel", None) if pydantic is not None else None
    return base is not None and issubclass(t, base)


def unwrap(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``args`` and ``kwargs`` with every ``unchecked(x)`` replaced by ``x``, at any depth.

    A container or object inside them is copied only where something inside
    it was unwrapped; the rest is passed as it is. The tuple and the dict are
    new ones (a call spreads them: ``fn(*args, **kwargs)``), so that a step
    identifies a call that holds ``unchecked()`` at the cost of one pass.
    """
    new_args = tuple([_unwrap(a) for a in args])
    if kwargs:
        kwargs = {k: _unwrap(v) for k, v in kwargs.items()}
    return new_args, kwargs


#: Types that hold no other value (an unchecked() cannot hide in them).
_LEAVES = frozenset({str, int, float, bool, type(None), bytes})


def _unwrap(v: Any) -> Any:
    t = type(v)
    if t is Unchecked:
        return _unwrap(v.value)
    if t is str or t is int or t is float or t is bool or v is None or t is bytes:
        return v
    if t is list or t is tuple or t is set or t is frozenset:
        if len(v) > 8 and set(map(type, v)) <= _LEAVES:
            return v  # (checked in C: a long list of numbers or text)
        items = [_unwrap(x) for x in v]
        if all(a is b for a, b in zip(items, v, strict=True)):
            return v
        return items if t is list else t(items)
    if t is dict:
        if len(v) > 8 and set(map(type, v.values())) <= _LEAVES and set(map(type, v)) <= _LEAVES:
            return v
        pairs = [(_unwrap(k), _unwrap(x)) for k, x in v.items()]
        if all(a is k and b is x for (a, b), (k, x) in zip(pairs, v.items(), strict=True)):
            return v
        return dict(pairs)
    if t is dict or t is list or not unwrappable(t):
        return v
    return _unwrap_fields(v, t)


def _unwrap_fields(v: Any, t: type) -> Any:
    """A dataclass, NamedTuple, Struct or Pydantic model with its fields unwrapped (a copy)."""
    if issubclass(t, tuple):
        names: Any = t._fields  # type: ignore[attr-defined]
    elif issubclass(t, msgspec.Struct):
        names = t.__struct_fields__
    elif hasattr(t, "__dataclass_fields__"):
        import dataclasses  # (not at import: it loads inspect, ~7 ms)

        names = [f.name for f in dataclasses.fields(v)]  # not ClassVars or InitVars
    else:
        names = [*t.model_fields, *(v.__pydantic_extra__ or ())]  # type: ignore[attr-defined]
    changed = {}
    for n in names:
        x = getattr(v, n)
        y = _unwrap(x)
        if y is not x:
            changed[n] = y
    if not changed:
        return v
    if issubclass(t, tuple):
        return v._replace(**changed)
    if issubclass(t, msgspec.Struct):
        return msgspec.structs.replace(v, **changed)
    import copy  # only for a dataclass or model holding unchecked()

    new = copy.copy(v)
    for n, y in changed.items():
        object.__setattr__(new, n, y)  # (a frozen dataclass too; no validation runs again)
    return new
