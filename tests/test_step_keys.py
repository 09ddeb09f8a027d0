"""A step's key and its parts: ``name#n`` read back exactly as the pattern defines it."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from letitloop.keys import REPEAT_SUFFIX, make_key, split_key


def by_the_pattern(key: str) -> tuple[str, int]:
    """What ``split_key`` must answer: the definition, ``#<digits>`` at the end."""
    m = REPEAT_SUFFIX.search(key)
    if m is None:
        return key, 1
    return key[: m.start()], int(m.group(1))


class TestSplittingAKey:
    @given(st.text(alphabet=st.sampled_from("#0123456789ab²٣\n -/")))
    def test_it_answers_what_the_pattern_defines(self, key: str) -> None:
        assert split_key(key) == by_the_pattern(key)

    @given(st.text(), st.text(alphabet=st.characters(categories=["Nd"]), min_size=1))
    def test_any_text_and_any_decimal_digits(self, head: str, digits: str) -> None:
        key = f"{head}#{digits}"
        assert split_key(key) == by_the_pattern(key) == (head, int(digits))

    def test_the_cases_that_look_alike(self) -> None:
        assert split_key("fetch") == ("fetch", 1)
        assert split_key("fetch#2") == ("fetch", 2)
        assert split_key("a#1#2") == ("a#1", 2)
        assert split_key("s#") == ("s#", 1)
        assert split_key("s#2\n") == ("s", 2)  # the pattern's $ before a final newline
        assert split_key("s#²") == ("s#²", 1)  # a digit that is not decimal

    @given(st.text(min_size=1).filter(lambda s: not re.search(r"#\d+$", s)), st.integers(1, 10**6))
    def test_a_made_key_splits_back(self, name: str, n: int) -> None:
        assert split_key(make_key(name, n)) == (name, n)


class TestReopeningAParentsChildren:
    """``StepKeys.reopen``: a parent step tried again meets its children afresh (no SQLite)."""

    def test_returned_children_replay_and_failed_ones_keep_their_keys(self) -> None:
        from letitloop.keys import Recorded, StepKeys

        keys = StepKeys("run")
        me = 1  # a thread id: the owner of the calls
        assert keys.claim("p", "fp", me) == ("p", None, None)
        assert keys.claim("p/c", "c1", me) == ("p/c", None, None)
        keys.release("p/c", me)
        assert keys.claim("p/d", "d1", me) == ("p/d", None, None)  # it fails
        keys.release("p/d", me)
        assert keys.claim("q", "q1", me)[0] == "q"  # outside the parent: untouched
        keys.reopen("p/", [Recorded("p/c", "m.child", "c1", 7)])
        key, replay, differs = keys.claim("p/c", "c1", me)
        assert (key, differs) == ("p/c", None) and replay is not None and replay.rowid == 7
        assert keys.claim("p/d", "d1", me) == ("p/d", None, None)
        keys.release("p/d", me)
        assert keys.claim("q", "q1", me)[0] == "q#2"  # still numbered after 'q'
        key, replay, differs = keys.claim("p/c", "c2", me)  # a third call: new
        assert (key, replay, differs) == ("p/c#2", None, None)
