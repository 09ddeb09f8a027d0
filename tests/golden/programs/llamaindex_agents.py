"""LlamaIndex agents written as LlamaIndex's docs write them, run with LetItLoopRuntime
(tests/test_llamaindex_agents.py runs it in children it kills).

    python tests/llamaindex_agents.py MODE DB SIDE KILL_AT

MODE is ``team`` (an ``AgentWorkflow`` of two ``FunctionAgent``\\ s with tools, a
handoff from the researcher to the writer and ``output_cls``), ``function`` (one
``FunctionAgent``) or ``react`` (one ``ReActAgent``). The model is llama-index-core's
``MockFunctionCallingLLM`` with a response generator, as LlamaIndex's own agent
tests write it; its replies depend on the conversation only, never on a counter,
so a replayed call and a real one agree. Every model call and tool call writes
``start WHAT`` and ``end WHAT`` to SIDE, and the process kills itself with SIGKILL
at ``start KILL_AT``. The last line printed is the answer as JSON.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from typing import Any

from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent, ReActAgent
from llama_index.core.llms import ChatMessage
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.tools import ToolSelection
from pydantic import BaseModel

from letitloop import Journal
from letitloop.adapters.llamaindex import LetItLoopRuntime

WHERE = {"side": "", "kill_at": ""}


def note(event: str, what: str) -> None:
    with open(WHERE["side"], "a") as f:
        f.write(f"{event} {what}\n")
    if event == "start" and what == WHERE["kill_at"]:
        os.kill(os.getpid(), signal.SIGKILL)


def lookup(city: str) -> str:
    """Look up facts about a city."""
    note("start", f"tool lookup {city}")
    note("end", f"tool lookup {city}")
    return f"{city} has 700000 people"


def add(a: int, b: int) -> int:
    """Add two numbers."""
    note("start", f"tool add {a} {b}")
    note("end", f"tool add {a} {b}")
    return a + b


class Report(BaseModel):
    """What the team reports."""

    city: str
    total: int


def calls(*selections: tuple[str, dict[str, Any], str]) -> dict[str, Any]:
    return {
        "tool_calls": [
            ToolSelection(tool_id=i, tool_name=name, tool_kwargs=kwargs)
            for name, kwargs, i in selections
        ]
    }


def function_reply(agent: str, messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
    """A function-calling model: what it says next, from the conversation alone."""
    results = [m for m in messages if m.role == "tool"]
    tools = kwargs.get("tools") or []
    if any(t.metadata.name == "Report" for t in tools):  # output_cls: the structured answer
        note("start", f"model {agent} report")
        reply = ChatMessage(
            role="assistant",
            content="",
            additional_kwargs=calls(("Report", {"city": "Oslo", "total": 5}, "r1")),
        )
        note("end", f"model {agent} report")
        return reply
    label = f"model {agent} {len(results)}"
    note("start", label)
    if agent == "writer" and len(results) < 3:
        reply = ChatMessage(
            role="assistant",
            content="adding",
            additional_kwargs=calls(("add", {"a": 2, "b": 3}, "t2")),
        )
    elif agent == "writer" or (agent == "solo" and results):
        reply = ChatMessage(role="assistant", content="Oslo has 700000 people; 2 + 3 = 5")
    elif not results:
        reply = ChatMessage(
            role="assistant",
            content="looking it up",
            additional_kwargs=calls(("lookup", {"city": "Oslo"}, "t1")),
        )
    else:
        handoff = {"to_agent": "writer", "reason": "the writer adds it up"}
        reply = ChatMessage(
            role="assistant",
            content="handing off",
            additional_kwargs=calls(("handoff", handoff, "h1")),
        )
    note("end", label)
    return reply


def react_reply(messages: list[ChatMessage], **kwargs: Any) -> ChatMessage:
    """A ReAct model: a thought and an action, then the answer once it observed."""
    observed = sum("Observation:" in (m.content or "") for m in messages if m.role != "system")
    label = f"model react {observed}"
    note("start", label)
    if observed == 0:
        text = 'Thought: I need facts.\nAction: lookup\nAction Input: {"city": "Oslo"}'
    else:
        text = "Thought: I can answer without using any more tools.\nAnswer: Oslo has 700000 people"
    note("end", label)
    return ChatMessage(role="assistant", content=text)


def model(agent: str) -> MockFunctionCallingLLM:
    return MockFunctionCallingLLM(
        response_generator=lambda messages, **kw: function_reply(agent, messages, **kw)
    )


async def run(mode: str, db: str) -> dict[str, Any]:
    if mode == "team":
        researcher = FunctionAgent(
            name="researcher",
            description="Finds facts about a city.",
            system_prompt="You research cities.",
            tools=[lookup],
            llm=model("researcher"),
            can_handoff_to=["writer"],
        )
        writer = FunctionAgent(
            name="writer",
            description="Writes the report.",
            system_prompt="You write reports.",
            tools=[add],
            llm=model("writer"),
        )
        agent: Any = AgentWorkflow(
            agents=[researcher, writer],
            root_agent="researcher",
            output_cls=Report,
            runtime=LetItLoopRuntime(),
        )
    elif mode == "function":
        agent = FunctionAgent(
            name="solo",
            system_prompt="You answer questions about cities.",
            tools=[lookup],
            llm=model("solo"),
            runtime=LetItLoopRuntime(),
        )
    else:
        agent = ReActAgent(
            tools=[lookup],
            llm=MockFunctionCallingLLM(response_generator=react_reply),
            runtime=LetItLoopRuntime(),
        )
    async with Journal(f"llama-{mode}", run="oslo", path=db):
        output = await agent.run(user_msg="Tell me about Oslo")
    return {
        "type": type(output).__name__,
        "answer": str(output),
        "structured": getattr(output, "structured_response", None),
        "tools": [c.tool_name for c in getattr(output, "tool_calls", [])],
    }


def main(mode: str, db: str) -> dict[str, Any]:
    return asyncio.run(run(mode, db))


if __name__ == "__main__":
    WHERE.update(side=sys.argv[3], kill_at=sys.argv[4])
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
