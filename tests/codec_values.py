"""Types, values and a deep comparison shared by the codec tests and their child processes.

Importing this module registers its classes on letitloop's default codec
registry, so a child interpreter that imports it can read what another wrote.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import json
import math
import pathlib
import random
import uuid
from typing import Any, NamedTuple

import msgspec

from letitloop import codec


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Mode(str, enum.Enum):  # enum.StrEnum is 3.11+; this is its 3.10 spelling
    FAST = "fast"
    SAFE = "safe"


@dataclasses.dataclass(frozen=True, slots=True)
class Point:
    x: int
    y: int = 0


@dataclasses.dataclass
class Box:
    content: Any
    label: str = "box"
    tags: list[str] = dataclasses.field(default_factory=list)


class Pair(NamedTuple):
    left: Any
    right: Any = None


class Event(msgspec.Struct):
    name: str
    payload: Any = None


class Money:
    """A class with its own encode/decode pair (no dataclass, no Struct)."""

    def __init__(self, cents: int, currency: str) -> None:
        self.cents = cents
        self.currency = currency

    def __eq__(self, other: object) -> bool:
        return type(other) is Money and (self.cents, self.currency) == (other.cents, other.currency)

    def __hash__(self) -> int:
        return hash((self.cents, self.currency))

    def __repr__(self) -> str:
        return f"Money({self.cents}, {self.currency!r})"


class QuotaError(Exception):
    """An exception whose __init__ does not take its own args (pickle chokes on these)."""

    def __init__(self, user: str, limit: int) -> None:
        super().__init__(f"user {user} is over the quota of {limit}")
        self.user = user
        self.limit = limit


class Wrapped:
    """A class whose registered encode returns a list holding what it wraps."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __eq__(self, other: object) -> bool:
        return type(other) is Wrapped and self.inner == other.inner

    def __repr__(self) -> str:
        return f"Wrapped({self.inner!r})"


for _cls in (Color, Level, Mode, Point, Box, Pair, Event, QuotaError):
    codec.register(_cls)
codec.register(Money, encode=lambda m: [m.cents, m.currency], decode=lambda v: Money(*v))
codec.register(Wrapped, encode=lambda w: [w.inner], decode=lambda v: Wrapped(v[0]))

PATH_TYPES = (pathlib.PurePosixPath, pathlib.PureWindowsPath, pathlib.PosixPath)


# -- a seeded generator of nested values (the cross-process test uses it) ------


def _scalar(rng: random.Random) -> Any:
    pick = rng.randrange(22)
    if pick == 0:
        return None
    if pick == 1:
        return rng.random() < 0.5
    if pick == 2:
        return rng.randint(-(2**70), 2**70)
    if pick == 3:
        return rng.choice([0.0, -0.0, 1.5, math.nan, math.inf, -math.inf, 1e308, 5e-324])
    if pick == 4:
        return "".join(rng.choice('aé🙂!"\\\x00{} ') for _ in range(rng.randrange(8)))
    if pick == 5:
        return rng.randbytes(rng.randrange(6))
    if pick == 6:
        return bytearray(rng.randbytes(3))
    if pick == 7:
        offset = dt.timedelta(minutes=rng.randint(-1439, 1439), seconds=rng.randint(0, 59))
        tz = rng.choice([None, dt.timezone.utc, dt.timezone(offset)])
        return dt.datetime(2026, 11, 30, 3, 4, 5, rng.randrange(10**6), tzinfo=tz)
    if pick == 8:
        return dt.date(rng.randint(1, 9999), 12, 31)
    if pick == 9:
        return dt.time(23, 59, 59, rng.randrange(10**6))
    if pick == 10:
        return dt.timedelta(days=rng.randint(-999, 999), microseconds=rng.randrange(10**6))
    if pick == 11:
        return decimal.Decimal(rng.choice(["1.10", "-0", "1E+3", "NaN", "-Infinity", "3.14159"]))
    if pick == 12:
        return uuid.UUID(int=rng.getrandbits(128))
    if pick == 13:
        return rng.choice(PATH_TYPES)(rng.choice(["/tmp/x", "a/b", "C:\\Users\\ada", "."]))
    if pick == 14:
        return rng.choice([Color.RED, Level.HIGH, Mode.SAFE])
    if pick == 15:
        return Money(rng.randint(0, 10**6), "EUR")
    if pick == 16:
        return Point(rng.randint(-5, 5))
    if pick == 17:
        return QuotaError("ada", rng.randint(1, 9))
    if pick == 18:
        return ValueError("bad", rng.randint(0, 3))
    if pick == 19:
        return 2 ** rng.randint(64, 20_000)  # beyond 64 bits, up to ~6000 digits
    return rng.choice(["!tuple", "plain", ""])


def _hashable(rng: random.Random, depth: int) -> Any:
    pick = rng.randrange(6)
    if pick == 0:
        return rng.randint(-3, 3)
    if pick == 1:
        return rng.choice([Color.RED, Level.LOW, Mode.FAST, uuid.UUID(int=7)])
    if pick == 2 and depth > 0:
        return tuple(_hashable(rng, depth - 1) for _ in range(rng.randrange(3)))
    if pick == 3:
        return frozenset({rng.randint(0, 3), "k"})
    if pick == 4:
        return Point(rng.randint(0, 3), 1)
    return rng.choice(["k", "!k", dt.date(2020, 1, 1)])


def make_value(seed: int, depth: int = 4) -> Any:
    """A random nested value of every supported type; the same seed gives the same value."""
    return _value(random.Random(seed), depth)


def _value(rng: random.Random, depth: int) -> Any:
    if depth <= 0 or rng.random() < 0.3:
        return _scalar(rng)
    n = rng.randrange(4)
    kids = [_value(rng, depth - 1) for _ in range(n)]
    pick = rng.randrange(11)
    if pick == 0:
        return kids
    if pick == 1:
        return tuple(kids)
    if pick == 2:
        return {f"k{i}": k for i, k in enumerate(kids)} | ({"!tag": 1} if n == 0 else {})
    if pick == 3:
        return {_hashable(rng, 2): k for k in kids}
    if pick == 4:
        return {_hashable(rng, 2) for _ in range(n)}
    if pick == 5:
        return frozenset(_hashable(rng, 2) for _ in range(n))
    if pick == 6:
        return Box(kids, tags=["a"] * n)
    if pick == 7:
        return Pair(kids, tuple(kids))
    if pick == 8:
        return Event("e", {"kids": kids})
    if pick == 9:
        return {"!only": kids}  # a user's key that looks like a tag
    return [kids, {"nested": kids}]


# -- rows written by earlier versions ---------------------------------------------


def written_now(old: str) -> str:
    """What encode writes today for the value an earlier version stored as ``old``.

    Until commit 13daf56 a whole str-keyed dict or list holding tags was
    wrapped as ``{"!dict": {…}}`` or ``{"!list": […]}``; it is now that
    payload as it was, followed by the mark (a space). A dict whose only key
    starts with ``!`` is still escaped as ``{"!dict": {…}}``; every other
    text is written as it was.
    """
    for wrapper in ('{"!dict":{', '{"!list":['):
        if old.startswith(wrapper):
            payload = json.loads(old)[wrapper[2:7]]
            escape = type(payload) is dict and len(payload) == 1 and next(iter(payload))[:1] == "!"
            if not escape:
                return old[len(wrapper) - 1 : -1] + " "
    return old


# -- deep comparison: equal values AND identical types at every level -----------


def show(v: Any) -> str:
    """A short repr for messages that never raises (ints beyond the digit guard, deep values)."""
    if type(v) is int and v.bit_length() > 128:
        return f"<int of {v.bit_length()} bits>"
    try:
        r = repr(v)
    except Exception:
        return f"<{type(v).__name__}>"
    return r if len(r) <= 200 else r[:197] + "..."


def difference(a: Any, b: Any, path: str = "$") -> str | None:
    """Where ``a`` and ``b`` differ in type or value (None when they are the same)."""
    ta, tb = type(a), type(b)
    if ta is not tb:
        return f"{path}: type {ta.__name__} != {tb.__name__}"
    if ta is float:
        same = (math.isnan(a) and math.isnan(b)) or (
            a == b and math.copysign(1, a) == math.copysign(1, b)
        )
        return None if same else f"{path}: {show(a)} != {show(b)}"
    if ta is decimal.Decimal:
        return None if a.as_tuple() == b.as_tuple() else f"{path}: {show(a)} != {show(b)}"
    if isinstance(a, enum.Enum):
        return None if a is b else f"{path}: {show(a)} is not {show(b)}"
    if isinstance(a, (list, tuple)):  # NamedTuples too: their type was checked above
        if len(a) != len(b):
            return f"{path}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if d := difference(x, y, f"{path}[{i}]"):
                return d
        return None
    if isinstance(a, dict):
        if len(a) != len(b):
            return f"{path}: {len(a)} keys != {len(b)}"
        for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True):
            if d := difference(ka, kb, f"{path}<key {show(ka)}>") or difference(
                va, vb, f"{path}[{show(ka)}]"
            ):
                return d
        return None
    if isinstance(a, (set, frozenset)):
        rest = list(b)
        for x in a:
            at = next((i for i, y in enumerate(rest) if difference(x, y) is None), None)
            if at is None:  # (an index: the matching member may itself be None)
                return f"{path}: {show(x)} missing from {show(b)}"
            del rest[at]
        return None if not rest else f"{path}: extra {show(rest)}"
    if isinstance(a, BaseException):
        return difference(list(a.args), list(b.args), f"{path}.args") or difference(
            dict(vars(a)), dict(vars(b)), f"{path}.__dict__"
        )
    if dataclasses.is_dataclass(a):
        return difference(
            [getattr(a, f.name) for f in dataclasses.fields(a)],
            [getattr(b, f.name) for f in dataclasses.fields(b)],
            path,
        )
    if isinstance(a, msgspec.Struct):
        return difference(msgspec.structs.astuple(a), msgspec.structs.astuple(b), path)
    if hasattr(ta, "model_fields"):  # a pydantic model
        return difference(
            [getattr(a, n) for n in ta.model_fields], [getattr(b, n) for n in ta.model_fields], path
        ) or difference(a.__pydantic_extra__, b.__pydantic_extra__, f"{path}.extra")
    if isinstance(a, (dt.datetime, dt.time)):
        same = (
            a.replace(tzinfo=None) == b.replace(tzinfo=None)
            and a.utcoffset() == b.utcoffset()
            and a.fold == b.fold
        )
        return None if same else f"{path}: {show(a)} != {show(b)}"
    if isinstance(a, pathlib.PurePath):
        return None if str(a) == str(b) else f"{path}: {show(a)} != {show(b)}"
    if ta is Wrapped:
        return difference(a.inner, b.inner, f"{path}.inner")
    return None if a == b else f"{path}: {show(a)} != {show(b)}"


# -- nesting: the depth encode counts, and values built to a chosen depth -------


def nesting(v: Any) -> int:
    """How deep ``v`` nests, as docs/types.md defines it (the codec's MAX_DEPTH counts this).

    Each list, tuple, set, frozenset and dict is a level; so are an object's
    fields (a dataclass's, a NamedTuple's, a Struct's, a model's, what a
    registered encode returns); an exception's fields are a level and its
    args another. Written independently of the codec, as the reference.
    """
    if isinstance(v, enum.Enum):
        return nesting(v.value)
    if isinstance(v, BaseException):
        args = 1 + max(map(nesting, v.args), default=0)
        attrs = vars(v)
        return 1 + max(args, 1 + max(map(nesting, attrs.values())) if attrs else 0)
    if dataclasses.is_dataclass(v):
        fields = [getattr(v, f.name) for f in dataclasses.fields(v) if f.init]
    elif isinstance(v, tuple) and hasattr(v, "_fields"):
        fields = list(v)
    elif isinstance(v, msgspec.Struct):
        fields = list(msgspec.structs.astuple(v))
    elif isinstance(v, Money):
        fields = [v.cents, v.currency]
    elif isinstance(v, Wrapped):
        fields = [v.inner]
    elif isinstance(v, dict):
        fields = [*v.keys(), *v.values()]
    elif isinstance(v, (list, tuple, set, frozenset)):
        fields = list(v)
    else:
        return 0
    return 1 + max(map(nesting, fields), default=0)


def _can_hash(v: Any) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True


#: One level of nesting around a value, by name (Box and ValueError add two
#: at the bottom or every time: nesting() says exactly how many).
WRAPPERS: dict[str, Any] = {
    "list": lambda v: [v],
    "tuple": lambda v: (v,),
    "dict": lambda v: {"k": v},
    "int-keyed dict": lambda v: {1: v},
    "dict key": lambda v: {v: 1} if _can_hash(v) else (v,),  # (a tuple if it cannot be)
    "frozenset": lambda v: frozenset([v]) if _can_hash(v) else (v,),
    "lookalike dict": lambda v: {"!x": v},
    "NamedTuple": lambda v: Pair(v),
    "Struct": lambda v: Event("e", v),
    "dataclass": lambda v: Box(v),
    "exception": lambda v: ValueError(v),
    "registered encode": lambda v: Wrapped(v),
}


def nest(kinds: list[str], leaf: Any) -> Any:
    """``leaf`` wrapped in the WRAPPERS named by ``kinds``, innermost first."""
    v = leaf
    for kind in kinds:
        v = WRAPPERS[kind](v)
    return v
