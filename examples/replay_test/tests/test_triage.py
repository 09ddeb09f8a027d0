"""The triage pipeline tested from its recording (tests/fixtures/triage.db, made by
``lil fixture``): no model call, and a failure that names the step that drifted."""

from __future__ import annotations

import pytest
import triage


@pytest.mark.letitloop_replay("tests/fixtures/triage.db")
def test_a_double_charge_still_goes_to_billing_with_the_recorded_reply() -> None:
    answer = triage.triage("I was charged twice for March")
    assert answer.startswith("billing: ")
    assert triage.MODEL_CALLS == []  # replayed: no model was called
