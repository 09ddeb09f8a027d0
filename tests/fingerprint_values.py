"""Values for the fingerprint property tests: classes, a registry, strategies, the codec verdict.

A module of its own, not the test file: hypothesis reads the recursive
strategies' functions, which pytest's assertion rewriting would change.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import json
import zoneinfo
from typing import Any, NamedTuple

import msgspec
import pydantic
from hypothesis import strategies as st

from letitloop.codec import CodecRegistry, encode
from letitloop.identity.fingerprint import Fingerprinter


@dataclasses.dataclass
class Point:
    x: Any
    y: Any = None


class Rec(msgspec.Struct):
    a: Any
    b: Any = None


class Model(pydantic.BaseModel):
    m: Any = None


class Pair(NamedTuple):
    left: Any
    right: Any


class Color(enum.Enum):
    RED = 1
    GREEN = "green"


class Opaque:
    """A class msgspec cannot encode, registered with the codec by an encode/decode pair."""

    def __init__(self, n: int) -> None:
        self.n = n


REGISTRY = CodecRegistry(Point, Rec, Model, Pair, Color)
REGISTRY.register(Opaque, encode=lambda o: o.n, decode=Opaque)
FP = Fingerprinter(REGISTRY)


def fp(value: Any) -> str:
    return FP.whole(value)


def canonical_document(text: str) -> str:
    """The codec's document for a value, as text in which dict and set order no longer shows."""

    def norm(x: Any) -> str:
        if x is None:
            return "n"
        if x is True or x is False:
            return f"b{int(x)}"
        if type(x) is int:
            return f"i{x}"
        if type(x) is float:
            return f"f{x!r}"
        if type(x) is str:
            return "s" + json.dumps(x)
        if type(x) is list:
            return "[" + ",".join(map(norm, x)) + "]"
        assert type(x) is dict
        if len(x) == 1:
            ((tag, payload),) = x.items()
            if tag in ("!set", "!frozenset"):
                return str(tag) + "{" + ",".join(sorted(map(norm, payload))) + "}"
            if tag == "!dict" and type(payload) is list:
                pairs = sorted(norm(k) + ":" + norm(v) for k, v in payload)
                return "!dict{" + ",".join(pairs) + "}"
        return "{" + ",".join(sorted(json.dumps(k) + ":" + norm(v) for k, v in x.items())) + "}"

    return norm(json.loads(text))


def codec_same(a: Any, b: Any) -> bool:
    return canonical_document(encode(a, REGISTRY)) == canonical_document(encode(b, REGISTRY))


# -- values the codec encodes, nested at any depth ------------------------------------------

LONE = st.sampled_from(["\ud800", "\udfff", "\udc80"])
TEXT = st.text(st.one_of(st.characters(), LONE), max_size=4)
KEY_TEXT = TEXT.filter(lambda s: not s.startswith("!"))  # no user dict that looks like a tag
BIG = st.sampled_from([2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 2**70, 2**71])
INTS = st.one_of(st.integers(-3, 3), st.integers(), BIG, st.integers(2**64, 2**130))
FLOATS = st.one_of(st.sampled_from([0.0, -0.0, 1.0, 2.0, float("nan"), float("inf")]), st.floats())
ZONES = st.sampled_from(
    [
        None,
        dt.timezone.utc,
        dt.timezone(dt.timedelta(hours=1)),
        dt.timezone(dt.timedelta(seconds=3601)),  # an odd offset: stored beside the text
        zoneinfo.ZoneInfo("Europe/Paris"),
        zoneinfo.ZoneInfo("America/New_York"),
    ]
)
HASHABLE = st.one_of(
    st.none(),
    st.booleans(),
    INTS,
    FLOATS,
    TEXT,
    st.binary(max_size=3),
    st.datetimes(timezones=ZONES),
    st.dates(),
    st.timedeltas(),
    st.sampled_from([decimal.Decimal("1.0"), decimal.Decimal("1.00"), decimal.Decimal("-0")]),
    st.decimals(allow_nan=False, places=2),
    st.uuids(),
    st.sampled_from(list(Color)),
)


def containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    hashable_children = st.one_of(HASHABLE, st.lists(HASHABLE, max_size=2).map(tuple))
    return st.one_of(
        st.lists(children, max_size=3),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(KEY_TEXT, children, max_size=3),
        st.dictionaries(hashable_children, children, max_size=3),  # mixed-type keys
        st.sets(hashable_children, max_size=3),  # mixed-type items
        st.frozensets(HASHABLE, max_size=3),
        st.builds(Point, children, children),
        st.builds(Rec, children, children),
        st.builds(Model, m=children),
        st.builds(Pair, children, children),
        st.builds(Opaque, INTS),
    )


VALUES = st.recursive(HASHABLE, containers, max_leaves=10)
SMALL = st.recursive(
    st.sampled_from([0, 1, True, False, 1.0, 0.0, -0.0, "", "a", "\ud800", None, 2**70]),
    lambda c: st.one_of(
        st.lists(c, max_size=2),
        st.lists(c, max_size=2).map(tuple),
        st.dictionaries(st.sampled_from(["a", "b"]), c, max_size=2),
        st.dictionaries(st.sampled_from([1, "a", True, 2.5]), c, max_size=2),
        st.sets(st.sampled_from([1, "a", 2**70, 0.5]), max_size=3),
        st.builds(Point, c),
        st.builds(Rec, c),
    ),
    max_leaves=4,
)  # a small world, so that equal pairs are drawn often


def reordered(v: Any) -> Any:
    """An equal value built in another order: dicts and sets reversed, at every depth."""
    t = type(v)
    if t is dict:
        return {k: reordered(x) for k, x in reversed(list(v.items()))}
    if t is list:
        return [reordered(x) for x in v]
    if t is tuple:
        return tuple(reordered(x) for x in v)
    if t in (set, frozenset):
        return t(reversed(list(v)))
    if t is Point:
        return Point(reordered(v.x), reordered(v.y))
    if t is Rec:
        return Rec(reordered(v.a), reordered(v.b))
    if t is Model:
        return Model(m=reordered(v.m))
    if t is Pair:
        return Pair(reordered(v.left), reordered(v.right))
    return v


PLAIN = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), TEXT),
    lambda c: st.one_of(st.lists(c, max_size=70), st.dictionaries(TEXT, c, max_size=4)),
    max_leaves=80,
)
