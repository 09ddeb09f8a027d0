"""Whether a value is plain JSON, stored untagged: small values part by part, large ones
by the level scan (``scan.py``); and the fingerprint's checks.

Small values are checked part by part (:func:`_plain_small`; a small dict
or list, :func:`_plain_few`); larger ones by :data:`scan._plain_scan`.
:func:`is_plain` and :func:`plain_tree` are the fingerprint's checks.
"""

from __future__ import annotations

from typing import Any

from .document import MAX_DEPTH, TAG
from .scan import _NONE, _is_float, _isfinite, _plain_scan

_SCALARS = frozenset({str, int, float, bool, _NONE})
_SIMPLE_SCALARS = frozenset({str, int, bool, _NONE})
_values = dict.values


#: How many containers and floats a value may hold for :func:`_plain_small` to
#: check it one part at a time. Below this a plain loop beats the level scan's
#: setup (sets, maps and lists per level); above it the scan's C passes win.
_SMALL_PARTS = 48
assert _SMALL_PARTS <= MAX_DEPTH


def _plain_small(value: Any, parts: int = _SMALL_PARTS) -> bool | None:
    """Whether a small ``value`` is plain JSON: True, False, or None when it is not small.

    The same rules as :func:`_plain_walk` (exact JSON types, str keys, finite
    floats, no tag-like top-level key), checked part by part for the typical
    small step result, where it costs a fraction of the scan. A value it
    calls small holds at most ``parts`` containers, so it cannot nest deeper
    than :data:`MAX_DEPTH`.
    """
    if type(value) is dict and len(value) == 1:
        key = next(iter(value))
        if type(key) is str and key.startswith(TAG):
            return False  # would read back as a tag: escape it
    stack = [value]
    pop, extend = stack.pop, stack.extend
    budget = parts
    while stack:
        v = pop()
        t = type(v)
        if t is str or t is int or t is bool or v is None:
            continue
        budget -= 1
        if budget < 0:
            return None
        if t is dict:
            if len(v) > parts:
                return None
            for k in v:
                if type(k) is not str:
                    return False
            extend(v.values())
        elif t is list:
            if len(v) > parts:
                return None
            extend(v)
        elif t is float:
            if not _isfinite(v):
                return False
        else:
            return False
        if len(stack) > parts:
            return None
    return True


def _plain_few(value: Any) -> bool | None:
    """Whether a dict or list is plain JSON: True, False, or None when it has too many parts.

    :func:`_plain_small`'s verdict (and :func:`_plain_walk`'s) on the usual
    step result, a dict or list holding a few scalars and containers, for
    about half its cost: the values of each container are looked at where
    they are, not pushed on a stack (:func:`_plain_parts` walks the nested
    ones). None when the value holds more than ``_SMALL_PARTS`` containers,
    or one longer than that: the level scan decides then.
    """
    if len(value) > _SMALL_PARTS:
        return None
    if type(value) is dict:
        if len(value) == 1:
            key = next(iter(value))
            if type(key) is str and key.startswith(TAG):
                return False  # would read back as a tag: escape it
        for k in value:
            if type(k) is not str:
                return False
        items = value.values()
    else:
        items = value
    left = _SMALL_PARTS - 1
    for x in items:
        t = type(x)
        if t is str or t is int or t is bool or x is None:
            continue
        if t is float:
            if x - x != 0.0:
                return False  # nan or an infinity
            continue
        if t is not dict and t is not list:
            return False
        # A container inside (the usual: a list or dict of scalars), walked here as
        # _plain_parts walks it, without its call; the containers in it by _plain_parts.
        left -= 1
        if left < 0 or len(x) > _SMALL_PARTS:
            return None
        if t is dict:
            for k in x:
                if type(k) is not str:
                    return False
            x = x.values()
        for y in x:
            t = type(y)
            if t is str or t is int or t is bool or y is None:
                continue
            if t is float:
                if y - y != 0.0:
                    return False
            elif t is dict or t is list:
                left = _plain_parts(y, left)
                if left < 0:
                    return None if left == _TOO_MANY else False
            else:
                return False
    return True


#: What :func:`_plain_parts` answers for a value with more parts than it walks.
_TOO_MANY = -2


def _plain_parts(v: Any, left: int) -> int:
    """``left`` less the containers of ``v`` (a dict or list, itself one of them) when it is
    plain JSON; -1 when it is not, ``_TOO_MANY`` when it holds more than ``left``."""
    left -= 1
    if left < 0 or len(v) > _SMALL_PARTS:
        return _TOO_MANY
    if type(v) is dict:
        for k in v:
            if type(k) is not str:
                return -1
        v = v.values()
    for x in v:
        t = type(x)
        if t is str or t is int or t is bool or x is None:
            continue
        if t is float:
            if x - x != 0.0:
                return -1
        elif t is dict or t is list:
            left = _plain_parts(x, left)
            if left < 0:
                return left
        else:
            return -1
    return left


#: Containers longer than this are first checked with C passes
#: (``set(map(type, ...))``), which return a plain one untouched at a few
#: nanoseconds a value; shorter ones are walked value by value, which costs
#: less than setting those passes up.
_WALK_MAX = 24


def _plain_values(values: Any, types: set[type]) -> bool:
    """Whether a long container's values, of these ``types``, are all plain scalars, in C."""
    return types <= _SIMPLE_SCALARS or (
        types <= _SCALARS and all(map(_isfinite, filter(_is_float, values)))
    )


def is_plain(value: Any) -> bool:
    """Whether ``value`` is plain JSON with finite floats, whatever its size.

    The fingerprint's fast path asks it: a plain value is its own canonical
    form. A one-key dict whose key starts with ``!`` counts as not plain
    (the codec escapes it); that only sends it the long way.
    """
    small = _plain_small(value)
    if small is not None:
        return small
    groups = _plain_scan(value)
    if groups is None:
        return False
    pure, mixed = groups
    for group in pure:
        if not _isfinite(sum(group)) and not all(map(_isfinite, group)):
            return False
    return all(all(map(_isfinite, filter(_is_float, group))) for group in mixed)


#: A container longer than this is checked by the codec's plain scan (C passes
#: over each level) rather than value by value.
_LOOP_MAX = 64


def plain_tree(v: Any, depth: int) -> bool:
    """Whether a dict or list is plain JSON (exact types, str keys, finite floats), as a tree
    nesting at most ``depth`` levels of containers (``v`` is the first), as :func:`is_plain`.

    The fingerprint's own check for the usual small argument, value by value
    with the scalars tested inline (a third of the codec's part-by-part check
    on a dict of four keys); a long container goes to the codec's scan. Ints
    beyond 64 bits and lone surrogates pass here: msgspec refuses them, and
    the caller then takes the long way.
    """
    if len(v) > _LOOP_MAX:
        return is_plain(v)
    if type(v) is dict:
        for k in v:
            if type(k) is not str:
                return False
        v = v.values()
    for x in v:
        t = type(x)
        if t is str or t is int or t is bool or x is None:
            continue
        if t is float:
            if x - x != 0.0:
                return False  # nan or an infinity
        elif t is dict or t is list:
            if depth <= 1 or not plain_tree(x, depth - 1):
                return False
        else:
            return False
    return True
