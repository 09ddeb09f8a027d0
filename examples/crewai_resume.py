"""A CrewAI crew SIGKILLed half-way through, then run again: only what was in flight runs again.

Offline and deterministic: the model is a ``BaseLLM`` subclass that answers
from the conversation alone (no network, no API key; CrewAI's telemetry is
opted out of below). Needs ``pip install -e '.[crewai]'`` in an environment of
its own (CrewAI pins openai<3 and mcp<2), run from a checkout of this repository.

    python examples/crewai_resume.py --crash   # dies inside the writer's tool call
    python examples/crewai_resume.py           # resumes: replays the rest, prints the report

Two agents (a researcher with ``search`` and ``word_count``, a writer with
``word_count``) run two tasks. Each real model call and tool call prints a
line as it runs. With ``--crash`` the process kills itself with SIGKILL
inside the writer's tool call. Run again, the researcher's four model calls
and three tool calls and the writer's first model call replay from the
journal (no line printed: they do not run), and only the interrupted tool
call and what follows it run. ``lil show research_crew`` lists every call
with its tokens and what replay saved.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
from typing import Any

os.environ.update(  # CrewAI's telemetry and tracing opt-outs, before crewai is imported
    OTEL_SDK_DISABLED="true",
    CREWAI_DISABLE_TELEMETRY="true",
    CREWAI_DISABLE_TRACKING="true",
    CREWAI_TRACING_ENABLED="false",
)

from crewai import Agent, Crew, CrewOutput, Task
from crewai.llms.base_llm import BaseLLM
from crewai.tools import tool

from letitloop.adapters.crewai import CrewAIDurabilityHandler

CRASH = False


def said(line: str) -> None:
    print(line, flush=True)


@tool("search")
def search(query: str) -> str:
    """Search the notes for a query."""
    said(f"  ran tool  search({query!r})")
    return f"{query}: {len(query)} notes"


@tool("word_count")
def word_count(text: str) -> str:
    """Count the words of a text."""
    said(f"  ran tool  word_count({text[:30]!r}...)")
    if CRASH and text.startswith("Draft"):
        said("  -- SIGKILL inside the tool call --")
        os.kill(os.getpid(), signal.SIGKILL)
    return str(len(text.split()))


class OfflineModel(BaseLLM):
    """Answers from the messages alone: tool calls first, then a final answer."""

    def supports_function_calling(self) -> bool:
        return True

    def call(self, messages: Any, tools: Any = None, callbacks: Any = None,
             available_functions: Any = None, from_task: Any = None,
             from_agent: Any = None, response_model: Any = None) -> Any:  # fmt: skip
        role = getattr(from_agent, "role", "?")
        seen = [m["content"] for m in messages if isinstance(m, dict) and m.get("role") == "tool"]
        said(f"  ran model {role} (after {len(seen)} tool results)")
        self._track_token_usage_internal({"prompt_tokens": 50 * len(messages), "completion_tokens": 20})  # fmt: skip  # noqa: E501
        if role == "Researcher":
            plan = [("search", {"query": "sqlite wal"}), ("search", {"query": "sqlite fsync"}),
                    ("word_count", {"text": " ".join(seen)})]  # fmt: skip
            final = "Findings: " + "; ".join(seen)
        else:
            plan = [("word_count", {"text": "Draft: WAL keeps readers and a writer apart"})]
            final = f"Report: WAL keeps readers and a writer apart ({' '.join(seen)} words)."
        if len(seen) < len(plan):
            name, args = plan[len(seen)]
            return [{"id": f"call_{len(seen)}", "type": "function",
                     "function": {"name": name, "arguments": json.dumps(args)}}]  # fmt: skip
        return final


def build_crew() -> Crew:
    model = OfflineModel(model="offline-1")
    researcher = Agent(role="Researcher", goal="Find facts", backstory="Careful.", llm=model,
                       tools=[search, word_count])  # fmt: skip
    writer = Agent(role="Writer", goal="Write", backstory="Brief.", llm=model, tools=[word_count])
    research = Task(description="Research {topic}.", expected_output="Facts.", agent=researcher)
    write = Task(description="Write about {topic}.", expected_output="A report.", agent=writer,
                 context=[research])  # fmt: skip
    return Crew(agents=[researcher, writer], tasks=[research, write])


def main() -> None:
    global CRASH
    parser = argparse.ArgumentParser(description="A CrewAI crew killed half-way, then resumed.")
    parser.add_argument("--crash", action="store_true", help="SIGKILL this process mid-run")
    parser.add_argument("--db", help="the journal file (default: .letitloop/journal.db)")
    args = parser.parse_args()
    CRASH = args.crash
    crew = build_crew()
    CrewAIDurabilityHandler(session_id="research_crew", path=args.db).wrap_crew(crew)
    result = crew.kickoff(inputs={"topic": "SQLite's WAL"})
    assert isinstance(result, CrewOutput)  # (a crew with stream=True is refused)
    said(f"report: {result.raw}")
    said(f"tokens: {crew.usage_metrics.total_tokens if crew.usage_metrics else 0}")


if __name__ == "__main__":
    main()
