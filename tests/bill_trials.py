"""tests/bill_pipeline.py's trials run and checked from a test: the provider's bill never
passes the budget, and the journal counts every billed call (test_bills.py; test_crewai.py
runs CrewAI's in CrewAI's environment).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers import run_forked

from letitloop.inspection import find_run, list_runs, open_inspector, show_run

PIPELINE = Path(__file__).resolve().parent / "bill_pipeline.py"


def trials(
    mode: str,
    durability: str,
    folder: Path,
    n: int,
    seed: int,
    kills: str = "random",
    location: str | None = None,
    env: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """bill_pipeline's ``n`` trials of ``mode`` in ``folder``, one result per trial (``env``:
    the forking process's whole environment, this one's by default). The pipeline runs in
    a child forked from the tests' interpreter that imported letitloop (tests/helpers.py's
    ``run_forked``; a fresh one costs about 0.1 s of CPU more) and forks its attempts."""
    (results,) = together([job(mode, durability, folder, n, seed, kills, location)], env=env)
    return results


def job(
    mode: str,
    durability: str,
    folder: Path,
    n: int,
    seed: int,
    kills: str = "random",
    location: str | None = None,
) -> list[str]:
    """The pipeline's arguments for :func:`trials`' arguments."""
    return [mode, durability, str(folder), str(n), str(seed), kills, *([location] if location else [])]  # fmt: skip  # noqa: E501


def together(
    jobs: list[list[str]], env: dict[str, str] | None = None
) -> list[list[dict[str, Any]]]:
    """:func:`trials` of each of ``jobs`` (:func:`job`'s, each its folder its own), run one
    after another by one pipeline: their framework imported once. One list of results per
    job."""
    args = [arg for number, given in enumerate(jobs) for arg in ["+"] * bool(number) + given]
    done = run_forked(PIPELINE, *args, env=env)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    # An attempt that ended otherwise printed its traceback: show it with the trial.
    odd = [r for r in lines if r["outcome"] not in ("done", "refused")]
    assert not odd, (odd, done.stderr[-4000:])
    return [[r for r in lines if r["job"] == number] for number in range(len(jobs))]


def counted(location: str, goal: str) -> tuple[int, int]:
    """What the journal counts as the run's spend, read from outside the writer: the usage
    every call reported, and what calls reserved and never settled."""
    inspector = open_inspector(location)
    try:
        detail = show_run(inspector, find_run(inspector, goal))
    finally:
        inspector.close()
    held = sum(r.tokens or 0 for r in detail.reservations if r.settled_at is None)
    return detail.usage.tokens or 0, held


def counted_per_run(location: str, goal: str) -> list[int]:
    """Per run of ``goal``, what the journal counts as its spend (reported, and reserved
    and not settled), read from outside the writer."""
    inspector = open_inspector(location)
    try:
        details = [show_run(inspector, run) for run in list_runs(inspector, goal)]
    finally:
        inspector.close()
    return [
        (d.usage.tokens or 0) + sum(r.tokens or 0 for r in d.reservations if r.settled_at is None)
        for d in details
    ]


def check_request(results: list[dict[str, Any]], goal: str) -> None:
    """``check`` for a budget that bounds one request journaled in several runs
    (LangGraph's ``durable_model(budget=)``: a run per model call): the request's bill
    within it, and what the journal counts over the runs of ``goal`` (reported, and
    reserved and not settled) at least the bill and within the budget."""
    for r in results:
        assert r["outcome"] in ("done", "refused"), r
        assert r["bill"] <= r["budget"], r
        runs = counted_per_run(r["db"], goal)
        assert r["bill"] <= sum(runs) <= r["budget"], (r, runs)
    assert sum(r["kills"] for r in results) >= len(results) // 2


def estimates(location: str, goal: str) -> list[tuple[int, int]]:
    """``(reserved, settled)`` tokens of every settled reservation of ``goal``'s runs."""
    inspector = open_inspector(location)
    try:
        details = [show_run(inspector, run) for run in list_runs(inspector, goal)]
    finally:
        inspector.close()
    return [
        (r.tokens or 0, r.settled_tokens)
        for d in details
        for r in d.reservations
        if r.settled_tokens
    ]


def check(results: list[dict[str, Any]]) -> None:
    for r in results:
        assert r["outcome"] in ("done", "refused"), r
        assert r["bill"] <= r["budget"], r
        reported, held = counted(r["db"], r["goal"])
        # Every billed call is counted: by its usage, or by its reservation when its
        # process died before the usage was committed; and the count is within the budget.
        assert r["bill"] <= reported + held <= r["budget"], (r, reported, held)
    assert sum(r["kills"] for r in results) >= len(results) // 2  # the kills did happen


def summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The trials' counts, printed by the tests for the issue's closing note."""
    return {
        "trials": len(results),
        "kills": sum(r["kills"] for r in results),
        "done": sum(r["outcome"] == "done" for r in results),
        "refused": sum(r["outcome"] == "refused" for r in results),
        "highest bill": max(r["bill"] for r in results),
        "highest call bill": max(max(r["calls"].values(), default=0) for r in results),
        "budget": results[0]["budget"],
    }
