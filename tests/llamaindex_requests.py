"""A LlamaIndex workflow asked the same request again, for tests/test_llamaindex.py,
run as a child process.

``python tests/llamaindex_requests.py MODE DB SIDE [KILL_AT]``: a three-step
``Workflow`` (fetch a forecast and note the city in the context state, a model
call that writes it up, a summary of every city the conversation asked about)
run with ``LetItLoopRuntime()``, the adapter's default arguments (no run name;
the journal file from ``$LETITLOOP_DB``). MODE ``trip`` asks about Oslo,
``slow`` too with each step taking 50 ms (two copies meet), ``other`` about
Rome (a changed request), ``turns`` about Oslo then, continuing that
conversation (``wf.run(ctx=ctx, ...)``: the context state holds turn 1's
cities), about Bergen. Each step appends ``start WHAT`` and ``end WHAT`` to the
side file SIDE and SIGKILLs the process at ``start KILL_AT``; ``returned``
(``returned turn N``) is the point where the program got its result and had not
printed it yet. The results are printed as the last line.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from side_file import SideFile
from workflows import Context, Workflow, step
from workflows.events import Event, StartEvent, StopEvent

SIDE = SideFile()
WHERE, event, done, reached = SIDE.where, SIDE.event, SIDE.done, SIDE.reached
PACE = {"slow": 0.05}
FORECASTS = {"Oslo": "snow", "Bergen": "rain"}


class Fetched(Event):
    city: str
    weather: str


class Written(Event):
    city: str
    text: str


async def work(what: str, pace: float) -> None:
    event(what)
    await asyncio.sleep(pace)


class Trip(Workflow):
    pace = 0.0

    @step
    async def fetch(self, ctx: Context, ev: StartEvent) -> Fetched:
        await work(f"fetch {ev.city}", self.pace)
        cities = await ctx.store.get("cities", default=[])
        await ctx.store.set("cities", [*cities, ev.city])
        done(f"fetch {ev.city}")
        return Fetched(city=ev.city, weather=FORECASTS.get(ev.city, "sun"))

    @step
    async def write(self, ev: Fetched) -> Written:
        await work(f"model {ev.city}", self.pace)
        done(f"model {ev.city}")
        return Written(city=ev.city, text=f"{ev.weather} in {ev.city}")

    @step
    async def summarize(self, ctx: Context, ev: Written) -> StopEvent:
        await work(f"summarize {ev.city}", self.pace)
        cities = await ctx.store.get("cities")
        done(f"summarize {ev.city}")
        return StopEvent(result={"answer": ev.text, "cities": cities})


async def main(mode: str) -> Any:
    from letitloop.adapters.llamaindex import LetItLoopRuntime

    Trip.pace = PACE.get(mode, 0.0)
    wf = Trip(runtime=LetItLoopRuntime(), timeout=120)
    if mode == "turns":
        first = wf.run(city="Oslo")
        one = await first
        reached("returned turn 1")
        two = await wf.run(ctx=first.ctx, city="Bergen")
        reached("returned turn 2")
        return [one, two]
    result = await wf.run(city="Rome" if mode == "other" else "Oslo")
    reached("returned")
    return result


#: The kill points of each mode, in the order its program reaches them.
POINTS = {
    mode: [f"fetch {city}", f"model {city}", f"summarize {city}", "returned"]
    for mode, city in (("trip", "Oslo"), ("slow", "Oslo"), ("other", "Rome"))
}
POINTS["turns"] = [
    *POINTS["trip"][:-1],
    "returned turn 1",
    *(p.replace("Oslo", "Bergen") for p in POINTS["trip"][:-1]),
    "returned turn 2",
]

if __name__ == "__main__":
    mode, os.environ["LETITLOOP_DB"], WHERE["side"] = sys.argv[1:4]
    WHERE["kill_at"] = sys.argv[4] if len(sys.argv) > 4 else ""
    print(json.dumps({"answer": asyncio.run(main(mode))}))
