"""A support-ticket triage pipeline: the worked example of docs/testing.md.

Two model calls (here a stand-in that counts its calls), each a step of the
durable run ``triage``: classify the ticket, then draft a reply for its team.

Record a run (it pays for two model calls), then replay it in a test that pays
for none:

    LETITLOOP_DB=recordings.db python triage.py "I was charged twice for March"
    lil --db recordings.db fixture triage --to tests/fixtures/triage.db --redact api_key
    pytest tests/                      # passes, calling no model
    # change the pipeline (say, the drafting prompt's tone), run pytest again:
    # the test fails naming step 'draft', with the recorded and new arguments
"""

from __future__ import annotations

import os
import sys

from letitloop import durable, step, unchecked

#: Every call of the stand-in model, as a test can count them: a replay makes none.
MODEL_CALLS: list[str] = []

#: What the drafting prompt asks for; change it and the recorded 'draft' step drifts.
TONE = "friendly"


def model(prompt: str, api_key: str) -> dict[str, object]:
    """A stand-in for a paid model call: its answer, and the request's headers."""
    MODEL_CALLS.append(prompt)
    if prompt.startswith("classify"):
        text = "billing" if "charged" in prompt else "general"
    else:
        text = f"Hello! Sorry about that; the {prompt.split(':')[1]} team is on it."
    return {"text": text, "request": {"model": "small", "api_key": api_key}}


@durable("triage")
def triage(ticket: str) -> str:
    """The team a ticket goes to and the reply drafted for it."""
    # The key is no part of the call's identity (unchecked): a test replays without it.
    key = unchecked(os.environ.get("MODEL_API_KEY", "sk-example-not-a-real-key"))
    team = step("classify", model, f"classify: {ticket}", api_key=key)["text"]
    reply = step("draft", model, f"draft:{team}: tone={TONE}: {ticket}", api_key=key)
    return f"{team}: {reply['text']}"


if __name__ == "__main__":
    # Run under the module's own name: steps record their functions as triage.model,
    # the name a test that imports this module calls them by (not __main__.model).
    import triage as pipeline

    print(pipeline.triage(" ".join(sys.argv[1:]) or "I was charged twice for March"))
