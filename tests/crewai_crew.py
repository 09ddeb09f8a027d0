"""Crews for tests/test_crewai.py, run as a program: real CrewAI, an offline model, two tools.

``python tests/crewai_crew.py SCENARIO --db FILE --log FILE [--mode native|text]``
runs one scenario to completion and prints its outcome as one JSON line.
Every execution of the fake model and of the tools appends ``start …`` and
``done …`` lines to the side file ``--log`` (the counts the tests check:
never the journal's own rows). ``CREW_KILL_AT`` names a line (``start tool
search …``, ``after-task Research``): on reaching it the process SIGKILLs
itself there, inside that call, or between two tasks.

The model is a ``BaseLLM`` subclass that decides from the conversation alone
(no state of its own, no network, no key): a resumed process gets the same
answers for the same messages. ``socket.connect`` is audited: any attempt is
written to ``--net`` (CrewAI's telemetry is opted out of below).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections import defaultdict
from typing import Any

# CrewAI's telemetry and tracing opt-outs, before crewai is imported.
os.environ.update(
    OTEL_SDK_DISABLED="true",
    CREWAI_DISABLE_TELEMETRY="true",
    CREWAI_DISABLE_TRACKING="true",
    CREWAI_TRACING_ENABLED="false",
)

from crewai import Agent, Crew, Process, Task
from crewai.hooks import (
    ToolCallHookContext,
    register_after_tool_call_hook,
    register_before_tool_call_hook,
)
from crewai.llms.base_llm import BaseLLM
from crewai.tools import BaseTool, tool
from pydantic import BaseModel, Field

from letitloop import Journal
from letitloop.adapters.crewai import CrewAIDurabilityHandler

LOG = ""
KILL_AT = os.environ.get("CREW_KILL_AT", "")
#: A search query whose call starts late (before the journal sees it): only once its
#: parallel twin of the same answer has finished (its step committed, or replayed), so
#: the two start in the order a test wants and a kill inside the late one never lands
#: between the twin's ``done`` line and its commit (which would count as a repeat).
LATE = os.environ.get("CREW_LATE", "")
#: The search queries finished in this process: CrewAI's after-tool-call hook runs once
#: the journaled call has returned, so its step is committed (or was replayed) by then.
FINISHED: dict[str, threading.Event] = defaultdict(threading.Event)


def twin(query: str) -> str:
    """The other search of the Researcher's first answer: "sqlite history" <-> "sqlite today"."""
    if query.endswith(" history"):
        return query.removesuffix(" history") + " today"
    return query.removesuffix(" today") + " history"


def note(line: str) -> None:
    """Append ``line`` to the side file (one write: a SIGKILL never tears it), maybe die there."""
    fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)
    if KILL_AT and line == KILL_AT:
        os.kill(os.getpid(), signal.SIGKILL)


# -- the tools -------------------------------------------------------------------------


@tool("search")
def search(query: str) -> str:
    """Search the notes for a query and return what they say."""
    note(f"start tool search {query}")
    found = f"[{query}: {len(query)} notes]"
    note(f"done tool search {query}")
    return found


class CountInput(BaseModel):
    text: str = Field(description="the text whose words to count")


class WordCount(BaseTool):
    name: str = "word_count"
    description: str = "Count the words of a text."
    args_schema: type[BaseModel] = CountInput

    def _run(self, text: str) -> str:
        note(f"start tool word_count {text}")
        counted = str(len(text.split()))
        note(f"done tool word_count {text}")
        return counted


# -- the model -------------------------------------------------------------------------


def _text(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, str) else ""


def _topic(messages: list[Any]) -> str:
    return "sqlite" if "sqlite" in " ".join(_text(m) for m in messages) else "wal"


class ScriptedModel(BaseLLM):
    """An offline model whose answer is a function of the messages (and the agent asking).

    ``native=True`` answers with tool calls (CrewAI's native function calling);
    ``native=False`` writes ReAct text (``Action:``/``Action Input:``) for
    CrewAI to parse.
    """

    native: bool = True

    def supports_function_calling(self) -> bool:
        return self.native

    def call(
        self,
        messages: Any,
        tools: Any = None,
        callbacks: Any = None,
        available_functions: Any = None,
        from_task: Any = None,
        from_agent: Any = None,
        response_model: Any = None,
    ) -> Any:
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        role = getattr(from_agent, "role", "crew")
        seen = self.results(messages)
        which = f"llm {role} {_topic(messages)} {len(messages)}:{len(seen)}"
        note(f"start {which}")
        answer = self.decide(role, messages, seen)
        prompt = sum(len(_text(m)) for m in messages)
        self._track_token_usage_internal(
            {"prompt_tokens": prompt // 4 + 1, "completion_tokens": len(str(answer)) // 4 + 1}
        )
        note(f"done {which}")
        return answer

    def results(self, messages: list[Any]) -> list[str]:
        """The tool results the agent has seen so far, in order."""
        if self.native:
            return [_text(m) for m in messages if isinstance(m, dict) and m.get("role") == "tool"]
        found = []
        for m in messages[2:]:  # after the prompt, whose format section shows "Observation:"
            for part in _text(m).split("Observation:")[1:]:
                found.append(part.strip().split("\n")[0])
        return found

    def decide(self, role: str, messages: list[Any], seen: list[str]) -> Any:
        first = _text(messages[-1]) if messages else ""
        topic = _topic(messages)
        plan: list[tuple[str, dict[str, str]]]
        if role == "Researcher":
            plan = [
                ("search", {"query": f"{topic} history"}),
                ("search", {"query": f"{topic} today"}),
                ("word_count", {"text": " ".join(seen[:2]) or topic}),
            ]
            final = f"Findings on {topic}: " + " | ".join(seen)
        elif role == "Writer":
            plan = [("word_count", {"text": f"draft about {topic}"})]
            final = f"Report on {topic} ({' '.join(seen)} words drafted)"
        elif role == "Manager":
            plan = [
                (
                    "delegate_work_to_coworker",
                    {
                        "task": f"Research {topic}",
                        "context": f"The report is about {topic}.",
                        "coworker": "Researcher",
                    },
                )
            ]
            final = f"Managed report: {' '.join(seen)}"
        else:
            return f"{role} answers: {first[:40]}"
        step = len(seen)
        if self.native and role == "Researcher":
            if not seen:  # two calls of one tool in one answer: CrewAI runs them in parallel
                return [self.tool_call(n, a, i) for i, (n, a) in enumerate(plan[:2])]
            step = len(seen) if len(seen) >= 2 else 2
        if step < len(plan):
            name, args = plan[step]
            if self.native:
                return [self.tool_call(name, args, len(seen))]
            return f"Thought: I should use {name}\nAction: {name}\nAction Input: {json.dumps(args)}"
        if self.native:
            return final
        return f"Thought: I now know the final answer\nFinal Answer: {final}"

    def tool_call(self, name: str, args: dict[str, str], n: int) -> dict[str, Any]:
        return {
            "id": f"call_{name}_{n}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)},
        }


# -- the crews -------------------------------------------------------------------------


def make_researcher(model: ScriptedModel) -> Agent:
    """The researcher both crews have: searches the notes and counts words."""
    return Agent(
        role="Researcher",
        goal="Find what the notes say",
        backstory="Reads notes.",
        llm=model,
        tools=[search, WordCount()],
        allow_delegation=False,
        max_iter=8,
    )


def research_crew(native: bool, topic_note: str = "") -> Crew:
    model = ScriptedModel(model="scripted-1", native=native)
    researcher = make_researcher(model)
    writer = Agent(
        role="Writer",
        goal="Write a short report",
        backstory="Writes reports.",
        llm=model,
        tools=[WordCount()],
        allow_delegation=False,
        max_iter=8,
    )
    research = Task(
        name="Research",
        description="Research {topic}." + topic_note,
        expected_output="Findings.",
        agent=researcher,
    )
    write = Task(
        name="Write",
        description="Write a report on {topic}.",
        expected_output="A report.",
        agent=writer,
        context=[research],
    )

    def between_tasks(output: Any) -> None:
        note(f"after-task {output.name}")

    return Crew(
        agents=[researcher, writer],
        tasks=[research, write],
        process=Process.sequential,
        task_callback=between_tasks,
        verbose=False,
    )


def delegating_crew(native: bool) -> Crew:
    model = ScriptedModel(model="scripted-1", native=native)
    researcher = make_researcher(model)
    manager = Agent(
        role="Manager",
        goal="Get the report written",
        backstory="Delegates research.",
        llm=model,
        allow_delegation=True,
        max_iter=8,
    )
    report = Task(
        name="Report",
        description="Get a report on {topic} researched.",
        expected_output="A report.",
        agent=manager,
    )
    return Crew(agents=[manager, researcher], tasks=[report], verbose=False)


def outcome(crew: Crew, result: Any) -> dict[str, Any]:
    usage = crew.usage_metrics
    return {
        "raw": result.raw,
        "tasks": [t.raw for t in result.tasks_output],
        "prompt_tokens": usage.prompt_tokens if usage else None,
        "completion_tokens": usage.completion_tokens if usage else None,
    }


def warm_kickoff() -> None:
    """One plain kickoff of the research crew (no journal, no hook), for tests/test_crewai.py's
    forker before its first fork: what CrewAI builds and caches at a process's first kickoff
    (compiled patterns, typing's and Pydantic's caches, ...) is then built once, not in
    each of its few hundred children (about 10 ms of CPU a child). It leaves nothing
    behind that a child would see: its side file is /dev/null, its files (CrewAI's task
    outputs) a scratch folder removed after, what it prints goes nowhere, its warnings'
    registry and context variables are restored, and the event bus's threads (started at
    the first event) are stopped: a child's first event starts them again, as in a fresh
    process. It opens no connection (CrewAI's telemetry and tracing are off)."""
    import contextlib
    import contextvars
    import shutil
    import tempfile
    import warnings

    from crewai.events.event_bus import crewai_event_bus as bus

    global LOG
    scratch = tempfile.mkdtemp(prefix="crewai-warm-")
    kept = {k: os.environ.get(k) for k in ("XDG_DATA_HOME", "CREWAI_STORAGE_DIR")}
    saved = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.environ.update(XDG_DATA_HOME=scratch, CREWAI_STORAGE_DIR="warm")
        for fd in (1, 2):
            os.dup2(null, fd)
        LOG = os.devnull
        with warnings.catch_warnings():
            crew = research_crew(native=True)
            contextvars.copy_context().run(crew.kickoff, inputs={"topic": "sqlite"})
            bus.flush()
    finally:
        LOG = ""
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        for fd, copy in zip((1, 2), saved, strict=True):
            os.dup2(copy, fd)
            os.close(copy)
        os.close(null)
        for k, v in kept.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(scratch, ignore_errors=True)
    if bus._executor_initialized:  # its handlers' pool and its loop's thread
        bus._loop.call_soon_threadsafe(bus._loop.stop)
        bus._loop_thread.join()
        bus._loop.close()
        bus._sync_executor.shutdown(wait=True)
        bus._executor_initialized = False
    assert threading.active_count() == 1, f"the warm kickoff left threads: {threading.enumerate()}"


def main() -> None:
    global LOG
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=["research", "two", "delegation"])
    parser.add_argument("--db", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--net", required=True)
    parser.add_argument("--mode", choices=["native", "text"], default="native")
    args = parser.parse_args()
    LOG = args.log
    net = args.net

    def audit(event: str, details: tuple[Any, ...]) -> None:
        if event in ("socket.connect", "socket.getaddrinfo"):
            with open(net, "a", encoding="utf-8") as f:
                f.write(f"{event} {details!r}\n")

    sys.addaudithook(audit)

    def late(context: ToolCallHookContext) -> None:
        if LATE and context.tool_input.get("query") == LATE:
            FINISHED[twin(LATE)].wait(60)

    def finished(context: ToolCallHookContext) -> None:
        query = context.tool_input.get("query")
        if isinstance(query, str):
            FINISHED[query].set()

    register_before_tool_call_hook(late)
    register_after_tool_call_hook(finished)
    native = args.mode == "native"
    out: Any
    if args.scenario == "research":
        crew = research_crew(native)
        CrewAIDurabilityHandler(session_id="research_crew", path=args.db).wrap_crew(crew)
        out = outcome(crew, crew.kickoff(inputs={"topic": "sqlite"}))
    elif args.scenario == "two":
        first, second = research_crew(native), research_crew(native)
        CrewAIDurabilityHandler(session_id="crew_a").wrap_crew(first)
        CrewAIDurabilityHandler(session_id="crew_b").wrap_crew(second)
        with Journal("two_crews", path=args.db):
            a = outcome(first, first.kickoff(inputs={"topic": "sqlite"}))
            b = outcome(second, second.kickoff(inputs={"topic": "wal"}))
        out = [a, b]
    else:
        crew = delegating_crew(native)
        CrewAIDurabilityHandler(session_id="delegation", path=args.db).wrap_crew(crew)
        out = outcome(crew, crew.kickoff(inputs={"topic": "sqlite"}))
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
