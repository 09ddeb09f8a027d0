"""Run ids: ULIDs that name a run in any process and sort by the time they were made."""

from __future__ import annotations

from letitloop.identity.ids import new_run_id

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def millis(run_id: str) -> int:
    """The milliseconds a ULID's first ten characters hold."""
    n = 0
    for c in run_id[:10]:
        n = n * 32 + CROCKFORD.index(c)
    return n


class TestARunId:
    def test_it_is_26_characters_of_crockford_base32(self) -> None:
        run_id = new_run_id(1_796_000_000.123)
        assert len(run_id) == 26
        assert set(run_id) <= set(CROCKFORD)

    def test_it_holds_the_millisecond_it_was_made(self) -> None:
        assert millis(new_run_id(1_796_000_000.123)) == 1_796_000_000_123

    def test_a_later_one_sorts_after_an_earlier_one(self) -> None:
        times = [1_796_000_000.0 + i * 0.001 for i in range(50)]
        ids = [new_run_id(t) for t in times]
        assert ids == sorted(ids)

    def test_two_made_in_the_same_millisecond_differ(self) -> None:
        ids = {new_run_id(1_796_000_000.5) for _ in range(1000)}
        assert len(ids) == 1000
