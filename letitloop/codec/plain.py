"""Whether a value is plain JSON, stored untagged: one check, a CPython fast path and its twin.

:data:`_plain_scan` is the one function encoding asks about a large value:
:func:`_plain_referents` (level-by-level C passes over ``gc.get_referents``)
where CPython's collector tells str-keyed dicts from others, its portable
twin :func:`_plain_walk` elsewhere. tests/test_codec.py holds the two to
one verdict on every value. Small values are checked part by part
(:func:`_plain_small`; a small dict or list, :func:`_plain_few`).
"""

from __future__ import annotations

import gc
import math
import operator
from collections.abc import Callable
from itertools import chain, compress, repeat
from typing import Any

from .document import MAX_DEPTH, TAG

_NONE = type(None)
_SCALARS = frozenset({str, int, float, bool, _NONE})
_SIMPLE_SCALARS = frozenset({str, int, bool, _NONE})
_JSON_TYPES = frozenset({str, int, float, bool, _NONE, dict, list})
_CONTAINERS = frozenset({dict, list})
_STR_ONLY = frozenset({str})
_DICT_ONLY = {dict}
_FLOAT_ONLY = {float}
_is_float = float.__instancecheck__
_chain = chain.from_iterable
_values = dict.values
_isfinite = math.isfinite


#: The groups of a scanned value that hold floats: those holding nothing
#: else, and those holding floats among other values.
_Floats = tuple[list[list[float]], list[list[Any]]]

_referents = gc.get_referents
_is = operator.is_
_count_of = operator.countOf


def _dict_traverse_shows_keys() -> bool:
    """Whether ``gc.get_referents`` tells str-keyed dicts from others (CPython 3.10+ does)."""
    try:
        return _referents({"a": 1}) == [1] and len(_referents({1: 2})) == 2
    except Exception:
        return False


#: :func:`_plain_scan` splits the values of at least this many dicts of one
#: size, and at most this many keys, into one group per key.
_COLUMNS_MIN_ROWS = 16
_COLUMNS_MAX = 64

#: :func:`_plain_scan` relies on it; elsewhere the part-by-part check is used.
_REFERENTS_SHOW_KEYS = _dict_traverse_shows_keys()


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


def _tag_like(value: Any) -> bool:
    """Whether ``value`` is a one-key dict whose key starts with ``!`` (at the top, a tag)."""
    if type(value) is dict and len(value) == 1:
        key = next(iter(value))
        return type(key) is str and key.startswith(TAG)
    return False


def _plain_walk(value: Any) -> _Floats | None:
    """The portable twin of :func:`_plain_referents`: the same verdict, part by part in Python.

    Plain JSON is: exact ``dict`` (``str`` keys), ``list``, ``str``, ``int``,
    ``bool``, ``None`` and finite ``float``, nested at most :data:`MAX_DEPTH`
    containers deep, and not a one-key dict whose key starts with ``!``
    (which would read back as a tag). None when ``value`` is not plain;
    otherwise no float groups left to check (this walk checks them itself).
    """
    if _tag_like(value):
        return None
    level = [value]
    for depth in range(MAX_DEPTH + 1):
        below: list[Any] = []
        for v in level:
            t = type(v)
            if t is dict:
                if depth == MAX_DEPTH:
                    return None  # a container below MAX_DEPTH others
                for k in v:
                    if type(k) is not str:
                        return None
                below.extend(v.values())
            elif t is list:
                if depth == MAX_DEPTH:
                    return None
                below.extend(v)
            elif t is float:
                if not _isfinite(v):
                    return None
            elif not (t is str or t is int or t is bool or v is None):
                return None
        if not below:
            break
        level = below
    return [], []


def _plain_referents(value: Any) -> _Floats | None:
    """Whether ``value`` is plain JSON, in C-speed passes over each level of the tree (CPython).

    The same verdict as :func:`_plain_walk` (the tests hold them to it), with
    non-finite floats left to :func:`_finite`: None when the value is not
    plain, otherwise the groups of values that hold floats. msgspec has no
    hook for the types it encodes natively (msgspec issue #671), so this
    scan is what keeps type identity, and it never runs a Python-level loop
    over the values:

    - ``set(map(type, group))`` checks the exact type of every value;
    - ``gc.get_referents(*group)`` gives the next level: the items of the
      lists and the values of the dicts, in one C call (scalars have no
      referents and drop out);
    - a dict whose keys are all exact ``str`` hands the collector its values
      only; any other dict (a non-str key, or str keys in a table that once
      held another key) its keys too (CPython's ``dict_traverse``). Dicts
      that give more referents than they hold entries get their keys
      checked, and the keys then count as values of the next level;
    - the values of records (many dicts of one size, in row order) are
      grouped by column: the values of one key mostly share a type, so the
      dicts to count come as a whole group and floats in short ones.
    """
    if _tag_like(value):
        return None
    groups: list[list[Any]] = [[value]]
    pure_floats: list[list[float]] = []
    mixed_floats: list[list[Any]] = []
    for depth in range(MAX_DEPTH + 1):
        next_groups: list[list[Any]] = []
        for group in groups:
            first = type(group[0])
            if type(group[-1]) is first and _count_of(map(type, group), first) == len(group):
                seen = {first}  # one type (a column of records, say): counted, not hashed
            else:
                seen = set(map(type, group))
            if not seen <= _JSON_TYPES:
                return None
            if float in seen:
                (pure_floats if seen == _FLOAT_ONLY else mixed_floats).append(group)
            if dict in seen and seen <= _CONTAINERS:  # containers only: count them all
                if depth == MAX_DEPTH:
                    return None  # containers below MAX_DEPTH others
                children = _referents(*group)
                width = 0
                if seen == _DICT_ONLY and len(group) >= _COLUMNS_MIN_ROWS:
                    sizes = set(map(len, group))
                    width = sizes.pop() if len(sizes) == 1 else 0
                if len(children) != (width * len(group) if width else sum(map(len, group))):
                    if not _str_keys_only(group):
                        return None
                    width = 0  # the keys came too: no columns
                if 1 < width <= _COLUMNS_MAX:
                    next_groups += [children[i::width] for i in range(width)]
                    continue
            elif dict in seen:  # count the dicts among the scalars
                if depth == MAX_DEPTH:
                    return None
                dicts = _dicts_of(group)
                if len(_referents(*dicts)) != sum(map(len, dicts)) and not _str_keys_only(dicts):
                    return None
                children = _referents(*group)
            elif list in seen:
                if depth == MAX_DEPTH:
                    return None
                children = _referents(*group)
            else:
                continue
            if children:
                next_groups.append(children)
        if not next_groups:
            break
        groups = next_groups
    return pure_floats, mixed_floats


def _dicts_of(group: list[Any]) -> list[dict[Any, Any]]:
    return list(compress(group, map(_is, map(type, group), repeat(dict))))


def _str_keys_only(group: list[Any]) -> bool:
    """Whether every key of the dicts in ``group`` is an exact ``str`` (checked in C)."""
    return set(map(type, _chain(_dicts_of(group)))) <= _STR_ONLY


#: The plain-JSON check for values too large for :func:`_plain_small`: the
#: C-speed level scan where ``gc.get_referents`` tells str-keyed dicts from
#: others (CPython), its portable twin elsewhere. Both give one verdict on
#: every value; tests/test_codec.py runs them side by side under hypothesis.
_plain_scan: Callable[[Any], _Floats | None] = (
    _plain_referents if _REFERENTS_SHOW_KEYS else _plain_walk
)


def _finite(text: bytes, groups: _Floats) -> bool:
    """Whether every float in the scanned groups is finite.

    msgspec writes nan and ±inf as ``null``, so a text without ``null`` has
    none. Otherwise a group holding only floats is summed (a nan or an inf
    makes the sum one; finite floats can overflow it, and are then checked
    one by one), and the floats of a mixed group are checked one by one, in C.
    """
    pure, mixed = groups
    if not (pure or mixed) or b"null" not in text:
        return True
    for group in pure:
        if not _isfinite(sum(group)) and not all(map(_isfinite, group)):
            return False
    return all(all(map(_isfinite, filter(_is_float, group))) for group in mixed)


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
