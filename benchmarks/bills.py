"""What a reservation costs a paid step, and the provider's bill under random kills.

    python benchmarks/bills.py cost [--small 300] [--large 900]
    python benchmarks/bills.py trials [--trials 40] [--seed 1]

``cost``: instructions per step, counted by valgrind's cachegrind
(``--cache-sim=no``, ``PYTHONHASHSEED=0``) as the difference of a run of
``--large`` steps and one of ``--small``, so the start-up cancels out. Each
step's function reports usage (``usage(input_tokens=…, output_tokens=…)``);
the variants: no budget; no budget with ``reserve()`` (a no-op); a budget
without ``reserve()``; a budget with ``reserve(prompt, max_tokens=…)`` (its
estimate, the check, one committed row, and the settle in the report's
commit). Load on the machine does not move these counts; a run of one tree
moves by well under 1 % (SQLite's page use).

``trials``: tests/bill_pipeline.py's trials (attempts SIGKILLed at random
points, inside and between calls), per mode, and the largest bill against
the budget (LangGraph's: one request's, its model calls in several runs);
``unreserved`` is the same pipeline without ``reserve()``, every
attempt killed just after the provider billed (the bill before this change).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROGRAM = """
import sys
from letitloop import Budget, Journal, reserve, usage

variant, n, db = sys.argv[1], int(sys.argv[2]), sys.argv[3]
budget = Budget(tokens=10**12) if variant.startswith("budget") else None
reserving = variant.endswith("reserve")

def ask(prompt):
    if reserving:
        reserve(prompt, max_tokens=200)
    usage(input_tokens=100, output_tokens=50)
    return "answer"

with Journal("bench", path=db, budget=budget) as j:
    for i in range(n):
        j.step("ask", ask, "question")
"""

VARIANTS = ("plain", "plain+reserve", "budget", "budget+reserve")


def instructions(variant: str, n: int) -> int:
    """Instructions of one run of ``n`` steps (the whole process, cachegrind)."""
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "steps.py"
        script.write_text(PROGRAM)
        env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(ROOT)}
        done = subprocess.run(
            [
                "valgrind",
                "--tool=cachegrind",
                "--cache-sim=no",
                f"--cachegrind-out-file={folder}/out",
                sys.executable,
                str(script),
                variant,
                str(n),
                str(Path(folder) / "j.db"),
            ],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    assert found, done.stderr[-2000:]
    return int(found.group(1).replace(",", ""))


def cost(small: int, large: int) -> None:
    print(f"instructions per step ({large} steps - {small} steps) / {large - small}")
    per = {}
    for variant in VARIANTS:
        per[variant] = (instructions(variant, large) - instructions(variant, small)) / (
            large - small
        )
        print(f"  {variant:<16} {per[variant]:>10,.0f}", flush=True)
    extra = per["budget+reserve"] - per["budget"]
    print(f"  a reservation costs {extra:,.0f} instructions a step with a budget")
    print(f"  reserve() without a budget: {per['plain+reserve'] - per['plain']:+,.0f}")


def trials(n: int, seed: int) -> None:
    pipeline = ROOT / "tests" / "bill_pipeline.py"
    runs = [
        ("sync", "process", "random"),
        ("sync", "power", "random"),
        ("async", "process", "random"),
        ("async", "power", "random"),
        ("smolagents", "process", "random"),
        ("pydantic_ai", "process", "random"),
        ("openai_agents", "process", "random"),
        ("llamaindex", "process", "random"),
        ("langgraph", "process", "random"),
        ("langgraph_graph", "process", "random"),
        ("sync", "process", "billed"),
        ("unreserved", "process", "billed"),
    ]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}"}
    print("mode           durability kills   trials attempts kills  max bill / budget  outcomes")
    for mode, durability, kills in runs:
        count = 1 if kills == "billed" else n
        with tempfile.TemporaryDirectory() as folder:
            args = [mode, durability, folder, str(count), str(seed), kills]
            done = subprocess.run(
                [sys.executable, str(pipeline), *args],
                capture_output=True,
                text=True,
                env=env,
                check=True,
            )
        results = [json.loads(line) for line in done.stdout.splitlines()]
        bills = [r["bill"] for r in results]
        outcomes: dict[str, int] = {}
        for r in results:
            outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
        print(
            f"{mode:<14} {durability:<10} {kills:<7} {len(results):>6} "
            f"{sum(r['attempts'] for r in results):>8} {sum(r['kills'] for r in results):>5}  "
            f"{max(bills):>8,} / {results[0]['budget']:<7,} {outcomes}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    c = sub.add_parser("cost")
    c.add_argument("--small", type=int, default=300)
    c.add_argument("--large", type=int, default=900)
    t = sub.add_parser("trials")
    t.add_argument("--trials", type=int, default=40)
    t.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.what == "cost":
        cost(args.small, args.large)
    else:
        trials(args.trials, args.seed)


if __name__ == "__main__":
    main()
