"""Arguments of every kind, whose fingerprints tests/golden/fingerprints.json pins.

A step records its arguments' fingerprint and a replay must compute the same one
(DESIGN.md, "Two calls that can be told apart are never the same call"), so the
fingerprint of each kind of value is part of the file format. ``tests/golden/
generate.py fingerprints`` imports this module (as ``fingerprint_kinds``: the
classes below are fingerprinted by that module path, as a user's are by theirs)
and records, for each kind, ``Fingerprinter.call`` of it as a step's only
argument and ``Fingerprinter.whole`` of it as a run's input (or the error that
refuses it). Keep this file as it is: a later release adds kinds in a module of
its own.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import functools
import math
import uuid
import zoneinfo
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, NamedTuple

import msgspec
import numpy as np
import pydantic

from letitloop import register_fingerprint, unchecked
from letitloop.codec import CodecRegistry


@dataclasses.dataclass
class Point:
    x: Any
    y: Any = None


@dataclasses.dataclass(frozen=True)
class Frozen:
    a: int


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


class Level(enum.IntEnum):
    LOW = 1


class Opaque:
    """Registered with the codec by an encode/decode pair."""

    def __init__(self, n: int) -> None:
        self.n = n


class Client:
    """Told apart by a registered fingerprint, under a name of its own."""

    def __init__(self, url: str) -> None:
        self.url = url


class Session:
    """Told apart by a registered fingerprint, under its module path."""

    def __init__(self, user: str) -> None:
        self.user = user


class Unknown:
    """Neither encoded nor registered: refused."""


def module_function(x: int) -> int:
    return x


REGISTRY = CodecRegistry(Point, Frozen, Rec, Model, Pair, Color, Level)
REGISTRY.register(Opaque, name="golden.Opaque", encode=lambda o: o.n, decode=Opaque)
register_fingerprint(Client, lambda c: c.url, name="golden.Client")
register_fingerprint(Session, lambda s: s.user)

#: (kind, value): each fingerprinted as a step's one argument and as a run's input.
KINDS: list[tuple[str, Any]] = [
    ("none", None),
    ("true", True),
    ("false", False),
    ("int", 123),
    ("int negative", -7),
    ("int beyond 64 bits", 2**70),
    ("int beyond 64 bits negative", -(2**100)),
    ("float", 1.5),
    ("float negative zero", -0.0),
    ("float nan", math.nan),
    ("float inf", math.inf),
    ("str", "héllo wörld"),
    ("str empty", ""),
    ("str lone surrogate", "a\udc80"),
    ("bytes", b"\x00\xff"),
    ("bytearray", bytearray(b"ab")),
    ("list", [1, "a", None]),
    ("list nested", [[1, [2, [3]]], {"k": [4]}]),
    ("tuple", (1, "t")),
    ("tuple empty", ()),
    ("dict", {"b": 1, "a": 2}),
    ("dict int and str keys", {1: "int", "1": "str"}),
    ("dict tuple keys", {(1, 2): "pair"}),
    ("set", {3, 1, 2}),
    ("set mixed", {1, "1", 1.5}),
    ("frozenset", frozenset({"a", "b"})),
    ("datetime utc", dt.datetime(2026, 12, 7, 6, 0, 0, 123456, tzinfo=dt.timezone.utc)),
    ("datetime +01:00", dt.datetime(2026, 12, 7, 7, 0, tzinfo=dt.timezone(dt.timedelta(hours=1)))),
    ("datetime zoneinfo", dt.datetime(2026, 12, 7, 7, 0, tzinfo=zoneinfo.ZoneInfo("Europe/Oslo"))),
    ("datetime naive", dt.datetime(2026, 12, 7, 6, 0)),
    ("date", dt.date(2026, 12, 7)),
    ("time", dt.time(6, 30, 15)),
    ("time aware", dt.time(6, 30, tzinfo=dt.timezone.utc)),
    ("timedelta", dt.timedelta(days=1, seconds=90, microseconds=5)),
    ("decimal", decimal.Decimal("1.10")),
    ("decimal exponent", decimal.Decimal("1.1E+3")),
    ("uuid", uuid.UUID("12345678-1234-5678-1234-567812345678")),
    ("path", Path("/tmp/x")),
    ("pure posix path", PurePosixPath("/tmp/x")),
    ("pure windows path", PureWindowsPath("C:/x")),
    ("enum", Color.RED),
    ("enum str value", Color.GREEN),
    ("int enum", Level.LOW),
    ("dataclass", Point(1, [2])),
    ("dataclass frozen", Frozen(3)),
    ("dataclass holding a struct", Point(Rec(1), Model(m=2))),
    ("msgspec struct", Rec(1, "b")),
    ("pydantic model", Model(m={"k": 1})),
    ("namedtuple", Pair(1, 2)),
    ("codec-registered class", Opaque(5)),
    ("fingerprint-registered class, named", Client("https://api.example.com")),
    ("fingerprint-registered class", Session("ada")),
    ("unchecked inside a list", [1, unchecked(object())]),
    ("unchecked inside a dataclass", Point(1, unchecked(object()))),
    ("function", module_function),
    ("builtin function", len),
    ("class", Point),
    ("builtin class", int),
    ("partial", functools.partial(module_function, 1)),
    ("numpy int64 array", np.arange(4, dtype=np.int64).reshape(2, 2)),
    ("numpy float32 array", np.array([1.5, 2.5], dtype=np.float32)),
    ("numpy object array", np.array([1, "a"], dtype=object)),
    ("numpy scalar", np.int64(7)),
    ("unknown object", Unknown()),
    ("lambda", lambda: 1),
]

#: Calls of several arguments: (kind, args, kwargs).
CALLS: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("no arguments", (), {}),
    ("positional", (123, "https://example.com"), {}),
    ("keywords in any order", (1,), {"b": 2, "a": [1]}),
    ("the same value twice", ([1, 2], [1, 2]), {"k": [1, 2]}),
    ("unchecked argument", (1, unchecked(object())), {"free": unchecked(2)}),
]
