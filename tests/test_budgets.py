"""Budgets that survive crashes: ``Journal(..., budget=...)`` counts every paid call of
every attempt (a crashed one's too), never a replayed one twice, and stops the run before
a step once the budget is reached (tests/budget_pipeline.py runs in child processes)."""

from __future__ import annotations

import asyncio
import json
import pickle
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import lil_forked, run_forked

from letitloop import (
    Budget,
    BudgetExceededError,
    Journal,
    LetItLoopError,
    durable,
    durable_async,
    usage,
)

PIPELINE = Path(__file__).resolve().parent / "budget_pipeline.py"


def attempt(db: Path, side: Path, kill_at: str, tokens: int) -> subprocess.CompletedProcess[str]:
    return run_forked(PIPELINE, str(db), str(side), kill_at, str(tokens))


def ran(side: Path) -> list[str]:
    return [line.split(" ", 1)[1] for line in side.read_text().splitlines()]


class TestARunKilledInsideAPaidStep:
    def test_the_next_attempt_counts_the_killed_calls_spend_and_stops_before_the_next_step(
        self, tmp_path: Path
    ) -> None:
        db, side = tmp_path / "j.db", tmp_path / "side.txt"
        # 250 tokens: a (100) and b's killed call (100) leave room for b once more (300),
        # then c is refused. Were the killed call not counted, c would run (300 < 250 fails).
        killed = attempt(db, side, "in b", 250)
        assert killed.returncode == -9
        second = attempt(db, side, "", 250)
        assert second.returncode == 3, second.stderr
        refused = json.loads(second.stdout)
        assert refused["key"] == "c"
        assert refused["tokens"] == 300
        assert sorted(refused["steps"]) == [["a", 100, 0.01], ["b", 200, 0.02]]
        assert "'c' was not started" in refused["msg"] and "b (200 tokens" in refused["msg"]
        assert ran(side) == ["a", "b", "b"]  # c was never called

    def test_a_budget_raised_on_the_next_run_lets_it_finish(self, tmp_path: Path) -> None:
        db, side = tmp_path / "j.db", tmp_path / "side.txt"
        assert attempt(db, side, "in b", 250).returncode == -9
        assert attempt(db, side, "", 250).returncode == 3
        done = attempt(db, side, "", 1000)
        assert done.returncode == 0, done.stderr
        assert ran(side) == ["a", "b", "b", "c"]


class TestARunKilledBetweenSteps:
    def test_its_replayed_steps_are_not_counted_twice(self, tmp_path: Path) -> None:
        db, side = tmp_path / "j.db", tmp_path / "side.txt"
        # 350 tokens: a (100, replayed), b and c (200) = 300 fit; a counted twice would not.
        assert attempt(db, side, "after a", 350).returncode == -9
        done = attempt(db, side, "", 350)
        assert done.returncode == 0, done.stderr + done.stdout
        assert ran(side) == ["a", "b", "c"]


class TestLilShow:
    def test_it_shows_the_budget_and_whether_the_run_reached_it(self, tmp_path: Path) -> None:
        db, side = tmp_path / "j.db", tmp_path / "side.txt"
        attempt(db, side, "in b", 250)
        attempt(db, side, "", 250)
        shown = lil_forked("--db", str(db), "show", "paid")
        assert shown.returncode == 0, shown.stderr
        line = next(x for x in shown.stdout.splitlines() if x.startswith("budget"))
        assert "250 tokens (reached: 300 tokens" in line
        assert "letitloop:budget:tokens=250" in shown.stdout  # the row that records it


def spend(tokens: int, cost: float | None = None) -> int:
    usage(input_tokens=tokens, cost=cost)
    return tokens


class TestABudget:
    def test_a_run_within_it_is_not_stopped(self, tmp_path: Path) -> None:
        with Journal("g", path=tmp_path / "j.db", budget={"tokens": 1000, "cost": 1.0}) as j:
            assert [j.step(f"s{i}", spend, 100, 0.1) for i in range(3)] == [100, 100, 100]

    def test_cost_alone_stops_the_run_and_the_step_is_not_called(self, tmp_path: Path) -> None:
        called: list[int] = []

        def counted(i: int) -> int:
            called.append(i)
            return spend(1, 0.1)

        journal = Journal("g", path=tmp_path / "j.db", budget=Budget(cost=0.25))
        with pytest.raises(BudgetExceededError) as caught, journal as j:
            for i in range(5):
                j.step(f"s{i}", counted, i)
        assert called == [0, 1, 2]
        assert caught.value.key == "s3" and caught.value.cost == pytest.approx(0.3)
        assert isinstance(caught.value, LetItLoopError)
        again = pickle.loads(pickle.dumps(caught.value))
        assert again.key == "s3" and str(again) == str(caught.value)

    def test_an_async_step_is_stopped_too(self, tmp_path: Path) -> None:
        async def paid() -> int:
            usage(input_tokens=60)
            return 1

        async def main() -> None:
            async with Journal("g", path=tmp_path / "j.db", budget=Budget(tokens=100)) as j:
                await j.async_step("one", paid)
                await j.async_step("two", paid)
                await j.async_step("three", paid)

        with pytest.raises(BudgetExceededError, match="'three' was not started"):
            asyncio.run(main())

    def test_durable_takes_one_and_a_run_resumed_with_more_replays_within_it(
        self, tmp_path: Path
    ) -> None:
        called: list[str] = []

        def paid(name: str) -> int:
            called.append(name)
            return spend(100)

        def pipeline_with(budget: dict[str, int]) -> Any:
            @durable("d", path=tmp_path / "j.db", budget=budget)
            def pipeline(n: int) -> int:
                from letitloop import step

                return int(step("first", paid, "first") + step("second", paid, "second"))

            return pipeline

        with pytest.raises(BudgetExceededError, match="'second' was not started"):
            pipeline_with({"tokens": 100})(1)
        assert pipeline_with({"tokens": 250})(1) == 200
        assert called == ["first", "second"]

        @durable_async("d2", path=tmp_path / "j.db", budget=Budget(tokens=50))
        async def nothing() -> int:
            return 0

        assert asyncio.run(nothing()) == 0

    @pytest.mark.parametrize(
        "bad",
        [Budget, {"tokens": -1}, {"tokens": 1.5}, {"cost": float("nan")}, {"money": 1}, 3],
    )
    def test_a_budget_that_is_not_one_is_refused_with_what_to_pass(
        self, bad: Any, tmp_path: Path
    ) -> None:
        with pytest.raises(LetItLoopError, match="budget"):
            Journal("g", path=tmp_path / "j.db", budget=bad() if bad is Budget else bad)


class TestAnAdaptersRun:
    @pytest.mark.slow  # Pydantic AI, the framework
    def test_pydantic_ai_stops_before_its_next_unit_once_its_model_spent_the_budget(
        self, tmp_path: Path
    ) -> None:
        pytest.importorskip("pydantic_ai.durable_exec")
        from pydantic_ai import Agent
        from pydantic_ai.messages import (
            ModelMessage,
            ModelResponse,
            TextPart,
            ToolCallPart,
            ToolReturnPart,
        )
        from pydantic_ai.models.function import AgentInfo, FunctionModel
        from pydantic_ai.usage import RequestUsage

        from letitloop.adapters.pydantic_ai import LetItLoopDurability

        called: list[str] = []

        def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            done = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
            called.append(f"model {len(done)}")
            spent = RequestUsage(input_tokens=60, output_tokens=5)
            if not done:
                return ModelResponse(parts=[ToolCallPart("weather", {"city": "Oslo"})], usage=spent)
            return ModelResponse(parts=[TextPart("sunny")], usage=spent)

        agent = Agent(FunctionModel(model), name="trip", capabilities=[LetItLoopDurability()])

        @agent.tool_plain
        def weather(city: str) -> str:
            called.append("tool")
            return "sunny"

        async def main(tokens: int) -> str:
            async with Journal("trip", path=tmp_path / "j.db", budget=Budget(tokens=tokens)):
                return (await agent.run("go")).output

        with pytest.raises(BudgetExceededError) as caught:
            asyncio.run(main(50))
        assert called == ["model 0"]  # the tool's unit was not started
        assert caught.value.tokens == 65 and "call_tool:weather" in str(caught.value.key)
        assert asyncio.run(main(1000)) == "sunny"  # resumed with more: the model replays
        assert called == ["model 0", "tool", "model 1"]


class TestTheBudgetRow:
    def test_a_new_run_with_a_budget_still_takes_the_new_path_of_a_patch(
        self, tmp_path: Path
    ) -> None:
        # The row recording the budget is this attempt's own: patched() sees no older row.
        with Journal("g", path=tmp_path / "j.db", budget=Budget(tokens=10)) as j:
            assert j.patched("new-prompt")
        with Journal("g", path=tmp_path / "j.db", run="named", budget=Budget(tokens=10)) as j:
            assert j.patched("new-prompt")
