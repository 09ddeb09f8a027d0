"""tests/bill_pipeline.py's crew (mode ``crewai``, run in CrewAI's own environment): a
researcher with one tool on an offline model that a fake provider bills before it replies.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from crewai import Agent, Crew, Task
from crewai.llms.base_llm import BaseLLM
from crewai.tools import tool

from letitloop import Budget
from letitloop.adapters.crewai import durable_crew

#: Each call's output limit (bill_pipeline's MAX_TOKENS).
MAX_TOKENS = 60


def paid_crew(
    goal: str,
    db: str,
    durability: Any,
    budget: Budget,
    provider: Callable[[str, int], tuple[int, int]],
    point: Callable[[], None],
    lookups: int,
) -> Crew:
    """The crew, wrapped with the handler's default arguments and ``budget=``: its model
    calls the lookup tool ``lookups`` times, one per turn, then answers; ``provider`` bills
    each call, ``point`` is where a kill may land inside a tool call."""

    class PaidModel(BaseLLM):
        """Billed by ``provider`` before it replies; its usage reported to CrewAI as a
        provider's is."""

        def call(self, messages: Any, tools: Any = None, *args: Any, **kwargs: Any) -> Any:
            text = json.dumps(messages) if not isinstance(messages, str) else messages
            turn = sum(isinstance(m, dict) and m.get("role") == "tool" for m in messages)
            assert isinstance(self.max_tokens, int)
            tokens_in, tokens_out = provider(text, self.max_tokens)
            self._track_token_usage_internal(
                {"prompt_tokens": tokens_in, "completion_tokens": tokens_out}
            )
            if turn < lookups:
                function = {"name": "lookup", "arguments": json.dumps({"n": turn})}
                return [{"id": f"call_{turn}", "type": "function", "function": function}]
            return f"done after {turn} lookups"

        def supports_function_calling(self) -> bool:
            return True

    @tool("lookup")
    def lookup(n: int) -> str:
        """Look a number up."""
        point()
        return f"fact {n}"

    model = PaidModel(model="paid", max_tokens=MAX_TOKENS)
    agent = Agent(
        role="Researcher", goal="Look facts up", backstory="Reads.", llm=model, tools=[lookup],
        max_iter=lookups + 2,
    )  # fmt: skip
    task = Task(description="Look up {count} facts.", expected_output="A count.", agent=agent)
    crew = Crew(agents=[agent], tasks=[task])
    return durable_crew(crew, goal, path=db, durability=durability, budget=budget)
