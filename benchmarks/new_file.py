"""A new journal file and its first step, in one process, beside ``sqlite3`` doing the same writes.

    python benchmarks/new_file.py [--trials 200] [--profile]

What a program pays the first time it journals to a file that does not exist
yet, import aside (``import letitloop`` is timed apart, in fresh
interpreters): ``Journal(goal, path=new)`` opened, one step committed, the
journal closed. Three ways, in alternating order, each trial on a new file
in one temporary folder:

- ``letitloop``: ``with Journal("g", path=p) as j: j.step("a", str, 1)``;
  the time to the step committed (``open + first step``) and to the close.
- ``sqlite3, same schema``: the least those writes cost with Python's
  ``sqlite3``, set as the journal sets a new file: 1 KiB pages,
  ``synchronous=OFF`` while the file is created, WAL, the journal's whole
  schema (``migrations/schema.sql``) in one transaction, then
  ``synchronous=NORMAL`` (``durability="process"``), a goal's table and one
  row, each committed.
- ``sqlite3, one table``: the same without the schema: the floor of any
  journal that keeps its rows in a new SQLite file.

Each figure is the minimum and the median over the trials: wall to the step
committed, its CPU (``time.process_time``), and wall to the close (SQLite
checkpoints the file and removes its ``-wal`` when its last connection
closes), after one trial of each way not counted (a process's first open
loads the file layer and the migrations, once).
``--profile`` prints where a letitloop trial's time goes (cProfile, 100
trials, by cumulative time). Bias: wall moves with the machine's load and
the disk; the minimum is the machine at its least loaded, the CPU figures
move least.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_steps import import_time
from letitloop import Journal
from letitloop.stores.sqlite.connect import PAGE_SIZE
from letitloop.stores.sqlite.schema_file import current_schema

#: One trial: (wall seconds to the first step committed, its CPU seconds, wall to the close).
Trial = tuple[float, float, float]


def letitloop_trial(path: Path) -> Trial:
    c0, t0 = time.process_time(), time.perf_counter()
    with Journal("g", path=path) as j:
        j.step("a", str, 1)
        stepped, cpu = time.perf_counter(), time.process_time()
    return stepped - t0, cpu - c0, time.perf_counter() - t0


def _sqlite(path: Path, schema: tuple[str, ...]) -> Trial:
    c0, t0 = time.process_time(), time.perf_counter()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")  # the journal's new files' pages
    conn.execute("PRAGMA synchronous = OFF")  # as the journal creates a file: no fsync
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("BEGIN IMMEDIATE")
    for statement in schema:
        conn.execute(statement)
    conn.execute("COMMIT")
    conn.execute("PRAGMA synchronous = NORMAL")  # durability="process" from now on
    conn.execute("CREATE TABLE journal_g (key TEXT PRIMARY KEY, status TEXT, result TEXT)")
    conn.execute("INSERT INTO journal_g VALUES ('a', 'done', '\"1\"')")
    stepped, cpu = time.perf_counter(), time.process_time()
    conn.close()
    return stepped - t0, cpu - c0, time.perf_counter() - t0


def sqlite_same_schema(path: Path) -> Trial:
    schema = current_schema()
    assert schema is not None, "migrations/schema.sql is not this version's"
    return _sqlite(path, schema)


def sqlite_one_table(path: Path) -> Trial:
    return _sqlite(path, ())


WAYS: dict[str, Callable[[Path], Trial]] = {
    "letitloop": letitloop_trial,
    "sqlite3, same schema": sqlite_same_schema,
    "sqlite3, one table": sqlite_one_table,
}


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    print(
        f"Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs"
    )
    with tempfile.TemporaryDirectory() as d:
        files = iter(Path(d) / f"new{i}.db" for i in range(10**9))
        for way in WAYS.values():  # not counted: a process's first open loads the file layer
            way(next(files))
        if args.profile:
            import cProfile
            import pstats

            profile = cProfile.Profile()
            profile.enable()
            for _ in range(100):
                letitloop_trial(next(files))
            profile.disable()
            pstats.Stats(profile).sort_stats("cumulative").print_stats(30)
            return
        trials: dict[str, list[Trial]] = {name: [] for name in WAYS}
        for _ in range(args.trials):
            for name, way in WAYS.items():
                trials[name].append(way(next(files)))
    imports = sorted(import_time() for _ in range(5))
    print(f"\n{args.trials} trials each, alternating; min / median")
    print(f"{'':24} {'to the step committed':>24} {'its CPU':>24} {'to the close':>24}")
    for name, got in trials.items():
        cells = []
        for i in range(3):
            values = [t[i] for t in got]
            cells.append(f"{ms(min(values))} / {ms(statistics.median(values))}")
        print(f"{name:24} {cells[0]:>24} {cells[1]:>24} {cells[2]:>24}")
    print(f"\nimport letitloop, in a fresh interpreter: {ms(imports[0])} / {ms(imports[2])} (5)")


if __name__ == "__main__":
    main()
