"""An AutoGen team with a person in it: the team stops until the person answers.

Offline and deterministic: the writer's model client is AutoGen's own
``ReplayChatCompletionClient``, exactly as AutoGen's docs write a test (a list
of replies, given in order); no API key, a second or two per run.

    python examples/autogen_human.py     # the writer drafts; the team stops to wait for you
    lil send poem user_proxy.input:1 '"Shorter, please."'
    python examples/autogen_human.py     # resumes: the writer's second draft; waits again
    lil send poem user_proxy.input:2 '"APPROVE"'
    python examples/autogen_human.py     # resumes and ends

A ``RoundRobinGroupChat`` of a writer (``AssistantAgent``) and a
``UserProxyAgent``, which ends when the person says APPROVE, as AutoGen's
human-in-the-loop tutorial writes it. ``AutoGenStateSerializer("poem").wrap_team``
makes each model call a step and each input of the person a wait of the
journal: with no answer sent, the process prints one line saying what it
waits for and the ``lil send`` that answers it, and exits with status 75. A
resumed run replays the drafts already written and the answers already
given, and makes only the next model call (the replay client's queue is kept
in step: a replayed call takes its reply off it too, so the second run gets
the second draft). ``lil show poem --db PATH`` lists the calls and the waits.

Needs ``pip install -e '.[autogen]'``, run from a checkout of this repository.
"""

from __future__ import annotations

import argparse
import asyncio
import logging

from autogen_agentchat.agents import AssistantAgent, UserProxyAgent
from autogen_agentchat.conditions import TextMentionTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core import EVENT_LOGGER_NAME
from autogen_ext.models.replay import ReplayChatCompletionClient

from letitloop.adapters.autogen import AutoGenStateSerializer


async def main() -> None:
    # The replay client warns that it counts tokens of text only: true, and beside the point.
    logging.getLogger(EVENT_LOGGER_NAME).setLevel(logging.ERROR)
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--db", default=".letitloop/journal.db", help="the journal file")
    args = parser.parse_args()
    drafts = [
        "The sea breathes in, the sea breathes out,\nsalt on the wind, gulls all about;\n"
        "it keeps no time and holds no grudge,\nit shifts the shore it will not budge.",
        "The sea breathes in and out again;\nit keeps no time, it holds no pain.",
    ]
    writer = AssistantAgent("writer", model_client=ReplayChatCompletionClient(drafts))
    user_proxy = UserProxyAgent("user_proxy", input_func=input)
    termination = TextMentionTermination("APPROVE")
    team = RoundRobinGroupChat([writer, user_proxy], termination_condition=termination)
    AutoGenStateSerializer("poem", path=args.db).wrap_team(team)
    result = await team.run(task="Write a 4-line poem about the ocean.")
    final = [m.to_text() for m in result.messages if m.source == "writer"][-1]
    print(f"approved poem:\n{final}")
    print(f"see each model call and each answer: lil show poem --db {args.db}")


if __name__ == "__main__":
    asyncio.run(main())
