"""LangGraph's prebuilt agent killed with SIGKILL inside a tool call, then resumed: what runs again?

Offline and deterministic: the model is a scripted stand-in (a LangChain
``BaseChatModel`` subclass) that calls tools as a real one does; no API key, a
second or two.

    python examples/langgraph_agent.py --crash   # killed inside its `book` tool call
    python examples/langgraph_agent.py           # the same script again: it resumes

The agent is ``create_react_agent`` as LangGraph's docs write it, made durable
as docs/langgraph.md says: the model wrapped with ``durable_model`` (each model
call a step), the tools given as ``durable_node(ToolNode(tools))`` (each tool
call a step named by its tool-call id), the checkpoints in the same journal file
(``LetItLoopCheckpointSaver``). The model asks for two ``lookup`` calls at once
(parallel tool calls), then ``book``s the cheaper hotel, then answers. Every call
that really runs prints a line.

The program starts with ``resume(agent, config)``: after a crash it finishes the
request the killed process was running, whatever ``get_state().next`` says; on
a thread where nothing was asked yet it says so, and the program asks. Killed
inside ``book``, the first run printed model call 1, both lookups, model call 2
and ``book``; the second run prints only ``book`` (it was in flight) and model
call 3: the finished calls replay from the journal. Run it a third time: nothing
runs, the same answer comes back. ``lil runs --db PATH`` lists every node's
run (the model node ``langgraph:agent``, the tool node ``langgraph:tools``);
``lil show langgraph:agent --db PATH`` the newest, its call and tokens.

Needs ``pip install -e '.[langgraph]'``, run from a checkout of this repository.
"""

from __future__ import annotations

import argparse
import os
import signal
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.prebuilt import ToolNode, create_react_agent

from letitloop.adapters.langgraph import (
    LetItLoopCheckpointSaver,
    durable_model,
    durable_node,
    resume,
)
from letitloop.errors import LetItLoopError

CRASH = False
TASK = "Book me the cheaper hotel tonight: Lisbon or Porto?"
PRICES = {"Lisbon": 140, "Porto": 95}


@tool
def lookup(city: str) -> str:
    """Tonight's cheapest free hotel in a city, with its price."""
    # One write per line: the two lookups run side by side, and print() writes the text
    # and its newline apart (two threads' lines could interleave).
    print(f"  ran  lookup({city!r})\n", end="", flush=True)
    return f"Hotel Central {city}: {PRICES[city]} EUR"


@tool
def book(hotel: str) -> str:
    """Book a room (a side effect: it must not happen twice)."""
    print(f"  ran  book({hotel!r})", flush=True)
    if CRASH:
        print("  -- SIGKILL inside book(): run the script again to resume --", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    return f"booked {hotel}, confirmation 7F3Q"


class ScriptedModel(BaseChatModel):
    """A stand-in for an LLM: two lookups at once, then book the cheaper, then answer."""

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        turn = sum(isinstance(m, AIMessage) for m in messages) + 1
        print(f"  ran  model call {turn}", flush=True)
        found = [str(m.content) for m in messages if isinstance(m, ToolMessage)]
        if turn == 1:
            calls = [
                {"name": "lookup", "args": {"city": city}, "id": f"lookup-{city.lower()}"}
                for city in PRICES
            ]
            reply = AIMessage("", tool_calls=calls)
        elif turn == 2:
            cheaper = min(found, key=lambda text: int(text.split(": ")[1].split()[0]))
            hotel = cheaper.split(":")[0]
            reply = AIMessage(
                "", tool_calls=[{"name": "book", "args": {"hotel": hotel}, "id": "book-1"}]
            )
        else:
            reply = AIMessage(f"Done: {found[-1]}.")
        reply.usage_metadata = UsageMetadata(
            input_tokens=300 + 40 * len(messages),
            output_tokens=25,
            total_tokens=325 + 40 * len(messages),
        )
        return ChatResult(generations=[ChatGeneration(message=reply)])

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kw: Any) -> Any:
        return self.bind(tools=[t.name for t in tools])


def main() -> None:
    global CRASH
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--crash", action="store_true", help="SIGKILL inside book()")
    parser.add_argument("--db", default=".letitloop/journal.db", help="the journal file")
    args = parser.parse_args()
    CRASH = args.crash
    agent = create_react_agent(
        durable_model(ScriptedModel()),
        durable_node(ToolNode([lookup, book])),
        checkpointer=LetItLoopCheckpointSaver(args.db),
    )
    config = {"configurable": {"thread_id": "trip-1"}}
    print("calls that really ran in this process:")
    try:
        # After a crash: the killed request runs on; a finished one is answered again.
        result = resume(agent, config)
    except LetItLoopError as nothing:
        if "invoke the request again with its input" not in str(nothing):
            raise
        result = agent.invoke({"messages": [("user", TASK)]}, config)  # the first time
    print(f"answer: {result['messages'][-1].content}")
    print(f"every node's run: lil runs --db {args.db}")
    print(f"the last model call, its tokens: lil show langgraph:agent --db {args.db}")


if __name__ == "__main__":
    main()
