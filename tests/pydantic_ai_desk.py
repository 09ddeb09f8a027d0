"""A Pydantic AI agent whose refund needs a person's approval, run as a child process
(tests/test_pydantic_ai_approvals.py).

``python tests/pydantic_ai_desk.py MODE DB SIDE [KILL_AT]``. The program is the
documented wait recipe: ``LetItLoopDurability(goal="desk", stop_after=...)`` and
``RequestInput(ask)``, ``agent.run(...)`` under ``asyncio.run`` (MODE ``async``)
or ``agent.run_sync(...)`` (MODE ``sync``); MODE ``named`` gives the capability
``run="ticket-7"``. The fake model, ``ask`` (the approval request posted) and
the refund tool write ``start WHAT``/``end WHAT`` to SIDE and SIGKILL their own
process at ``start KILL_AT``; the refund itself is the line ``start paid``
(``KILL_AT=paid`` kills right after it, inside the call). ``start resume`` is the
process's first line (``KILL_AT=resume``: right after an approval was sent,
before anything ran). The last line of stdout is the answer as JSON.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.capabilities import RequestInput
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from side_file import SideFile

from letitloop.adapters.pydantic_ai import LetItLoopDurability

SIDE = SideFile()
WHERE, event, done = SIDE.where, SIDE.event, SIDE.done
PROMPT = "Refund 30 euros on order 7"


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Asks for the refund, then reports what the tool said (its result or its failure)."""
    told = [
        str(p.content)
        for m in messages
        for p in m.parts
        if isinstance(p, (ToolReturnPart, RetryPromptPart))
    ]
    turn = len(told)
    event(f"model {turn}")
    if turn == 0:
        reply = ModelResponse(
            parts=[ToolCallPart("refund", {"order": 7, "amount": 30}, tool_call_id="call-1")]
        )
    else:
        reply = ModelResponse(parts=[TextPart(f"desk: {told[0]}")])
    done(f"model {turn}")
    return reply


def ask(ctx: Any, requests: Any, token: str) -> None:
    """Posts the approval request (the side effect a replay must not repeat)."""
    event("ask")
    done("ask")


def build(mode: str, db: str) -> Agent[None, str]:
    durable = LetItLoopDurability(
        goal="desk", path=db, stop_after=0.2, run="ticket-7" if mode == "named" else None
    )
    approval = RequestInput(ask, name="refund_approval")
    agent = Agent(FunctionModel(model), name="desk", capabilities=[durable, approval])

    @agent.tool_plain(requires_approval=True)
    def refund(order: int, amount: int) -> str:
        event("tool refund")
        event("paid")  # the refund went out
        done("tool refund")
        return f"refunded {amount} on order {order}"

    return agent


def main(mode: str, db: str) -> dict[str, Any]:
    event("resume")
    agent = build(mode, db)
    if mode == "sync":
        output = agent.run_sync(PROMPT).output
    else:
        output = asyncio.run(agent.run(PROMPT)).output
    return {"answer": output}


if __name__ == "__main__":
    mode, db, WHERE["side"] = sys.argv[1:4]
    WHERE["kill_at"] = sys.argv[4] if len(sys.argv) > 4 else ""
    print(json.dumps(main(mode, db)))
