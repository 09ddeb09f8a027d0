"""``lil crashtest`` over every program of ``examples/``: every kill point, and what it cost.

    python -m benchmarks.crashtest_examples [--only NAME,...] [--max-kills N] [--no-write]

Each example runs as tests/crashtest_examples.py says (its command, its
driver, what of its output is compared), through the crash test's Python
API: once for reference, then killed with SIGKILL at each of its kill points
(before each step, at its body's start, after it returned and before its
record, at each marker body's start) and rerun until it finishes. CrewAI's
example runs in CrewAI's own environment (tests/crewai_env.py makes
``.venvs/crewai``), through ``lil crashtest`` there; it is skipped, saying so,
when that environment is not made. The table gives, per example, the kill
points tried, the reruns, the repeats (must be 0), the other problems
(must be 0), the calls in flight at a kill paid again (allowed), the wall
time and the CPU time (user+sys) of its processes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from crashtest_examples import ALL, BY_NAME, Example  # noqa: E402

from letitloop.errors import LetItLoopError  # noqa: E402
from letitloop.supervision.crashtest import crashtest, describe  # noqa: E402

#: CrewAI's environment's interpreter (--crewai-python: another checkout's, say).
CREWAI_PYTHON = ROOT / ".venvs" / "crewai" / "bin" / "python"


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def in_crewai_env(example: Example, max_kills: int | None) -> dict[str, object]:
    """``lil crashtest`` of the example with CrewAI's environment's interpreter."""
    options = ["--output", example.output] + (["--max-kills", str(max_kills)] if max_kills else [])
    options += ["--effects", example.effects] if example.effects else []
    command = example.command(str(CREWAI_PYTHON))
    done = subprocess.run(
        [str(CREWAI_PYTHON), "-m", "letitloop", "crashtest", *options, "--", *command],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    out = done.stdout
    head = re.search(r"kill points: (\d+) tried of (\d+), (\d+) reruns, ([\d.]+) s", out)
    if head is None:
        raise SystemExit(f"crashtest of {example.file} failed:\n{out}{done.stderr}")
    repeats = re.search(r"^repeats: (\d+)", out, re.M)
    problems = re.search(r"^other problems: (\d+)", out, re.M)
    allowed = re.search(r"^in flight, paid again \(allowed\): (\d+)", out, re.M)
    return {
        "tried": int(head[1]),
        "points": int(head[2]),
        "reruns": int(head[3]),
        "seconds": float(head[4]),
        "repeats": int(repeats[1]) if repeats else -1,
        "problems": int(problems[1]) if problems else 0,
        "allowed": int(allowed[1]) if allowed else 0,
        "report": out.rstrip().splitlines(),
    }


def one(example: Example, max_kills: int | None) -> dict[str, object]:
    if example.env == "crewai":
        return in_crewai_env(example, max_kills)
    command = example.command()
    report = crashtest(
        command, output=example.output, effects=example.effects, max_kills=max_kills, timeout=300
    )
    return {
        "tried": report.tried,
        "points": report.points,
        "reruns": report.reruns,
        "seconds": report.seconds,
        "repeats": len(report.repeats),
        "problems": len(report.problems),
        "allowed": len(report.allowed),
        "report": describe(report, command),
    }


def timed(example: Example, max_kills: int | None, crewai: str) -> dict[str, object]:
    """The example's crash test, with its wall time and its processes' CPU time (measured in
    the process that runs it: a worker of ``--jobs``, whose children are its own)."""
    global CREWAI_PYTHON
    CREWAI_PYTHON = Path(crewai)
    cpu = children_cpu()
    began = time.monotonic()
    found = one(example, max_kills)
    return {**found, "wall": time.monotonic() - began, "cpu": children_cpu() - cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", help="the examples to run, by name (comma-separated), in order")
    parser.add_argument("--max-kills", type=int, help="kill points per example (default: all)")
    parser.add_argument("--jobs", type=int, default=1, help="examples crash-tested at once")
    parser.add_argument("--no-write", action="store_true", help="do not write results/")
    parser.add_argument("--crewai-python", default=str(CREWAI_PYTHON),
                        help="CrewAI's environment's python (default: .venvs/crewai's, made "
                        "by tests/crewai_env.py --make)")  # fmt: skip
    args = parser.parse_args()
    # In --only's order (the longest first keeps --jobs' workers busy to the end).
    chosen = [BY_NAME[name] for name in args.only.split(",")] if args.only else list(ALL)
    for example in [e for e in chosen if e.env == "crewai"]:
        if not Path(args.crewai_python).exists():
            print(f"{example.file}: skipped: run python tests/crewai_env.py --make first")
            chosen.remove(example)
    began = time.monotonic()
    finished: dict[str, dict[str, object]] = {}
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(timed, e, args.max_kills, args.crewai_python): e for e in chosen}
        for future in as_completed(futures):
            example = futures[future]
            try:
                finished[example.name] = future.result()
            except LetItLoopError as failed:  # it hung past --timeout, say: a finding
                finished[example.name] = {
                    "tried": 0, "points": 0, "reruns": 0, "repeats": 0, "problems": 1,
                    "allowed": 0, "wall": 0.0, "cpu": 0.0, "report": [str(failed)],
                }  # fmt: skip
            lines = finished[example.name]["report"]
            print("\n".join(str(line) for line in lines), flush=True)  # type: ignore[attr-defined]
    wall = time.monotonic() - began
    rows = []
    results = {}
    done = [finished[e.name] for e in chosen]
    for example, found in zip(chosen, done, strict=True):
        results[example.name] = {k: v for k, v in found.items() if k != "report"}
        rows.append([
            example.file, f"{found['tried']} of {found['points']}", found["reruns"],
            found["repeats"], found["problems"], found["allowed"], f"{found['wall']:.0f} s",
            f"{found['cpu']:.1f} s",
        ])  # fmt: skip
    rows.append([
        "all", sum(int(f["tried"]) for f in done), sum(int(f["reruns"]) for f in done),  # type: ignore[call-overload]
        sum(int(f["repeats"]) for f in done), sum(int(f["problems"]) for f in done),  # type: ignore[call-overload]
        sum(int(f["allowed"]) for f in done), f"{wall:.0f} s ({args.jobs} at once)",  # type: ignore[call-overload]
        f"{sum(float(f['cpu']) for f in done):.1f} s",  # type: ignore[arg-type]
    ])  # fmt: skip
    if not args.no_write:
        from benchmarks._report import publish, table

        publish(
            "crashtest_examples",
            "lil crashtest over every example",
            "python -m benchmarks.crashtest_examples"
            + (f" --max-kills {args.max_kills}" if args.max_kills else "")
            + (f" --jobs {args.jobs}" if args.jobs > 1 else ""),
            table(
                ["example", "kill points", "reruns", "repeats", "problems",
                 "in flight, paid again (allowed)", "wall", "CPU (user+sys)"],
                rows,
            ),
        )  # fmt: skip
    print(json.dumps(results))


if __name__ == "__main__":
    main()
