"""What JSON text cannot hold: lone surrogates, and ints beyond Python's 4,300-digit guard.

Found in a tagged tree only when msgspec refused it or may have written a
too-long int, and tagged in their turn (``{"!str": [...]}``, ``{"!int": "0x…"}``).
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable
from operator import is_ as _is
from typing import Any

import msgspec

from ..errors import EncodeError
from .document import _MAX_INT_DIGITS, TAG, _marked

_encoder = msgspec.json.Encoder()

_get_int_max_str_digits: Callable[[], int] | None = getattr(sys, "get_int_max_str_digits", None)


def _int_digits_written() -> int:
    """Ints of more digits than this are written as ``{"!int": "0x…"}``.

    4300 (Python's default guard), or the writer's own guard where it is
    lower (msgspec cannot write more as decimal text there). Never more: a
    reader with the default guard could not read a longer decimal.
    """
    limit = _get_int_max_str_digits() if _get_int_max_str_digits is not None else 0
    return limit if 0 < limit < _MAX_INT_DIGITS else _MAX_INT_DIGITS


def _decimal_unguarded() -> bool:
    """Whether msgspec here writes ints of more than 4300 digits without complaint.

    True where the writer turned the guard off (``sys.set_int_max_str_digits(0)``)
    or raised it, and on a Python without it: such ints must be found and
    tagged by :func:`_escape`, since msgspec raises no error to say so.
    """
    limit = _get_int_max_str_digits() if _get_int_max_str_digits is not None else 0
    return limit == 0 or limit > _MAX_INT_DIGITS


@functools.lru_cache(maxsize=8)
def _ten_to(digits: int) -> int:
    return int(10**digits)


def _holds_big_int(value: Any, bound: int) -> bool:
    """Whether the plain JSON ``value`` holds an int at least ``bound`` in size (walked)."""
    stack = [value]
    pop, extend = stack.pop, stack.extend
    while stack:
        v = pop()
        t = type(v)
        if t is int:
            if v >= bound or -v >= bound:
                return True
        elif t is dict:
            extend(v.values())
        elif t is list:
            extend(v)
    return False


#: One lone surrogate (U+D800–U+DFFF), as a group so that ``re.split`` keeps it.
_SURROGATE = r"([\ud800-\udfff])"  # (escapes for re: no lone surrogate in the source)


def _str_parts(s: str) -> list[str | int] | None:
    """``s`` as text parts and the code points of its lone surrogates; None when it has none.

    ``"report-\\udcff.txt"`` (what ``os.fsdecode`` makes of a non-UTF-8
    file name) gives ``["report-", 56575, ".txt"]``: UTF-8, and so SQLite,
    cannot hold a lone surrogate, and msgspec refuses to write one.
    """
    if s.isascii():
        return None
    pieces = re.split(_SURROGATE, s)
    if len(pieces) == 1:
        return None
    return [ord(p) if i % 2 else p for i, p in enumerate(pieces) if p]


def _escape(v: Any, bound: int) -> Any:
    """The tagged tree ``v`` with what JSON text cannot hold tagged in its turn.

    A str with a lone surrogate becomes ``{"!str": [text, code point, …]}``
    (a dict key too: its dict is then stored as ``[key, value]`` pairs) and
    an int at least ``bound`` in size ``{"!int": "0x…"}``. Returns new
    containers where something changed; never mutates ``v``, which may
    share lists and dicts with the caller's value. Runs only when msgspec
    refused the tree or may have written a too-long int.
    """
    t = type(v)
    if t is str:
        parts = _str_parts(v)
        return v if parts is None else {"!str": parts}
    if t is int:
        return {"!int": hex(v)} if v >= bound or -v >= bound else v
    if t is list:
        out = [_escape(x, bound) for x in v]
        return v if all(map(_is, out, v)) else out
    if t is dict:
        if len(v) == 1:
            key, x = next(iter(v.items()))
            if key.startswith(TAG):  # a tag: its key is ours, its payload is escaped
                if key == "!datetime":
                    return v  # ISO text, small ints and a zone name, which msgspec checks
                y = _escape_fields(x, bound) if key == "!dict" and type(x) is dict else None
                if y is None:
                    y = _escape(x, bound)
                return v if y is x else {key: y}
        y = _escape_fields(v, bound)
        return y if type(y) is dict else {"!dict": y}
    return v


def _escape_fields(d: dict[str, Any], bound: int) -> dict[str, Any] | list[list[Any]]:
    """A str-keyed dict with its values escaped, or its ``[key, value]`` pairs if a key must be."""
    if not all(map(str.isascii, d)) and any(_str_parts(k) is not None for k in d):
        return [[_escape(k, bound), _escape(x, bound)] for k, x in d.items()]
    out = {k: _escape(x, bound) for k, x in d.items()}
    return d if all(map(_is, out.values(), d.values())) else out


def _dump_escaped(tree: Any, out: bytes | None) -> str:
    """The tagged tree as stored text, with :func:`_escape` applied where msgspec needs it.

    ``out`` is msgspec's text of ``tree`` when it wrote one (a long one),
    None when it refused (a lone surrogate, an int beyond the writer's guard).
    The text ends with the mark when its top level is a plain object or array.
    """
    if out is not None and not _decimal_unguarded():
        return _marked(out.decode("utf-8"), tree)
    escaped = _escape(tree, _ten_to(_int_digits_written()))
    if escaped is tree and out is not None:
        return _marked(out.decode("utf-8"), tree)  # a long text without a long int
    try:
        return _marked(_encoder.encode(escaped).decode("utf-8"), escaped)
    except (ValueError, OverflowError, TypeError, msgspec.EncodeError) as exc:
        raise EncodeError(f"cannot encode value at $: {exc}", path="$") from None


def _plain_text(value: Any, out: bytes) -> str | None:
    """``out``, msgspec's text of the plain ``value``, if it reads back in every process."""
    if (
        len(out) > _MAX_INT_DIGITS
        and _decimal_unguarded()
        and _holds_big_int(value, _ten_to(_MAX_INT_DIGITS))
    ):
        return None  # an int that a reader with the default guard could not read
    return out.decode("utf-8")
