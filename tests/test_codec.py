"""The codec: typed results come back as the same types, plain JSON stays plain.

Round trips are checked with ``difference()``: equal values *and* identical
types at every level (a tuple that came back as a list is a failure).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import datetime as dt
import decimal
import enum
import functools
import io
import json
import math
import os
import pathlib
import socket
import sqlite3
import subprocess
import sys
import threading
import uuid
import zoneinfo
from collections import OrderedDict
from pathlib import Path
from types import FrameType
from typing import Any

import msgspec
import pydantic
import pytest
from codec_values import (
    WRAPPERS,
    Box,
    Color,
    Event,
    Level,
    Mode,
    Money,
    Pair,
    Point,
    QuotaError,
    difference,
    make_value,
    nest,
    nesting,
    written_now,
)
from helpers import run_python, write_script
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from letitloop import Journal, codec, durable, unchecked
from letitloop.codec import (
    MAX_DEPTH,
    CodecRegistry,
    decode,
    default_registry,
    encode,
    register,
)
from letitloop.errors import DecodeError, EncodeError

TESTS = Path(__file__).parent
#: A child's import path: the shared test types, and this checkout's letitloop
#: (not whichever one is installed in the environment).
CHILD_PATH = os.pathsep.join([str(TESTS), str(TESTS.parent)])


class Model(pydantic.BaseModel):
    name: str
    when: dt.datetime
    items: list[Any] = []
    meta: Any = None


class Loose(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
    name: str


class Perm(enum.IntFlag):
    R = 4
    W = 2


register(Model)
register(Loose)
register(Perm)


def roundtrip(value: Any, registry: CodecRegistry | None = None) -> Any:
    return decode(encode(value, registry), registry)


def assert_same(value: Any, back: Any) -> None:
    diff = difference(value, back)
    assert diff is None, diff


def rows(db: Path, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Read from outside the writer: a separate sqlite3 connection."""
    con = sqlite3.connect(db)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def returns(value: Any) -> Any:
    return value


def tagged(text: str) -> bool:
    """Whether stored text is a tagged document: one tag at the top, or a plain top and the mark.

    Written from the format's description (docs/types.md), not from the decoder.
    """
    if text.endswith(" "):
        return True
    top = json.loads(text)
    return type(top) is dict and len(top) == 1 and next(iter(top)).startswith("!")


# -- strategies ----------------------------------------------------------------

offsets = st.timedeltas(
    min_value=dt.timedelta(hours=-23, minutes=-59), max_value=dt.timedelta(hours=23, minutes=59)
)
timezones = st.one_of(st.none(), st.just(dt.timezone.utc), offsets.map(dt.timezone))
#: Text with lone surrogates (what os.fsdecode makes of non-UTF-8 names) and control characters.
odd_text = st.text(
    st.characters(exclude_categories=[]) | st.sampled_from("\udcff\ud800\udfff\x00\x1b\x7f\x9b"),
    max_size=8,
)
#: Ints beyond Python's 4,300-digit guard for decimal text, and either side of it.
big_ints = st.builds(
    lambda digits, sign, low: sign * (10 ** (digits - 1) + low),
    st.integers(4295, 4310),
    st.sampled_from([1, -1]),
    st.integers(0, 2**64),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**64, max_value=2**300) | st.integers(max_value=-(2**63) - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    odd_text,
    big_ints,
    st.binary(max_size=12),
    st.binary(max_size=12).map(bytearray),
    st.datetimes(timezones=timezones),
    st.dates(),
    st.times(timezones=timezones),
    st.timedeltas(),
    st.decimals(allow_nan=True, allow_infinity=True),
    st.uuids(),
    st.builds(
        lambda cls, parts: cls(*parts),
        st.sampled_from([pathlib.PurePosixPath, pathlib.PureWindowsPath, pathlib.PosixPath]),
        st.lists(st.sampled_from(["a", "b c", "é", "..", "x.txt"]), max_size=3),
    ),
    st.sampled_from([*Color, *Level, *Mode]),
    st.builds(Money, st.integers(0, 10**9), st.sampled_from(["EUR", "JPY"])),
)
hashables = st.recursive(
    st.one_of(
        st.integers(),
        st.text(max_size=5),
        odd_text,
        st.uuids(),
        st.sampled_from([*Color, *Level, *Mode]),
        st.dates(),
        st.builds(Point, st.integers(), st.integers()),
    ),
    lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
    max_leaves=4,
)


def containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(st.text(max_size=5), inner, max_size=4),
        st.dictionaries(odd_text, inner, max_size=3),
        st.dictionaries(st.sampled_from(["!tuple", "!x", "!", "!\udcff"]), inner, max_size=1),
        st.dictionaries(hashables, inner, max_size=4),
        st.sets(hashables, max_size=4),
        st.frozensets(hashables, max_size=4),
        st.builds(Box, inner, st.text(max_size=4), st.lists(st.text(max_size=3), max_size=2)),
        st.builds(Pair, inner, inner),
        st.builds(Event, st.text(max_size=4), inner),
        st.builds(
            Model.model_construct,
            name=st.text(max_size=4),
            when=st.datetimes(),
            items=st.lists(inner, max_size=3),
            meta=inner,
        ),
        st.builds(lambda args: ValueError(*args), st.lists(inner, max_size=2)),
        st.builds(QuotaError, st.text(max_size=4), st.integers()),
    )


values = st.recursive(scalars, containers, max_leaves=12)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=20,
)
FEW = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


# -- round trips ----------------------------------------------------------------


class TestEveryTypeComesBackAsItself:
    EXAMPLES: tuple[Any, ...] = (
        None,
        True,
        0,
        -(2**63),
        2**64,
        10**5000,
        -0.0,
        math.nan,
        math.inf,
        -math.inf,
        "ü🙂\x00",
        b"\x00\xff",
        bytearray(b"ab"),
        [1, [2]],
        (),
        (1, (2,)),
        {"a": 1},
        {1: "int key", (1, 2): "tuple key", uuid.UUID(int=1): "uuid key", Color.RED: "enum key"},
        {1, 2},
        frozenset({"a"}),
        dt.datetime(2026, 11, 30, 3, 4, 5, 123456),
        dt.datetime(2026, 11, 30, 3, 4, 5, 6, tzinfo=dt.timezone.utc),
        dt.datetime(
            2026, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=-3, seconds=-7, microseconds=-9))
        ),
        dt.date(1, 1, 1),
        dt.time(23, 59, 59, 999999),
        dt.time(1, 2, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=45))),
        dt.timedelta(days=-3, seconds=5, microseconds=7),
        decimal.Decimal("1.10"),
        decimal.Decimal("-0"),
        decimal.Decimal("sNaN"),
        uuid.uuid4(),
        pathlib.Path("/tmp/a b"),
        pathlib.PurePosixPath("rel/x"),
        pathlib.PureWindowsPath(r"C:\Users\Ada"),
        Color.GREEN,
        Level.HIGH,
        Mode.FAST,
        Point(1, 2),
        Box([Point(3)], tags=["t"]),
        Pair((1, 2), {3}),
        Event("e", {"when": dt.date(2020, 1, 1)}),
        Model(name="m", when=dt.datetime(2026, 1, 1), items=[Point(1)], meta={1: (2,)}),
        Money(199, "EUR"),
        Perm.R | Perm.W,
        Loose(name="x", extra_field=(1, dt.date(2020, 1, 1))),  # type: ignore[call-arg]
        ValueError("bad", 3),
        QuotaError("ada", 5),
    )

    @pytest.mark.parametrize("value", EXAMPLES, ids=lambda v: type(v).__name__)
    def test_it_comes_back_equal_and_with_its_type(self, value: Any) -> None:
        assert_same(value, roundtrip(value))

    @pytest.mark.parametrize("value", EXAMPLES, ids=lambda v: type(v).__name__)
    def test_it_comes_back_nested_in_a_list_dict_and_tuple(self, value: Any) -> None:
        nested = {"items": [1, {"when": (value, [value])}]}
        assert_same(nested, roundtrip(nested))

    def test_a_zoneinfo_datetime_keeps_its_zone_and_fold(self) -> None:
        zone = zoneinfo.ZoneInfo("America/New_York")
        ambiguous = dt.datetime(2021, 11, 7, 1, 30, tzinfo=zone, fold=1)
        back = roundtrip(ambiguous)
        assert back.tzinfo is zone
        assert (back.fold, back.utcoffset()) == (1, ambiguous.utcoffset())

    def test_each_path_flavour_keeps_its_flavour(self) -> None:
        for p in (
            pathlib.PurePosixPath("a/b"),
            pathlib.PureWindowsPath("a/b"),
            pathlib.PosixPath("a/b"),
        ):
            assert type(roundtrip(p)) is type(p)
        assert str(roundtrip(pathlib.PureWindowsPath("a/b"))) == "a\\b"

    @given(values)
    @FEW
    def test_any_nesting_of_the_supported_types_round_trips(self, value: Any) -> None:
        assert_same(value, roundtrip(value))

    def test_two_thousand_seeded_nestings_round_trip(self) -> None:
        for seed in range(2000):
            value = make_value(seed)
            diff = difference(value, roundtrip(value))
            assert diff is None, f"seed {seed}: {diff}"


class TestTheComparisonItself:
    """difference() is the judge of every round trip: it must see what matters."""

    @pytest.mark.parametrize(
        ("a", "b"),
        [
            ((1,), [1]),
            ({1}, frozenset({1})),
            (Level.LOW, 1),
            (Mode.FAST, "fast"),
            (0.0, -0.0),
            (decimal.Decimal("1.1"), decimal.Decimal("1.10")),
            ({"a": (1,)}, {"a": [1]}),
            (pathlib.PureWindowsPath("A"), pathlib.PureWindowsPath("a")),
            (
                dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc),
                dt.datetime(2026, 1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=1))),
            ),
        ],
    )
    def test_it_tells_apart_values_that_python_calls_equal(self, a: Any, b: Any) -> None:
        assert difference(a, b) is not None


class TestPlainJSONStaysPlain:
    @given(json_values)
    @FEW
    def test_a_json_native_value_is_stored_exactly_as_msgspec_writes_it(self, value: Any) -> None:
        if type(value) is dict and len(value) == 1 and next(iter(value)).startswith("!"):
            return  # escaped (see below)
        text = encode(value)
        assert text == msgspec.json.encode(value).decode()
        assert json.loads(text) == value
        assert_same(value, decode(text))

    def test_a_nested_key_that_looks_like_a_tag_is_stored_untouched(self) -> None:
        value = [{"!tuple": [1, 2]}, {"!os.system": "ls"}]
        assert encode(value) == '[{"!tuple":[1,2]},{"!os.system":"ls"}]'
        assert_same(value, decode(encode(value)))

    @pytest.mark.parametrize("value", [[None, "null", 1.5], {"a": [None, 2.5], "b": "nullable"}])
    def test_a_string_saying_null_beside_floats_does_not_make_it_tagged(self, value: Any) -> None:
        assert encode(value) == msgspec.json.encode(value).decode()

    def test_a_top_level_key_that_looks_like_a_tag_is_escaped(self) -> None:
        assert encode({"!tuple": [1]}) == '{"!dict":{"!tuple":[1]}}'
        assert_same({"!tuple": [1]}, roundtrip({"!tuple": [1]}))

    @pytest.mark.parametrize(
        "value",
        [
            [Level.LOW],
            {"k": Mode.FAST},
            [(1, 2)],
            {1: "a"},
            {"f": [1.0, math.nan]},
            [None, math.inf],
            [{"s": "null"}, -math.inf],
        ],
    )
    def test_a_lookalike_of_json_is_tagged_not_flattened(self, value: Any) -> None:
        assert tagged(encode(value))
        assert_same(value, roundtrip(value))

    def test_tags_are_small_and_readable(self) -> None:
        value = {
            "when": dt.datetime(2026, 11, 30, 3, 4, 5, tzinfo=dt.timezone.utc),
            "id": uuid.UUID(int=1),
            "pair": (1, 2),
        }
        assert encode(value) == (
            '{"when":{"!datetime":"2026-11-30T03:04:05Z"},'
            '"id":{"!UUID":"00000000-0000-0000-0000-000000000001"},"pair":{"!tuple":[1,2]}} '
        )
        assert encode(Point(1, 2)) == '{"!codec_values.Point":{"x":1,"y":2}}'

    @pytest.mark.parametrize(
        "text",
        ['{"!datetime":"2026-11-30T03:04:05Z"}', '{"!datetime":"2026-11-30T03:04:05+00:00"}'],
        ids=["as-written-now", "as-written-earlier"],
    )
    def test_a_utc_datetime_reads_back_as_utc_in_either_spelling(self, text: str) -> None:
        when = decode(text)
        assert when == dt.datetime(2026, 11, 30, 3, 4, 5, tzinfo=dt.timezone.utc)
        assert when.tzinfo is dt.timezone.utc


def _general_dict_with_str_keys() -> dict[Any, Any]:
    """A dict holding only str keys that once held an int key (CPython keeps it 'general')."""
    d: dict[Any, Any] = {"a": 1, 0: "gone"}
    del d[0]
    return d


def _large(x: Any) -> Any:
    """``x`` beside enough parts that the encoder checks it with the level scan."""
    # x first: the part-by-part check looks at the last key first, and must give up on pad
    return {"x": x, "pad": [[i, {"n": float(i)}] for i in range(60)]}


class StrKey(str):
    pass


class TestTheLargeValueScan:
    """Values too large for the part-by-part check go through the C-speed level scan."""

    @given(json_values)
    @FEW
    def test_a_large_json_native_value_is_stored_exactly_as_msgspec_writes_it(self, x: Any) -> None:
        value = _large(x)
        text = encode(value)
        assert text == msgspec.json.encode(value).decode()
        assert_same(value, decode(text))

    @pytest.mark.parametrize(
        "x",
        [
            {1: "int key"},  # a dict among scalars
            [{"a": 1}, {2: "int key"}],  # a level made only of dicts
            ["s", 1, {1.5: "float key"}, [None]],
            [[[[(1, 2)]]]],
            [Level.LOW, 1],
            {"deep": [{"f": [1.0, math.nan]}]},
            [None, "null", -math.inf],
        ],
        ids=repr,
    )
    def test_a_lookalike_deep_in_a_large_value_keeps_its_type(self, x: Any) -> None:
        value = _large(x)
        assert tagged(encode(value))
        assert_same(value, roundtrip(value))

    @pytest.mark.parametrize("x", [{StrKey("k"): 1}, {"k": StrKey("v")}], ids=["key", "value"])
    def test_a_str_subclass_deep_in_a_large_value_is_refused_not_flattened(self, x: Any) -> None:
        with pytest.raises(EncodeError, match=r"at \$\.x.*StrKey is not registered"):
            encode(_large(x))

    @staticmethod
    def records(n: int = 40) -> list[dict[str, Any]]:
        """Rows of one shape, which the scan checks column by column."""
        return [
            {"id": i, "score": i / 7, "parent": None if i % 3 else i, "at": {"x": 1.5, "y": "s"}}
            for i in range(n)
        ]

    @pytest.mark.parametrize(
        ("column", "odd"),
        [
            ("at", {1: "int key"}),  # one dict of a column of dicts
            ("at", {"x": 1.5, 2.5: "float key"}),  # same size as its neighbours
            ("score", math.nan),  # one value of a column of floats
            ("score", -math.inf),
            ("parent", (1,)),
            ("id", Level.LOW),
        ],
        ids=repr,
    )
    def test_one_odd_value_in_a_column_of_records_keeps_its_type(
        self, column: str, odd: Any
    ) -> None:
        value = self.records()
        value[2][column] = odd  # early: the part-by-part check gives up from the end
        assert tagged(encode(value))
        assert_same(value, roundtrip(value))

    def test_records_of_different_shapes_are_checked_just_as_well(self) -> None:
        value: list[Any] = self.records()
        value[5] = {"id": 5, "extra": [1]}  # another size
        value[9] = {"score": 1.0, "id": 9, "at": {}, "parent": None}  # keys in another order
        assert encode(value) == msgspec.json.encode(value).decode()
        value[1]["at"] = {3: "int key"}
        assert tagged(encode(value))
        assert_same(value, roundtrip(value))

    @pytest.mark.parametrize(
        "value",
        [[[] for _ in range(60)], [{} for _ in range(60)], {"a": [[{}, []] for _ in range(60)]}],
        ids=["lists", "dicts", "nested"],
    )
    def test_many_empty_containers_are_plain(self, value: Any) -> None:
        assert encode(value) == msgspec.json.encode(value).decode()
        assert_same(value, roundtrip(value))

    def test_floats_whose_sum_overflows_are_still_plain(self) -> None:
        value = [{"f": 1e308, "n": None} for _ in range(40)]
        assert encode(value) == msgspec.json.encode(value).decode()
        assert_same(value, roundtrip(value))

    def test_a_str_keyed_dict_that_once_held_an_int_key_still_round_trips(self) -> None:
        value = _large(_general_dict_with_str_keys())
        assert_same(value, roundtrip(value))

    def test_a_large_value_that_contains_itself_is_refused_clearly(self) -> None:
        loop: list[Any] = []
        loop.append(loop)
        with pytest.raises(EncodeError, match="contains itself"):
            encode(_large(loop))

    def test_a_large_value_sharing_a_part_twice_is_stored_twice(self) -> None:
        shared = {"k": [1.5, None]}
        value = _large([shared, shared])
        assert encode(value) == msgspec.json.encode(value).decode()
        back = decode(encode(value))
        assert back == value and back["x"][0] is not back["x"][1]


# -- the registry ----------------------------------------------------------------


@dataclasses.dataclass
class Unregistered:
    when: dt.date


class TestTheRegistry:
    def test_an_unregistered_dataclass_is_refused_with_the_path_and_the_fix(self) -> None:
        value = {"items": [1, 2, 3, {"when": Unregistered(dt.date(2020, 1, 1))}]}
        with pytest.raises(EncodeError) as info:
            encode(value)
        assert str(info.value) == (
            "cannot encode value at $.items[3].when: type test_codec.Unregistered is not "
            "registered; register it with letitloop.codec.register(Unregistered) to get "
            "Unregistered back on replay, or return plain data instead: dataclasses.asdict(value)"
        )
        assert info.value.path == "$.items[3].when"

    def test_an_arbitrary_object_is_refused_with_how_to_give_it_a_codec(self) -> None:
        with pytest.raises(
            EncodeError,
            match=r"at \$\[0\]\[1\]: type object is not registered.*"
            r"register\(object, encode=\.\.\., decode=\.\.\.\)",
        ):
            encode([(1, object())])

    def test_a_stdlib_class_it_does_not_know_is_refused_not_flattened(self) -> None:
        with pytest.raises(EncodeError, match=r"collections\.OrderedDict is not registered"):
            encode({"d": OrderedDict(a=1)})

    def test_a_class_unknown_on_decode_is_named_with_how_to_register_it(self) -> None:
        text = encode(Point(1, 2))
        with pytest.raises(DecodeError) as info:
            decode(text, CodecRegistry())
        assert "type 'codec_values.Point' is not registered" in str(info.value)
        assert "letitloop.codec.register(" in str(info.value)

    def test_a_registry_of_its_own_knows_only_its_types(self) -> None:
        own = CodecRegistry(Unregistered)
        value = Unregistered(dt.date(2020, 1, 2))
        assert_same(value, roundtrip(value, own))
        with pytest.raises(EncodeError, match=r"codec_values\.Point is not registered"):
            encode(Point(1), own)
        with pytest.raises(EncodeError, match="Unregistered is not registered"):
            encode(value)

    def test_a_registry_that_extends_the_default_sees_later_registrations(self) -> None:
        own = CodecRegistry(extends=default_registry)

        @dataclasses.dataclass
        class Late:
            x: int

        register(Late)
        assert_same([Late(1), Point(2)], roundtrip([Late(1), Point(2)], own))

    def test_a_class_with_its_own_encode_and_decode_pair_round_trips(self) -> None:
        assert encode(Money(5, "EUR")) == '{"!codec_values.Money":[5,"EUR"]}'
        assert_same(
            {Money(5, "EUR"): [Money(6, "JPY")]}, roundtrip({Money(5, "EUR"): [Money(6, "JPY")]})
        )

    def test_register_works_as_a_decorator_with_a_chosen_name(self) -> None:
        own = CodecRegistry()

        @own.register
        @dataclasses.dataclass
        class A:
            x: int

        own.register(A, name="app.A")
        assert encode(A(1), own) == '{"!app.A":{"x":1}}'

        @register(name="test_codec.decorated")
        @dataclasses.dataclass
        class B:
            y: int

        assert encode(B(2)) == '{"!test_codec.decorated":{"y":2}}'

    def test_an_alias_reads_rows_written_under_an_old_name(self) -> None:
        own = CodecRegistry()

        @dataclasses.dataclass
        class Order:
            id: int

        own.register(Order, name="shop.Order", aliases=["old_shop.Order"])
        assert_same(Order(3), decode('{"!old_shop.Order":{"id":3}}', own))
        assert encode(Order(3), own) == '{"!shop.Order":{"id":3}}'

    def test_a_name_taken_by_another_class_is_refused(self) -> None:
        own = CodecRegistry(Point)
        with pytest.raises(ValueError, match=r"already registered for codec_values\.Point"):
            own.register(Box, name="codec_values.Point")

    @pytest.mark.parametrize("name", ["datetime", "tuple", "ValueError", "!x", "", "str", "int"])
    def test_a_reserved_name_is_refused(self, name: str) -> None:
        with pytest.raises(ValueError, match="reserved"):
            CodecRegistry().register(Point, name=name)

    def test_a_name_that_is_not_utf8_text_is_refused(self) -> None:
        with pytest.raises(ValueError, match="lone surrogate"):
            CodecRegistry().register(Point, name="app.\udcffPoint")

    def test_a_class_the_codec_cannot_take_apart_needs_an_encode_decode_pair(self) -> None:
        class Opaque:
            pass

        with pytest.raises(TypeError, match="pass encode= and decode="):
            register(Opaque)
        with pytest.raises(TypeError, match="built in"):
            register(dt.datetime)

    def test_a_subclass_of_a_registered_class_is_not_silently_its_parent(self) -> None:
        class Special(Point):
            pass

        with pytest.raises(EncodeError, match="Special is not registered"):
            encode(Special(1))


# -- evolution ---------------------------------------------------------------------


class TestAClassThatChangedUnderRecordedRows:
    """A row written with one version of a class, read with the next one."""

    def write_old(self, value: Any, name: str) -> str:
        return encode(value, _registry_with(type(value), name))

    def test_a_field_added_with_a_default_decodes_old_rows(self) -> None:
        @dataclasses.dataclass
        class V1:
            id: int

        @dataclasses.dataclass
        class V2:
            id: int
            email: str | None = None
            tags: list[str] = dataclasses.field(default_factory=list)

        text = self.write_old(V1(7), "User")
        back = decode(text, _registry_with(V2, "User"))
        assert (type(back), back) == (V2, V2(7, None, []))

    @pytest.mark.parametrize("kind", ["dataclass", "struct", "namedtuple", "pydantic"])
    def test_a_removed_or_renamed_field_fails_naming_the_field(self, kind: str) -> None:
        old, new = _versions(kind, ("id", "customer"), ("id", "client"))
        text = self.write_old(old(id=1, customer="ada"), "Order")
        with pytest.raises(DecodeError) as info:
            decode(text, _registry_with(new, "Order"))
        message = str(info.value)
        assert "field 'customer' that the class no longer has (removed or renamed?)" in message

    @pytest.mark.parametrize("kind", ["dataclass", "struct", "namedtuple", "pydantic"])
    def test_a_new_field_without_a_default_fails_naming_the_field(self, kind: str) -> None:
        old, new = _versions(kind, ("id",), ("id", "email"))
        text = self.write_old(old(id=1), "Order")
        with pytest.raises(DecodeError, match="has no field 'email', which the class requires"):
            decode(text, _registry_with(new, "Order"))

    def test_an_enum_member_that_was_removed_fails_naming_the_value(self) -> None:
        class Old(enum.Enum):
            A = "a"
            GONE = "gone"

        class New(enum.Enum):
            A = "a"

        text = self.write_old(Old.GONE, "E")
        with pytest.raises(DecodeError, match="no member with the recorded value 'gone'"):
            decode(text, _registry_with(New, "E"))

    def test_the_error_names_the_step_when_read_through_a_journal(self, db: Path) -> None:
        old, new = _versions("dataclass", ("id", "customer"), ("id",))
        with Journal("g", run="r", path=db, registry=_registry_with(old, "Order")) as j:
            j.step("load_order", returns, old(id=1, customer="ada"))
        with (
            pytest.raises(DecodeError) as info,
            Journal("g", run="r", path=db, registry=_registry_with(new, "Order")) as j,
        ):
            j.step("load_order", returns, unchecked(None))
        assert str(info.value).startswith("step 'load_order' (run ")
        assert "field 'customer'" in str(info.value)


def _registry_with(cls: type, name: str) -> CodecRegistry:
    reg = CodecRegistry()
    reg.register(cls, name=name)
    return reg


def _versions(
    kind: str, old_fields: tuple[str, ...], new_fields: tuple[str, ...]
) -> tuple[type, type]:
    def make(fields: tuple[str, ...], label: str) -> type:
        if kind == "dataclass":
            return dataclasses.make_dataclass(label, [(f, Any) for f in fields])
        if kind == "struct":
            return msgspec.defstruct(label, [(f, Any) for f in fields])
        if kind == "namedtuple":
            from typing import NamedTuple

            made: type = NamedTuple(label, [(f, Any) for f in fields])  # type: ignore[misc]
            return made
        fields_of: dict[str, Any] = {f: (Any, ...) for f in fields}
        model: type = pydantic.create_model(label, **fields_of)
        return model

    return make(old_fields, "Old"), make(new_fields, "New")


# -- exceptions as values ------------------------------------------------------------


class TestAnExceptionReturnedAsAValue:
    def test_a_builtin_exception_comes_back_with_its_type_and_args(self) -> None:
        back = roundtrip([KeyError("k"), FileNotFoundError(2, "No such file", "/x")])
        assert_same([KeyError("k"), FileNotFoundError(2, "No such file", "/x")], back)
        assert (back[1].errno, back[1].filename) == (2, "/x")

    def test_a_registered_exception_with_an_odd_init_comes_back_with_its_attributes(self) -> None:
        back = roundtrip(QuotaError("ada", 5))
        assert type(back) is QuotaError
        assert (back.args, back.user, back.limit) == (
            ("user ada is over the quota of 5",),
            "ada",
            5,
        )

    def test_an_unregistered_exception_is_refused_like_any_class(self) -> None:
        class Oops(Exception):
            pass

        with pytest.raises(EncodeError, match="Oops is not registered"):
            encode({"error": Oops("x")})

    def test_its_traceback_and_cause_are_not_kept(self) -> None:
        try:
            raise ValueError("inner") from KeyError("cause")
        except ValueError as exc:
            back = roundtrip(exc)
        assert (back.__traceback__, back.__cause__) == (None, None)

    def test_a_failed_step_records_its_error_as_text(self, db: Path) -> None:
        def fail() -> None:
            raise QuotaError("ada", 5)

        with pytest.raises(QuotaError), Journal("g", run="r", path=db) as j:
            j.step("charge", fail)
        [(error, result)] = rows(db, f'SELECT error, result FROM "{j.table}"')
        assert (error, result) == ("QuotaError: user ada is over the quota of 5", None)


# -- errors and hand-edited rows ---------------------------------------------------------


class TestAResultThatCannotBeEncoded:
    def test_it_is_refused_before_anything_is_written_naming_step_and_path(self, db: Path) -> None:
        with pytest.raises(EncodeError) as info, Journal("g", run="r", path=db) as j:
            j.step("fetch", returns, {"ok": 1})
            j.step(
                "summarize", returns, {"items": [0, 1, 2, {"when": Unregistered(dt.date.today())}]}
            )
        message = str(info.value)
        assert message.startswith("step 'summarize' (run ")
        assert (
            "cannot encode value at $.items[3].when: type test_codec.Unregistered is not "
            "registered; register it with letitloop.codec.register(Unregistered)"
        ) in message
        assert [k for (k,) in rows(db, f'SELECT key FROM "{j.table}"')] == ["fetch"]

    def test_a_value_that_contains_itself_is_refused_clearly(self) -> None:
        loop: list[Any] = [1]
        loop.append(loop)
        with pytest.raises(EncodeError, match="contains itself"):
            encode(loop)

    def test_a_key_that_is_not_a_str_is_named_once_in_the_path(self) -> None:
        with pytest.raises(EncodeError) as info:
            encode({"a": {"b": 1, 2: [object()]}})
        assert info.value.path == "$.a[2][0]"

    def test_a_key_whose_repr_fails_still_gives_a_path(self) -> None:
        with pytest.raises(EncodeError) as info:
            encode({10**5000: object()})
        assert info.value.path == "$[<int of 16610 bits>]"

    def test_a_class_given_instead_of_an_instance_is_named(self) -> None:
        with pytest.raises(EncodeError) as info:
            encode({"kind": Point})
        assert str(info.value) == (
            "cannot encode value at $.kind: the class codec_values.Point cannot be a step "
            "result: it is code, not data, and nothing could rebuild it from the journal when "
            "the run resumes; return an instance of it, or its name"
        )


def _named_function() -> int:
    return 1


async def _async_function() -> int:
    return 1


def _generator() -> Any:
    yield 1


async def _async_generator() -> Any:
    yield 1


class _Thing:
    def method(self) -> None:
        pass


def _never_stored_values(stack: contextlib.ExitStack, tmp: Path) -> list[tuple[Any, str, str]]:
    """(a value that can never be a step result, what the message calls it, what to return)."""
    coroutine = _async_function()
    stack.callback(coroutine.close)
    agen = _async_generator()
    stack.callback(lambda: asyncio.run(agen.aclose()))
    sock = stack.enter_context(socket.socket())
    conn = sqlite3.connect(tmp / "other.db")
    stack.callback(conn.close)
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    stack.callback(process.wait)
    function = "what it computes (call it inside the step), or a name to look it up by"
    lock = "the data it guards"
    listed = "its items in a list"
    return [
        (lambda: 1, "a lambda", function),
        (_named_function, "the function _named_function", function),
        (len, "the function len", function),
        (_Thing().method, "the function _Thing.method", function),
        (functools.partial(_named_function), "the function _named_function", function),
        (Point, "the class codec_values.Point", "an instance of it, or its name"),
        (json, "the module json", "the data you need from it, or its name"),
        (coroutine, "a coroutine", "its awaited result (an async function is a step"),
        (_generator(), "a generator", listed),
        (agen, "a generator (async_generator)", listed),
        (map(str, [1]), "an iterator (map)", listed),
        ({"a": 1}.items(), "a dict view (dict_items)", "its items in a list (list(d.keys()))"),
        (
            stack.enter_context(open(tmp / "out.txt", "w")),
            "an open file or stream (_io.TextIOWrapper)",
            "its path, or what you read from it",
        ),
        (io.BytesIO(b"x"), "an open file or stream (_io.BytesIO)", "its path, or what you read"),
        (threading.Lock(), "a lock (_thread.lock)", lock),
        (threading.RLock(), "a lock (_thread.RLock)", lock),
        (threading.Condition(), "a lock (threading.Condition)", lock),
        (threading.Event(), "a lock (threading.Event)", lock),
        (asyncio.Lock(), "a lock (asyncio.locks.Lock)", lock),
        (sock, "an open socket (socket.socket)", "the data it received, or the address"),
        (threading.Thread(target=print), "a thread (threading.Thread)", "what it computed"),
        (process, "a running process (subprocess.Popen)", "its pid, exit status or output"),
        (conn, "a database connection (sqlite3.Connection)", "the rows you read from it"),
        (concurrent.futures.Future(), "a future (concurrent.futures._base.Future)", "its result"),
    ]


class TestAValueThatCanNeverBeStored:
    """A function, an open file, a lock…: the error says what to return, never to register it."""

    def test_each_is_named_with_what_to_return_instead(self, tmp_path: Path) -> None:
        with contextlib.ExitStack() as stack:
            for value, what, instead in _never_stored_values(stack, tmp_path):
                with pytest.raises(EncodeError) as info:
                    encode({"out": [value]})
                message = str(info.value)
                assert message.startswith(
                    f"cannot encode value at $.out[0]: {what} cannot be a step result: "
                ), message
                assert "nothing could rebuild it from the journal when the run resumes" in message
                assert f"; return {instead}" in message
                assert "register" not in message, message
                assert info.value.path == "$.out[0]"

    def test_a_step_returning_one_is_refused_before_anything_is_written(self, db: Path) -> None:
        with pytest.raises(EncodeError) as info, Journal("g", run="r", path=db) as j:
            j.step("fetch", returns, {"ok": 1})
            j.step("make_handler", lambda: lambda event: event)
        message = str(info.value)
        assert message.startswith("step 'make_handler' (run ")
        assert "cannot encode value at $: a lambda cannot be a step result" in message
        assert "register" not in message
        assert [k for (k,) in rows(db, f'SELECT key FROM "{j.table}"')] == ["fetch"]

    def test_an_object_that_could_be_data_is_still_told_how_to_register(self) -> None:
        with pytest.raises(EncodeError, match=r"register\(OrderedDict, encode=\.\.\."):
            encode({"d": OrderedDict(a=1)})

    def test_a_registered_encode_for_such_a_class_is_used(self) -> None:
        own = CodecRegistry()
        own.register(io.StringIO, encode=lambda f: f.getvalue(), decode=io.StringIO)
        back = decode(encode({"buffer": io.StringIO("kept")}, own), own)
        assert type(back["buffer"]) is io.StringIO
        assert back["buffer"].getvalue() == "kept"


class TestAHandEditedRow:
    @pytest.mark.parametrize(
        "text",
        [
            '{"!datetime": 5}',
            '{"!UUID": "not-a-uuid"}',
            '{"!dict": [[1]]}',
            '{"!float": "1.5"}',
            '{"!bytes": "***"}',
            '{"!list": [1, {"!tuple": {"a": 1}}]}',
            '{"!ValueError": {"args": ["x"], "attrs": {"__class__": "int"}}}',
            "not json",
        ],
    )
    def test_a_malformed_tag_is_a_decode_error_not_a_crash(self, text: str) -> None:
        with pytest.raises(DecodeError):
            decode(text)

    def test_tags_spelled_with_whitespace_or_escapes_are_all_decoded(self) -> None:
        text = (
            '{ "!list" : [ {"!a": 1, "b": 2}, { "\\u0021tuple" : [1] },\n'
            ' {\t"!date": "2020-01-01"} ] }'
        )
        assert_same([{"!a": 1, "b": 2}, (1,), dt.date(2020, 1, 1)], decode(text))
        with pytest.raises(DecodeError, match=r"'os\.system' is not registered"):
            decode('{"!list": [{"!date": "2020-01-01"}, [1, { "\\u0021os.system": 1}]]}')

    @pytest.mark.parametrize(
        "name", ["os.system", "subprocess.Popen", "builtins.eval", "posix.system"]
    )
    def test_a_tag_naming_an_importable_callable_is_refused(self, name: str) -> None:
        with pytest.raises(DecodeError, match=f"type '{name}' is not registered"):
            decode(f'{{"!list": [{{"!{name}": {{"args": ["touch /tmp/x"]}}}}]}}')

    def test_refused_in_a_fresh_process_with_nothing_imported_or_called(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "j.db"
        marker = tmp_path / "pwned"
        with Journal("g", run="r", path=db) as j:
            for i in range(3):
                j.step(f"s{i}", returns, i)
        evil = [
            {"!os.system": {"command": f"touch {marker}"}},
            {"!subprocess.Popen": {"args": ["touch", str(marker)]}},
            {"!list": [{"!subprocess.Popen": [["touch", str(marker)]]}]},
        ]
        con = sqlite3.connect(db)
        for i, row in enumerate(evil):
            con.execute(
                # checksum NULL: as a row written before checksums (a hand edit that
                # kept the checksum is refused as damage first, tests/test_checksums.py)
                f'UPDATE "{j.table}" SET result = ?, fn = ?, checksum = NULL WHERE key = ?',
                (json.dumps(row), "__main__.returns", f"s{i}"),
            )
        con.commit()
        con.close()
        script = write_script(
            tmp_path,
            "reader.py",
            f"""
            import sys
            from letitloop import Journal, unchecked
            from letitloop.errors import DecodeError

            def returns(v):
                return v

            outcomes = []
            with Journal("g", run="r", path={str(db)!r}) as j:
                before = set(sys.modules)
                for i in range(3):
                    try:
                        j.step(f"s{{i}}", returns, unchecked(None))
                        outcomes.append("decoded")
                    except DecodeError as exc:
                        outcomes.append(str(exc))
                new = sorted(set(sys.modules) - before)
            print(outcomes)
            print("new modules:", new)
            """,
        )
        proc = run_python(script, env={"PYTHONPATH": CHILD_PATH})
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.count("is not registered") == 3
        assert "new modules: []" in proc.stdout
        assert not marker.exists()


# -- journals, processes, optional pydantic ------------------------------------------------


class TestInARealJournal:
    @given(values)
    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    def test_a_recorded_value_replays_with_its_types(self, tmp_path: Path, value: Any) -> None:
        # A run of its own for each value, in one file (made once, not once a value).
        db, run = tmp_path / "j.db", uuid.uuid4().hex
        with Journal("g", run=run, path=db) as j:
            j.step("v", returns, value)
        with Journal("g", run=run, path=db) as j:
            back = j.step("v", returns, unchecked("not called"))
        assert_same(value, back)

    def test_a_registry_passed_to_the_journal_is_used_both_ways(self, db: Path) -> None:
        own = CodecRegistry(Unregistered)
        value = {"u": Unregistered(dt.date(2020, 1, 1))}
        with Journal("g", run="r", path=db, registry=own) as j:
            j.step("v", returns, value)
        with Journal("g", run="r", path=db, registry=own) as j:
            assert_same(value, j.step("v", returns, unchecked(None)))

    def test_a_durable_run_result_comes_back_typed(self, db: Path) -> None:
        own = CodecRegistry(Unregistered, extends=default_registry)
        calls = []

        @durable(goal_id="g", run="r", path=db, registry=own)
        def job() -> Any:
            calls.append(1)
            return (Unregistered(dt.date(2020, 1, 1)), Point(1))

        first, second = job(), job()
        assert calls == [1]
        assert_same(first, second)

    def test_the_row_is_readable_json_text(self, db: Path) -> None:
        with Journal("g", run="r", path=db) as j:
            j.step("v", returns, {"when": dt.date(2026, 11, 30), "n": (1, 2)})
        [(text,)] = rows(db, f'SELECT result FROM "{j.table}"')
        assert json.loads(text) == {"when": {"!date": "2026-11-30"}, "n": {"!tuple": [1, 2]}}


class TestAcrossAProcessRestart:
    def test_values_written_by_one_process_read_back_typed_in_another(self, tmp_path: Path) -> None:
        db = tmp_path / "j.db"
        common = """
            import sys
            from letitloop import Journal
            from codec_values import make_value, difference

            calls = 0

            def produce(seed):
                global calls
                calls += 1
                return make_value(seed)

            N = 300
            """
        writer = write_script(
            tmp_path,
            "writer.py",
            common
            + f"""
            with Journal("g", run="r", path={str(db)!r}) as j:
                for seed in range(N):
                    j.step(f"v{{seed}}", produce, seed)
            print("wrote", calls)
            """,
        )
        reader = write_script(
            tmp_path,
            "reader.py",
            common
            + f"""
            bad = []
            with Journal("g", run="r", path={str(db)!r}) as j:
                for seed in range(N):
                    back = j.step(f"v{{seed}}", produce, seed)
                    diff = difference(make_value(seed), back)
                    if diff:
                        bad.append((seed, diff))
            print("called", calls, "bad", bad)
            """,
        )
        env = {"PYTHONPATH": CHILD_PATH}
        wrote = run_python(writer, env=env)
        assert wrote.returncode == 0, wrote.stderr
        assert wrote.stdout.strip() == "wrote 300"
        read = run_python(reader, env=env)
        assert read.returncode == 0, read.stderr
        assert read.stdout.strip() == "called 0 bad []"


class TestWithoutPydantic:
    def test_the_codec_and_journal_work_when_pydantic_cannot_be_imported(
        self, tmp_path: Path
    ) -> None:
        blocker = tmp_path / "blocked"
        (blocker / "pydantic").mkdir(parents=True)
        (blocker / "pydantic" / "__init__.py").write_text(
            "raise ImportError('pydantic is blocked for this test')\n"
        )
        script = write_script(
            tmp_path,
            "nopydantic.py",
            f"""
            import datetime, sys
            from letitloop import Journal
            from letitloop.codec import encode, decode
            import codec_values

            try:
                import pydantic
            except ImportError as exc:
                print("blocked:", exc)
            value = [codec_values.Point(1), codec_values.Event("e", (1, datetime.date(2020, 1, 1)))]
            assert decode(encode(value)) == value
            with Journal("g", run="r", path={str(tmp_path / "j.db")!r}) as j:
                j.step("v", lambda: value)
            with Journal("g", run="r", path={str(tmp_path / "j.db")!r}) as j:
                assert j.step("v", lambda: None) == value
            print("ok", "pydantic" in sys.modules)
            """,
        )
        proc = run_python(script, env={"PYTHONPATH": os.pathsep.join([str(blocker), CHILD_PATH])})
        assert proc.returncode == 0, proc.stderr
        assert "blocked: pydantic is blocked for this test" in proc.stdout
        assert "ok False" in proc.stdout

    def test_importing_letitloop_does_not_import_pydantic(self) -> None:
        proc = run_python_code(
            "import sys, letitloop, letitloop.codec; "
            "print(sorted(m for m in ('pydantic', 'zoneinfo', 'pickle') if m in sys.modules))"
        )
        assert proc.stdout.strip() == "[]", proc.stderr


def run_python_code(code: str) -> Any:
    import subprocess

    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


# -- what was recorded must replay (issue 13 §4) ------------------------------------------

WORST_KINDS = ["tuple", "int-keyed dict", "frozenset", "lookalike dict", "Struct"]
LEAF = dt.date(2020, 1, 1)


def stack_depth() -> int:
    frame: FrameType | None = sys._getframe()
    depth = 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    return depth


def near_the_recursion_limit(fn: Any, frames_left: int = 12) -> Any:
    """``fn()`` called from so deep a stack that only ``frames_left`` frames remain."""

    def dive(n: int) -> Any:
        return fn() if n <= 0 else dive(n - 1)

    return dive(sys.getrecursionlimit() - stack_depth() - frames_left)


class TestAValueNestedUpToTheLimit:
    """Encode accepts MAX_DEPTH levels and refuses one more; decode reads what encode wrote."""

    @pytest.mark.parametrize("kind", list(WRAPPERS))
    def test_max_depth_levels_round_trip_and_one_more_is_refused_naming_the_path(
        self, kind: str
    ) -> None:
        levels = 0
        value: Any = LEAF
        while nesting(nest([kind], value)) <= MAX_DEPTH:
            value = nest([kind], value)
            levels += 1
        assert nesting(value) in (MAX_DEPTH - 1, MAX_DEPTH)
        assert_same(value, roundtrip(value))
        deeper = nest([kind], value)
        with pytest.raises(EncodeError) as info:
            encode(deeper)
        assert f"it nests more than {MAX_DEPTH} levels deep" in str(info.value)
        assert info.value.path.startswith("$") and len(info.value.path) > levels

    def test_the_path_of_a_too_deep_value_leads_to_the_level_past_the_limit(self) -> None:
        value = {"rows": nest(["list"] * MAX_DEPTH, LEAF)}  # 101 levels
        with pytest.raises(EncodeError) as info:
            encode(value)
        assert info.value.path == "$.rows" + "[0]" * (MAX_DEPTH - 1)

    @pytest.mark.parametrize("plain", [True, False], ids=["plain JSON", "tagged"])
    def test_plain_json_has_the_same_limit(self, plain: bool) -> None:
        leaf = 1 if plain else LEAF
        ok = nest(["list"] * MAX_DEPTH, leaf)
        if plain:
            assert encode(ok) == msgspec.json.encode(ok).decode()
        assert_same(ok, roundtrip(ok))
        with pytest.raises(EncodeError, match="nests more than"):
            encode([ok])
        with pytest.raises(EncodeError, match="nests more than"):
            encode(_large([ok]))  # through the level scan

    def test_an_empty_container_past_the_limit_counts(self) -> None:
        with pytest.raises(EncodeError, match="nests more than"):
            encode(nest(["list"] * MAX_DEPTH, []))
        with pytest.raises(EncodeError, match="nests more than"):
            encode(_large(nest(["dict"] * MAX_DEPTH, {})))

    @pytest.mark.parametrize("kind", WORST_KINDS)
    def test_it_encodes_and_decodes_from_a_call_stack_near_the_recursion_limit(
        self, kind: str
    ) -> None:
        value = nest([kind] * MAX_DEPTH, LEAF)
        text = encode(value)
        assert near_the_recursion_limit(lambda: encode(value)) == text
        assert_same(value, near_the_recursion_limit(lambda: decode(text)))

    def test_a_durable_run_returns_it_in_a_fresh_process_called_from_deep_recursion(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "j.db"
        script = write_script(
            tmp_path,
            "job.py",
            f"""
            import datetime, sys
            from letitloop import durable
            from codec_values import difference, nest

            KINDS = ["tuple", "int-keyed dict", "NamedTuple", "Struct"] * 25  # 100 levels
            calls = []

            @durable(goal_id="deep", run="r", path={str(db)!r})
            def job():
                calls.append(1)
                return nest(KINDS, datetime.date(2020, 1, 1))

            def dive(n):
                return job() if n <= 0 else dive(n - 1)

            frames = 0
            frame = sys._getframe()
            while frame is not None:
                frame, frames = frame.f_back, frames + 1
            back = dive(sys.getrecursionlimit() - frames - 40) if sys.argv[1] == "deep" else job()
            print(len(calls), difference(nest(KINDS, datetime.date(2020, 1, 1)), back))
            """,
        )
        first = run_python(script, "shallow", env={"PYTHONPATH": CHILD_PATH})
        assert (first.returncode, first.stdout.strip()) == (0, "1 None"), first.stderr
        replay = run_python(script, "deep", env={"PYTHONPATH": CHILD_PATH})
        assert (replay.returncode, replay.stdout.strip()) == (0, "0 None"), replay.stderr

    def test_a_cycle_is_refused_as_too_deep_without_a_recursion_error(self) -> None:
        loop: dict[str, Any] = {}
        loop["me"] = (loop,)
        with pytest.raises(EncodeError, match="or contains itself"):
            encode(loop)
        with pytest.raises(EncodeError, match="or contains itself"):
            near_the_recursion_limit(lambda: encode(loop))


deep_kinds = st.lists(
    st.sampled_from(sorted(WRAPPERS)), min_size=MAX_DEPTH - 4, max_size=MAX_DEPTH + 2
)
leaves = st.one_of(
    st.none(), st.integers(), st.floats(), odd_text, st.dates(), st.uuids(), big_ints
)


class TestEncodeAcceptedMeansDecodeReturnsTheSameValue:
    @given(deep_kinds, leaves)
    @FEW
    def test_a_value_near_the_depth_limit_round_trips_or_is_refused_with_its_path(
        self, kinds: list[str], leaf: Any
    ) -> None:
        value = nest(kinds, leaf)
        if nesting(value) <= MAX_DEPTH:
            assert_same(value, roundtrip(value))
        else:
            with pytest.raises(EncodeError, match=f"more than {MAX_DEPTH} levels") as info:
                encode(value)
            assert info.value.path.startswith("$")

    @given(
        st.recursive(
            scalars
            | st.sampled_from([object(), Unregistered(LEAF), Point, print, StrKey("s"), Perm])
            | st.builds(OrderedDict),
            containers,
            max_leaves=10,
        )
    )
    @FEW
    def test_encode_either_refuses_with_an_encode_error_or_the_value_comes_back(
        self, value: Any
    ) -> None:
        try:
            text = encode(value)
        except EncodeError as exc:
            assert exc.path.startswith("$")
            return
        text.encode("utf-8")  # strict: text SQLite can store as UTF-8
        assert_same(value, decode(text))

    @pytest.mark.parametrize("wrap", [lambda v: v, lambda v: [v, (v,)], _large])
    def test_a_value_that_holds_itself_deep_inside_is_an_encode_error(self, wrap: Any) -> None:
        loop: list[Any] = [1, {"a": [LEAF]}]
        loop[1]["a"].append(loop)
        with pytest.raises(EncodeError, match="contains itself"):
            encode(wrap(loop))


class TestARowTooDeepForThisProcess:
    def test_it_is_a_decode_error_saying_so_not_blaming_an_edit(self) -> None:
        text = '{"!list":' + "[" * 3000 + '{"!date":"2020-01-01"}' + "]" * 3000 + "}"
        with pytest.raises(DecodeError) as info:
            decode(text)
        message = str(info.value)
        assert "nests 3002 levels deep" in message
        assert f"recursion limit ({sys.getrecursionlimit()})" in message
        assert "The row itself is intact" in message and "sys.setrecursionlimit()" in message
        assert "edited" not in message

    def test_a_malformed_row_is_still_blamed_on_an_edit(self) -> None:
        for text in ('{"!tuple": 5}', '{"!str": [1]}', '{"!list": [1, {"!int": 7}]}', "{"):
            with pytest.raises(DecodeError, match="edited"):
                decode(text)

    def test_rows_deeper_than_the_limit_written_by_earlier_versions_still_decode(self) -> None:
        # 150 tuples and a 250-deep dict with a typed leaf: accepted before
        # MAX_DEPTH existed, and read back on a fresh thread's stack.
        tuples = '{"!date":"2020-01-01"}'
        for _ in range(150):
            tuples = '{"!tuple":[' + tuples + "]}"
        dicts = '{"!date":"2020-01-01"}'
        for _ in range(250):
            dicts = '{"k":' + dicts + "}"
        assert_same(nest(["tuple"] * 150, LEAF), near_the_recursion_limit(lambda: decode(tuples)))
        assert_same(
            nest(["dict"] * 250, LEAF),
            near_the_recursion_limit(lambda: decode('{"!dict":' + dicts + "}")),
        )

    def test_a_row_too_deep_for_the_limit_reads_back_once_the_limit_is_raised(self) -> None:
        text = '{"!date":"2020-01-01"}'
        for _ in range(400):  # what the earlier encoder let through for lists
            text = "[" + text + "]"
        text = '{"!list":' + text + "}"
        with pytest.raises(DecodeError, match="recursion limit"):
            decode(text)
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(4000)
        try:
            back = decode(text)
        finally:
            sys.setrecursionlimit(old)
        assert_same(nest(["list"] * 400, LEAF), back)


# -- big ints: a form every reader can read, whatever either side's digit guard ------------

needs_digit_guard = pytest.mark.skipif(
    not hasattr(sys, "set_int_max_str_digits"), reason="this Python has no int digit guard"
)


@pytest.fixture
def digit_guard() -> Any:
    """Set this process's int digit guard (sys.set_int_max_str_digits) for one test."""
    old = sys.get_int_max_str_digits()
    yield sys.set_int_max_str_digits
    sys.set_int_max_str_digits(old)


BIG = 10**5000
BIG_VALUES = [
    BIG,
    -(10**4300),  # 4,301 digits
    [BIG, 1],
    {"n": (BIG, 2**64)},
    {"plain": [1, BIG], "floats": [1.5] * 3},
    _large([BIG]),
    [{"id": i, "n": BIG if i == 30 else i} for i in range(40)],  # the records shortcut
    {"typed": LEAF, "deep": nest(["list"] * 20, BIG)},
]


@needs_digit_guard
class TestAnIntBeyondTheDigitGuard:
    @pytest.mark.parametrize("guard", [0, 640, 4300, 100_000])
    @pytest.mark.parametrize("value", BIG_VALUES, ids=lambda v: type(v).__name__)
    def test_it_is_written_as_hex_whatever_the_writers_guard(
        self, digit_guard: Any, guard: int, value: Any
    ) -> None:
        expected = encode(value)  # the default guard
        digit_guard(guard)
        text = encode(value)
        assert text == expected
        assert '"!int":"' in text and "0" * 4301 not in text
        digit_guard(4300)
        assert_same(value, decode(text))
        json.loads(text)  # any JSON reader with the default guard reads it

    def test_an_int_of_4300_digits_stays_a_json_number(self) -> None:
        value = [10**4299, -(10**4299)]
        assert encode(value) == msgspec.json.encode(value).decode()

    def test_a_writer_with_a_lower_guard_writes_hex_where_it_cannot_write_decimal(
        self, digit_guard: Any
    ) -> None:
        digit_guard(640)
        value = {"n": 10**700, "m": 10**500}
        text = encode(value)
        assert text == '{"n":{"!int":"' + hex(10**700) + '"},"m":' + "1" + "0" * 500 + "} "
        assert_same(value, decode(text))

    @pytest.mark.parametrize(
        "text",
        ["[" + "7" * 5000 + "]", '{"!list":[{"!tuple":[-' + "7" * 5000 + "]}]}"],
        ids=["plain", "tagged"],
    )
    def test_a_long_decimal_from_an_unguarded_writer_still_reads_back(self, text: str) -> None:
        sevens = (10**5000 - 1) // 9 * 7  # 5,000 sevens, built without decimal text
        back = decode(text)
        assert back == ([sevens] if text.startswith("[") else [(-sevens,)])

    def test_a_reader_with_a_lower_guard_reads_decimals_the_default_guard_wrote(
        self, digit_guard: Any
    ) -> None:
        value = {"n": 10**4000, "t": (10**700, LEAF)}
        text = encode(value)
        digit_guard(640)
        assert_same(value, decode(text))

    def test_a_reader_in_a_fresh_process_reads_what_an_unguarded_writer_recorded(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "j.db"
        common = """
            import sys
            from letitloop import Journal
            from codec_values import difference, nest

            BIG = 10**5000
            VALUES = [BIG, [BIG, {"k": -(10**4301)}], (10**9999, 1.5), {"plain": [BIG] * 3},
                      [{"id": i, "n": BIG} for i in range(40)], nest(["tuple"] * 30, BIG)]
            calls = 0

            def produce(i):
                global calls
                calls += 1
                return VALUES[i]
            """
        writer = write_script(
            tmp_path,
            "writer.py",
            common
            + f"""
            sys.set_int_max_str_digits(0)
            with Journal("g", run="r", path={str(db)!r}) as j:
                for i in range(len(VALUES)):
                    j.step(f"v{{i}}", produce, i)
            print("wrote", calls)
            """,
        )
        reader = write_script(
            tmp_path,
            "reader.py",
            common
            + f"""
            import json, sqlite3
            assert sys.get_int_max_str_digits() == 4300
            with Journal("g", run="r", path={str(db)!r}) as j:
                back = [j.step(f"v{{i}}", produce, i) for i in range(len(VALUES))]
                bad = [i for i, v in enumerate(back) if difference(VALUES[i], v)]
                table = j.table
            con = sqlite3.connect({str(db)!r})
            for (text,) in con.execute(f'SELECT result FROM "{{table}}"'):
                json.loads(text)  # no decimal beyond the default guard
            print("called", calls, "bad", bad)
            """,
        )
        env = {"PYTHONPATH": CHILD_PATH}
        wrote = run_python(writer, env=env)
        assert wrote.returncode == 0, wrote.stderr
        assert wrote.stdout.strip() == "wrote 6"
        read = run_python(reader, env=env)
        assert read.returncode == 0, read.stderr
        assert read.stdout.strip() == "called 0 bad []"


# -- lone surrogates and other odd text ------------------------------------------------------

NOT_UTF8 = os.fsdecode(b"report-\xff.txt")  # 'report-\udcff.txt'


class OddMode(str, enum.Enum):
    ODD = "\udcff"


register(OddMode)

ODD_TEXT_VALUES = [
    NOT_UTF8,
    "\ud83d\ude00",  # a surrogate pair Python keeps as two lone surrogates
    "\ud800" * 3 + "é\udfff",
    [NOT_UTF8, "plain"],
    {"name": NOT_UTF8},
    {NOT_UTF8: 1, "other": 2},
    {NOT_UTF8: [LEAF]},
    {"!\udcff": 1},
    {"outer": {"!\udcff": (1,)}},
    (NOT_UTF8,),
    {NOT_UTF8, "b"},
    {1: NOT_UTF8, (NOT_UTF8,): 2},
    pathlib.PurePosixPath("/data") / NOT_UTF8,
    pathlib.PosixPath("/data") / NOT_UTF8,
    ValueError(f"cannot parse {NOT_UTF8}"),
    Box(NOT_UTF8, label=NOT_UTF8, tags=[NOT_UTF8]),
    Loose.model_construct(name=NOT_UTF8, **{f"x{NOT_UTF8}": 1}),  # type: ignore[arg-type]  # pydantic refuses them
    OddMode.ODD,
    _large(NOT_UTF8),
    _large({NOT_UTF8: 1.5}),
    [{"name": NOT_UTF8 if i == 3 else "a", "n": i} for i in range(40)],
    [NOT_UTF8] * 40,
    {"big": BIG, "name": NOT_UTF8},
]


class TestTextThatIsNotUTF8:
    @pytest.mark.parametrize("value", ODD_TEXT_VALUES, ids=lambda v: type(v).__name__)
    def test_it_round_trips_exactly_as_utf8_text_with_a_str_tag(self, value: Any) -> None:
        text = encode(value)
        text.encode("utf-8")  # strict: SQLite stores it as UTF-8
        assert '"!str":[' in text
        assert_same(value, decode(text))

    def test_the_tag_keeps_the_readable_parts_as_text(self) -> None:
        assert encode(NOT_UTF8) == '{"!str":["report-",56575,".txt"]}'
        assert encode({NOT_UTF8: 1}) == '{"!dict":[[{"!str":["report-",56575,".txt"]},1]]}'

    @pytest.mark.parametrize("text", ["\x00\x01\x1b]0;title\x07\x1b[2J", "\x7f\x9b\u2028\ufffe"])
    def test_control_characters_round_trip_in_plain_json(self, text: str) -> None:
        value = {"t": text, "l": [text]}
        assert encode(value) == msgspec.json.encode(value).decode()
        assert_same(value, roundtrip(value))

    def test_a_step_returning_a_non_utf8_file_name_replays_it(self, db: Path) -> None:
        value = {"files": [NOT_UTF8, "ok.txt"], "first": pathlib.Path(NOT_UTF8)}
        with Journal("g", run="r", path=db) as j:
            j.step("list", returns, value)
        [(stored,)] = rows(db, f'SELECT result FROM "{j.table}"')
        assert "56575" in stored
        with Journal("g", run="r", path=db) as j:
            assert_same(value, j.step("list", returns, unchecked(None)))


# -- rows written by earlier versions ---------------------------------------------------------

#: Stored texts written by the codec before MAX_DEPTH, "!str" and the digit
#: guard fix (commit adb6575), with the values they hold. Each must decode to
#: its value, and encode must still write that text, or (since a dict or list
#: holding tags is no longer wrapped whole) its unwrapped form: see
#: :func:`codec_values.written_now`. More rows, written by commit 13daf56, are in
#: tests/test_codec_rows.py.
TODAY_ROWS: list[tuple[str, Any]] = [
    ('{"a":1,"b":[1.5,null,"x"]}', {"a": 1, "b": [1.5, None, "x"]}),
    ('[{"!tuple":[1,2]},{"!os.system":"ls"}]', [{"!tuple": [1, 2]}, {"!os.system": "ls"}]),
    ('{"!dict":{"!tuple":[1]}}', {"!tuple": [1]}),
    ('"ü🙂\\u0000\\u001b"', "ü🙂\x00\x1b"),
    ('{"!tuple":[1,"a",null]}', (1, "a", None)),
    ('{"!dict":[[1,"a"],[{"!tuple":[1,2]},[3]],[null,0]]}', {1: "a", (1, 2): [3], None: 0}),
    ('{"!list":[{"!set":[1,2]},{"!frozenset":["a"]}]}', [{1, 2}, frozenset({"a"})]),
    ('{"!list":[{"!bytes":"AP8="},{"!bytearray":"YWI="}]}', [b"\x00\xff", bytearray(b"ab")]),
    (
        '{"!list":[{"!float":"nan"},{"!float":"inf"},{"!float":"-inf"},-0.0,1e308]}',
        [math.nan, math.inf, -math.inf, -0.0, 1e308],
    ),
    (
        "[18446744073709551616,-1180591620717411303424,1" + "0" * 4000 + "]",
        [2**64, -(2**70), 10**4000],
    ),
    ('{"!int":"' + hex(10**5000) + '"}', 10**5000),
    ('{"!dict":{"n":[{"!int":"' + hex(-(10**5000)) + '"}]}}', {"n": [-(10**5000)]}),
    (
        '{"!list":[{"!datetime":"2026-11-30T03:04:05.123456"},{"!datetime":"2026-11-30T03:04:05Z"}]}',
        [
            dt.datetime(2026, 11, 30, 3, 4, 5, 123456),
            dt.datetime(2026, 11, 30, 3, 4, 5, tzinfo=dt.timezone.utc),
        ],
    ),
    (
        '{"!datetime":"2026-01-01T00:00:00+05:30"}',
        dt.datetime(2026, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30))),
    ),
    (
        '{"!datetime":["2026-01-01T00:00:00",-10807000009]}',
        dt.datetime(
            2026, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=-3, seconds=-7, microseconds=-9))
        ),
    ),
    (
        '{"!datetime":["2021-11-07T01:30:00-05:00","America/New_York",1]}',
        dt.datetime(2021, 11, 7, 1, 30, tzinfo=zoneinfo.ZoneInfo("America/New_York"), fold=1),
    ),
    (
        '{"!list":[{"!date":"2026-11-30"},{"!time":"23:59:59.999999"},{"!time":["01:02:00",1]},'
        '{"!timedelta":"-P2DT86394.999993S"}]}',
        [
            dt.date(2026, 11, 30),
            dt.time(23, 59, 59, 999999),
            dt.time(1, 2, fold=1),
            dt.timedelta(days=-3, seconds=5, microseconds=7),
        ],
    ),
    (
        '{"!list":[{"!Decimal":"1.10"},{"!Decimal":"-0"},{"!Decimal":"NaN"},'
        '{"!UUID":"00000000-0000-0000-0000-000000000001"}]}',
        [decimal.Decimal("1.10"), decimal.Decimal("-0"), decimal.Decimal("NaN"), uuid.UUID(int=1)],
    ),
    (
        '{"!list":[{"!PurePosixPath":"rel/x"},{"!PureWindowsPath":"C:\\\\Users\\\\Ada"},'
        '{"!PosixPath":"/tmp/a b"}]}',
        [
            pathlib.PurePosixPath("rel/x"),
            pathlib.PureWindowsPath(r"C:\Users\Ada"),
            pathlib.PosixPath("/tmp/a b"),
        ],
    ),
    (
        '{"!list":[{"!codec_values.Color":"red"},{"!codec_values.Level":2},{"!codec_values.Mode":"fast"}]}',
        [Color.RED, Level.HIGH, Mode.FAST],
    ),
    (
        '{"!list":[{"!codec_values.Point":{"x":1,"y":2}},{"!codec_values.Box":{"content":'
        '[{"!codec_values.Point":{"x":3,"y":0}}],"label":"box","tags":["t"]}},{"!codec_values.Pair":'
        '{"left":{"!tuple":[1,2]},"right":{"!set":[3]}}},{"!codec_values.Event":{"name":"e",'
        '"payload":{"when":{"!date":"2020-01-01"}}}}]}',
        [
            Point(1, 2),
            Box([Point(3)], tags=["t"]),
            Pair((1, 2), {3}),
            Event("e", {"when": dt.date(2020, 1, 1)}),
        ],
    ),
    (
        '{"!dict":[[{"!codec_values.Money":[5,"EUR"]},[{"!codec_values.Money":[6,"JPY"]}]]]}',
        {Money(5, "EUR"): [Money(6, "JPY")]},
    ),
    (
        '{"!list":[{"!ValueError":{"args":["bad",3]}},{"!KeyError":{"args":["k"]}},'
        '{"!codec_values.QuotaError":{"args":["user ada is over the quota of 5"],"attrs":'
        '{"user":"ada","limit":5}}},{"!FileNotFoundError":{"args":[2,"No such file","/x"]}}]}',
        [
            ValueError("bad", 3),
            KeyError("k"),
            QuotaError("ada", 5),
            FileNotFoundError(2, "No such file", "/x"),
        ],
    ),
    (
        '{"!dict":{"when":{"!date":"2026-11-30"},"n":{"!tuple":[1,2]},"!x":{"!dict":{"!y":1}}}}',
        {"when": dt.date(2026, 11, 30), "n": (1, 2), "!x": {"!y": 1}},
    ),
]


def _row_id(x: Any) -> str:
    return x[:24] if type(x) is str else type(x).__name__


class TestRowsWrittenByEarlierVersions:
    @pytest.mark.parametrize(("text", "value"), TODAY_ROWS, ids=_row_id)
    def test_they_decode_to_their_value(self, text: str, value: Any) -> None:
        assert_same(value, decode(text))

    @pytest.mark.parametrize(("text", "value"), TODAY_ROWS, ids=_row_id)
    def test_the_same_value_is_written_as_the_same_text_or_its_unwrapped_form(
        self, text: str, value: Any
    ) -> None:
        assert encode(value) == written_now(text)

    def test_a_big_int_tagged_beside_a_shorter_one_still_decodes(self) -> None:
        # Earlier versions tagged every int over 13,000 bits once one int in
        # the value passed 4,300 digits; ints up to 4,300 digits are now decimal.
        text = '{"!list":[{"!int":"' + hex(10**4000) + '"},{"!int":"' + hex(10**5000) + '"}]}'
        assert_same([10**4000, 10**5000], decode(text))
        assert encode([10**4000, 10**5000]) == (
            "[1" + "0" * 4000 + ',{"!int":"' + hex(10**5000) + '"}] '
        )


# -- the plain-JSON check and its portable twin (issue 15) ---------------------------------------


class DictSub(dict):  # type: ignore[type-arg]
    pass


class ListSub(list):  # type: ignore[type-arg]
    pass


class IntSub(int):
    pass


def plain_verdict(check: Any, value: Any) -> bool:
    """What a plain-JSON check says of ``value``, its float groups checked as encode does."""
    groups = check(value)
    return groups is not None and codec._finite(b"null", groups)


def general_dict(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` in a table CPython keeps 'general' (it once held a non-str key)."""
    out: dict[Any, Any] = {0.5: None, **d}
    del out[0.5]
    return out


lookalikes = st.sampled_from(
    [IntSub(1), StrKey("s"), Level.LOW, Mode.FAST, True, math.nan, math.inf, -0.0, (1,), b"x"]
)
plain_keys = st.text(max_size=3) | st.sampled_from(["!", "!x", "!dict", "!tuple"])
odd_keys = st.sampled_from([1, True, None, 1.5, StrKey("k"), (1,), Level.LOW])


def plain_or_not(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(inner, max_size=5),
        st.dictionaries(plain_keys, inner, max_size=4),
        st.dictionaries(plain_keys | odd_keys, inner, max_size=3),
        st.dictionaries(plain_keys, inner, min_size=1, max_size=3).map(general_dict),
        st.dictionaries(st.sampled_from(["!a", "!tuple"]), inner, min_size=1, max_size=1),
        st.lists(inner, max_size=3).map(ListSub),
        st.dictionaries(plain_keys, inner, max_size=3).map(DictSub),
        # records: many dicts of one shape, checked column by column
        st.lists(st.fixed_dictionaries({"a": inner, "b": inner}), min_size=16, max_size=20),
    )


almost_plain = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=3) | lookalikes,
    plain_or_not,
    max_leaves=40,
)


class TestThePlainJSONCheckAndItsPortableTwin:
    """codec._plain_scan is the C-speed level scan on CPython; _plain_walk runs anywhere."""

    def test_the_level_scan_is_the_one_used_on_cpython(self) -> None:
        if sys.implementation.name == "cpython":
            assert codec._plain_scan is codec._plain_referents

    @pytest.mark.slow  # 150 generated values, each checked four ways
    @given(almost_plain, st.sampled_from([0, 0, 0, 1, MAX_DEPTH - 2, MAX_DEPTH - 1, MAX_DEPTH]))
    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    def test_both_agree_on_every_value_and_so_does_the_small_check(
        self, value: Any, levels: int
    ) -> None:
        value = nest(["list"] * levels, value)
        scan = plain_verdict(codec._plain_referents, value)
        walk = plain_verdict(codec._plain_walk, value)
        assert scan == walk
        small = codec._plain_small(value)
        assert small is None or small == walk
        if type(value) in (dict, list):
            few = codec._plain_few(value)
            assert few is None or few == walk

    @pytest.mark.parametrize(
        ("value", "plain"),
        [
            ({"a": [1, 2.5, None, True, "s"]}, True),
            (DictSub(a=1), False),
            (ListSub([1]), False),
            (IntSub(1), False),
            (StrKey("s"), False),
            ({StrKey("k"): 1}, False),
            (Level.LOW, False),
            ([True, False], True),
            ([{"!x": 1}], True),  # below the top a tag-like key is stored untouched
            ([math.nan], False),
            ([1e308, 1e308], True),  # finite, though their sum is not
            ({1: "a"}, False),
            ({True: "a"}, False),
            (general_dict({"a": 1}), True),
            ([general_dict({"a": 1})] * 20, True),
            ([{"a": 1, "b": 2}] * 19 + [general_dict({"a": 1, "b": 2})], True),
            ([{"a": 1, "b": 2}] * 19 + [{"a": 1, 2: 2}], False),
            (nest(["list"] * (MAX_DEPTH - 1), 1), True),
            (nest(["list"] * (MAX_DEPTH - 1), []), False),
            (nest(["dict"] * MAX_DEPTH, 1), False),
        ],
        ids=_row_id,
    )
    @pytest.mark.parametrize("where", ["at the top", "in a large value"])
    def test_both_say_what_is_plain(self, value: Any, plain: bool, where: str) -> None:
        v = _large(value) if where == "in a large value" else [value]
        assert plain_verdict(codec._plain_referents, v) is plain
        assert plain_verdict(codec._plain_walk, v) is plain
        assert codec._plain_few(v) in (None, plain)

    def test_a_one_key_dict_whose_key_looks_like_a_tag_is_plain_only_below_the_top(self) -> None:
        for check in (codec._plain_referents, codec._plain_walk):
            assert check({"!x": 1}) is None
            assert check([{"!x": 1}]) is not None

    def test_a_cycle_is_not_plain_for_either(self) -> None:
        loop: list[Any] = []
        loop.append(loop)
        assert codec._plain_referents(loop) is None
        assert codec._plain_walk(loop) is None
        assert codec._plain_few(loop) is None  # too many parts: the scan decides

    def test_a_general_dict_is_stored_as_plain_json(self) -> None:
        value = _large(general_dict({"k": [1, 2]}))
        assert encode(value) == msgspec.json.encode(value).decode()


class TestTheBuiltInTags:
    """The built-in tags are split over tags.py and the walks; the registry reserves them all."""

    def test_every_tag_a_document_can_hold_is_a_name_no_class_may_register(self) -> None:
        from letitloop.codec import decoding, registry

        assert set(decoding._BUILTIN_DECODERS) == registry._RESERVED_NAMES
        for name in decoding._BUILTIN_DECODERS:
            with pytest.raises(ValueError, match="reserved"):
                CodecRegistry().register(Point, name=name)

    def test_every_type_with_a_built_in_tag_is_refused_by_register(self) -> None:
        from letitloop.codec import encoding, tags

        # pathlib's paths join the encoders once a path is met (tags.path_encoder).
        paths = {pathlib.PurePosixPath, pathlib.PureWindowsPath, pathlib.PosixPath}
        paths.add(pathlib.WindowsPath)
        assert set(encoding._BUILTIN_ENCODERS) - paths == tags._BUILTIN_TYPES
        for t in {*encoding._BUILTIN_ENCODERS, *paths}:
            with pytest.raises(TypeError, match="built in"):
                CodecRegistry().register(t)


class Gadget:
    """A class with an encode/decode pair that fails (see TestARegisteredFunctionThatFails)."""


class Mute(Exception):
    """An exception whose message cannot be turned into text."""

    def __str__(self) -> str:
        raise RuntimeError("no text")


def _raise_mute(_: Any) -> Any:
    raise Mute()


class TestARegisteredFunctionThatFails:
    """Its error is quoted as a failed step's error is recorded (letitloop.errors.error_text)."""

    def test_a_failing_encode_is_named_with_its_error(self) -> None:
        from letitloop.errors import error_text

        own = CodecRegistry()
        own.register(Gadget, name="app.Gadget", encode=_raise_mute, decode=lambda v: Gadget())
        with pytest.raises(EncodeError) as info:
            encode([Gadget()], own)
        assert (
            "the encode function registered for test_codec.Gadget failed: "
            f"{error_text(Mute())}" in str(info.value)
        )

    def test_a_failing_decode_is_named_with_its_error(self) -> None:
        from letitloop.errors import error_text

        own = CodecRegistry()
        own.register(Gadget, name="app.Gadget", encode=lambda g: 1, decode=_raise_mute)
        with pytest.raises(DecodeError) as info:
            decode(encode([Gadget()], own), own)
        assert (
            "the decode function registered for test_codec.Gadget failed: "
            f"{error_text(Mute())}" in str(info.value)
        )
