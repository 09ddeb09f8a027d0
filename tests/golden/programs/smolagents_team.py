"""A smolagents team for tests/test_smolagents.py, run as a child process.

``python tests/smolagents_team.py MODE DB SIDE [KILL_AT [TASK]]``: MODE ``team``
runs a manager (two tools, one managed agent, a researcher with a tool of its own);
``two`` runs two agents, one after the other, in one journal; ``ask`` asks one
agent TASK with the adapter's default arguments (no session, no run name, the
journal from ``LETITLOOP_DB``); ``chat`` asks it TASK, then a second turn that
continues the conversation (``reset=False``). The fake model
and the tools append ``start WHAT`` and ``end WHAT`` to the side file SIDE
and SIGKILL their own process at ``start KILL_AT``; ``step manager 1``
kills it between the manager's first and second step. The final answer is
printed with the agents' memory as the last line of stdout.

The fake model is stateless: its reply depends only on the messages it is
given (the number of tool responses so far), so a resumed process asks it
where the killed one stopped.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from typing import Any

from side_file import SideFile
from smolagents import Tool, ToolCallingAgent, tool
from smolagents.memory import ActionStep
from smolagents.models import (
    ChatMessage,
    ChatMessageToolCall,
    ChatMessageToolCallFunction,
    MessageRole,
    Model,
)
from smolagents.monitoring import LogLevel, TokenUsage

from letitloop import Journal
from letitloop.adapters.smolagents import SmolagentsWALCallback, durable_agent
from letitloop.adapters.smolagents.model import message_identity

SIDE = SideFile()
WHERE, event, done = SIDE.where, SIDE.event, SIDE.done


#: The manager's two tool calls of one reply meet here: they run at the same time
#: (smolagents runs them in a thread pool), and neither finishes before the other
#: started, so a kill inside one always finds the other in flight, never between
#: its end and its commit.
TOGETHER = threading.Barrier(2, timeout=30)


@tool
def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city's name
    """
    event(f"tool get_weather {city}")
    if city == "Paris":
        TOGETHER.wait()
    result = f"sunny in {city}"
    done(f"tool get_weather {city}")
    return result


@tool
def add(a: int, b: int) -> int:
    """The sum of two numbers.

    Args:
        a: the first number
        b: the second number
    """
    event(f"tool add {a} {b}")
    if (a, b) == (2, 3):
        TOGETHER.wait()
    done(f"tool add {a} {b}")
    return a + b


@tool
def search(query: str) -> str:
    """Search the web.

    Args:
        query: what to look for
    """
    event(f"tool search {query}")
    done(f"tool search {query}")
    return f"found: {query} is 330 m tall"


def call(n: int, name: str, **arguments: Any) -> ChatMessageToolCall:
    return ChatMessageToolCall(
        function=ChatMessageToolCallFunction(name=name, arguments=arguments),
        id=f"call_{n}",
        type="function",
    )


#: Each agent's replies, by the number of tool responses in its prompt.
SCRIPTS: dict[str, list[list[ChatMessageToolCall]]] = {
    "manager": [
        [call(0, "get_weather", city="Paris"), call(1, "add", a=2, b=3)],
        [call(2, "researcher", task="How tall is the Eiffel tower?")],
        [call(3, "final_answer", answer="{observations}")],
    ],
    "researcher": [
        [call(0, "search", query="Eiffel tower height")],
        [call(1, "final_answer", answer="{observations}")],
    ],
    "writer": [
        [call(0, "get_weather", city="Rome")],
        [call(1, "final_answer", answer="{observations}")],
    ],
    "reviewer": [
        [call(0, "add", a=40, b=2)],
        [call(1, "get_weather", city="Oslo")],
        [call(2, "final_answer", answer="{observations}")],
    ],
}


def text(message: Any) -> str:
    content = message.content if isinstance(message, ChatMessage) else message["content"]
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content)
    return str(content or "")


class FakeModel(Model):
    """Replies from SCRIPTS[label]; the final answer quotes the tool responses seen."""

    def __init__(self, label: str) -> None:
        super().__init__(model_id=f"fake-{label}")
        self.label = label

    def generate(
        self,
        messages: list[Any],
        stop_sequences: list[str] | None = None,
        response_format: Any = None,
        tools_to_call_from: Any = None,
        **kwargs: Any,
    ) -> ChatMessage:
        responses = [m for m in messages if getattr(m, "role", None) == MessageRole.TOOL_RESPONSE]
        turn = len(responses)
        event(f"model {self.label} {turn}")
        calls = SCRIPTS[self.label][turn]
        if calls[0].function.name == "final_answer":
            seen = " | ".join(text(m).replace("Observation:", "").strip() for m in responses)
            answer = f"{self.label}: {seen}"
            calls = [call(turn, "final_answer", answer=answer)]
        done(f"model {self.label} {turn}")
        return ChatMessage(
            role=MessageRole.ASSISTANT,
            content=None,
            tool_calls=calls,
            token_usage=TokenUsage(input_tokens=100 + turn, output_tokens=10 + turn),
        )


def agent(label: str, tools: list[Tool], **kw: Any) -> ToolCallingAgent:
    return ToolCallingAgent(
        tools=tools,
        model=FakeModel(label),
        name=label,
        description=f"the {label}",
        verbosity_level=LogLevel.OFF,
        max_steps=6,
        **kw,
    )


def price(model: str | None, input_tokens: int, output_tokens: int) -> float:
    """A made-up price: $1 per million input tokens, $4 per million output tokens."""
    return (input_tokens + 4 * output_tokens) / 1e6


def kill_between_steps(step: ActionStep, agent: Any) -> None:
    if f"step {agent.name} {step.step_number}" == WHERE["kill_at"]:
        os.kill(os.getpid(), signal.SIGKILL)


def memory(agent: ToolCallingAgent) -> list[Any]:
    """The agent's memory as the messages its next model call would get (no times, no ids)."""
    return [message_identity(m) for m in agent.write_memory_to_messages()]


#: The asker's cities, by its turn in the conversation.
CITIES = ["Oslo", "Lima", "Kyiv"]


class AskerModel(Model):
    """The asker: in each turn of a conversation (a task), an addition, a weather lookup,
    then an answer that names the turn, the task and what the tools said. Its reply
    depends only on its prompt: the tasks in it, and the tool responses since the last."""

    def __init__(self) -> None:
        super().__init__(model_id="fake-asker")

    def generate(
        self,
        messages: list[Any],
        stop_sequences: list[str] | None = None,
        response_format: Any = None,
        tools_to_call_from: Any = None,
        **kwargs: Any,
    ) -> ChatMessage:
        tasks = [i for i, m in enumerate(messages) if text(m).startswith("New task:")]
        turn, task = len(tasks), text(messages[tasks[-1]]).removeprefix("New task:").strip()
        since = [m for m in messages[tasks[-1] :] if m.role == MessageRole.TOOL_RESPONSE]
        event(f"model asker {turn}.{len(since)}")
        if len(since) == 0:
            calls = [call(0, "add", a=40, b=turn)]
        elif len(since) == 1:
            calls = [call(1, "get_weather", city=CITIES[turn - 1])]
        else:
            seen = " | ".join(text(m).replace("Observation:", "").strip() for m in since)
            calls = [call(2, "final_answer", answer=f"turn {turn} ({task}): {seen}")]
        done(f"model asker {turn}.{len(since)}")
        return ChatMessage(
            role=MessageRole.ASSISTANT,
            content=None,
            tool_calls=calls,
            token_usage=TokenUsage(input_tokens=100, output_tokens=10),
        )


def asker(**options: Any) -> ToolCallingAgent:
    """The asker with the adapter's defaults (no session, no run name, the default
    journal), or with ``options`` (``run=``, ``reuse=``, ``fresh=``)."""
    plain = ToolCallingAgent(
        tools=[add, get_weather],
        model=AskerModel(),
        name="asker",
        verbosity_level=LogLevel.OFF,
        max_steps=6,
    )
    return durable_agent(plain, **options)


def ask(db: str) -> dict[str, Any]:
    """One request (``WHERE["task"]``); killed after it returned if asked to."""
    os.environ["LETITLOOP_DB"] = db
    agent = asker()
    answer = agent.run(WHERE["task"])
    event("after return")  # the program has the answer and has not used it yet
    return {"answer": str(answer), "memory": memory(agent)}


def chat(db: str) -> dict[str, Any]:
    """A conversation of two turns, the second continuing the first (reset=False)."""
    os.environ["LETITLOOP_DB"] = db
    agent = asker()
    first = agent.run(WHERE["task"])
    event("between turns")
    second = agent.run("And tomorrow?", reset=False)
    event("after return")
    return {"answer": f"{first} // {second}", "memory": memory(agent)}


def team(db: str) -> dict[str, Any]:
    researcher = agent("researcher", [search])
    manager = agent(
        "manager",
        [get_weather, add],
        managed_agents=[researcher],
        step_callbacks=[kill_between_steps],
    )
    SmolagentsWALCallback("team", path=db, cost=price).wrap_agent(manager)
    answer = manager.run("Weather in Paris, 2 + 3, and the Eiffel tower's height?")
    return {"answer": str(answer), "memory": memory(manager)}


def two(db: str) -> dict[str, Any]:
    writer = durable_agent(agent("writer", [get_weather]), "writer")
    reviewer = durable_agent(agent("reviewer", [add, get_weather]), "reviewer")
    with Journal("two_agents", path=db):
        first = writer.run("Write about Rome")
        second = reviewer.run("Review it")
    return {"answer": f"{first} // {second}", "memory": [memory(writer), memory(reviewer)]}


MODES = {"team": team, "two": two, "ask": ask, "chat": chat}

if __name__ == "__main__":
    mode, db, WHERE["side"] = sys.argv[1:4]
    WHERE["kill_at"] = sys.argv[4] if len(sys.argv) > 4 else ""
    WHERE["task"] = sys.argv[5] if len(sys.argv) > 5 else "What is 40 + 1, and the weather?"
    answer = MODES[mode](db)
    print(json.dumps(answer))
