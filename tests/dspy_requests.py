"""A DSPy program asked the same request again, for tests/test_dspy.py, run as a child process.

``python tests/dspy_requests.py MODE DB SIDE [KILL_AT]``: a ``dspy.ReAct`` agent
with one journaled tool (a forecast) on a fake LM, made durable with
``durable_program`` and the adapter's default arguments (no run name; the
journal file from ``$LETITLOOP_DB``). MODE ``trip`` asks about Oslo, ``slow``
too with each call taking 50 ms (two copies meet), ``other`` asks about Rome (a
changed prompt), ``turns`` asks about Oslo then, continuing that conversation
(``dspy.History``), about Bergen. The LM and the tool append ``start WHAT`` and
``end WHAT`` to the side file SIDE and SIGKILL their process at ``start
KILL_AT``; ``returned`` (``returned turn N``) is the point where the program got
its answer and had not printed it yet. The answers are printed as the last line.

The fake LM is stateless: its reply depends only on the prompt (the city in the
question, the observations so far), so a resumed process asks it where the
killed one stopped.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from typing import Any

import dspy
from dspy.utils.dummies import DummyLM
from side_file import SideFile

SIDE = SideFile()
WHERE, event, done, reached = SIDE.where, SIDE.event, SIDE.done, SIDE.reached
PACE = {"slow": 0.05}


class ForecastLM(DummyLM):  # type: ignore[misc]
    """Plans a forecast call for the question's city, then finishes, then answers."""

    def __init__(self, pace: float) -> None:
        super().__init__({})
        self.pace = pace

    def __call__(self, prompt: Any = None, *, messages: Any = None, **kwargs: Any) -> Any:
        last = messages[-1]["content"]
        question = re.search(r"\[\[ ## question ## \]\]\n(.*)", last)
        city = question.group(1).rstrip("?").split()[-1] if question else "?"
        seen = re.findall(r"\[\[ ## observation_\d+ ## \]\]\n(.*)", last)
        if "`[[ ## reasoning ## ]]`" in last:
            label, reply = f"lm answer {city}", {"reasoning": "read it", "answer": seen[0]}
        elif seen:
            label = f"lm think {city} 1"
            reply = {"next_thought": "enough", "next_tool_name": "finish", "next_tool_args": {}}
        else:
            label = f"lm think {city} 0"
            reply = {
                "next_thought": "look it up",
                "next_tool_name": "forecast",
                "next_tool_args": {"city": city},
            }
        event(label)
        time.sleep(self.pace)
        self.history.append({"usage": {"prompt_tokens": 11, "completion_tokens": 4}})
        out = [self._format_answer_fields(reply)]
        done(label)
        return out


def forecast(city: str) -> str:
    """The weather forecast for a city."""
    event(f"tool forecast {city}")
    answer = {"Oslo": "snow in Oslo", "Bergen": "rain in Bergen"}.get(city, f"sun in {city}")
    done(f"tool forecast {city}")
    return answer


def main(mode: str) -> dict[str, Any]:
    from letitloop.adapters.dspy import JournaledLM, durable_program, journaled_tool

    dspy.configure(lm=JournaledLM(ForecastLM(PACE.get(mode, 0.0))))
    agent = durable_program(
        dspy.ReAct("question, history: dspy.History -> answer", tools=[journaled_tool(forecast)])
    )
    if mode == "turns":
        first = "What is the weather in Oslo?"
        one = agent(question=first, history=dspy.History(messages=[])).answer
        reached("returned turn 1")
        history = dspy.History(messages=[{"question": first, "answer": one}])
        two = agent(question="And in Bergen?", history=history).answer
        reached("returned turn 2")
        return {"answer": [one, two]}
    city = "Rome" if mode == "other" else "Oslo"
    answer = agent(
        question=f"What is the weather in {city}?", history=dspy.History(messages=[])
    ).answer
    reached("returned")
    return {"answer": answer}


#: The kill points of each mode, in the order its program reaches them.
POINTS = {
    mode: [f"lm think {city} 0", f"tool forecast {city}", f"lm think {city} 1", f"lm answer {city}"]
    for mode, city in (("trip", "Oslo"), ("slow", "Oslo"), ("other", "Rome"))
}
POINTS = {mode: [*calls, "returned"] for mode, calls in POINTS.items()}
POINTS["turns"] = [
    *POINTS["trip"][:-1],
    "returned turn 1",
    *(p.replace("Oslo", "Bergen") for p in POINTS["trip"][:-1]),
    "returned turn 2",
]

if __name__ == "__main__":
    mode, os.environ["LETITLOOP_DB"], WHERE["side"] = sys.argv[1:4]
    WHERE["kill_at"] = sys.argv[4] if len(sys.argv) > 4 else ""
    print(json.dumps(main(mode)))
