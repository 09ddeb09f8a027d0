"""How many random-SIGKILL trials each scenario of the suite's trial families runs.

One number for all of them: the agent requests' (tests/request_trials.py, CrewAI's
included), the budgets' (test_bills.py), LangGraph's requests, prebuilt agents and
answers, LlamaIndex's agents, smolagents' code agent, AutoGen's team with a person in
it, and the approvals' and identities' of Pydantic AI and the OpenAI Agents SDK.
Issues 48 and 49 ask for at least 20 in CI, their CI-sized form: that is the default.
``LETITLOOP_TRIALS=N`` runs N instead: more, as a benchmark would (200). Fewer is not
what CI runs: a family's checks that its trials reached every kill point and outcome
may then fail (the trials are about a quarter of the suite's CPU).
Imported by the scripts' helpers too, so it imports nothing but ``os``.
"""

from __future__ import annotations

import os


def trials_per_scenario() -> int:
    """``LETITLOOP_TRIALS`` (an integer, at least 4: a family checks that a quarter of
    its trials killed a process), 20 when unset."""
    text = os.environ.get("LETITLOOP_TRIALS", "").strip() or "20"
    if not text.isdigit() or int(text) < 4:
        raise ValueError(
            f"LETITLOOP_TRIALS: expected a whole number of trials per scenario, at least 4 "
            f"(20 when unset); found {text!r}. Unset it, or set it to 20 or more"
        )
    return int(text)


#: Trials per scenario (see the module's docstring).
TRIALS = trials_per_scenario()
