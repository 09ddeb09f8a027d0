"""A DSPy program for tests/test_agent_requests.py's trials, run as a child process.

``python tests/dspy_requests.py MODE DB SIDE [KILL_AT [TASK]]``: a ``dspy.ReAct``
agent with one journaled tool (a forecast) on a fake LM, made durable with
``durable_program`` and the adapter's default arguments (no run name; the
journal file from ``$LETITLOOP_DB``). MODE ``ask`` asks TASK; ``chat`` asks
TASK, then, continuing that conversation (a ``dspy.History`` of turn 1), about
Bergen. The LM and the tool append ``start WHAT`` and ``end WHAT`` to the side
file SIDE and SIGKILL their process at ``start KILL_AT``; ``after return`` is
the point where the program got its answer and had not printed it yet,
``between turns`` the point between the two turns. The answer is the last line.

The fake LM is stateless: its reply depends only on the prompt (the city the
question is about, the observations so far), so a resumed process asks it
where the killed one stopped.
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

SIDE = SideFile(task="What is 40 + 1, and the weather?")
WHERE, event, done = SIDE.where, SIDE.event, SIDE.done
#: Each call takes this long (s), so that two copies started together meet.
PACE = 0.01
FORECASTS = {"Oslo": "snow in Oslo", "Bergen": "rain in Bergen"}


def city_of(question: str) -> str:
    """The city a question is about: named in it, else Oslo (Rome in the evening)."""
    named = [c for c in ("Bergen", "Lima") if c in question]
    return named[0] if named else "Rome" if "evening" in question else "Oslo"


class ForecastLM(DummyLM):  # type: ignore[misc]
    """Plans a forecast call for the question's city, then finishes, then answers."""

    def __init__(self) -> None:
        super().__init__({})

    def __call__(self, prompt: Any = None, *, messages: Any = None, **kwargs: Any) -> Any:
        last = messages[-1]["content"]
        question = re.search(r"\[\[ ## question ## \]\]\n(.*)", last)
        city = city_of(question.group(1) if question else "")
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
        time.sleep(PACE)
        self.history.append({"usage": {"prompt_tokens": 11, "completion_tokens": 4}})
        out = [self._format_answer_fields(reply)]
        done(label)
        return out


def forecast(city: str) -> str:
    """The weather forecast for a city."""
    event(f"tool forecast {city}")
    time.sleep(PACE)
    done(f"tool forecast {city}")
    return FORECASTS.get(city, f"sun in {city}")


def main(mode: str) -> str:
    from letitloop.adapters.dspy import JournaledLM, durable_program, journaled_tool

    dspy.configure(lm=JournaledLM(ForecastLM()))
    agent = durable_program(
        dspy.ReAct("question, history: dspy.History -> answer", tools=[journaled_tool(forecast)])
    )
    task = WHERE["task"]
    first = agent(question=task, history=dspy.History(messages=[])).answer
    if mode == "ask":
        event("after return")  # the program has the answer and has not used it yet
        return str(first)
    event("between turns")
    history = dspy.History(messages=[{"question": task, "answer": first}])
    second = agent(question="And in Bergen?", history=history).answer
    event("after return")
    return f"{first} // {second}"


#: The calls of the conversation's second turn (kill points inside it).
TURN_TWO = ("lm think Bergen", "tool forecast Bergen", "lm answer Bergen")

if __name__ == "__main__":
    mode, os.environ["LETITLOOP_DB"], WHERE["side"] = sys.argv[1:4]
    WHERE["kill_at"] = sys.argv[4] if len(sys.argv) > 4 else ""
    WHERE["task"] = sys.argv[5] if len(sys.argv) > 5 else WHERE["task"]
    print(json.dumps({"answer": main(mode)}))
