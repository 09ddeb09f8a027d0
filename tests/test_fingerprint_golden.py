"""Golden fingerprints: the digests recorded journals hold never change (issue 50).

A fingerprint is stored with every step row: a digest computed differently
tomorrow refuses every recorded call as changed arguments. These values are
pinned byte for byte, for the kinds of values whose canonical form has its own
rule (tuples, sets and frozensets sorted by their bytes, subclasses of str and
dict with their type's name, functools.partial with its keywords, unchecked()
on a whole argument); each would pass a round-trip test if it changed.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

from letitloop import unchecked
from letitloop.identity.fingerprint import Fingerprinter

FP = Fingerprinter()
partial = functools.partial


class Name(str):
    """A str subclass: its type's name is part of its identity."""


class Bag(dict):  # type: ignore[type-arg]
    """A dict subclass, likewise."""


def pay(amount: int, currency: str = "EUR", *, memo: str = "") -> int:
    return amount


#: (a value, its digest as recorded since the format began)
GOLDEN: list[tuple[str, Any, str]] = [
    ("tuple", (1, "a", (2.5, None)), "59f93c0f9a7d"),
    ("list", [1, "a", [2.5, None]], "9453d33c4be4"),
    ("set", {3, 1, 2}, "451242053301"),
    ("set, other insertion order", {2, 3, 1}, "451242053301"),
    ("frozenset", frozenset({"b", "a"}), "1e3204a56dee"),
    ("str", "ada", "a2e592d8643a"),
    ("dict", {"a": 1, "b": 2}, "847ce07d44c6"),
    ("dict, other insertion order", {"b": 2, "a": 1}, "847ce07d44c6"),
    ("partial with keywords", partial(pay, 5, currency="USD", memo="x"), "350e2c1d640a"),
    (
        "partial, another keyword",
        partial(pay, 5, currency="GBP", memo="x"),
        "1e5c8802d675",
    ),
    ("str subclass", Name("ada"), "55d6a3188e1a"),
    ("dict subclass", Bag(b=2, a=1), "9902cad584a6"),
]


class TestARecordedDigest:
    @pytest.mark.parametrize(("what", "value", "digest"), GOLDEN, ids=[g[0] for g in GOLDEN])
    def test_is_computed_the_same_today(self, what: str, value: Any, digest: str) -> None:
        assert FP.digest(value) == digest

    def test_a_subclass_is_not_its_base_and_keywords_count(self) -> None:
        digests = {g[0]: g[2] for g in GOLDEN}
        assert digests["str subclass"] != digests["str"]
        assert digests["dict subclass"] != digests["dict"]
        assert digests["partial with keywords"] != digests["partial, another keyword"]


class TestACallsFingerprint:
    def test_an_unchecked_whole_argument_is_a_tilde_in_its_place(self) -> None:
        assert FP.call((1, unchecked({"k": 1})), {"memo": unchecked("x")}) == (
            "38eddaeb4233 ~ memo=~"
        )

    def test_the_same_call_checked_digests_each_argument(self) -> None:
        assert FP.call((1, {"k": 1}), {"memo": "x"}) == (
            "38eddaeb4233 bbd7d20d2109 memo=59b49de5a437"
        )
