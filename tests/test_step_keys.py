"""Step keys: ``name#n`` read back exactly as the pattern defines it, and the allocator's rules.

``StepKeys`` does no I/O: these tests run it on fingerprints written out,
without SQLite or a journal (the rules of ``letitloop/identity/keys.py``'s docstring).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from letitloop.errors import ConcurrentStepError, InvalidNameError
from letitloop.identity.keys import (
    REPEAT_SUFFIX,
    Recorded,
    StepKeys,
    make_key,
    same_arguments,
    split_key,
)


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
        from letitloop.identity.keys import Recorded, StepKeys

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


# -- the allocator, without SQLite ---------------------------------------------------------

A, B = "aaaaaaaaaaaa", "bbbbbbbbbbbb"


def keys_with(*rows: tuple[str, str | None]) -> StepKeys:
    """A run's allocator with these done rows (key, fingerprint) loaded, in this journal order."""
    keys = StepKeys("run")
    keys.load([Recorded(key, "m.f", fp, rowid) for rowid, (key, fp) in enumerate(rows, 1)])
    return keys


def call(keys: StepKeys, name: str, fp: str) -> tuple[str, str | None, str | None]:
    """One call: its key, the key it replays, the recorded key it was refused for."""
    key, replay, mismatch = keys.claim(name, fp, 1)
    if replay is None and mismatch is None:
        keys.release(name, 1)
    return (
        key,
        None if replay is None else replay.key,
        None if mismatch is None else mismatch.key,
    )


class TestIdenticalCalls:
    def test_they_replay_in_call_order(self) -> None:
        keys = keys_with(("f", A), ("f#2", A), ("f#3", A))
        assert [call(keys, "f", A) for _ in range(3)] == [
            ("f", "f", None),
            ("f#2", "f#2", None),
            ("f#3", "f#3", None),
        ]

    def test_a_call_made_unchecked_after_a_refusal_replays_the_earliest_match(self) -> None:
        keys = keys_with(("f", A), ("f#2", B))
        assert call(keys, "f", "~") == ("f", "f", None)
        assert call(keys, "f", "~") == ("f#2", "f#2", None)

    def test_a_call_with_an_unchecked_part_replays_the_earliest_match(self) -> None:
        keys = keys_with(("f", A), ("f#2", B))
        assert call(keys, "f", "~cccccccccccc") == ("f", "f", None)

    def test_rows_recorded_out_of_number_order_replay_in_number_order(self) -> None:
        # a cancelled f (#1) re-ran and was recorded after f#2
        keys = keys_with(("f#2", A), ("f", A))
        assert call(keys, "f", A) == ("f", "f", None)
        assert call(keys, "f", A) == ("f#2", "f#2", None)

    def test_different_calls_find_their_own_rows_in_any_order(self) -> None:
        keys = keys_with(("f", A), ("f#2", B))
        assert call(keys, "f", B) == ("f#2", "f#2", None)
        assert call(keys, "f", A) == ("f", "f", None)


class TestAChangedArgument:
    def test_on_the_first_call_it_is_refused_naming_the_key(self) -> None:
        keys = keys_with(("f", A))
        assert call(keys, "f", B) == ("f", None, "f")

    def test_on_a_repeated_call_it_is_refused_naming_that_call(self) -> None:
        keys = keys_with(("f", A), ("f#2", A), ("f#3", A))
        assert call(keys, "f", A) == ("f", "f", None)
        assert call(keys, "f", B) == ("f#2", None, "f#2")  # not run as a new f#4

    def test_on_the_third_call_after_two_replays_it_is_refused_naming_that_call(self) -> None:
        keys = keys_with(("f", A), ("f#2", A), ("f#3", A))
        assert call(keys, "f", A) == ("f", "f", None)
        assert call(keys, "f", A) == ("f#2", "f#2", None)
        assert call(keys, "f", B) == ("f#3", None, "f#3")  # not run as a new f#4

    def test_on_the_third_call_after_two_other_replays_it_is_refused_too(self) -> None:
        keys = keys_with(("f", A), ("f#2", B), ("f#3", A))
        assert call(keys, "f", A) == ("f", "f", None)
        assert call(keys, "f", B) == ("f#2", "f#2", None)
        assert call(keys, "f", B) == ("f#3", None, "f#3")

    def test_a_call_past_every_recorded_one_runs_as_new(self) -> None:
        keys = keys_with(("f", A))
        assert call(keys, "f", A) == ("f", "f", None)
        assert call(keys, "f", B) == ("f#2", None, None)


class TestAnUncheckedArgument:
    def test_it_matches_any_value_at_its_own_position_or_keyword(self) -> None:
        assert same_arguments(f"{A} k={B}", f"~ k={B}")
        assert same_arguments(f"{A} k={B}", f"{A} k=~")
        assert same_arguments(f"{A} k=~", f"{A} k={B}")

    def test_it_never_matches_an_argument_under_another_keyword_or_position(self) -> None:
        assert not same_arguments(f"a={A}", "b=~")
        assert not same_arguments("a=~", f"b={A}")
        assert not same_arguments(A, "k=~")
        assert not same_arguments(f"k={A}", "~")
        assert not same_arguments(f"{A} {B}", "~")
        assert not same_arguments(f"{A}", f"~ {B}")

    def test_so_a_row_of_another_keyword_is_refused_not_replayed(self) -> None:
        keys = keys_with(("f", f"a={A}"))
        assert call(keys, "f", "b=~") == ("f", None, "f")

    def test_a_partly_unchecked_argument_matches_one_recorded_without_it_but_not_another(
        self,
    ) -> None:
        assert same_arguments(A, "~" + B)  # wrapped after the call was recorded
        assert same_arguments("~" + A, B)
        assert not same_arguments("~" + A, "~" + B)  # both partial: the rest differs
        assert same_arguments("~" + A, "~" + A)


class TestTheAllocatorsOtherRules:
    def test_a_name_in_flight_in_one_thread_is_refused_to_another(self) -> None:
        keys = keys_with()
        keys.claim("f", A, 1)
        with pytest.raises(ConcurrentStepError, match="distinct names"):
            keys.claim("f", A, 2)

    def test_a_new_call_skips_numbers_already_recorded_or_claimed(self) -> None:
        keys = keys_with(("f#2", A))
        assert call(keys, "f", B) == ("f", None, None)
        assert call(keys, "f", B) == ("f#2", None, "f#2")

    def test_a_legacy_row_without_fingerprint_replays_by_position(self) -> None:
        keys = keys_with(("f", None))
        assert call(keys, "f", B) == ("f", "f", None)


class SlowKeys(StepKeys):
    """The allocator with every call decided by the general rules (no fast path)."""

    fast = False


#: One operation on an allocator: claim (name, fingerprint, owner), release (name, owner),
#: or take a marker's name.
_names = st.sampled_from(["f", "g", "f/g", "h"])
#: Owners: two threads (their ids), and asyncio tasks named by text: two of a running loop
#: and one of a loop that has stopped (see ``with_tasks``).
_owners = st.sampled_from([1, 2, "task 1", "task 2", "stopped task"])
_ops = st.lists(
    st.one_of(
        st.tuples(st.just("claim"), _names, st.sampled_from([A, B]), _owners),
        st.tuples(st.just("release"), _names, _owners),
        st.tuples(st.just("marker"), _names),
    ),
    max_size=30,
)
_recorded = st.lists(st.tuples(st.sampled_from(["f", "f#2", "g", "h#3"]), st.sampled_from([A, B])))


def run_ops(
    keys: StepKeys,
    rows: list[tuple[str, str]],
    ops: list[tuple[Any, ...]],
    owners: dict[Any, object] | None = None,
) -> list[Any]:
    """What each operation answered (or the error it raised), then the allocator's state.

    ``owners``: the owner objects the names in ``ops`` stand for (asyncio tasks).
    """
    who = owners or {}
    keys.load([Recorded(key, "m.f", fp, n) for n, (key, fp) in enumerate(dict(rows).items(), 1)])
    out: list[Any] = []
    in_flight: dict[str, list[Any]] = {}
    for op in ops:
        try:
            if op[0] == "claim":
                key, replay, differs = keys.claim(op[1], op[2], who.get(op[3], op[3]))
                out.append((key, replay and replay.key, differs and differs.key))
                if replay is None and differs is None:
                    in_flight.setdefault(op[1], []).append(op[3])
            elif op[0] == "release":
                if op[2] in in_flight.get(op[1], []):  # only a call in flight is released
                    in_flight[op[1]].remove(op[2])
                    keys.release(op[1], who.get(op[2], op[2]))
                    out.append("released")
            else:
                out.append(keys.claim_marker(op[1]))
        except Exception as exc:
            out.append((type(exc).__name__, str(exc)))
    label = {id(o): name for name, o in who.items()}  # an owner as the name ops give it
    in_flight_now = {n: [label.get(id(o), o) for o in os] for n, os in keys._in_flight.items()}
    names = {n: (s.low, {fp: list(q) for fp, q in s.by_fp.items()}) for n, s in keys._names.items()}
    tasks = {n: label.get(id(task()), "?") for n, (task, _) in keys._task_names.items()}
    out.append(
        (sorted(keys.claimed), keys._calls, in_flight_now, sorted(keys.marker_keys), names, tasks)
    )
    return out


def with_tasks(
    rows: list[tuple[str, str]], ops: list[tuple[Any, ...]], keys: StepKeys
) -> list[Any]:
    """``run_ops`` inside a running event loop, whose tasks stand for the owners named
    ``task 1`` and ``task 2``; ``stopped task`` is the task of a loop that has stopped."""

    async def current() -> asyncio.Task[Any]:
        task = asyncio.current_task()
        assert task is not None
        return task

    stopped = asyncio.run(current())

    async def inside() -> list[Any]:
        one, two = asyncio.create_task(asyncio.sleep(0)), asyncio.create_task(asyncio.sleep(0))
        owners: dict[Any, object] = {"task 1": one, "task 2": two, "stopped task": stopped}
        try:
            return run_ops(keys, rows, ops, owners)
        finally:
            await asyncio.gather(one, two)

    return asyncio.run(inside())


class TestTheUsualCallsFastPath:
    @given(_recorded, _ops)
    # A name replayed by one task of a running loop is refused to another, as a new one is.
    @example([("f", A), ("f#2", A)], [("claim", "f", A, "task 1"), ("claim", "f", A, "task 2")])
    @example([], [("claim", "f", A, "task 1"), ("release", "f", "task 1"), ("claim", "f", A, 1)])
    def test_it_answers_as_the_general_rules_do(
        self, rows: list[tuple[str, str]], ops: list[tuple[Any, ...]]
    ) -> None:
        assert with_tasks(rows, ops, StepKeys("run")) == with_tasks(rows, ops, SlowKeys("run"))

    def test_it_refuses_a_markers_name_and_a_name_in_flight_elsewhere(self) -> None:
        keys = StepKeys("run")
        assert keys.claim_marker("m")
        with pytest.raises(InvalidNameError, match="already the name of a marker"):
            keys.claim("m", A, 1)
        keys.claim("f", A, 1)
        with pytest.raises(ConcurrentStepError, match="distinct names"):
            keys.claim("f", A, 2)
        keys.release("f", 1)
        assert keys.claim("f", A, 2) == ("f#2", None, None)
