"""Whether a large value is plain JSON: the level scan, a CPython fast path and its twin.

:data:`_plain_scan` is the one function encoding asks about a large value:
:func:`_plain_referents` (level-by-level C passes over ``gc.get_referents``)
where CPython's collector tells str-keyed dicts from others, its portable
twin :func:`_plain_walk` elsewhere. tests/test_codec.py holds the two to
one verdict on every value. The scan leaves non-finite floats to
:func:`_finite`. Small values are checked part by part (``plain.py``).
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
_JSON_TYPES = frozenset({str, int, float, bool, _NONE, dict, list})
_CONTAINERS = frozenset({dict, list})
_STR_ONLY = frozenset({str})
_DICT_ONLY = {dict}
_FLOAT_ONLY = {float}
_is_float = float.__instancecheck__
_chain = chain.from_iterable
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
