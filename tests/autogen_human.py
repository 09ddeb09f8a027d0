"""An AutoGen team with a person in it, run as a child process (tests/test_autogen.py).

``python tests/autogen_human.py DB SIDE KILL_AT [STOP_AFTER]``: a writer
(``AssistantAgent``) and a ``UserProxyAgent`` in a ``RoundRobinGroupChat`` that
ends when the person says APPROVE, written as AutoGen's human-in-the-loop
tutorial writes it, made durable with ``AutoGenStateSerializer().wrap_team(team)``
and its defaults (the journal from ``LETITLOOP_DB``; STOP_AFTER, when given, is
how long a process waits for the person before it stops). With no answer sent,
the process stops with status 75 and one line on stderr; the test sends the
answer (``letitloop.send`` or ``lil send``) and runs it again. The fake model
writes ``start WHAT``/``end WHAT`` to SIDE and SIGKILLs its process at ``start
KILL_AT``; ``after return`` is the point after the team returned. The writer's
drafts are the last line of stdout.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from autogen_agentchat.agents import AssistantAgent, UserProxyAgent
from autogen_agentchat.conditions import TextMentionTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_agentchat.ui import Console
from autogen_core import EVENT_LOGGER_NAME
from autogen_core.models import CreateResult, LLMMessage, UserMessage
from autogen_ext.models.replay import ReplayChatCompletionClient
from side_file import SideFile

from letitloop.adapters.autogen import AutoGenStateSerializer

SIDE = SideFile()
WHERE, event, done = SIDE.where, SIDE.event, SIDE.done

TASK = "Write a 4-line poem about the ocean."
#: What the person answers to the writer's n-th draft (the test sends it).
ANSWERS = {"user_proxy.input:1": "Shorter, please.", "user_proxy.input:2": "APPROVE"}


class Writer(ReplayChatCompletionClient):
    """A draft per call, chosen by the person's messages in the prompt (stateless)."""

    def __init__(self) -> None:
        super().__init__(["draft"])

    async def create(self, messages: Sequence[LLMMessage], **kwargs: Any) -> CreateResult:
        said = [m.content for m in messages if isinstance(m, UserMessage)]
        turn = len(said) - 1  # the task, then one message per answer of the person
        event(f"model writer {turn}")
        self.chat_completions = [f"Draft {turn}: {said[-1]}"]
        self._current_index = 0
        result = await super().create(messages, **kwargs)
        done(f"model writer {turn}")
        return result


async def main() -> None:
    db, WHERE["side"], WHERE["kill_at"] = sys.argv[1:4]
    os.environ["LETITLOOP_DB"] = db
    logging.getLogger(EVENT_LOGGER_NAME).setLevel(logging.ERROR)  # the replay client's note
    assistant = AssistantAgent("assistant", model_client=Writer())
    user_proxy = UserProxyAgent("user_proxy", input_func=input)
    termination = TextMentionTermination("APPROVE")
    team = RoundRobinGroupChat([assistant, user_proxy], termination_condition=termination)
    if len(sys.argv) > 4:
        AutoGenStateSerializer(stop_after=float(sys.argv[4])).wrap_team(team)
    else:
        AutoGenStateSerializer().wrap_team(team)
    result = await Console(team.run_stream(task=TASK))
    event("after return")
    drafts = [m.to_text() for m in result.messages if m.source == "assistant"]
    print(json.dumps({"answer": drafts, "stop_reason": result.stop_reason}))


if __name__ == "__main__":
    asyncio.run(main())
