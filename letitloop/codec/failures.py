"""A failure deep inside a value, the path to it, and the short texts its messages quote.

Encoding and decoding raise :class:`_Fail` where a part does not fit; each
container on the way out adds its path segment, and :func:`encode` or
:func:`decode` turns it into one EncodeError or DecodeError naming ``$.a[3].b``.
"""

from __future__ import annotations

from typing import Any

from .document import MAX_DEPTH


class _Fail(Exception):
    """Internal: a failure deep in a value; containers add their path segment on the way out."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.parts: list[str] = []

    def path(self) -> str:
        return "$" + "".join(reversed(self.parts))


def _key_segment(key: object) -> str:
    if type(key) is str and key.isidentifier():
        return f".{key}"
    return f"[{key!r}]"


def _too_deep() -> _Fail:
    return _Fail(
        f"it nests more than {MAX_DEPTH} levels deep (lists, tuples, sets, dicts and objects' "
        f"fields inside one another), or contains itself; a value nested deeper could not be "
        f"read back from every call stack. Return a flatter value, or one without cycles"
    )


def _type_name(t: type) -> str:
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _need(payload: Any, t: type, what: str) -> Any:
    if type(payload) is not t:
        raise _Fail(
            f"recorded {what} holds a {type(payload).__name__}, expected a {t.__name__}; "
            f"the row was edited or written by another program"
        )
    return payload


def _short_repr(v: Any, width: int = 40) -> str:
    """``repr(v)`` cut to ``width``; never raises (it only serves error messages)."""
    if type(v) is int and v.bit_length() > 128:
        return f"<int of {v.bit_length()} bits>"  # (decimal text may be refused, or slow)
    try:
        r = repr(v)
    except Exception:  # a __repr__ that fails, or a value too deep to print
        return f"<{_type_name(type(v))}>"
    return r if len(r) <= width else r[: width - 3] + "..."
