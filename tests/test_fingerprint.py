"""Fingerprints: two values are one argument exactly when the codec would store the same value.

The equivalence (README, "Which calls are the same call"): the codec's
document for each value, read with dict entries and set items in any order.
So ``1``, ``1.0`` and ``True`` differ, a list is not a tuple, ``0.0`` is not
``-0.0``, every nan is one value, and ``{"a": 1, "b": 2}`` is
``{"b": 2, "a": 1}``. The property tests hold the fingerprint to that on
pairs of values nested at any depth, big ints, lone surrogates, mixed-type
keys and sets included; the examples pin the cases the issue names.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, ClassVar

import msgspec
import pytest
from fingerprint_values import (
    FP,
    PLAIN,
    REGISTRY,
    SMALL,
    VALUES,
    Model,
    Opaque,
    Pair,
    Point,
    Rec,
    codec_same,
    fp,
    reordered,
)
from hypothesis import HealthCheck, given, settings

from letitloop import Journal, LetItLoopError, register_fingerprint, unchecked
from letitloop.codec import MAX_DEPTH
from letitloop.errors import FingerprintError, StepMismatchError
from letitloop.identity.fingerprint import Fingerprinter
from letitloop.identity.unchecked import unwrap

PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class TestTheFingerprintOfValuesTheCodecEncodes:
    @PROPERTY
    @given(VALUES, VALUES)
    def test_two_values_share_a_fingerprint_exactly_when_the_codec_stores_the_same(
        self, a: Any, b: Any
    ) -> None:
        assert (fp(a) == fp(b)) == codec_same(a, b)

    @PROPERTY
    @given(SMALL, SMALL)
    def test_so_do_values_drawn_from_a_small_world_where_equal_pairs_are_common(
        self, a: Any, b: Any
    ) -> None:
        assert (fp(a) == fp(b)) == codec_same(a, b)

    @PROPERTY
    @given(VALUES)
    def test_dict_and_set_order_is_not_part_of_a_value(self, a: Any) -> None:
        b = reordered(a)
        assert codec_same(a, b)
        assert fp(a) == fp(b)
        assert FP.call((a,), {}) == FP.call((b,), {})

    @PROPERTY
    @given(VALUES, VALUES)
    def test_an_argument_digest_agrees_with_the_whole_value(self, a: Any, b: Any) -> None:
        assert (FP.digest(a) == FP.digest(b)) == (fp(a) == fp(b))


class TestValuesMsgpackRefuses:
    """Before: one msgspec refusal made the whole container count by its type name."""

    def test_orders_whose_ids_are_beyond_64_bits_are_two_orders(self) -> None:
        one = {"id": 2**100 + 1, "amount": 10}
        two = {"id": 2**100 + 2, "amount": 10}
        assert fp(one) != fp(two)
        assert FP.call((one,), {}) != FP.call((two,), {})

    def test_ints_beyond_64_bits_are_told_apart(self) -> None:
        assert FP.call((2**70,), {}) != FP.call((2**71,), {})
        assert FP.call(([2**70],), {}) != FP.call(([2**71],), {})
        assert FP.call((-(2**70),), {}) != FP.call((2**70,), {})

    def test_strs_with_lone_surrogates_are_told_apart(self) -> None:
        assert fp({"a": "\ud800"}) != fp({"a": "\udc00"})
        assert fp(("x", "\ud800")) != fp(("x", "\udfff"))
        assert fp({"\ud800": 1}) != fp({"\udc00": 1})

    def test_mixed_type_keys_and_set_items_are_told_apart(self) -> None:
        assert fp({1: "a", "b": 2}) != fp({1: "a", "b": 3})
        assert fp({1, "a"}) != fp({1, "b"})
        assert fp({1, "a"}) == fp({"a", 1})
        assert fp({1: "a", "b": 2}) == fp({"b": 2, 1: "a"})

    def test_a_registered_class_msgspec_cannot_encode_is_told_apart(self) -> None:
        assert FP.call((Opaque(1),), {}) != FP.call((Opaque(2),), {})
        assert FP.call((Opaque(1),), {}) == FP.call((Opaque(1),), {})
        assert fp([Point(Opaque(1))]) != fp([Point(Opaque(2))])

    def test_dataclasses_structs_and_models_holding_them_are_told_apart(self) -> None:
        for make in (Point, Rec, lambda v: Model(m=v), lambda v: Pair(v, 0)):
            assert fp(make(2**70)) != fp(make(2**71))
            assert fp(make({1, "a"})) != fp(make({1, "b"}))
            assert fp(make("\ud800")) != fp(make("\udbff"))


class TestTheEquivalence:
    """What README's identity paragraph says, pinned."""

    def test_one_one_point_oh_and_true_are_three_values(self) -> None:
        assert len({FP.digest(1), FP.digest(1.0), FP.digest(True)}) == 3
        assert len({fp({1: 0}), fp({1.0: 0}), fp({True: 0})}) == 3

    def test_a_list_is_not_a_tuple_and_a_set_not_a_frozenset(self) -> None:
        assert FP.digest([1, 2]) != FP.digest((1, 2))
        assert FP.digest({1, 2}) != FP.digest(frozenset({1, 2}))
        assert FP.digest({1, 2}) != FP.digest([1, 2])

    def test_a_dataclass_is_not_the_dict_of_its_fields_nor_another_class(self) -> None:
        assert fp(Point(1, 2)) != fp({"x": 1, "y": 2})
        assert fp(Point(1, 2)) != fp(Rec(1, 2))

    def test_every_nan_is_one_value_and_zero_keeps_its_sign(self) -> None:
        assert FP.digest(float("nan")) == FP.digest(-float("nan"))
        assert FP.digest(0.0) != FP.digest(-0.0)

    def test_keyword_order_is_not_part_of_a_call(self) -> None:
        assert FP.call((), {"a": 1, "b": 2}) == FP.call((), {"b": 2, "a": 1})
        assert FP.call((), {"a": 1, "b": 2}) != FP.call((), {"a": 2, "b": 1})

    def test_an_aware_datetime_keeps_its_zone(self) -> None:
        utc = dt.datetime(2026, 1, 1, 12, tzinfo=dt.timezone.utc)
        assert FP.digest(utc) != FP.digest(utc.astimezone(dt.timezone(dt.timedelta(hours=1))))

    def test_a_plain_value_keeps_the_fingerprint_it_had_before(self) -> None:
        # Plain JSON values go to msgspec as before, so runs recorded earlier still match.
        assert Fingerprinter().call((123, "https://example.com"), {}) == "34c6b3dfbc21 07bcbffdee70"


class Unknown:
    def __init__(self, n: int) -> None:
        self.n = n


class Registered:
    def __init__(self, n: int) -> None:
        self.n = n


register_fingerprint(Registered, lambda r: r.n)


def module_level(x: int) -> int:
    return x


class TestValuesWithNoEncoding:
    def test_a_value_with_no_way_to_tell_it_apart_is_refused_naming_its_path_and_type(
        self,
    ) -> None:
        with pytest.raises(FingerprintError) as caught:
            FP.call((1, {"items": [0, Unknown(1)]}), {})
        message = str(caught.value)
        assert "argument 1 holds at $.items[1] a test_fingerprint.Unknown" in message
        assert "letitloop.register_fingerprint(Unknown, fn)" in message
        assert "letitloop.unchecked(value)" in message
        assert caught.value.path == "$.items[1]"
        assert isinstance(caught.value, LetItLoopError)

    def test_a_step_refused_for_it_is_named_and_never_runs(self, tmp_path: Path) -> None:
        import asyncio

        calls: list[object] = []
        with Journal("g", path=tmp_path / "j.db") as j:
            with pytest.raises(FingerprintError) as caught:
                j.step("charge", calls.append, Unknown(1))
            assert str(caught.value).startswith(f"step 'charge' (run {j.run_id} of goal 'g'): ")
            assert "argument 0 holds a test_fingerprint.Unknown" in str(caught.value)

            async def main() -> None:
                with pytest.raises(FingerprintError, match=r"^step 'ask' \(run "):
                    await j.async_step("ask", asyncio.sleep, 0, Unknown(2))

            asyncio.run(main())
        assert calls == []

    def test_a_keyword_argument_is_named(self) -> None:
        with pytest.raises(FingerprintError, match="keyword argument 'client' holds a"):
            FP.call((), {"client": Unknown(1)})

    def test_a_registered_fingerprint_tells_values_apart(self) -> None:
        assert FP.digest(Registered(1)) == FP.digest(Registered(1))
        assert FP.digest(Registered(1)) != FP.digest(Registered(2))
        assert FP.digest([Registered(1)]) != FP.digest([1])  # the class is part of it

    def test_a_registered_fingerprint_covers_subclasses_by_their_own_name(self) -> None:
        class Sub(Registered):
            pass

        assert FP.digest(Sub(1)) != FP.digest(Registered(1))
        assert FP.digest(Sub(1)) != FP.digest(Sub(2))

    def test_a_built_in_type_cannot_get_a_fingerprint_function(self) -> None:
        for cls in (int, dict, dt.datetime, uuid.UUID):
            with pytest.raises(TypeError, match="built in"):
                register_fingerprint(cls, repr)

    def test_a_fingerprint_function_that_raises_is_reported(self) -> None:
        class Broken:
            pass

        register_fingerprint(Broken, lambda b: 1 / 0)
        with pytest.raises(FingerprintError, match=r"registered for .*Broken.* raised"):
            FP.digest(Broken())

    def test_partials_and_functions_are_told_apart_by_what_they_are(self) -> None:
        assert FP.digest(functools.partial(module_level, 1)) != FP.digest(
            functools.partial(module_level, 2)
        )
        assert FP.digest(module_level) == FP.digest(module_level)
        assert FP.digest(module_level) != FP.digest(print)
        assert FP.digest(Point) != FP.digest(Rec)

    def test_a_lambda_is_refused_since_its_name_does_not_tell_it_apart(self) -> None:
        with pytest.raises(FingerprintError, match="lambda"):
            FP.call((lambda: 1,), {})

    def test_unregistered_records_are_told_apart_by_their_fields(self) -> None:
        @dataclasses.dataclass
        class Local:
            n: int

        assert FP.digest(Local(1)) != FP.digest(Local(2))
        assert FP.digest(Local(1)) == FP.digest(Local(1))

    def test_subclasses_of_built_in_types_count_their_type_and_value(self) -> None:
        class Name(str):
            pass

        assert FP.digest(Name("a")) != FP.digest("a")
        assert FP.digest(Name("a")) != FP.digest(Name("b"))

    def test_a_named_runs_input_counts_a_value_with_no_fingerprint_by_its_type(self) -> None:
        one, two = {"c": Unknown(1)}, {"c": Unknown(2)}
        assert FP.whole(one, strict=False) == FP.whole(two, strict=False)
        with pytest.raises(FingerprintError, match=r"the run's input holds at \$.c a"):
            FP.whole({"c": Unknown(1)})


class TestNumpyArrays:
    np = pytest.importorskip("numpy")

    def test_arrays_are_told_apart_by_dtype_shape_and_bytes(self) -> None:
        np = self.np
        a = np.array([1, 2, 3, 4], dtype=np.int64)
        assert FP.digest(a) == FP.digest(a.copy())
        assert FP.digest(a) != FP.digest(np.array([1, 2, 3, 5], dtype=np.int64))
        assert FP.digest(a) != FP.digest(a.astype(np.int32))
        assert FP.digest(a) != FP.digest(a.reshape(2, 2))
        assert FP.digest(a.reshape(2, 2).T) == FP.digest(np.ascontiguousarray(a.reshape(2, 2).T))
        assert FP.digest(np.float64(1.5)) != FP.digest(np.float64(2.5))
        assert FP.digest(np.float64(1.5)) != FP.digest(1.5)

    def test_object_arrays_are_told_apart_by_their_items(self) -> None:
        np = self.np
        one = np.array([{"a": 2**70}, None], dtype=object)
        two = np.array([{"a": 2**71}, None], dtype=object)
        assert FP.digest(one) != FP.digest(two)

    def test_numpy_is_never_imported_to_fingerprint(self, tmp_path: Path) -> None:
        code = (
            "import sys\n"
            "from letitloop.identity.fingerprint import Fingerprinter\n"
            "Fingerprinter().call(({'a': (1, 2**70)}, {1, 'x'}), {})\n"
            "print('numpy' in sys.modules)\n"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "False"


@dataclasses.dataclass(frozen=True)
class Frozen:
    text: Any
    n: int = 0


class Msg(msgspec.Struct):
    role: str
    content: Any


class TestUncheckedAtAnyDepth:
    def test_a_nested_part_is_left_out_of_the_fingerprint(self) -> None:
        a = [{"role": "system", "content": unchecked("today is monday")}, {"q": 1}]
        b = [{"role": "system", "content": unchecked("today is tuesday")}, {"q": 1}]
        c = [{"role": "system", "content": unchecked("today is tuesday")}, {"q": 2}]
        assert FP.call((a,), {}) == FP.call((b,), {})
        assert FP.call((a,), {}) != FP.call((c,), {})
        assert FP.call((a,), {}).startswith("~")

    def test_the_function_receives_exactly_the_values(self, db: Path) -> None:
        got: list[Any] = []
        messages = [
            {"role": "system", "content": unchecked("today")},
            (unchecked(1), {unchecked("k"): unchecked({2})}),
            Frozen(unchecked("t")),
            Msg("user", unchecked("hi")),
            Pair(unchecked(1), [unchecked(2)]),
            Model(m=unchecked([unchecked(3)])),
        ]
        with Journal("g", path=db) as j:
            j.step("ask", lambda m, k=None: got.append((m, k)), messages, k=[unchecked(4)])
        ((received, k),) = got
        assert received == [
            {"role": "system", "content": "today"},
            (1, {"k": {2}}),
            Frozen("t"),
            Msg("user", "hi"),
            Pair(1, [2]),
            Model(m=[3]),
        ]
        assert k == [4]
        assert "Unchecked" not in repr(received)

    def test_a_part_in_a_class_that_is_not_rebuilt_is_refused(self) -> None:
        with pytest.raises(
            FingerprintError, match=r"at \$\[0\] a letitloop.identity.unchecked.Unchecked"
        ):
            FP.call(([Opaque(unchecked(1))],), {})

    def test_a_call_recorded_without_it_replays_for_a_call_that_wraps_a_part(
        self, db: Path
    ) -> None:
        calls: list[str] = []

        def ask(messages: Any) -> str:
            calls.append(str(messages))
            return "answer"

        with pytest.raises(RuntimeError), Journal("g", path=db) as j:
            j.step("ask", ask, [{"content": "monday"}, "q"])
            raise RuntimeError("crash")
        with Journal("g", path=db) as j:  # the fix: the changing part wrapped
            assert j.step("ask", ask, [{"content": unchecked("tuesday")}, "q"]) == "answer"
        assert len(calls) == 1

    def test_but_the_rest_of_a_partly_unchecked_argument_is_still_checked(self, db: Path) -> None:
        with pytest.raises(RuntimeError), Journal("g", path=db) as j:
            j.step("ask", str, [{"content": unchecked("monday")}, "q1"])
            raise RuntimeError("crash")
        with Journal("g", path=db) as j, pytest.raises(StepMismatchError, match="argument 0"):
            j.step("ask", str, [{"content": unchecked("tuesday")}, "q2"])


class TestAJournalReplaysByValue:
    def test_keyword_order_is_not_part_of_a_recorded_call(self, db: Path) -> None:
        calls: list[tuple[int, int]] = []

        def add(a: int, b: int) -> int:
            calls.append((a, b))
            return a + b

        with pytest.raises(RuntimeError), Journal("g", path=db) as j:
            j.step("add", add, a=1, b=2)
            raise RuntimeError("crash")
        with Journal("g", path=db) as j:
            assert j.step("add", add, b=2, a=1) == 3
        assert calls == [(1, 2)]

    def test_registered_objects_and_big_ints_are_told_apart_on_replay(self, db: Path) -> None:
        with pytest.raises(RuntimeError), Journal("g", path=db, registry=REGISTRY) as j:
            j.step("o", str, Opaque(1))
            j.step("n", str, 2**70)
            raise RuntimeError("crash")
        with Journal("g", path=db, registry=REGISTRY) as j:
            with pytest.raises(StepMismatchError, match="positional argument 0 differs"):
                j.step("o", str, Opaque(2))
            with pytest.raises(StepMismatchError, match="positional argument 0 differs"):
                j.step("n", str, 2**71)


class TestTheFastPath:
    """A plain value goes to msgspec at once; the walk must give it the same bytes."""

    @PROPERTY
    @given(PLAIN)
    def test_it_gives_the_bytes_the_walk_gives(self, value: Any) -> None:
        from letitloop.codec import default_registry
        from letitloop.identity import canon

        fast, _ = canon.canonical(value, default_registry, True)
        walked = None
        for careful in (False, True):
            walk = canon._Walk(default_registry, True, careful)
            try:
                walked = canon.pack(canon._canon(value, walk, MAX_DEPTH + 1, True))
                break
            except UnicodeEncodeError:
                continue
        assert fast == walked

    @PROPERTY
    @given(PLAIN)
    def test_its_check_agrees_with_the_codecs_plain_scan(self, value: Any) -> None:
        from letitloop.codec.plain import is_plain, plain_tree

        if type(value) in (dict, list):
            tag_like = type(value) is dict and len(value) == 1 and next(iter(value))[:1] == "!"
            assert plain_tree(value, MAX_DEPTH) == (is_plain(value) or tag_like)


class TestTheFastPathAtTheDepthLimit:
    """The fingerprint's own plain check counts levels as the codec's scan does (100 at most)."""

    @staticmethod
    def nested(levels: int, kind: type) -> Any:
        value: Any = kind()
        for _ in range(levels - 1):
            value = [value] if kind is list else {"a": value}
        return value

    @pytest.mark.parametrize("kind", [list, dict])
    @pytest.mark.parametrize("levels", [MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, MAX_DEPTH + 2])
    def test_its_check_agrees_with_the_codecs_plain_scan(self, levels: int, kind: type) -> None:
        from letitloop.codec.plain import is_plain, plain_tree

        value = self.nested(levels, kind)
        assert plain_tree(value, MAX_DEPTH) == is_plain(value) == (levels <= MAX_DEPTH)

    @pytest.mark.parametrize("kind", [list, dict])
    def test_a_value_one_level_deeper_keeps_the_fingerprint_the_walk_gives(
        self, kind: type
    ) -> None:
        from letitloop.codec import default_registry
        from letitloop.identity import canon
        from letitloop.identity.fingerprint import arg_digest

        value = self.nested(MAX_DEPTH + 1, kind)
        walk = canon._Walk(default_registry, True, False)
        walked = canon.pack(canon._canon(value, walk, MAX_DEPTH + 1, True))
        assert Fingerprinter().digest(value) == arg_digest(walked)


class TestTheDigestsKeptForRepeatedArguments:
    """A str or int argument met again gets its digest looked up, never another value's."""

    VALUES: ClassVar[list[Any]] = [
        1,
        True,
        1.0,
        "1",
        b"1",
        0,
        False,
        "",
        -1,
        2**63 - 1,
        2**64 - 1,
        2**64,
        -(2**63),
        "é",
        "\ud800",
        "a" * 128,
        "a" * 129,
        [1],
        (1,),
    ]

    @staticmethod
    def hashed(value: Any) -> str:
        """The digest computed afresh by the walk, kept digests left aside."""
        from letitloop.codec import default_registry
        from letitloop.identity import canon
        from letitloop.identity.fingerprint import arg_digest

        data, _ = canon.canonical(value, default_registry, True)
        return arg_digest(data)

    def test_each_value_met_again_gets_its_own_digest(self) -> None:
        fps = Fingerprinter()
        for _ in range(3):  # the first round computes, the later ones may look up
            for value in self.VALUES:
                want = self.hashed(value)
                assert fps.digest(value) == want, value
                assert fps.call((value,), {}) == want, value
                assert fps.call((value, value), {}) == f"{want} {want}", value
                assert fps.call((), {"k": value}) == f"k={want}", value
        digests = [fps.digest(v) for v in self.VALUES]
        assert len(set(digests)) == len(digests)  # 1, True, 1.0, "1", b"1" stay apart

    def test_the_kept_digests_stay_bounded_and_long_strs_are_not_kept(self) -> None:
        from letitloop.identity import fingerprint

        fps = Fingerprinter()
        for i in range(fingerprint.KNOWN_MAX + 100):
            assert fps.call((i,), {}) == self.hashed(i)
        assert 0 < len(fingerprint._KNOWN) <= fingerprint.KNOWN_MAX
        long = "x" * (fingerprint.KNOWN_CHARS + 1)
        fps.call((long,), {})
        assert long not in fingerprint._KNOWN


class TestTheDigestOfOneArgument:
    """``arg_digest`` (a copy of an empty hash) is the digest recorded fingerprints hold."""

    @pytest.mark.parametrize("data", [b"", b"x", b"\x00" * 200, bytes(range(256)) * 3])
    def test_it_is_blake2b_of_six_bytes(self, data: bytes) -> None:
        from hashlib import blake2b

        from letitloop.identity.fingerprint import arg_digest

        assert arg_digest(data) == blake2b(data, digest_size=6).hexdigest()

    def test_a_call_keeps_the_fingerprint_files_recorded(self) -> None:
        # Pinned: recorded rows hold these digests, so a replay must compute them again.
        fp = Fingerprinter().call((123, "https://example.com/articles/2026/11/30"), {"k": [1]})
        assert fp == "34c6b3dfbc21 9a46f978a9b3 k=" + Fingerprinter().digest([1])
        assert Fingerprinter().digest([1]) == "709011ace1c2"


class TestUncheckedInAnAsyncStep:
    def test_the_coroutine_receives_the_values(self, db: Path) -> None:
        import asyncio

        got: list[Any] = []

        async def ask(messages: Any) -> str:
            got.append(messages)
            return "answer"

        async def main() -> str:
            async with Journal("g", path=db) as j:
                return await j.async_step("ask", ask, [{"content": unchecked("now")}, (1,)])

        assert asyncio.run(main()) == "answer"
        assert got == [[{"content": "now"}, (1,)]]


@dataclasses.dataclass
class WithPseudoFields:
    seed: dataclasses.InitVar[int]  # no default: no class attribute of that name
    text: Any
    kind: ClassVar[str] = "k"

    def __post_init__(self, seed: int) -> None:
        self.seeded = seed


class TestUncheckedInADataclassWithPseudoFields:
    def test_class_variables_and_init_variables_are_not_taken_for_fields(self) -> None:
        args, _ = unwrap((WithPseudoFields(7, unchecked("t")),), {})
        assert args == (WithPseudoFields(7, "t"),)
        assert args[0].seeded == 7  # a copy: __post_init__ did not run again


class TestARepeatedCallWithAChangedArgument:
    def test_it_is_refused_naming_its_numbered_key(self, db: Path) -> None:
        with pytest.raises(RuntimeError), Journal("g", path=db) as j:
            j.step("f", str, 1)
            j.step("f", str, 1)
            raise RuntimeError("crash")
        with Journal("g", path=db) as j:
            assert j.step("f", str, 1) == "1"
            with pytest.raises(StepMismatchError, match=r"^step 'f#2' \(run "):
                j.step("f", str, 2)


class TestARegisteredFingerprintsName:
    CODE = (
        "import sys\n"
        "from letitloop import register_fingerprint\n"
        "from letitloop.identity.fingerprint import Fingerprinter\n"
        "Invoice = type('Invoice', (), {'__init__': lambda s, n: setattr(s, 'n', n)})\n"
        "Invoice.__module__ = sys.argv[1]\n"
        "register_fingerprint(Invoice, lambda i: i.n, **({'name': sys.argv[2]} if sys.argv[2] "
        "else {}))\n"
        "print(Fingerprinter().digest(Invoice(7)))\n"
    )

    def digest_in_a_process(self, module: str, name: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", self.CODE, module, name], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def test_it_keeps_a_fingerprint_when_the_class_moves(self) -> None:
        before = self.digest_in_a_process("billing", "Invoice")
        assert self.digest_in_a_process("accounts.invoices", "Invoice") == before
        assert self.digest_in_a_process("accounts.invoices", "") != before  # by module.QualName

    def test_it_cannot_be_taken_by_another_class(self) -> None:
        class One:
            pass

        class Two:
            pass

        register_fingerprint(One, repr, name="test-one")
        with pytest.raises(ValueError, match=r"already registered for .*One"):
            register_fingerprint(Two, repr, name="test-one")


class TestAJournalsInput:
    def test_an_unnamed_run_is_not_picked_by_a_value_with_no_fingerprint(self, db: Path) -> None:
        with pytest.raises(FingerprintError, match=r"the run's input holds at \$.c a "):
            Journal("g", path=db, input={"c": Unknown(1)}).__enter__()
        with Journal("g", path=db, input={"c": Unknown(1)}, run="r") as j:  # named: fine
            assert j.attempt == 1
