"""Decoding: JSON text back to the value :func:`encode` was given, with its types.

Plain JSON comes back from msgspec as it is. A document is tagged when its
top level is one tag (``{"!tuple": […]}``) or when it ends with the mark
(a plain object or array holding tags); only then does the walk
(:func:`_dec`) run, decoding each tag in place and stopping once the text
has no tag left. The built-in containers' tags are decoded here, the other
built-in types by ``tags.py`` and registered classes by their entry.
"""

from __future__ import annotations

import decimal
import re
import sys
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import msgspec

from ..errors import DecodeError, error_text
from .document import MARKS, MAX_DEPTH, TAG
from .entries import _BUILTIN_EXCEPTIONS, Entry
from .failures import _Fail, _key_segment, _need, _short_repr, _type_name
from .plain import _SCALARS, _WALK_MAX
from .registry import CodecRegistry, default_registry
from .stack import _FRAMES_PER_LEVEL, _on_fresh_stack
from .tags import _SCALAR_DECODERS

_decoder = msgspec.json.Decoder()

#: ``_Reading.tags_left`` that never runs out: walk everything.
_WALK_ALL = 1 << 62


class _Reading:
    """One decode's state: the registry, and how many tags the text still holds.

    Every tag is an object whose first key starts with ``!``, and the text
    says how many such objects there are. Once the walk has met them all,
    the rest of the value is plain JSON and is returned as msgspec built it,
    without visiting it: a typed value early in a large result costs only
    the path to it.
    """

    __slots__ = ("registry", "tags_left")

    def __init__(self, registry: CodecRegistry, text: str) -> None:
        self.registry = registry
        # Every tag key starts with "!", spelled raw or as the escape \u0021
        # (a hand-edited row). The count of raw '"!' may overshoot (a string
        # holding '"!'), which only walks further, and never undershoots.
        self.tags_left = _WALK_ALL if "\\u0021" in text else text.count('"!')

    def _entry_for_name(self, name: str) -> Entry | None:
        return self.registry._entry_for_name(name)

    def value(self, v: Any) -> Any:
        """``v`` with its tags decoded: for a built-in tag whose payload may hold one."""
        return _dec(v, self)


def _dec(v: Any, reg: _Reading) -> Any:
    """``v`` (fresh from msgspec, so ours to change) with its tags decoded, in place."""
    if reg.tags_left <= 0:
        return v  # every tag is decoded: what is left is plain JSON
    t = type(v)
    if t is dict:
        if len(v) == 1:
            key = next(iter(v))
            if key.startswith(TAG):
                reg.tags_left -= 1
                return _dec_tag(key, v[key], reg)
        return _dec_fields(v, reg)
    if t is list:
        return _dec_items(v, reg)
    return v


def _dec_items(v: list[Any], reg: _Reading) -> list[Any]:
    """A list's items with their tags decoded, in place."""
    return _dec_in_place(v, v, enumerate(v), _index_segment, reg)


def _dec_fields(v: dict[str, Any], reg: _Reading) -> dict[str, Any]:
    """A str-keyed dict's values with their tags decoded, in place (its keys are never tags)."""
    return _dec_in_place(v, v.values(), v.items(), _key_segment, reg)


def _index_segment(i: object) -> str:
    return f"[{i}]"


_Container = TypeVar("_Container", list[Any], dict[str, Any])


def _dec_in_place(
    v: _Container,
    values: Iterable[Any],
    entries: Iterable[tuple[Any, Any]],
    segment: Callable[[Any], str],
    reg: _Reading,
) -> _Container:
    """``v`` (a list or dict) with the tags in ``values`` decoded, assigned back by key or index.

    Assigning to an existing key or index keeps the size (and a dict's
    order), so ``entries`` can be iterated meanwhile.
    """
    if len(v) > _WALK_MAX and set(map(type, values)) <= _SCALARS:
        return v  # holding no tag: used as it is
    k: Any = None
    try:
        for k, x in entries:
            tx = type(x)
            if tx is dict or tx is list:
                y = _dec(x, reg)
                if y is not x:
                    v[k] = y
                if reg.tags_left <= 0:
                    break
    except _Fail as exc:
        exc.parts.append(segment(k))
        raise
    return v


def _dec_tag(key: str, payload: Any, reg: _Reading) -> Any:
    name = key[1:]
    builtin = _BUILTIN_DECODERS.get(name)
    if builtin is not None:
        try:
            return builtin(payload, reg)
        except (_Fail, RecursionError):
            raise
        except Exception as exc:
            raise _Fail(
                f"recorded {name} {_short_repr(payload, 80)} is malformed ({error_text(exc)}); "
                f"the row was edited or written by another program"
            ) from None
    entry = reg._entry_for_name(name)
    if entry is None:
        raise _Fail(
            f"type {name!r} is not registered; import its class and register it with "
            f"letitloop.codec.register(<the class>) (or name={name!r} if it was renamed or "
            f"moved) before reading. Nothing is imported from the journal's data"
        )
    decoded = _dec(payload, reg)
    try:
        return entry.decode(decoded)
    except (_Fail, RecursionError):
        raise
    except Exception as exc:
        raise _Fail(
            f"the decode function registered for {_type_name(entry.cls)} failed: {error_text(exc)}"
        ) from None


def _dec_dict(payload: Any, reg: _Reading) -> Any:
    if type(payload) is dict:  # str keys: a top-level dict, or an escaped one
        return _dec_fields(payload, reg)
    out = {}
    for i, pair in enumerate(_need(payload, list, "dict")):
        if type(pair) is not list or len(pair) != 2:
            raise _Fail(f"recorded dict entry {i} is not a [key, value] pair; the row was edited")
        try:
            k = _dec(pair[0], reg)
            out[k] = _dec(pair[1], reg)
        except _Fail as exc:
            exc.parts.append(f"[{_short_repr(pair[0])}]")
            raise
        except TypeError as exc:  # an unhashable key
            raise _Fail(f"recorded dict key is unusable: {exc}") from None
    return out


def _dec_container(t: type, what: str) -> Callable[[Any, _Reading], Any]:
    def dec(payload: Any, reg: _Reading) -> Any:
        return t(_dec_items(_need(payload, list, what), reg))

    return dec


#: Every built-in tag's decoder, by name: the containers' and Python's exceptions' here,
#: the others' in ``tags.py``.
_BUILTIN_DECODERS: dict[str, Callable[[Any, _Reading], Any]] = {
    "list": lambda p, reg: _dec_items(_need(p, list, "list"), reg),
    "dict": _dec_dict,
    "tuple": _dec_container(tuple, "tuple"),
    "set": _dec_container(set, "set"),
    "frozenset": _dec_container(frozenset, "frozenset"),
    **_SCALAR_DECODERS,
}
for _entry in _BUILTIN_EXCEPTIONS.values():
    _BUILTIN_DECODERS[_entry.name] = (
        lambda p, reg, _e=_entry: _e.decode(_dec(p, reg))  # type: ignore[misc]
    )
del _entry


def _parse(text: str) -> Any:
    """The JSON value of ``text``, as msgspec builds it; a DecodeError if it is not JSON."""
    try:
        return _decoder.decode(text)
    except msgspec.ValidationError:
        # msgspec's word for a decimal int longer than this reader's digit
        # guard (a row from a writer whose guard was off, or higher than
        # ours): read it with json, turning digits into ints without the guard.
        return _parse_long_ints(text)
    except msgspec.DecodeError as exc:
        raise DecodeError(
            f"cannot decode recorded value: {exc}; the row is not JSON text as the codec "
            f"writes it: it was edited or written by another program"
        ) from None


def _parse_long_ints(text: str) -> Any:
    import json

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    try:
        return json.loads(text, parse_int=_int_from_digits, parse_constant=refuse)
    except ValueError as exc:  # json.JSONDecodeError too
        raise DecodeError(
            f"cannot decode recorded value: {exc}; the row is not JSON text as the codec "
            f"writes it: it was edited or written by another program"
        ) from None


def _int_from_digits(digits: str) -> int:
    """An int from decimal text of any length (Decimal is spared Python's digit guard)."""
    return int(digits) if len(digits) <= 640 else int(decimal.Decimal(digits))


#: ``_decode``'s value when its text was not parsed yet.
_UNPARSED: Any = object()


def _decode(text: str, registry: CodecRegistry, value: Any = _UNPARSED) -> Any:
    if value is _UNPARSED:
        value = _parse(text)
    t = type(value)
    try:
        if t is dict and len(value) == 1:
            key = next(iter(value))
            if key.startswith(TAG):  # one tag at the top
                reg = _Reading(registry, text)
                reg.tags_left -= 1
                payload = value[key]
                if (key == "!dict" and type(payload) is dict and len(payload) != 1) or (
                    key == "!list"
                ):
                    # A whole document wrapped as one container of tagged values,
                    # as rows were written before the mark: its payload decodes as
                    # an ordinary container, one call instead of four.
                    return _dec(_need(payload, list, "list") if key == "!list" else payload, reg)
                return _dec_tag(key, payload, reg)
        if text[-1] not in MARKS or (t is not dict and t is not list):
            return value  # plain JSON
        # A plain object or array holding tags (the mark): decoded in place.
        reg = _Reading(registry, text)
        return _dec_fields(value, reg) if t is dict else _dec_items(value, reg)
    except _Fail as exc:
        raise DecodeError(f"cannot decode value at {exc.path()}: {exc.reason}") from None


def decode(text: str, registry: CodecRegistry | None = None) -> Any:
    """The value that :func:`encode` turned into ``text``, with its types.

    Plain JSON comes back from msgspec as it is. In a tagged document every
    tag is looked up among the built-in types and in ``registry`` (the
    default registry when None), nowhere else. A caller too deep in
    recursion to read a deeply nested value gets it read on a fresh thread.
    Raises DecodeError naming the path and the cause: an unregistered type,
    a field that no longer fits its class, text that is not JSON, a value
    nested deeper than this process's recursion limit can read.
    """
    reg = registry if registry is not None else default_registry
    # The usual row, plain JSON (no tag at its top, no mark at its end), in this one call:
    # what _decode() says of it, without its two calls (a replay's decode of a small
    # result, 30% less).
    try:
        value = _decoder.decode(text)
    except (msgspec.DecodeError, RecursionError):
        value = _UNPARSED  # a long int, text that is not JSON: _decode() says which
    else:
        t = type(value)
        if t is dict:
            if text[-1] not in MARKS and (len(value) != 1 or not next(iter(value)).startswith(TAG)):
                return value
        elif t is not list or text[-1] not in MARKS:
            return value
    try:
        return _decode(text, reg, value)
    except RecursionError:
        pass  # the caller's stack is deep: decode again on a fresh one
    try:
        return _on_fresh_stack(_decode, text, reg)
    except RecursionError:
        raise DecodeError(
            f"cannot decode recorded value: it nests {_json_depth(text)} levels deep (as JSON "
            f"text), more than Python's recursion limit ({sys.getrecursionlimit()}) lets this "
            f"process read back, even on a fresh thread. The row itself is intact. Raise the "
            f"limit with sys.setrecursionlimit() before replaying; a value encode accepts "
            f"(at most {MAX_DEPTH} levels) needs about {_FRAMES_PER_LEVEL * MAX_DEPTH} frames"
        ) from None


def _json_depth(text: str) -> int:
    """How deep the arrays and objects of JSON ``text`` nest (strings skipped), iteratively."""
    brackets = re.sub(r'"(?:[^"\\]|\\.)*"', "", text)
    depth = deepest = 0
    for c in brackets:
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    return deepest
