"""An OpenAI Agents SDK run killed with SIGKILL inside a tool call, then resumed.

Offline and deterministic: each agent's model is a scripted ``Model`` that
picks its reply from its input (no API key), a second or two.

    python examples/openai_agents_resume.py --crash   # killed inside the refund tool
    python examples/openai_agents_resume.py           # the same script again: it resumes

A triage agent looks up an order, then hands off to a refunds agent, which
refunds it and answers. ``durable_agent`` makes each model call and each tool
call a step of the journal file, and ``JournalSession`` keeps the
conversation's history without adding the user's message twice. Every call
that really runs prints a line. Killed inside the refund, the first run
printed everything before it; the second run prints only the refund and the
refunds agent's last model call: the triage's calls, the handoff and the
lookup replay from the journal. ``lil show support --db PATH`` lists the
calls with their tokens and cost.

Needs ``pip install -e '.[openai-agents]'``, run from a checkout of this repository.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from letitloop import Journal
from letitloop.adapters.openai_agents import JournalSession, durable_agent

CRASH = False


@function_tool
def look_up_order(order_id: str) -> str:
    """An order's item and price."""
    print(f"  ran  look_up_order({order_id!r})")
    return f"order {order_id}: a kettle, 39.90 EUR"


@function_tool
def refund(order_id: str, amount: float) -> str:
    """Refund an order."""
    print(f"  ran  refund({order_id!r}, {amount})")
    if CRASH:
        print("  -- SIGKILL inside the refund: run again to resume --", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    return f"refunded {amount:.2f} EUR for order {order_id}"


#: Each agent's replies, by how many tool calls of its own its input holds.
SCRIPTS: dict[str, list[tuple[str, dict[str, Any]] | None]] = {
    "triage": [("look_up_order", {"order_id": "A17"}), ("transfer_to_refunds", {})],
    "refunds": [("refund", {"order_id": "A17", "amount": 39.9}), None],
}


class ScriptedModel(Model):
    """A model that keeps no state: its reply is chosen by its input alone."""

    def __init__(self, agent: str) -> None:
        self.agent = agent

    async def get_response(self, system_instructions: Any, input: Any, *a: Any, **kw: Any) -> Any:
        items = [] if isinstance(input, str) else list(input)
        calls = [i for i in items if i.get("type") == "function_call"]
        turn = sum(str(i.get("call_id")).startswith(self.agent) for i in calls)
        print(f"  ran  {self.agent} model call {turn + 1}")
        usage = Usage(requests=1, input_tokens=300, output_tokens=20, total_tokens=320)
        reply = SCRIPTS[self.agent][turn]
        if reply is None:  # the answer: what the tools said
            seen = [str(i["output"]) for i in items if i.get("type") == "function_call_output"]
            text = ResponseOutputText(
                text=" / ".join(s for s in seen if "assistant" not in s),
                type="output_text",
                annotations=[],
            )
            message = ResponseOutputMessage(
                id=f"msg_{self.agent}",
                role="assistant",
                status="completed",
                type="message",
                content=[text],
            )
            return ModelResponse(output=[message], usage=usage, response_id=None)
        name, arguments = reply
        call = ResponseFunctionToolCall(
            id=f"fc_{self.agent}_{turn}",
            call_id=f"{self.agent}_{turn}",
            name=name,
            arguments=json.dumps(arguments),
            type="function_call",
        )
        return ModelResponse(output=[call], usage=usage, response_id=None)

    def stream_response(self, *a: Any, **kw: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


def price(model: str | None, input_tokens: int, output_tokens: int) -> float:
    """What a call cost: a made-up price of $2.50 per million input tokens, $10 per million out."""
    return (2.5 * input_tokens + 10 * output_tokens) / 1e6


async def main() -> None:
    global CRASH
    set_tracing_disabled(True)  # offline: no traces to upload
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--crash", action="store_true", help="SIGKILL inside the refund")
    parser.add_argument("--db", default=".letitloop/journal.db", help="the journal file")
    args = parser.parse_args()
    CRASH = args.crash
    refunds = Agent(name="refunds", model=ScriptedModel("refunds"), tools=[refund])
    triage = Agent(
        name="triage", model=ScriptedModel("triage"), tools=[look_up_order], handoffs=[refunds]
    )
    durable_agent(triage, cost=price)
    os.makedirs(os.path.dirname(os.path.abspath(args.db)), exist_ok=True)
    history = SQLiteSession("customer-42", f"{args.db}.sessions")
    print("calls that really ran in this process:")
    async with Journal("support", path=args.db):
        result = await Runner.run(
            triage, "Please refund order A17", session=JournalSession(history)
        )
    print(f"history: {len(await history.get_items())} items")
    print(f"answer: {result.final_output}")
    print(f"see every call, its tokens and cost: lil show support --db {args.db}")


if __name__ == "__main__":
    asyncio.run(main())
