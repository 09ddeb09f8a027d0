"""Rows that any SQLite browser can query: a dict of str keys stays a JSON object, a list an array.

The stored format (docs/types.md): plain JSON as msgspec writes it; a dict
or list holding typed values as a JSON object or array with each typed
value tagged in its place, followed by the mark (a space); any other value
as one tag. Checked with real SQLite queries on real journal rows, on rows
written by earlier versions, and under hypothesis at every level of nesting.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import json
import math
import os
import pathlib
import re
import sqlite3
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from codec_values import (
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
    show,
    written_now,
)
from helpers import lil_forked
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from letitloop import Journal, durable, unchecked
from letitloop.codec import decode, encode

NOT_UTF8 = os.fsdecode(b"report-\xff.txt")  # 'report-\udcff.txt'
BIG = 10**5000
HEX_BIG = hex(BIG)
WHEN = dt.datetime(2026, 11, 30, 3, 4, 5, tzinfo=dt.timezone.utc)
#: The real `lil` entry point, as a child process.
LIL = [sys.executable, "-m", "letitloop"]


def assert_same(value: Any, back: Any) -> None:
    diff = difference(value, back)
    assert diff is None, diff


def returns(value: Any) -> Any:
    return value


def query(
    db: Path | sqlite3.Connection, sql: str, args: tuple[Any, ...] = ()
) -> list[tuple[Any, ...]]:
    """Read as any SQLite browser would: a separate connection (``db``'s own, or one the
    caller opened on the file for many queries), the file's own SQL."""
    if isinstance(db, sqlite3.Connection):
        return db.execute(sql, args).fetchall()
    con = sqlite3.connect(db)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def goal_table(db: Path, goal: str) -> str:
    """The goal's journal table, looked up in ``goals`` as docs/inspecting.md says."""
    [(table,)] = query(db, "SELECT journal_table FROM goals WHERE goal = ?", (goal,))
    return str(table)


def record(db: Path, values: dict[str, Any], goal: str = "g") -> str:
    """Each value as the result of a step of that name, in a real journal; the goal's table."""
    with Journal(goal, run="r", path=db) as j:
        for key, value in values.items():
            j.step(key, returns, value)
    return goal_table(db, goal)


def replay(db: Path, keys: list[str], goal: str = "g") -> list[Any]:
    """The recorded results of those steps, as a later attempt gets them (nothing is called)."""
    with Journal(goal, run="r", path=db) as j:
        return [j.step(key, returns, unchecked("not called")) for key in keys]


# -- the format --------------------------------------------------------------------------------


class TestADictOfStrKeysHoldingTypedValues:
    def test_it_is_a_json_object_with_each_typed_value_tagged_in_its_place(self) -> None:
        value = {"hits": 3, "when": WHEN, "user": {"id": 7, "seen": [dt.date(2020, 1, 1)]}}
        assert encode(value) == (
            '{"hits":3,"when":{"!datetime":"2026-11-30T03:04:05Z"},'
            '"user":{"id":7,"seen":[{"!date":"2020-01-01"}]}} '
        )
        assert_same(value, decode(encode(value)))

    def test_a_list_is_a_json_array_likewise(self) -> None:
        value = [1, (2, 3), {"at": dt.date(2020, 1, 1)}]
        assert encode(value) == '[1,{"!tuple":[2,3]},{"at":{"!date":"2020-01-01"}}] '
        assert_same(value, decode(encode(value)))

    @pytest.mark.parametrize(
        ("value", "text"),
        [
            ({"hits": 3}, '{"hits":3}'),  # plain JSON: as msgspec writes it
            ({"hits": (3,)}, '{"hits":{"!tuple":[3]}} '),  # tags inside: the mark
            ([math.nan], '[{"!float":"nan"}] '),
            ((3,), '{"!tuple":[3]}'),  # one tag at the top says it all
            ({1: "a"}, '{"!dict":[[1,"a"]]}'),
            (Point(1, 2), '{"!codec_values.Point":{"x":1,"y":2}}'),
            ({"!x": (1,)}, '{"!dict":{"!x":{"!tuple":[1]}}}'),
            ({NOT_UTF8: 1}, '{"!dict":[[{"!str":["report-",56575,".txt"]},1]]}'),
            ({"s": NOT_UTF8}, '{"s":{"!str":["report-",56575,".txt"]}} '),
            ({"n": BIG}, '{"n":{"!int":"' + HEX_BIG + '"}} '),
        ],
        ids=show,
    )
    def test_the_text_ends_with_the_mark_only_when_a_plain_top_holds_tags(
        self, value: Any, text: str
    ) -> None:
        assert encode(value) == text
        assert_same(value, decode(text))

    def test_json_extract_finds_its_values_by_their_plain_paths(self, db: Path) -> None:
        result = {"hits": 3, "when": WHEN, "user": {"id": 7, "tags": ["a", "b"]}, "ok": True}
        table = record(db, {"search": result, "list": [{"at": dt.date(2020, 1, 1)}, (1, 2)]})
        rows = query(
            db,
            f"""SELECT json_extract(result, '$.hits'), json_extract(result, '$.user.id'),
                       json_extract(result, '$.user.tags[1]'), json_extract(result, '$.ok'),
                       json_extract(result, '$.when."!datetime"'), json_type(result, '$.when')
                FROM "{table}" WHERE key = 'search'""",
        )
        assert rows == [(3, 7, "b", 1, "2026-11-30T03:04:05Z", "object")]
        rows = query(
            db,
            f"""SELECT json_extract(result, '$[0].at."!date"'), json_extract(result, '$[1]')
                FROM "{table}" WHERE key = 'list'""",
        )
        assert rows == [("2020-01-01", '{"!tuple":[1,2]}')]

    def test_a_durable_runs_input_and_result_are_queryable_the_same_way(self, db: Path) -> None:
        @durable(goal_id="g", path=db)
        def job(user_id: int, day: dt.date) -> dict[str, Any]:
            return {"user_id": user_id, "day": day, "done": True}

        job(7, dt.date(2026, 11, 30))
        assert query(
            db,
            """SELECT json_extract(input, '$.user_id'), json_extract(input, '$.day."!date"'),
                      json_extract(result, '$.done')
               FROM runs""",
        ) == [(7, "2026-11-30", 1)]


class TestTheQueriesInTheDocs:
    """docs/inspecting.md's queries on typed results (its ```sql typed blocks), run for real."""

    def test_each_finds_the_typed_results_it_describes(self, db: Path) -> None:
        page = (Path(__file__).parent.parent / "docs" / "inspecting.md").read_text("utf-8")
        blocks = re.findall(r"```sql typed\n(.*?)```", page, flags=re.S)
        assert blocks
        record(db, {"search": {"hits": 3, "when": WHEN}}, goal="customer_sync")
        record(db, {"search": {"hits": 0, "when": WHEN}}, goal="other")
        for sql in blocks:
            assert query(db, sql) == [(3, "2026-11-30T03:04:05Z")], sql

    def test_coalesce_reads_a_value_written_before_and_after_the_mark(self, db: Path) -> None:
        table = record(db, {"new": {"hits": 3, "when": WHEN}, "old": None})
        with sqlite3.connect(db) as con:
            con.execute(
                f"UPDATE \"{table}\" SET result = ? WHERE key = 'old'",
                ('{"!dict":{"hits":4,"when":{"!datetime":"2026-11-30T03:04:05Z"}}}',),
            )
        assert query(
            db,
            f"""SELECT key, coalesce(json_extract(result, '$.hits'),
                                     json_extract(result, '$."!dict".hits'))
                FROM "{table}" ORDER BY key""",
        ) == [("new", 3), ("old", 4)]


class TestAOneKeyDictWhoseKeyStartsWithABang:
    """The only dicts of str keys not stored as they are: they would read back as a tag."""

    def test_at_the_top_it_is_escaped_as_a_dict_tag(self) -> None:
        assert encode({"!x": 1}) == '{"!dict":{"!x":1}}'
        assert_same({"!x": 1}, decode(encode({"!x": 1})))

    def test_inside_a_document_holding_tags_it_is_escaped_the_same_way(self) -> None:
        value = {"a": {"!x": 1}, "t": (1,), "l": [{"!tuple": [2]}]}
        assert encode(value) == (
            '{"a":{"!dict":{"!x":1}},"t":{"!tuple":[1]},"l":[{"!dict":{"!tuple":[2]}}]} '
        )
        assert_same(value, decode(encode(value)))

    def test_inside_plain_json_it_is_stored_untouched(self) -> None:
        value = {"a": {"!x": 1}, "l": [{"!tuple": [2]}]}
        assert encode(value) == '{"a":{"!x":1},"l":[{"!tuple":[2]}]}'
        assert_same(value, decode(encode(value)))

    @pytest.mark.parametrize(
        "value",
        [
            {"!a": 1, "!b": (2,)},
            {"a": {"!a": 1, "!b": 2}, "t": (1,)},
            {"s": 'say "!"', "t": (1,), '"!': "x"},
            {"s": "ends with a space ", "t": (1,)},
            ["", " ", {"!": " ", "b": 1}, (1,)],
        ],
        ids=show,
    )
    def test_anything_else_that_looks_like_a_tag_is_stored_as_it_is(self, value: Any) -> None:
        text = encode(value)
        assert "!dict" not in text
        assert_same(value, decode(text))


class TestTheMark:
    def test_a_row_ending_with_other_json_whitespace_is_read_as_marked(self) -> None:
        assert_same({"t": (1,)}, decode('{"t": {"!tuple": [1]}}\n'))
        assert_same([dt.date(2020, 1, 1)], decode('[{"!date":"2020-01-01"}]\r\n'))

    def test_every_json_reader_ignores_it(self, db: Path) -> None:
        text = encode({"t": (1,)})
        assert json.loads(text) == {"t": {"!tuple": [1]}}
        assert query(db, "SELECT json_valid(?), json(?)", (text, text)) == [
            (1, '{"t":{"!tuple":[1]}}')
        ]

    def test_a_row_rewritten_without_it_reads_its_tags_as_plain_objects(self, db: Path) -> None:
        # The documented limit: SQLite's json_set() (like json()) rewrites the
        # text without whitespace, and the mark goes with it.
        table = record(db, {"v": {"n": 1, "when": WHEN}})
        with sqlite3.connect(db) as con:
            # checksum NULL: a row rewritten outside letitloop, as before checksums
            # (one that kept its checksum is refused as damage: tests/test_checksums.py)
            con.execute(
                f"UPDATE \"{table}\" SET result = json_set(result, '$.n', 2), checksum = NULL"
            )
        assert replay(db, ["v"]) == [{"n": 2, "when": {"!datetime": "2026-11-30T03:04:05Z"}}]


# -- rows written by commit 13daf56 -----------------------------------------------------------

#: Stored texts written by commit 13daf56's encoder (generated by running it
#: on each value below, then pasted), when a dict or list holding typed values
#: was wrapped whole as {"!dict": {…}} or {"!list": […]}. Each must decode to
#: its value; encode now writes written_now(text).
ROWS_13DAF56: list[tuple[str, Any]] = [
    (
        '{"!dict":{"hits":3,"when":{"!datetime":"2026-11-30T03:04:05Z"}}}',
        {"hits": 3, "when": dt.datetime(2026, 11, 30, 3, 4, 5, tzinfo=dt.timezone.utc)},
    ),
    (
        '{"!dict":{"user_id":7,"day":{"!date":"2026-11-30"}}}',
        {"user_id": 7, "day": dt.date(2026, 11, 30)},
    ),
    (
        '{"!dict":{"a":{"b":[{"!UUID":"00000000-0000-0000-0000-000000000005"}]},"c":"x"}}',
        {"a": {"b": [uuid.UUID(int=5)]}, "c": "x"},
    ),
    (
        '{"!dict":{"e":{},"t":{"!tuple":[]},"l":[],"n":null}}',
        {"e": {}, "t": (), "l": [], "n": None},
    ),
    ('{"!dict":{"a":null,"b":[null,{"c":{"!set":[]}}]}}', {"a": None, "b": [None, {"c": set()}]}),
    (
        ('{"!dict":{"p":{"!codec_values.Point":{"x":1,"y":2}},"when":{"!time":"01:02:00"}}}'),
        {"p": Point(1, 2), "when": dt.time(1, 2)},
    ),
    (
        (
            '{"!dict":{"err":{"!ValueError":{"args":["bad",3]}},"q":{"!codec_values.QuotaErro'
            'r":{"args":["user ada is over the quota of 5"],"attrs":{"user":"ada","limit":5}}'
            "}}}"
        ),
        {"err": ValueError("bad", 3), "q": QuotaError("ada", 5)},
    ),
    (
        (
            '{"!dict":{"m":{"!dict":[[{"!codec_values.Money":[5,"EUR"]},"five"]]},"k":{"!dict'
            '":[[1,"one"]]}}}'
        ),
        {"m": {Money(5, "EUR"): "five"}, "k": {1: "one"}},
    ),
    (
        '{"!dict":{"f":[1.5,{"!float":"nan"}],"g":{"!float":"-inf"},"z":-0.0}}',
        {"f": [1.5, math.nan], "g": -math.inf, "z": -0.0},
    ),
    (
        '{"!dict":{"s":"say \\"!\\" and \\\\\\"!","d":{"!Decimal":"1.10"}}}',
        {"s": 'say "!" and \\"!', "d": decimal.Decimal("1.10")},
    ),
    (
        (
            '{"!dict":{"path":{"!PurePosixPath":"/tmp/x"},"mode":{"!codec_values.Mode":"fast"'
            '},"level":{"!codec_values.Level":2}}}'
        ),
        {"path": pathlib.PurePosixPath("/tmp/x"), "mode": Mode.FAST, "level": Level.HIGH},
    ),
    (
        '{"!dict":{"bytes":{"!bytes":"AP8="},"ba":{"!bytearray":"YWI="}}}',
        {"bytes": b"\x00\xff", "ba": bytearray(b"ab")},
    ),
    (
        '{"!dict":{"deep":{"a":{"b":{"c":{"d":[[{"e":{"!timedelta":"PT5S"}}]]}}}}}}',
        {"deep": {"a": {"b": {"c": {"d": [[{"e": dt.timedelta(seconds=5)}]]}}}}},
    ),
    (
        (
            '{"!dict":{"rows":[{"id":0,"name":"n0"},{"id":1,"name":"n1"},{"id":2,"name":"n2"}'
            ',{"id":3,"name":"n3"},{"id":4,"name":"n4"},{"id":5,"name":"n5"},{"id":6,"name":"'
            'n6"},{"id":7,"name":"n7"},{"id":8,"name":"n8"},{"id":9,"name":"n9"},{"id":10,"na'
            'me":"n10"},{"id":11,"name":"n11"},{"id":12,"name":"n12"},{"id":13,"name":"n13"},'
            '{"id":14,"name":"n14"},{"id":15,"name":"n15"},{"id":16,"name":"n16"},{"id":17,"n'
            'ame":"n17"},{"id":18,"name":"n18"},{"id":19,"name":"n19"},{"id":20,"name":"n20"}'
            ',{"id":21,"name":"n21"},{"id":22,"name":"n22"},{"id":23,"name":"n23"},{"id":24,"'
            'name":"n24"},{"id":25,"name":"n25"},{"id":26,"name":"n26"},{"id":27,"name":"n27"'
            '},{"id":28,"name":"n28"},{"id":29,"name":"n29"}],"when":{"!date":"2020-01-01"}}}'
        ),
        {"rows": [{"id": i, "name": f"n{i}"} for i in range(30)], "when": dt.date(2020, 1, 1)},
    ),
    (
        (
            '{"!dict":{"nums":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,'
            '24,25,26,27,28,29,{"!tuple":[1,2]}]}}'
        ),
        {"nums": [*range(30), (1, 2)]},
    ),
    ('{"!dict":{"big":{"!int":"' + HEX_BIG + '"},"t":{"!tuple":[1]}}}', {"big": BIG, "t": (1,)}),
    ('{"!dict":{"big":{"!int":"' + HEX_BIG + '"}}}', {"big": BIG}),
    ('{"!dict":{"name":{"!str":["report-",56575,".txt"]},"n":1}}', {"name": NOT_UTF8, "n": 1}),
    (
        '{"!dict":[[{"!str":["report-",56575,".txt"]},1],["a",{"!tuple":[1]}]]}',
        {NOT_UTF8: 1, "a": (1,)},
    ),
    (
        (
            '{"!dict":{"box":{"!codec_values.Box":{"content":[{"!codec_values.Point":{"x":3,"'
            'y":0}}],"label":"box","tags":["t"]}},"pair":{"!codec_values.Pair":{"left":{"!tup'
            'le":[1,2]},"right":{"!set":[3]}}}}}'
        ),
        {"box": Box([Point(3)], tags=["t"]), "pair": Pair((1, 2), {3})},
    ),
    (
        (
            '{"!dict":{"event":{"!codec_values.Event":{"name":"e","payload":{"when":{"!date":'
            '"2020-01-01"}}}}}}'
        ),
        {"event": Event("e", {"when": dt.date(2020, 1, 1)})},
    ),
    ('{"!dict":{"!x":{"y":{"!tuple":[1]}}}}', {"!x": {"y": (1,)}}),
    ('{"!dict":{"!dict":{"a":1}}}', {"!dict": {"a": 1}}),
    ('{"!dict":{"!list":[1]}}', {"!list": [1]}),
    ('{"!dict":{"a":{"!dict":{"!x":1}},"t":{"!tuple":[1]}}}', {"a": {"!x": 1}, "t": (1,)}),
    ('{"!dict":{"a":[{"!dict":{"!tuple":[1]}},{"!tuple":[2]}]}}', {"a": [{"!tuple": [1]}, (2,)]}),
    (
        (
            '{"!dict":{"x":{"!dict":{"!dict":{"!tuple":[1]}}},"y":{"!dict":{"!datetime":"2026'
            '-11-30T03:04:05Z"}},"z":{"!date":"2020-01-01"}}}'
        ),
        {
            "x": {"!dict": (1,)},
            "y": {"!datetime": "2026-11-30T03:04:05Z"},
            "z": dt.date(2020, 1, 1),
        },
    ),
    ('{"!dict":{"!a":1,"!b":{"!tuple":[2]}}}', {"!a": 1, "!b": (2,)}),
    ('{"!a":1,"!b":2}', {"!a": 1, "!b": 2}),
    (
        '{"!list":[1,{"!tuple":[2,3]},{"a":{"!date":"2020-01-01"}}]}',
        [1, (2, 3), {"a": dt.date(2020, 1, 1)}],
    ),
    (
        (
            '{"!list":[{"id":1,"at":{"!datetime":"2026-01-01T00:00:00"}},{"id":2,"at":{"!date'
            'time":"2026-01-02T00:00:00"}}]}'
        ),
        [{"id": 1, "at": dt.datetime(2026, 1, 1)}, {"id": 2, "at": dt.datetime(2026, 1, 2)}],
    ),
    ('{"!list":[[[{"!date":"2020-01-01"}]]]}', [[[dt.date(2020, 1, 1)]]]),
    ('{"!list":[{"!dict":{"!x":1}},{"!dict":{"!y":{"!tuple":[1]}}}]}', [{"!x": 1}, {"!y": (1,)}]),
    ('{"!list":[{"a":1,"b":[2.5,null]},{"!float":"inf"}]}', [{"a": 1, "b": [2.5, None]}, math.inf]),
    ('{"!list":[{"!str":["report-",56575,".txt"]},"plain"]}', [NOT_UTF8, "plain"]),
    ('{"!list":[{"!int":"' + HEX_BIG + '"},{"n":1}]}', [BIG, {"n": 1}]),
    ('{"a":1,"b":[1.5,null,"x"]}', {"a": 1, "b": [1.5, None, "x"]}),
    ('{"outer":{"!x":1},"n":2}', {"outer": {"!x": 1}, "n": 2}),
    ('[{"!tuple":[1,2]},{"!os.system":"ls"}]', [{"!tuple": [1, 2]}, {"!os.system": "ls"}]),
    (
        '{"s":"say \\"!\\"","t":{"!datetime":"2026-11-30T03:04:05Z"}}',
        {"s": 'say "!"', "t": {"!datetime": "2026-11-30T03:04:05Z"}},
    ),
    ('{"rows":[{"!only":[1]},{"k":{"!tag":1}}]}', {"rows": [{"!only": [1]}, {"k": {"!tag": 1}}]}),
    ("[]", []),
    ("{}", {}),
    ('{"!tuple":[1,{"a":{"!date":"2020-01-01"}}]}', (1, {"a": dt.date(2020, 1, 1)})),
    ('{"!dict":[[1,{"a":{"!tuple":[1]}}]]}', {1: {"a": (1,)}}),
    ('{"!codec_values.Point":{"x":1,"y":2}}', Point(1, 2)),
    ('{"!date":"2020-01-01"}', dt.date(2020, 1, 1)),
    ('{"!dict":{"!tuple":[1]}}', {"!tuple": [1]}),
]


#: Texts 13daf56 wrote for codec_values.make_value(seed, depth=3): the first
#: 40 of seeds 0-399 that were under 300 characters and wrapped whole, or
#: plain with a "!" key inside.
SEEDED_13DAF56: list[tuple[int, str]] = [
    (
        5,
        (
            '{"!dict":{"!only":[{"!codec_values.Pair":{"left":[],"right":{"!tuple":[]}}},{"!d'
            'ict":[[{"!frozenset":[0,"k"]},{"!codec_values.Pair":{"left":[{"!float":"-inf"}],'
            '"right":{"!tuple":[{"!float":"-inf"}]}}}]]}]}}'
        ),
    ),
    (24, '{"!list":[[{"!bytes":"Kw=="}],{"nested":[{"!bytes":"Kw=="}]}]}'),
    (
        27,
        (
            '{"!list":[[{"!frozenset":[{"!tuple":[{"!frozenset":[1,"k"]}]}]},{"!datetime":"20'
            '26-11-30T03:04:05.765186"}],{"nested":[{"!frozenset":[{"!tuple":[{"!frozenset":['
            '1,"k"]}]}]},{"!datetime":"2026-11-30T03:04:05.765186"}]}]}'
        ),
    ),
    (28, '"!🙂"'),
    (
        30,
        (
            '{"!list":[{"!codec_values.Box":{"content":[{"!codec_values.Box":{"content":[],"l'
            'abel":"box","tags":[]}}],"label":"box","tags":["a"]}},{"!codec_values.Pair":{"le'
            'ft":[],"right":{"!tuple":[]}}}]}'
        ),
    ),
    (37, '{"!dict":{"!only":[]}}'),
    (44, '{"!dict":{"!tag":1}}'),
    (46, '{"!dict":{"k0":{"!ValueError":{"args":["bad",1]}},"k1":{"!tuple":[[]]},"k2":[]}}'),
    (
        48,
        (
            '{"!list":[{"!dict":[[{"!codec_values.Point":{"x":1,"y":1}},[[{"!PurePosixPath":"'
            'a/b"}],{"nested":[{"!PurePosixPath":"a/b"}]}]],[{"!frozenset":[1,"k"]},"!tuple"]'
            "]}]}"
        ),
    ),
    (54, '{"!dict":{"k0":{"!frozenset":[{"!tuple":[]},{"!codec_values.Color":"red"}]}}}'),
    (62, '{"!dict":{"k0":{"!datetime":["2026-11-30T03:04:05.373055",27859000000]}}}'),
    (
        63,
        (
            '{"!list":[[{"!dict":[[{"!tuple":[]},{"!codec_values.Box":{"content":[],"label":"'
            'box","tags":[]}}],["!k",[[],{"nested":[]}]]]},{}],{"nested":[{"!dict":[[{"!tuple'
            '":[]},{"!codec_values.Box":{"content":[],"label":"box","tags":[]}}],["!k",[[],{"'
            'nested":[]}]]]},{}]}]}'
        ),
    ),
    (64, ('{"!dict":{"k0":{},"k1":{"!tuple":[{"k":893131096639500465966}]},"k2":{"!tuple":[]}}}')),
    (68, '{"!dict":{"!only":[]}}'),
    (69, '{"!dict":{"!tag":1}}'),
    (
        70,
        (
            '{"!dict":{"k0":{"!codec_values.Event":{"name":"e","payload":{"kids":[1.5,{"!code'
            'c_values.Box":{"content":["plain"],"label":"box","tags":["a"]}},"!tuple"]}}},"k1'
            '":{"!tuple":[[-0.0,true,{"!time":"23:59:59.141053"}],5e-324]}}}'
        ),
    ),
    (
        83,
        (
            '{"!dict":{"k0":{"!UUID":"a658d453-f3c0-a0e5-0c95-d61b08ce66d9"},"k1":{"!bytes":"'
            'LRU="},"k2":{"!codec_values.Box":{"content":[],"label":"box","tags":[]}}}}'
        ),
    ),
    (
        92,
        (
            '[[{"!only":[]},[[{"!only":[]}],{"nested":[{"!only":[]}]}]],{"nested":[{"!only":['
            ']},[[{"!only":[]}],{"nested":[{"!only":[]}]}]]}]'
        ),
    ),
    (
        93,
        (
            '{"!dict":{"!only":[[{"!frozenset":[]},{"!UUID":"94e7c4a4-293c-3067-c9b0-6b561f34'
            '4c9f"}],[[],{"nested":[]}],{"!dict":[["!k",[[],{"nested":[]}]],[{"!codec_values.'
            'Mode":"fast"},"!tuple"]]}]}}'
        ),
    ),
    (95, '[{"!tag":1}]'),
    (
        99,
        (
            '{"!list":[[{"!codec_values.Event":{"name":"e","payload":{"kids":[640637547207897'
            '869999]}}}],{"nested":[{"!codec_values.Event":{"name":"e","payload":{"kids":[640'
            "637547207897869999]}}}]}]}"
        ),
    ),
    (104, '{"k0":[{"!tag":1}]}'),
    (124, '{"!dict":{"!tag":1}}'),
    (
        125,
        (
            '{"!dict":{"k0":[[{"!dict":{"!only":[{"!Decimal":"-0"}]}},{"!tuple":[]}],{"nested'
            '":[{"!dict":{"!only":[{"!Decimal":"-0"}]}},{"!tuple":[]}]}]}}'
        ),
    ),
    (
        129,
        (
            '{"!dict":{"k0":{"!UUID":"dd848e2d-5453-a00d-3986-04aaa1808a5c"},"k1":{"!codec_va'
            'lues.Event":{"name":"e","payload":{"kids":[]}}}}}'
        ),
    ),
    (141, '{"!dict":{"!only":[]}}'),
    (
        145,
        (
            '{"!dict":{"!only":[{"!codec_values.Pair":{"left":[],"right":{"!tuple":[]}}},{"!t'
            'imedelta":"P502DT0.832718S"},[{"!dict":{"!only":[{"!float":"inf"},{"!bytes":""}]'
            '}},[false,{"!date":"4186-12-31"},{"!UUID":"52a63232-bee2-57f9-2fa4-76d5e8440a65"'
            '}],{"!dict":{"!tag":1}}]]}}'
        ),
    ),
    (
        150,
        (
            '{"!dict":{"k0":{"!time":"23:59:59.851652"},"k1":{"k0":[{"!timedelta":"-P422DT863'
            '99.223653S"},{"!codec_values.Level":2}]},"k2":{"!set":[{"!frozenset":["k",2]}]}}'
            "}"
        ),
    ),
    (162, '"!tuple"'),
    (172, '{"!list":[{"!Decimal":"3.14159"}]}'),
    (175, '{"!dict":{"!only":[]}}'),
    (
        178,
        (
            '{"!list":[{"k0":{"!codec_values.Box":{"content":[{"!time":"23:59:59.194117"},-64'
            '912136660981651868,{"!bytes":"sFlmgQ=="}],"label":"box","tags":["a","a","a"]}},"'
            'k1":[[],{"nested":[]}]},{"!set":[]},"!tuple"]}'
        ),
    ),
    (180, '"!tuple"'),
    (185, '{"!dict":{"!tag":1}}'),
    (
        189,
        (
            '{"!list":[{"!codec_values.QuotaError":{"args":["user ada is over the quota of 2"'
            '],"attrs":{"user":"ada","limit":2}}},{"!codec_values.Event":{"name":"e","payload'
            '":{"kids":[]}}}]}'
        ),
    ),
    (
        192,
        (
            '{"!list":[[{"!time":"23:59:59.989381"},{"!frozenset":["k",{"!frozenset":["k",3]}'
            ',"!k"]}],{"nested":[{"!time":"23:59:59.989381"},{"!frozenset":["k",{"!frozenset"'
            ':["k",3]},"!k"]}]}]}'
        ),
    ),
    (194, '{"!dict":{"!only":[]}}'),
    (
        202,
        (
            '{"!dict":{"!only":[{"!codec_values.Pair":{"left":[{"!UUID":"715256ba-6d80-d558-0'
            'e60-df92f8231d99"}],"right":{"!tuple":[{"!UUID":"715256ba-6d80-d558-0e60-df92f82'
            '31d99"}]}}},{"!codec_values.Point":{"x":0,"y":0}},{"!codec_values.Money":[660346'
            ',"EUR"]}]}}'
        ),
    ),
    (204, '{"!dict":{"!only":[]}}'),
    (209, '{"!dict":{"!tag":1}}'),
]


def _row_id(x: Any) -> str:
    return x[:32] if type(x) is str else str(x) if type(x) is int else type(x).__name__


class TestRowsWrittenByCommit13daf56:
    @pytest.mark.parametrize(("text", "value"), ROWS_13DAF56, ids=_row_id)
    def test_they_decode_to_their_value(self, text: str, value: Any) -> None:
        assert_same(value, decode(text))

    @pytest.mark.parametrize(("text", "value"), ROWS_13DAF56, ids=_row_id)
    def test_their_value_is_now_written_unwrapped(self, text: str, value: Any) -> None:
        assert encode(value) == written_now(text)

    @pytest.mark.parametrize(("seed", "text"), SEEDED_13DAF56, ids=_row_id)
    def test_seeded_values_decode_and_so_does_their_unwrapped_form(
        self, seed: int, text: str
    ) -> None:
        # (Not compared with encode's text: a set of str iterates in another
        # order in each process.)
        value = make_value(seed, depth=3)
        assert_same(value, decode(text))
        assert_same(value, decode(written_now(text)))

    def test_rows_in_a_journal_file_replay_with_their_types(self, db: Path) -> None:
        keys = [f"s{i}" for i in range(len(ROWS_13DAF56))]
        table = record(db, dict.fromkeys(keys))
        with sqlite3.connect(db) as con:  # the file as 13daf56 left it (no checksums)
            con.executemany(
                f'UPDATE "{table}" SET result = ?, checksum = NULL WHERE key = ?',
                [(text, key) for key, (text, _) in zip(keys, ROWS_13DAF56, strict=True)],
            )
        for back, (_, value) in zip(replay(db, keys), ROWS_13DAF56, strict=True):
            assert_same(value, back)

    def test_lil_runs_input_finds_a_run_by_its_input_in_either_format(self, db: Path) -> None:
        @durable(goal_id="g", path=db)
        def job(user_id: int, day: dt.date) -> int:
            return user_id

        job(7, dt.date(2026, 11, 30))
        job(8, dt.date(2026, 11, 30))
        with sqlite3.connect(db) as con:  # run 8's input as 13daf56 wrote it
            con.execute(
                "UPDATE runs SET input = ? WHERE json_extract(input, '$.user_id') = 8",
                ('{"!dict":{"user_id":8,"day":{"!date":"2026-11-30"}}}',),
            )
        for user in (7, 8):
            found = lil_forked("runs", "--db", str(db), "--json", "--input", f"user_id={user}")
            assert found.returncode == 0, found.stderr
            [run] = json.loads(found.stdout)
            assert run["input"] == {"user_id": user, "day": "2026-11-30"}


# -- any nesting of dicts and lists, under hypothesis -----------------------------------------

#: Keys a JSON path can name as ``."key"`` (no quote or backslash), with
#: bangs, spaces and dots, and the empty key.
keys = st.text(st.sampled_from("ab!. é-_$[]*"), max_size=5)
plain_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=8),
    st.sampled_from(['"!', "!tuple", " ", ""]),
)
typed_leaves = st.one_of(
    st.datetimes(timezones=st.none() | st.just(dt.timezone.utc)),
    st.dates(),
    st.uuids(),
    st.decimals(allow_nan=False, allow_infinity=False),
    st.binary(max_size=4),
    st.tuples(st.integers(0, 9)),
    st.frozensets(st.integers(0, 9), max_size=2),
    st.sampled_from([math.nan, math.inf, NOT_UTF8, Color.RED, Level.HIGH, Point(1, 2)]),
    st.builds(lambda digits: 10**digits, st.integers(4300, 4310)),  # hex: {"!int": "0x…"}
)
documents = st.recursive(
    plain_leaves | typed_leaves,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(keys, inner, max_size=4)
        | st.dictionaries(st.sampled_from(["!x", "!tuple", "!dict"]), inner, min_size=1, max_size=1)
    ),
    max_leaves=16,
)
str_keyed = st.dictionaries(keys, documents, max_size=5)
HYPOTHESIS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _plain_leaf(v: Any) -> bool:
    t = type(v)
    if t is float:
        return math.isfinite(v)
    if t is int:
        return bool(abs(v) < 10**4300)
    if t is str:  # UTF-8 text: no lone surrogate
        return not any("\ud800" <= c <= "\udfff" for c in v)
    return t is bool or v is None


def _lookalike(v: Any) -> bool:
    return type(v) is dict and len(v) == 1 and next(iter(v)).startswith("!")


def holds_typed(v: Any) -> bool:
    """Whether ``v`` holds anything but plain JSON (written independently of the codec)."""
    if type(v) is dict:
        return any(holds_typed(x) for x in v.values())
    if type(v) is list:
        return any(holds_typed(x) for x in v)
    return not _plain_leaf(v)


def tagged_document(v: Any) -> bool:
    """Whether docs/types.md says ``v`` is stored as a tagged document (else as plain JSON)."""
    return holds_typed(v) or _lookalike(v)


def paths(v: Any, path: str, tagged: bool) -> Iterator[tuple[str, Any]]:
    """(JSON path, value) of every leaf and container, as docs/types.md says the text holds them.

    In a tagged document, a one-key dict whose key starts with "!" is
    escaped as {"!dict": {…}}; in plain JSON it is stored as it is.
    """
    yield path, v
    if type(v) is dict:
        if tagged and _lookalike(v):
            path += '."!dict"'
        for k, x in v.items():
            yield from paths(x, f'{path}."{k}"', tagged)
    elif type(v) is list:
        for i, x in enumerate(v):
            yield from paths(x, f"{path}[{i}]", tagged)


class TestAnyNestingOfDictsAndLists:
    @given(documents)
    @HYPOTHESIS
    def test_it_round_trips_with_its_types_at_every_level(self, value: Any) -> None:
        assert_same(value, decode(encode(value)))

    @given(documents)
    @HYPOTHESIS
    def test_a_plain_top_holding_tags_is_marked_and_anything_else_is_not(self, value: Any) -> None:
        text = encode(value)
        plain_top = type(value) is list or (type(value) is dict and not _lookalike(value))
        assert text.endswith(" ") == (plain_top and holds_typed(value))
        if not holds_typed(value) and not _lookalike(value):
            assert text == msgspec.json.encode(value).decode()

    @pytest.mark.slow  # 60 journal files, each queried at every path
    @given(str_keyed)
    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    def test_json_extract_finds_every_value_at_its_plain_path(
        self, tmp_path: Path, value: dict[str, Any]
    ) -> None:
        db = tmp_path / f"{uuid.uuid4().hex}.db"
        table = record(db, {"v": value}, goal="a goal with spaces")
        with contextlib.closing(sqlite3.connect(db)) as reader:  # one for every path's query
            self._each_path_finds_its_value(reader, table, value)

    @staticmethod
    def _each_path_finds_its_value(
        db: sqlite3.Connection, table: str, value: dict[str, Any]
    ) -> None:
        tagged = tagged_document(value)
        for path, v in paths(value, "$", tagged):
            [(kind, got)] = query(
                db,
                f'SELECT json_type(result, ?), json_extract(result, ?) FROM "{table}"',
                (path, path),
            )
            if type(v) is dict:
                assert kind == "object", (path, v)
                if not (tagged and _lookalike(v)):
                    assert got is None or json.loads(got).keys() == v.keys(), (path, v)
            elif type(v) is list:
                assert (kind, len(json.loads(got))) == ("array", len(v)), (path, v)
            elif _plain_leaf(v):
                expected = {None: "null", True: "true", False: "false"}
                if v is None or type(v) is bool:
                    assert kind == expected[v], (path, v)
                else:
                    assert got == v, (path, v)
            else:  # a typed value: one tag, {"!name": payload}, in its place
                assert kind == "object", (path, v)
                [(key,)] = query(
                    db, f'SELECT each.key FROM "{table}", json_each(result, ?) AS each', (path,)
                )
                assert key.startswith("!"), (path, v, key)
