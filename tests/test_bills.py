"""The bill, not only the record, stays within the budget: a paid call reserves what it may
cost before it starts (``letitloop.reserve``, every adapter's model call), its usage settles
the reservation, and a reservation whose process died stays counted.

The trials run in tests/bill_pipeline.py: attempts forked from one process and SIGKILLed
at random points (before the fake provider bills a call, after it billed and before the
reply, between steps), the provider's bill kept in a file outside the journal.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from bill_trials import check, check_request, counted, estimates, job, summary, together, trials
from helpers import lil_forked, run_forked
from trial_count import TRIALS

from letitloop import (
    Budget,
    BudgetExceededError,
    Journal,
    LetItLoopError,
    PaidCall,
    Reservation,
    reserve,
    usage,
)
from letitloop.errors import NoJournalError
from letitloop.inspection import find_run, open_inspector, show_run

#: Resume a bill_pipeline run (``sys.argv``: location, goal): exit 3 if its budget refuses.
RESUME = """
import sys
from letitloop import Budget, BudgetExceededError, Journal, reserve, usage

def ask():
    reserve("question 0", max_tokens=60)
    raise SystemExit("paid")

try:
    with Journal(sys.argv[2], path=sys.argv[1], budget=Budget(tokens=800)) as j:
        j.step("ask:0", ask)
except BudgetExceededError:
    sys.exit(3)
"""


@pytest.fixture(scope="module")
def billed_once(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A plain journal's trial (sync, seed 1) whose every attempt but the last was killed
    just after the provider billed its first call: run once for the tests that read it."""
    (r,) = trials("sync", "process", tmp_path_factory.mktemp("billed"), 1, seed=1, kills="billed")
    return r


@pytest.fixture(scope="module")
def langgraph_trials(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """This file's trials of LangGraph's requests, each named, run by one pipeline (LangGraph
    imported once, not once per test): TRIALS of the prebuilt agent and TRIALS of the graph with
    random kills; one with every attempt but the last killed just after the provider
    billed its first call; one whose seed kills it once."""
    pytest.importorskip("langgraph.prebuilt")
    folder = tmp_path_factory.mktemp("langgraph")
    named = {
        "langgraph": ("langgraph", TRIALS, 29, "random"),
        "langgraph_graph": ("langgraph_graph", TRIALS, 31, "random"),
        "billed": ("langgraph", 1, 1, "billed"),
        "killed once": ("langgraph", 1, 3, "random"),
    }
    jobs = []
    for name, (mode, n, seed, kills) in named.items():
        (folder / name).mkdir()
        jobs.append(job(mode, "process", folder / name, n, seed, kills))
    return dict(zip(named, together(jobs), strict=True))


@pytest.fixture
def billed(billed_once: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """:func:`billed_once`'s trial, its journal copied into this test's folder (SQLite's
    backup, from outside the pipeline, which ended): a test may change its copy."""
    copy = tmp_path / "billed.db"
    source, target = sqlite3.connect(billed_once["db"]), sqlite3.connect(copy)
    with contextlib.closing(source), contextlib.closing(target):
        source.backup(target)
    return {**billed_once, "db": str(copy)}


class TestTheProvidersBillUnderRandomKills:
    @pytest.mark.parametrize(
        ("mode", "durability"),
        [("sync", "process"), ("sync", "power"), ("async", "process"), ("async", "power")],
    )
    def test_a_journals_paid_steps_never_bill_past_the_budget(
        self, mode: str, durability: str, tmp_path: Path
    ) -> None:
        check(trials(mode, durability, tmp_path, 6, seed=len(mode) + len(durability)))

    def test_a_smolagents_agent_never_bills_past_the_budget(self, tmp_path: Path) -> None:
        pytest.importorskip("smolagents")
        check(trials("smolagents", "process", tmp_path, TRIALS, seed=7))

    def test_a_pydantic_ai_agent_never_bills_past_the_budget(self, tmp_path: Path) -> None:
        pytest.importorskip("pydantic_ai.durable_exec")
        check(trials("pydantic_ai", "process", tmp_path, TRIALS, seed=11))

    @pytest.mark.parametrize(
        ("mode", "framework", "seed"),
        [
            ("autogen", "autogen_agentchat", 13),
            ("dspy", "dspy", 17),
            ("openai_agents", "agents", 19),
            ("llamaindex", "llama_index.core.agent.workflow", 23),
        ],
    )
    def test_an_agent_of_autogen_dspy_openai_agents_or_llamaindex_never_bills_past_the_budget(
        self, mode: str, framework: str, seed: int, tmp_path: Path
    ) -> None:
        pytest.importorskip(framework)
        results = trials(mode, "process", tmp_path, TRIALS, seed=seed)
        print(json.dumps({mode: summary(results)}))
        check(results)
        # Each call's reservation was an upper bound of what it then reported.
        for r in results:
            with sqlite3.connect(r["db"]) as conn:
                settled = conn.execute(
                    "SELECT tokens, settled_tokens FROM reservations WHERE settled_at IS NOT NULL"
                ).fetchall()
            assert settled and all(t >= s for t, s in settled), (r, settled)
        # Both ends were reached: runs that finished within the budget, runs it stopped.
        assert {r["outcome"] for r in results} == {"done", "refused"}

    @pytest.mark.parametrize(
        ("mode", "goal"),
        [("langgraph", "langgraph:agent"), ("langgraph_graph", "langgraph:chatbot")],
    )
    def test_a_langgraph_request_never_bills_past_its_budget(
        self, mode: str, goal: str, langgraph_trials: dict[str, list[dict[str, Any]]]
    ) -> None:
        # create_react_agent(durable_model(model, budget=...), durable_node(ToolNode(...))),
        # and a StateGraph with ToolNode and tools_condition: the budget bounds the whole
        # invoke, its model calls journaled in a run each, across the request's kills.
        results = langgraph_trials[mode]
        assert len(results) == TRIALS
        ratios = [reserved / settled for r in results for reserved, settled in estimates(r["db"], goal)]  # fmt: skip  # noqa: E501
        print(json.dumps({mode: summary(results), "estimate/bill": [min(ratios), max(ratios)]}))
        check_request(results, goal)
        assert {r["outcome"] for r in results} == {"done", "refused"}
        # The estimate tracks the bill (the prompt's text, not its messages' JSON), above it.
        assert min(ratios) > 1 and max(ratios) < 6, ratios

    def test_on_postgresql_too(self, tmp_path: Path) -> None:
        import pg_server

        location = pg_server.location()
        check(trials("sync", "process", tmp_path, 6, seed=5, location=location))


class TestEveryAttemptKilledJustAfterTheProviderBilled:
    def test_without_reservations_the_bill_passes_the_budget(self, tmp_path: Path) -> None:
        # What the record alone bounded: each killed call was paid and never recorded.
        (r,) = trials("unreserved", "process", tmp_path, 1, seed=1, kills="billed")
        assert r["kills"] == 9 and r["bill"] > r["budget"]

    @pytest.mark.parametrize("mode", ["sync", "async"])
    def test_with_them_it_stops_within_it_and_lil_shows_why(
        self, mode: str, tmp_path: Path, request: pytest.FixtureRequest
    ) -> None:
        if mode == "sync":
            r = request.getfixturevalue("billed")
        else:
            (r,) = trials(mode, "process", tmp_path, 1, seed=1, kills="billed")
        assert r["outcome"] == "refused" and r["bill"] <= r["budget"]
        shown = lil_forked("--db", r["db"], "show", r["goal"])
        assert shown.returncode == 0, shown.stderr
        budget = next(x for x in shown.stdout.splitlines() if x.startswith("budget"))
        assert "reserved and not settled by 4 calls" in budget
        assert "not settled (cut short, counted as spent)" in shown.stdout

    def test_lil_ui_shows_reserved_versus_settled_spend(self, billed: dict[str, Any]) -> None:
        pytest.importorskip("starlette")
        from starlette.testclient import TestClient

        from letitloop.web import create_app

        r = billed
        page = TestClient(create_app(Path(r["db"])), base_url="http://127.0.0.1")
        html = page.get(f"/runs/{r['goal']}").text
        assert "reserved and not settled by 4 calls" in html
        assert "4 paid calls: 0 settled" in html

    def test_lil_export_has_a_record_per_reservation(self, billed: dict[str, Any]) -> None:
        r = billed
        exported = lil_forked("--db", r["db"], "export", r["goal"], "--format", "jsonl")
        assert exported.returncode == 0, exported.stderr
        records = [json.loads(line) for line in exported.stdout.splitlines()]
        held = [x for x in records if x["record"] == "reservation"]
        assert [(x["key"], x["attempt"], x["settled_at"]) for x in held] == [
            ("ask:0", n, None) for n in (1, 2, 3, 4)
        ]

    @pytest.mark.parametrize("target", ["file", "postgres"])
    def test_lil_copy_takes_the_reservations_and_the_copy_stays_within_the_budget(
        self, target: str, tmp_path: Path, billed: dict[str, Any]
    ) -> None:
        r = billed
        if target == "file":
            to = str(tmp_path / "copy.db")
        else:
            import pg_server

            to = pg_server.location()
        copied = lil_forked("copy", r["db"], to)
        assert copied.returncode == 0, copied.stderr
        assert counted(to, r["goal"]) == counted(r["db"], r["goal"]) == (0, 768)
        # Resumed from the copy: the killed calls' reservations still count, nothing is paid.
        resume = tmp_path / "resume.py"
        resume.write_text(RESUME)
        refused = run_forked(resume, to, r["goal"])
        assert refused.returncode == 3, refused.stderr

    def test_lil_reset_deletes_the_runs_reservations(self, billed: dict[str, Any]) -> None:
        r = billed
        reset = lil_forked("--db", r["db"], "reset", r["goal"], "--yes")
        assert reset.returncode == 0, reset.stderr
        import sqlite3

        with sqlite3.connect(r["db"]) as db:
            assert db.execute("SELECT count(*) FROM reservations").fetchone() == (0,)


class TestALangGraphRequestsSpendInLilShowAndLilUi:
    """A LangGraph request's model calls are journaled in a run each: ``lil show`` and
    ``lil ui`` show each run's reservations against its settled usage, and name the
    request the budget bounds."""

    def test_killed_after_each_bill_its_reservations_not_settled_are_listed(
        self, langgraph_trials: dict[str, list[dict[str, Any]]]
    ) -> None:
        pytest.importorskip("starlette")
        from starlette.testclient import TestClient

        from letitloop.web import create_app

        # Every attempt but the last killed just after the provider billed its first call.
        (r,) = langgraph_trials["billed"]
        assert r["outcome"] == "refused" and r["bill"] <= r["budget"]
        shown = lil_forked("--db", r["db"], "show", "langgraph:agent")
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.splitlines()
        budget = next(x for x in lines if x.startswith("budget"))
        assert budget.startswith(
            "budget    1,500 tokens for request 1 of thread 'paid-0' (its model calls in every "
            "durable node's run), shared with its other runs (this run's part: nothing spent, "
        ), budget
        assert budget.endswith("reserved and not settled by 3 calls)"), budget
        assert "reserved  3 paid calls: 0 settled (0 tokens reserved, 0 tokens reported)" in lines
        assert sum("not settled (cut short, counted as spent)" in x for x in lines) == 3
        run_id = lines[0].split()[1]
        page = TestClient(create_app(Path(r["db"])), base_url="http://127.0.0.1")
        for route in (f"/runs/{run_id}", f"/runs/{run_id}/live"):
            html = page.get(route).text
            assert "for request 1 of thread &#39;paid-0&#39;" in html, route
            assert "reserved and not settled by 3 calls" in html, route
            assert "3 paid calls: 0 settled" in html, route

    def test_a_finished_requests_last_call_shows_what_it_reserved_and_reported(
        self, langgraph_trials: dict[str, list[dict[str, Any]]]
    ) -> None:
        (r,) = langgraph_trials["killed once"]  # one kill, then done
        assert r["outcome"] == "done" and r["kills"] == 1
        shown = lil_forked("--db", r["db"], "show", "langgraph:agent")
        assert shown.returncode == 0, shown.stderr
        reserved, settled = estimates(r["db"], "langgraph:agent")[0]  # the newest run's
        assert settled == r["calls"]["model:4"]  # the last call's bill, as reported
        assert (
            f"reserved  1 paid call: 1 settled ({reserved:,} tokens reserved, "
            f"{settled:,} tokens reported)" in shown.stdout.splitlines()
        )


@pytest.fixture(params=["file", "memory", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "file":
        return str(tmp_path / "j.db")
    if request.param == "memory":
        return f"memory://{tmp_path.name}"
    import pg_server

    return pg_server.location()


def amounts(made: Reservation | None) -> tuple[int | None, float | None] | None:
    """A reservation as a step can return it (plain data)."""
    return None if made is None else (made.tokens, made.cost)


def paid(prompt: str, spent: int, calls: list[str]) -> tuple[int | None, float | None] | None:
    """A paid call of ``spent`` tokens whose output is at most 100 tokens."""
    made = reserve(prompt, max_tokens=100)
    calls.append(prompt)
    usage(input_tokens=spent)
    return amounts(made)


class TestAReservation:
    def test_it_is_the_prompts_bytes_plus_max_tokens_and_is_settled_by_the_usage(
        self, location: str
    ) -> None:
        calls: list[str] = []
        with Journal("g", path=location, budget=Budget(tokens=1000)) as j:
            assert j.step("one", paid, "x" * 300, 50, calls) == (400, None)
            # Settled: 50 counted, not 400, so 950 remain for two more calls of 400.
            j.step("two", paid, "x" * 300, 50, calls)
            j.step("three", paid, "x" * 300, 50, calls)
            with pytest.raises(BudgetExceededError) as refused:
                j.step("four", paid, "x" * 800, 50, calls)
        assert len(calls) == 3  # the call that did not fit was not made
        assert refused.value.tokens == 150 and refused.value.key == "four"
        assert "the paid call of step 'four' (reserving 900 tokens) was not made" in str(
            refused.value
        )
        inspector = open_inspector(location)
        try:
            shown = show_run(inspector, find_run(inspector, "g")).reservations
        finally:
            inspector.close()
        assert [(r.key, r.tokens, r.settled_tokens) for r in shown] == [
            ("one", 400, 50),
            ("two", 400, 50),
            ("three", 400, 50),
        ]
        assert all(r.settled_at is not None for r in shown)

    def test_a_call_that_raised_releases_what_it_reserved(self, location: str) -> None:
        def failing() -> None:
            reserve(tokens=900)
            raise ValueError("the provider refused")

        with Journal("g", path=location, budget=Budget(tokens=1000)) as j:
            with pytest.raises(ValueError):
                j.step("fails", failing)
            assert j.step("after", lambda: amounts(reserve(tokens=1000))) == (1000, None)

    def test_a_cancelled_call_keeps_its_reservation_counted(self, location: str) -> None:
        async def slow() -> None:
            reserve(tokens=600)
            await asyncio.sleep(30)

        async def main() -> None:
            async with Journal("g", path=location, budget=Budget(tokens=1000)) as j:
                task = asyncio.ensure_future(j.async_step("slow", slow))
                await asyncio.sleep(0.05)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                with pytest.raises(BudgetExceededError, match="600 tokens"):
                    await j.async_step("next", lambda: amounts(reserve(tokens=500)))

        asyncio.run(main())

    def test_the_budgets_estimate_decides_when_the_call_gives_no_amounts(
        self, location: str
    ) -> None:
        seen: list[PaidCall] = []

        def estimate(call: PaidCall) -> Reservation:
            seen.append(call)
            return Reservation(tokens=call.prompt_tokens * 2)

        with Journal("g", path=location, budget=Budget(tokens=100, estimate=estimate)) as j:
            made = j.step("a", lambda: amounts(reserve("héllo", max_tokens=7, model="m")))
        assert made == (12, None)
        assert seen == [PaidCall(prompt_tokens=6, max_tokens=7, model="m")]
        fixed = Budget(tokens=100, estimate=Reservation(tokens=30))
        with Journal("h", path=location, budget=fixed) as j:
            assert j.step("a", lambda: amounts(reserve("anything"))) == (30, None)

    def test_a_call_with_no_output_limit_reserves_all_that_remains(self, location: str) -> None:
        with Journal("g", path=location, budget=Budget(tokens=1000, cost=2.0)) as j:
            j.step("spent", lambda: usage(input_tokens=100, cost=0.5))
            made = j.step("open", lambda: amounts(reserve("hi")))
            j.step("settle", lambda: None)
            priced = j.step(
                "priced",
                lambda: amounts(reserve("hi", max_tokens=10, price=lambda m, i, o: (i + o) / 100)),
            )
        assert made == (900, 1.5)
        assert priced == (12, 0.12)

    def test_without_a_budget_nothing_is_reserved(self, location: str) -> None:
        with Journal("g", path=location) as j:
            assert j.step("a", lambda: amounts(reserve("hi", max_tokens=10))) is None

    def test_outside_a_step_or_with_amounts_that_are_none_it_is_refused(
        self, location: str
    ) -> None:
        with pytest.raises(NoJournalError, match="outside a step"):
            reserve("hi")
        with Journal("g", path=location, budget=Budget(tokens=10)) as j:
            with pytest.raises(LetItLoopError, match="max_tokens must be"):
                j.step("a", lambda: reserve("hi", max_tokens=-1))
            with pytest.raises(LetItLoopError, match="tokens must be"):
                j.step("b", lambda: reserve(tokens=1.5))  # type: ignore[arg-type]
        with pytest.raises(LetItLoopError, match="estimate must be"):
            Budget(tokens=10, estimate=3)

    def test_a_failed_try_of_a_retried_step_releases_its_own_reservation(
        self, location: str
    ) -> None:
        from letitloop import RetryPolicy

        tries: list[int] = []

        def flaky() -> int:
            reserve(tokens=600)
            tries.append(1)
            if len(tries) == 1:
                raise ConnectionError("the provider hung up")
            usage(input_tokens=10)
            return len(tries)

        policy = RetryPolicy(max_attempts=3, initial_backoff=0.0, jitter=0.0)
        with Journal("g", path=location, budget=Budget(tokens=1000)) as j:
            # The second try reserves 600 again: the first try's 600 was released.
            assert j.step("flaky", flaky, retry=policy) == 2
        inspector = open_inspector(location)
        try:
            shown = show_run(inspector, find_run(inspector, "g")).reservations
        finally:
            inspector.close()
        assert [(r.tokens, r.settled_tokens) for r in shown] == [(600, None), (600, 10)]


def reservations_of(location: str, goal: str) -> list[tuple[str, int | None, int | None]]:
    inspector = open_inspector(location)
    try:
        held = show_run(inspector, find_run(inspector, goal)).reservations
    finally:
        inspector.close()
    return [(r.key, r.tokens, r.settled_tokens) for r in held]


class TestEveryAdaptersModelCallReserves:
    """The adapters' model calls reserve the prompt's bytes plus the output limit they find
    (smolagents, Pydantic AI, OpenAI Agents and LlamaIndex: the trials above)."""

    def test_autogens_from_its_extra_create_args(self, tmp_path: Path) -> None:
        pytest.importorskip("autogen_ext.models.replay")
        from autogen_core.models import UserMessage
        from autogen_ext.models.replay import ReplayChatCompletionClient

        from letitloop.adapters.autogen.client import call_model

        client = ReplayChatCompletionClient(["an answer"])
        messages = [UserMessage(content="hello there", source="user")]
        ran: list[bool] = []
        call = (client, messages, {"extra_create_args": {"max_tokens": 50}}, None, ran)
        with Journal("g", path=tmp_path / "j.db", budget=Budget(tokens=10_000)) as j:
            j.step("model", lambda: asyncio.run(call_model("id", call))["content"])
        ((key, tokens, settled),) = reservations_of(str(tmp_path / "j.db"), "g")
        assert key == "model" and tokens is not None and tokens > 50 + len("hello there")
        assert settled is not None and settled < tokens  # replaced by what it reported

    def test_dspys_from_its_lms_settings(self, tmp_path: Path) -> None:
        pytest.importorskip("dspy")
        from dspy.utils.dummies import DummyLM

        from letitloop.adapters.dspy.lm import lm_call

        lm = DummyLM([{"answer": "x"}])  # max_tokens=1000 among its kwargs, as dspy.LM's
        with Journal("g", path=tmp_path / "j.db", budget=Budget(tokens=10_000)) as j:
            j.step("lm", lambda: len(lm_call(lm, "hello", None, {}, False)))
        ((key, tokens, settled),) = reservations_of(str(tmp_path / "j.db"), "g")
        assert key == "lm" and tokens == 1000 + len('["hello",null]')
        assert settled == 0  # settled by what DummyLM reports: 0 tokens


class TestConcurrentCalls:
    def test_they_reserve_one_at_a_time_and_those_that_do_not_fit_are_not_made(
        self, location: str
    ) -> None:
        import threading
        from concurrent.futures import ThreadPoolExecutor

        every = threading.Barrier(5, timeout=30)
        made: list[int] = []

        def call(i: int) -> int:
            try:
                reserve(tokens=300)
            finally:
                every.wait()  # all five have reserved or been refused before any settles
            made.append(i)
            usage(input_tokens=10)
            return i

        with Journal("g", path=location, budget=Budget(tokens=1000)) as j:

            def step(i: int) -> str:
                try:
                    j.step(f"call:{i}", call, i)
                    return "made"
                except BudgetExceededError:
                    return "refused"

            with ThreadPoolExecutor(5) as pool:
                outcomes = sorted(pool.map(step, range(5)))
        assert outcomes == ["made"] * 3 + ["refused"] * 2
        assert len(made) == 3


class TestAForkedRun:
    """``lil fork``: the fork's budget counts what its source spent and reserved before the
    fork point (its history, paid once by the source), not what came after it: on every
    store in tests/test_inspector_contract.py (``TestAFork``), through the ``lil fork``
    subprocess on PostgreSQL and a file in tests/test_postgres_lil.py."""

    def test_a_run_that_is_not_a_fork_carries_nothing(self, tmp_path: Path) -> None:
        with Journal("g", path=tmp_path / "j.db", budget=Budget(tokens=1000)) as j:
            assert j.step("all", lambda: amounts(reserve(tokens=1000))) == (1000, None)
