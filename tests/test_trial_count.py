"""The suite's one number of random-SIGKILL trials per scenario (tests/trial_count.py)."""

from __future__ import annotations

import pytest
from trial_count import trials_per_scenario


def test_unset_it_is_the_issues_ci_sized_form(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LETITLOOP_TRIALS", raising=False)
    assert trials_per_scenario() == 20


def test_a_benchmark_sets_more(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LETITLOOP_TRIALS", " 200 ")
    assert trials_per_scenario() == 200


@pytest.mark.parametrize("text", ["x", "3", "-20", "20.5"])
def test_anything_else_is_refused_saying_what_it_takes(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    monkeypatch.setenv("LETITLOOP_TRIALS", text)
    with pytest.raises(ValueError, match=r"at least 4 \(20 when unset\); found") as refused:
        trials_per_scenario()
    assert repr(text) in str(refused.value)
