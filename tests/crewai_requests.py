"""The research crew of tests/crewai_crew.py asked one request with the adapter's default
arguments, for tests/request_trials.py's trials (tests/test_crewai.py runs them).

``python tests/crewai_requests.py MODE DB SIDE [KILL_AT [TASK]]``: kicks the crew off
with ``durable_crew(crew, "research_crew")`` (no run name; the journal from
``LETITLOOP_DB``) for the topic TASK stands for (request_trials' changed prompt: "wal",
else "sqlite": the scripted model knows these two), then writes ``start after return``.
MODE is the kickoff: ``ask`` (``kickoff``), ``async`` (``kickoff_async``), ``each``
(``kickoff_for_each`` of the topic, then "wal") or ``each-async``
(``kickoff_for_each_async`` of the same two, which CrewAI runs at once: the model's and
tools' journaled calls then take turns, each from its start to its step's commit, so
that a kill inside one never lands between another's ``done`` line and its commit,
which would count a call in flight as one paid again).
The model and tools write ``start …``/``done …`` to SIDE and the process SIGKILLs itself
at ``start KILL_AT``. ``CREW_KICKOFF`` (JSON) passes the kickoff's own ``run=``,
``reuse=``, ``fresh=``. Prints the crew's answer as one JSON line.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

import crewai_crew
from crewai import CrewOutput
from crewai.hooks import (
    ToolCallHookContext,
    register_after_tool_call_hook,
    register_before_tool_call_hook,
)
from request_trials import CHANGED

from letitloop.adapters.crewai import durable_crew, llms, tools

#: Held by a journaled call of ``each-async`` from its start to its step's commit.
TURN = threading.RLock()


def one_at_a_time(journaled: Callable[..., Any]) -> Callable[..., Any]:
    """The adapter's ``journaled`` (one call as a step), made to hold TURN."""

    @functools.wraps(journaled)
    def taking_turns(*args: Any, **kwargs: Any) -> Any:
        with TURN:
            return journaled(*args, **kwargs)

    return taking_turns


#: The kickoffs this script makes, by MODE.
MODES = ("ask", "async", "each", "each-async")


def ask(mode: str, db: str, side: str, kill_at: str, task: str) -> dict[str, Any]:
    os.environ["LETITLOOP_DB"] = db
    topic = "wal" if task == CHANGED else "sqlite"
    topics = [topic] if mode in ("ask", "async") else [topic, "wal"]
    crewai_crew.LOG = side
    crewai_crew.KILL_AT = f"start {kill_at}" if kill_at else ""
    # The second search of the Researcher's first answer starts once the first finished
    # (crewai_crew.LATE): a kill inside it never lands between the first's done and commit.
    late = {f"{t} today" for t in topics}

    def wait_for_twin(context: ToolCallHookContext) -> None:
        query = context.tool_input.get("query")
        if query in late:
            crewai_crew.FINISHED[crewai_crew.twin(query)].wait(60)

    def finished(context: ToolCallHookContext) -> None:
        query = context.tool_input.get("query")
        if isinstance(query, str):
            crewai_crew.FINISHED[query].set()

    register_before_tool_call_hook(wait_for_twin)
    if mode == "each-async":  # one call at a time, its commit included (the docstring)
        for module in (llms, tools):  # each imported calls.journaled by name
            setattr(module, "journaled", one_at_a_time(getattr(module, "journaled")))  # noqa: B009, B010
    register_after_tool_call_hook(finished)
    crew = durable_crew(crewai_crew.research_crew(native=True), "research_crew")
    # CREW_KICKOFF: the kickoff's own run=/reuse=/fresh= (JSON), for the tests of those.
    options = json.loads(os.environ.get("CREW_KICKOFF") or "{}")
    inputs = [{"topic": t} for t in topics]
    results: list[Any]
    if mode == "ask":
        results = [crew.kickoff(inputs=inputs[0], **options)]
    elif mode == "async":
        results = [asyncio.run(crew.kickoff_async(inputs=inputs[0], **options))]
    elif mode == "each":
        results = crew.kickoff_for_each(inputs=inputs, **options)
    else:
        results = asyncio.run(crew.kickoff_for_each_async(inputs=inputs, **options))  # type: ignore[arg-type]
    crewai_crew.note("start after return")  # the program has the answer, not used yet
    outputs = [r for r in results if isinstance(r, CrewOutput)]
    assert outputs == results, results  # the crew does not stream
    return {"answer": " // ".join(r.raw for r in outputs)}


if __name__ == "__main__":
    mode, db, side = sys.argv[1:4]
    kill_at = sys.argv[4] if len(sys.argv) > 4 else ""
    task = sys.argv[5] if len(sys.argv) > 5 else ""
    assert mode in MODES, f"the crew's kickoffs are {MODES}, not {mode!r}"
    print(json.dumps(ask(mode, db, side, kill_at, task)))
