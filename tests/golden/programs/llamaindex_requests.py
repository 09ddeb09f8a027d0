"""A LlamaIndex workflow for tests/test_agent_requests.py's trials, run as a child process.

``python tests/llamaindex_requests.py MODE DB SIDE [KILL_AT [TASK]]``: a
three-step ``Workflow`` (fetch a forecast and note the city in the context
state, a model call that writes it up, a summary of every city the
conversation asked about) run with ``LetItLoopRuntime()``, the adapter's
default arguments (no run name; the journal file from ``$LETITLOOP_DB``).
MODE ``ask`` asks TASK; ``chat`` asks TASK, then, continuing that
conversation (``wf.run(ctx=handler.ctx, ...)``: the context state holds turn
1's cities), about Bergen. Each step appends ``start WHAT`` and ``end WHAT``
to the side file SIDE and SIGKILLs the process at ``start KILL_AT``; ``after
return`` is the point where the program got its result and had not printed it
yet, ``between turns`` the point between the two turns. The answer is the
last line.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from side_file import SideFile
from workflows import Context, Workflow, step
from workflows.events import Event, StartEvent, StopEvent

SIDE = SideFile(task="What is 40 + 1, and the weather?")
WHERE, event, done = SIDE.where, SIDE.event, SIDE.done
#: Each step takes this long (s), so that two copies started together meet.
PACE = 0.01
FORECASTS = {"Oslo": "snow", "Bergen": "rain"}


def city_of(question: str) -> str:
    """The city a question is about: named in it, else Oslo (Rome in the evening)."""
    named = [c for c in ("Bergen", "Lima") if c in question]
    return named[0] if named else "Rome" if "evening" in question else "Oslo"


class Fetched(Event):
    city: str
    weather: str


class Written(Event):
    city: str
    text: str


class Trip(Workflow):
    @step
    async def fetch(self, ctx: Context, ev: StartEvent) -> Fetched:
        city = city_of(ev.question)
        event(f"fetch {city}")
        await asyncio.sleep(PACE)
        cities = await ctx.store.get("cities", default=[])
        await ctx.store.set("cities", [*cities, city])
        done(f"fetch {city}")
        return Fetched(city=city, weather=FORECASTS.get(city, "sun"))

    @step
    async def write(self, ev: Fetched) -> Written:
        event(f"model {ev.city}")
        await asyncio.sleep(PACE)
        done(f"model {ev.city}")
        return Written(city=ev.city, text=f"{ev.weather} in {ev.city}")

    @step
    async def summarize(self, ctx: Context, ev: Written) -> StopEvent:
        event(f"summarize {ev.city}")
        await asyncio.sleep(PACE)
        cities = await ctx.store.get("cities")
        done(f"summarize {ev.city}")
        return StopEvent(result=f"{ev.text} (asked about {', '.join(cities)})")


async def main(mode: str) -> str:
    from letitloop.adapters.llamaindex import LetItLoopRuntime

    wf = Trip(runtime=LetItLoopRuntime(), timeout=120)
    first = wf.run(question=WHERE["task"])
    one = await first
    if mode == "ask":
        event("after return")  # the program has the result and has not used it yet
        return str(one)
    event("between turns")
    two = await wf.run(ctx=first.ctx, question="And in Bergen?")
    event("after return")
    return f"{one} // {two}"


#: The steps of the conversation's second turn (kill points inside it).
TURN_TWO = ("fetch Bergen", "model Bergen", "summarize Bergen")

if __name__ == "__main__":
    mode, os.environ["LETITLOOP_DB"], WHERE["side"] = sys.argv[1:4]
    WHERE["kill_at"] = sys.argv[4] if len(sys.argv) > 4 else ""
    WHERE["task"] = sys.argv[5] if len(sys.argv) > 5 else WHERE["task"]
    print(json.dumps({"answer": asyncio.run(main(mode))}))
