"""What a step consumed: ``letitloop.usage(...)`` inside its function, stored on its row."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import lil_forked, run_forked

from letitloop import Journal, RetryPolicy, step, usage
from letitloop.errors import LetItLoopError, NoJournalError
from letitloop.primitives.costs import Usage, reported


def rows(db: Path, table: str = "journal_g") -> list[tuple[Any, ...]]:
    """Each row's key and usage columns, read from a second connection."""
    conn = sqlite3.connect(db)
    try:
        return conn.execute(
            f"SELECT key, status, input_tokens, output_tokens, cost, model FROM {table} "
            f"ORDER BY rowid"
        ).fetchall()
    finally:
        conn.close()


@dataclass
class OpenAIUsage:  # the shape of openai's CompletionUsage
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


@dataclass
class OpenAIResponse:  # the shape of openai's ChatCompletion
    model: str
    usage: OpenAIUsage


@dataclass
class AnthropicUsage:  # the shape of anthropic's Usage
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None


@dataclass
class AnthropicMessage:
    model: str
    usage: AnthropicUsage


class TestAReport:
    def test_plain_numbers_are_taken_as_they_are(self) -> None:
        u = reported(input_tokens=10, output_tokens=5, cost=0.25, model="m")
        assert u == Usage(10, 5, 0.25, "m")

    def test_an_openai_response_gives_its_tokens_and_model(self) -> None:
        u = reported(OpenAIResponse("gpt-4o", OpenAIUsage(100, 20, 120)))
        assert u == Usage(100, 20, None, "gpt-4o")

    def test_an_openai_usage_dict_works_like_the_object(self) -> None:
        u = reported({"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10})
        assert (u.input_tokens, u.output_tokens) == (7, 3)

    def test_anthropic_cache_reads_and_writes_count_as_input(self) -> None:
        msg = AnthropicMessage("claude", AnthropicUsage(50, 10, 200, 1000))
        assert reported(msg) == Usage(1250, 10, None, "claude")

    def test_gemini_and_langchain_shapes_are_read(self) -> None:
        gemini = {"usage_metadata": {"prompt_token_count": 9, "candidates_token_count": 4}}
        langchain = {"input_tokens": 11, "output_tokens": 2, "total_tokens": 13}
        assert (reported(gemini).input_tokens, reported(gemini).output_tokens) == (9, 4)
        assert (reported(langchain).input_tokens, reported(langchain).output_tokens) == (11, 2)

    def test_keywords_override_what_the_object_says(self) -> None:
        u = reported(OpenAIResponse("gpt-4o", OpenAIUsage(100, 20, 120)), cost=0.5, model="x")
        assert u == Usage(100, 20, 0.5, "x")

    def test_reports_add_up_and_models_are_listed_once(self) -> None:
        u = Usage(10, 1, 0.1, "a")
        for other in (Usage(5, None, 0.2, "b"), Usage(None, 4, None, "a")):
            u.add(other)
        assert u.input_tokens == 15 and u.output_tokens == 5 and u.model == "a, b"
        assert u.cost == pytest.approx(0.3)

    @pytest.mark.parametrize(
        ("kwargs", "says"),
        [
            ({"input_tokens": -1}, "must be >= 0"),
            ({"output_tokens": 1.5}, "whole number"),
            ({"input_tokens": True}, "whole number"),
            ({"cost": "cheap"}, "cost must be a number"),
            ({"cost": float("nan")}, "finite"),
            ({"model": 4}, "model must be text"),
        ],
    )
    def test_a_value_that_is_not_a_count_is_refused_saying_what_was_expected(
        self, kwargs: dict[str, Any], says: str
    ) -> None:
        with pytest.raises(LetItLoopError, match=says):
            reported(**kwargs)

    def test_an_object_without_token_counts_is_refused(self) -> None:
        with pytest.raises(LetItLoopError, match="expected a response or usage object"):
            reported({"tokens": 4})


class TestUsageInAStep:
    def test_it_is_stored_on_the_steps_row_in_plain_columns(self, db: Path) -> None:
        def ask() -> str:
            usage(OpenAIResponse("gpt-4o", OpenAIUsage(100, 20, 120)), cost=0.002)
            usage(input_tokens=10, output_tokens=1, cost=0.001, model="gpt-4o-mini")
            return "answer"

        with Journal("g", path=db) as j:
            j.step("ask", ask)
            j.step("plain", lambda: 1)
        assert rows(db) == [
            ("ask", "done", 110, 21, pytest.approx(0.003), "gpt-4o, gpt-4o-mini"),
            ("plain", "done", None, None, None, None),
        ]
        conn = sqlite3.connect(db)
        assert conn.execute("SELECT sum(cost) FROM journal_g").fetchone()[0] == pytest.approx(0.003)
        conn.close()

    def test_a_nested_steps_usage_goes_to_its_own_row(self, db: Path) -> None:
        def inner() -> int:
            usage(input_tokens=5)
            return 1

        def outer() -> int:
            usage(input_tokens=100)
            return step("inner", inner) + 1

        with Journal("g", path=db) as j:
            j.step("outer", outer)
        # (outer's row comes first: its report was committed while it ran)
        assert {(k, i) for k, _, i, *_ in rows(db)} == {("outer/inner", 5), ("outer", 100)}

    def test_a_failed_step_keeps_what_it_spent(self, db: Path) -> None:
        def broke() -> None:
            usage(input_tokens=7, cost=0.01)
            raise RuntimeError("model overloaded")

        with pytest.raises(RuntimeError), Journal("g", path=db) as j:
            j.step("ask", broke)
        # On its failed try (as a retry policy's last try keeps it), not twice.
        assert rows(db) == [("ask", "failed", None, None, None, None)]
        conn = sqlite3.connect(db)
        spent = conn.execute("SELECT try, input_tokens, cost, error FROM step_tries").fetchall()
        conn.close()
        assert spent == [(1, 7, 0.01, "RuntimeError: model overloaded")]

    def test_each_failed_try_keeps_its_own_usage(self, db: Path) -> None:
        tries = []

        def flaky() -> str:
            tries.append(1)
            usage(input_tokens=10 * len(tries))
            if len(tries) < 3:
                raise TimeoutError("slow")
            return "ok"

        with Journal("g", path=db) as j:
            j.step("ask", flaky, retry=RetryPolicy(initial_backoff=0, jitter=0))
        conn = sqlite3.connect(db)
        spent = conn.execute("SELECT try, input_tokens FROM step_tries ORDER BY try").fetchall()
        conn.close()
        assert spent == [(1, 10), (2, 20)]
        assert rows(db) == [("ask", "done", 30, None, None, None)]

    def test_an_async_steps_usage_is_stored_too(self, db: Path) -> None:
        async def ask() -> str:
            usage(input_tokens=3, output_tokens=4)
            return "a"

        def ask_in_a_thread() -> str:
            usage(input_tokens=1)
            return "b"

        async def main() -> None:
            async with Journal("g", path=db) as j:
                await asyncio.gather(j.async_step("a", ask), j.async_step("b", ask_in_a_thread))

        asyncio.run(main())
        assert sorted(rows(db)) == [
            ("a", "done", 3, 4, None, None),
            ("b", "done", 1, None, None, None),
        ]

    def test_outside_a_steps_function_it_says_where_to_call_it(self, db: Path) -> None:
        with pytest.raises(NoJournalError, match="outside a step's function"):
            usage(input_tokens=1)
        with Journal("g", path=db), pytest.raises(NoJournalError, match="outside a step"):
            usage(input_tokens=1)


PIPELINE = """
import sys
from letitloop import Journal, usage

db, crash = sys.argv[1], sys.argv[2] == "crash"

def ask(i):
    usage(input_tokens=1000 * i, output_tokens=100 * i, cost=0.01 * i, model="m")
    return i

with Journal("costly", path=db) as j:
    for i in range(1, 4):
        j.step(f"ask{i}", ask, i)
    if crash:
        raise SystemExit(3)
"""


def lil(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return lil_forked("--db", str(db), *args)


@pytest.fixture(scope="module")
def costly(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A journal of PIPELINE's run, crashed then finished: one for the module's tests that
    only read it."""
    tmp_path = tmp_path_factory.mktemp("costly")
    db = tmp_path / "journal.db"
    script = tmp_path / "costly.py"
    script.write_text(PIPELINE, encoding="utf-8")
    for how in ("crash", "finish"):  # attempt 2 replays all three steps
        run_forked(script, str(db), how)
    return db


class TestWhatLilSaysARunCost:
    @pytest.fixture
    def journal(self, costly: Path) -> Path:
        return costly

    def test_lil_show_totals_the_run_and_what_the_last_attempt_replayed(
        self, journal: Path
    ) -> None:
        out = lil(journal, "show", "costly")
        assert out.returncode == 0, out.stderr
        assert "usage     6,600 tokens (6,000 in, 600 out), $0.06 reported by 3 steps" in out.stdout
        assert "replayed  6,600 tokens (6,000 in, 600 out), $0.06 saved" in out.stdout

    def test_lil_runs_has_a_cost_column(self, journal: Path) -> None:
        out = lil(journal, "runs")
        header, line = out.stdout.splitlines()[:2]
        assert header.split()[-1] == "COST" and line.split()[-1] == "$0.06"

    def test_json_carries_the_numbers(self, journal: Path) -> None:
        run = json.loads(lil(journal, "runs", "--json").stdout)[0]
        assert (run["input_tokens"], run["output_tokens"]) == (6000, 600)
        assert run["cost"] == pytest.approx(0.06)
        shown = json.loads(lil(journal, "show", "costly", "--json").stdout)
        assert shown["usage"]["tokens"] == 6600
        assert shown["usage"]["replayed"]["cost"] == pytest.approx(0.06)
        assert [r["input_tokens"] for r in shown["rows"]] == [1000, 2000, 3000]
        assert {r["model"] for r in shown["rows"]} == {"m"}


PAID = """
import os, signal, sys
from letitloop import Journal, RetryPolicy, usage

db, log, modes = sys.argv[1], sys.argv[2], sys.argv[3].split(",")

def ask():
    with open(log, "a") as f:  # every call that ran, counted outside the journal
        f.write("call\\n")
    n = sum(1 for _ in open(log))
    usage(input_tokens=100, output_tokens=10, cost=0.5, model="m")
    mode = modes[min(n, len(modes)) - 1]
    if mode == "raise":
        raise RuntimeError("model overloaded")
    if mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    return "answer"

def cheap(x):
    usage(cost=0.25)
    return x

policy = RetryPolicy(max_attempts=3, initial_backoff=0, jitter=0)
extra = {"retry": policy} if "retry" in sys.argv else {}
with Journal("paid", run="r", path=db) as j:
    if "die-at-open" in sys.argv:
        os.kill(os.getpid(), signal.SIGKILL)
    j.step("first", cheap, 1)
    if "kill-after-first" in sys.argv:
        os.kill(os.getpid(), signal.SIGKILL)
    print(j.step("ask", ask, **extra))
"""


class TestEveryPaidCallIsCountedOnce:
    """A step's calls that raised, were retried or were cut short by SIGKILL all count."""

    @pytest.fixture
    def lab(self, tmp_path: Path) -> tuple[Path, Path, Path]:
        script = tmp_path / "paid.py"
        script.write_text(PAID, encoding="utf-8")
        return tmp_path / "journal.db", tmp_path / "calls.log", script

    def attempt(self, lab: tuple[Path, Path, Path], modes: str, *flags: str) -> int:
        db, log, script = lab
        return run_forked(script, str(db), str(log), modes, *flags).returncode

    def calls(self, lab: tuple[Path, Path, Path]) -> int:
        log = lab[1]
        return len(log.read_text().splitlines()) if log.exists() else 0

    def costs(self, db: Path) -> tuple[float, float, int]:
        """(cost on the rows, cost on step_tries, step_tries rows), from outside."""
        conn = sqlite3.connect(db)
        try:
            on_rows = conn.execute("SELECT coalesce(sum(cost), 0) FROM journal_paid").fetchone()
            tries = conn.execute("SELECT coalesce(sum(cost), 0), count(*) FROM step_tries")
            return (on_rows[0], *tries.fetchone())
        finally:
            conn.close()

    def shown(self, db: Path) -> dict[str, Any]:
        out = lil(db, "show", "r", "--json")
        assert out.returncode == 0, out.stderr
        data: dict[str, Any] = json.loads(out.stdout)
        return data

    def test_a_call_that_raised_then_one_that_returned_are_two_paid_calls(
        self, lab: tuple[Path, Path, Path]
    ) -> None:
        db = lab[0]
        assert self.attempt(lab, "raise,ok") == 1
        assert self.attempt(lab, "raise,ok") == 0
        assert self.calls(lab) == 2
        rows_cost, tries_cost, _ = self.costs(db)
        assert rows_cost + tries_cost == pytest.approx(0.25 + 1.0)
        shown = self.shown(db)
        assert shown["usage"]["cost"] == pytest.approx(1.25)
        assert shown["usage"]["input_tokens"] == 200
        (run,) = json.loads(lil(db, "runs", "--json").stdout)
        assert run["cost"] == pytest.approx(1.25)
        assert "$1.25 reported" in lil(db, "show", "r").stdout
        # A completed named run replays: nothing is called, nothing counted again.
        assert self.attempt(lab, "raise,ok") == 0
        assert self.calls(lab) == 2
        assert self.shown(db)["usage"]["cost"] == pytest.approx(1.25)

    def test_a_call_cut_short_by_sigkill_after_it_reported_still_counts(
        self, lab: tuple[Path, Path, Path]
    ) -> None:
        db = lab[0]
        assert self.attempt(lab, "kill,kill,ok") == -signal.SIGKILL
        assert self.attempt(lab, "kill,kill,ok") == -signal.SIGKILL
        assert self.attempt(lab, "kill,kill,ok") == 0
        assert self.calls(lab) == 3
        rows_cost, tries_cost, tries = self.costs(db)
        assert tries == 2 and tries_cost == pytest.approx(1.0)
        assert rows_cost == pytest.approx(0.75)  # 'first' and the call that returned
        shown = self.shown(db)
        assert shown["usage"]["cost"] == pytest.approx(1.75)
        assert [(t["number"], t["ended"]) for t in shown["tries"]] == [
            (1, "crashed"),
            (2, "crashed"),
        ]
        assert self.attempt(lab, "kill,kill,ok") == 0  # replays
        assert self.shown(db)["usage"]["cost"] == pytest.approx(1.75)

    def test_a_crash_during_a_retried_call_does_not_spend_the_retry_budget(
        self, lab: tuple[Path, Path, Path]
    ) -> None:
        # Try 1 raises, try 2 reports usage and is SIGKILLed; the next attempt
        # continues the series: 2 of its 3 tries are left, both raise.
        assert self.attempt(lab, "raise,kill,raise", "retry") == -signal.SIGKILL
        assert self.calls(lab) == 2
        assert self.attempt(lab, "raise,kill,raise", "retry") == 1
        assert self.calls(lab) == 4
        shown = self.shown(lab[0])
        assert [(t["number"], t["ended"]) for t in shown["tries"]] == [
            (1, "failed"),
            (2, "crashed"),
            (3, "failed"),
            (4, "failed"),
        ]
        assert shown["usage"]["cost"] == pytest.approx(0.25 + 4 * 0.5)


class TestWhatReplaySaved:
    """ "Saved by replay" counts the steps an attempt really got back, nothing else."""

    def test_an_attempt_that_died_before_replaying_saved_nothing(self, tmp_path: Path) -> None:
        lab = (tmp_path / "journal.db", tmp_path / "calls.log", tmp_path / "paid.py")
        lab[2].write_text(PAID, encoding="utf-8")
        paid = TestEveryPaidCallIsCountedOnce()
        assert paid.attempt(lab, "ok", "kill-after-first") == -signal.SIGKILL
        assert paid.attempt(lab, "ok", "die-at-open") == -signal.SIGKILL
        shown = paid.shown(lab[0])
        assert shown["usage"]["cost"] == pytest.approx(0.25)
        assert shown["usage"]["replayed"]["cost"] is None  # attempt 2 replayed nothing
        assert "saved" not in lil(lab[0], "show", "r").stdout
        assert paid.attempt(lab, "ok") == 0  # replays 'first', runs 'ask'
        shown = paid.shown(lab[0])
        assert shown["usage"]["replayed"]["cost"] == pytest.approx(0.25)
        assert paid.attempt(lab, "ok") == 0  # replays both
        shown = paid.shown(lab[0])
        assert shown["usage"]["replayed"]["cost"] == pytest.approx(0.25 + 0.25 + 0.5)
        assert shown["usage"]["cost"] == pytest.approx(0.75)
