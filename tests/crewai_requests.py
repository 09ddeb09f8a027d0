"""The research crew of tests/crewai_crew.py asked one request with the adapter's default
arguments, for tests/request_trials.py's trials (tests/test_crewai.py runs them).

``python tests/crewai_requests.py ask DB SIDE [KILL_AT [TASK]]``: kicks the crew off
with ``durable_crew(crew, "research_crew")`` (no run name; the journal from
``LETITLOOP_DB``) for the topic TASK stands for (request_trials' changed prompt: "wal",
else "sqlite": the scripted model knows these two), then writes ``start after return``.
The model and tools write ``start …``/``done …`` to SIDE and the process SIGKILLs itself
at ``start KILL_AT``. ``CREW_KICKOFF`` (JSON) passes the kickoff's own ``run=``,
``reuse=``, ``fresh=``. Prints the crew's answer as one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import crewai_crew
from crewai import CrewOutput
from crewai.hooks import (
    ToolCallHookContext,
    register_after_tool_call_hook,
    register_before_tool_call_hook,
)
from request_trials import CHANGED

from letitloop.adapters.crewai import durable_crew


def ask(db: str, side: str, kill_at: str, task: str) -> dict[str, Any]:
    os.environ["LETITLOOP_DB"] = db
    topic = "wal" if task == CHANGED else "sqlite"
    crewai_crew.LOG = side
    crewai_crew.KILL_AT = f"start {kill_at}" if kill_at else ""
    # The second search of the Researcher's first answer starts once the first finished
    # (crewai_crew.LATE): a kill inside it never lands between the first's done and commit.
    late = f"{topic} today"

    def wait_for_twin(context: ToolCallHookContext) -> None:
        if context.tool_input.get("query") == late:
            crewai_crew.FINISHED[crewai_crew.twin(late)].wait(60)

    def finished(context: ToolCallHookContext) -> None:
        query = context.tool_input.get("query")
        if isinstance(query, str):
            crewai_crew.FINISHED[query].set()

    register_before_tool_call_hook(wait_for_twin)
    register_after_tool_call_hook(finished)
    crew = durable_crew(crewai_crew.research_crew(native=True), "research_crew")
    # CREW_KICKOFF: the kickoff's own run=/reuse=/fresh= (JSON), for the tests of those.
    options = json.loads(os.environ.get("CREW_KICKOFF") or "{}")
    result = crew.kickoff(inputs={"topic": topic}, **options)
    crewai_crew.note("start after return")  # the program has the answer, not used yet
    assert isinstance(result, CrewOutput), result  # the crew does not stream
    return {"answer": result.raw}


if __name__ == "__main__":
    mode, db, side = sys.argv[1:4]
    kill_at = sys.argv[4] if len(sys.argv) > 4 else ""
    task = sys.argv[5] if len(sys.argv) > 5 else ""
    assert mode == "ask", f"the crew answers requests one at a time (mode ask), not {mode!r}"
    print(json.dumps(ask(db, side, kill_at, task)))
