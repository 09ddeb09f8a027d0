"""Per-call overhead of JournaledLM against bare DSPy on its offline DummyLM.

    python benchmarks/bench_dspy.py [--runs 60] [--calls 4]

A program of ``--calls`` ``dspy.Predict`` calls on ``DummyLM`` (stateless mode:
answers chosen by the prompt). Three rows, timed in rounds that run each once
(a busy moment of the shared machine falls on all of them alike), medians of
``--runs`` rounds:

- bare: the program on ``DummyLM`` (what DSPy itself costs: prompt formatting,
  parsing, its history);
- durable, fresh: ``JournaledLM(DummyLM)`` inside ``with Journal`` on a new
  named run, each call a step written to the file;
- durable, replay: the same completed run opened again, every call replayed.

The per-call overhead is (durable - bare) / calls, the journal's open and close
included. Bias, stated: ``durability="process"`` (WAL, synchronous=NORMAL);
DummyLM answers in microseconds, so a real model call makes the overhead a far
smaller share than here. The file lives in a temporary folder.
"""

from __future__ import annotations

import argparse
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

import dspy
from dspy.utils.dummies import DummyLM

from letitloop import Journal, __version__
from letitloop.adapters.dspy import JournaledLM


def program(calls: int) -> list[str]:
    predict = dspy.Predict("question -> answer")
    return [predict(question=f"q{i}").answer for i in range(calls)]


def timed_rounds(runs: int, calls: int, db: Path) -> dict[str, list[float]]:
    answers = {f"q{i}": {"answer": f"a{i}"} for i in range(calls)}
    bare, durable = DummyLM(answers), JournaledLM(DummyLM(answers))
    times: dict[str, list[float]] = {"bare": [], "durable, fresh": [], "durable, replay": []}
    for i in range(runs):
        with dspy.context(lm=bare):
            start = time.perf_counter()
            program(calls)
            times["bare"].append(time.perf_counter() - start)
        with dspy.context(lm=durable):
            start = time.perf_counter()
            with Journal("bench", run=f"r{i}", path=db):
                program(calls)
            times["durable, fresh"].append(time.perf_counter() - start)
            start = time.perf_counter()
            with Journal("bench", run=f"r{i}", path=db):
                program(calls)
            times["durable, replay"].append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60, help="rounds (default 60)")
    parser.add_argument("--calls", type=int, default=4, help="LM calls per program (default 4)")
    args = parser.parse_args()
    print(
        f"letitloop {__version__}, dspy {version('dspy')}, "
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, {sys.platform}"
    )
    with tempfile.TemporaryDirectory() as folder:
        times = timed_rounds(args.runs, args.calls, Path(folder) / "journal.db")
    bare = statistics.median(times["bare"])
    print(f"{'row':<18}{'per program':>14}{'vs bare':>10}{'per call over bare':>22}")
    for row, samples in times.items():
        median = statistics.median(samples)
        extra = (median - bare) / args.calls
        print(f"{row:<18}{median * 1e3:>11.2f} ms{median / bare:>9.2f}x{extra * 1e3:>19.3f} ms")
    print(f"{args.calls} LM calls per program")


if __name__ == "__main__":
    main()
