"""The journal on disk after close, and what shrinking the -wal at the last close costs.

    python benchmarks/disk.py [--repeats 7] [--runs 170]

Two tables, in one run:

1. **The -wal at the last close, side by side.** ``stores.WAL_TRUNCATE_BYTES``
   and ``WAL_TRUNCATE_ROWS`` decide whether the last close of a file in a
   process checkpoints and truncates its ``-wal``: never, always, above a
   size, or above a size once enough rows were written (the default).
   For each setting, in alternating blocks (one file per setting, warmed
   first, so each keeps its own ``-wal`` history): a run of 3 small steps
   opened and closed in a warm process, ``--runs`` runs a block (enough that
   a truncation every ~17 runs shows in the mean), the block's mean per run,
   then the median over ``--repeats`` blocks and its ratio to "never" taken
   within each round; and the ``-wal`` left after a 1,000-step run and after
   a block of short runs.
2. **Bytes on disk after close** with the default setting, read with
   ``os.stat`` while this process still holds its idle connection (as a
   program that goes on after ``close()`` does): the file and its ``-wal``
   (the ``-shm``, 32 KiB, is SQLite's index of the ``-wal``, removed when the
   last connection closes; not counted). An empty journal (its schema, one
   run; under the limit, so not checkpointed), then 1,000 and 10,000 steps of
   small results (the 70-byte dict of bench_steps.py) and of 1 KB results,
   each one run in a fresh file: the whole per 1,000 steps, and the 9,000
   steps from 1,000 to 10,000 per 1,000 (the fixed cost taken out).

What it does not show: a page cache that is cold, or a disk slower than this
VM's (the checkpoint's cost is its fsync); several processes on one file.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import environment, table
from benchmarks.overhead import SMALL
from letitloop import Journal
from letitloop.stores.sqlite import pool as stores

KB: dict[str, Any] = {"text": "x" * 1000}

#: The -wal settings compared: (label, WAL_TRUNCATE_BYTES, WAL_TRUNCATE_ROWS).
SETTINGS = (
    ("never (before)", sys.maxsize, 0),
    ("always", 0, 0),
    ("above 1 MiB", 1 << 20, 0),
    ("above 3 MiB", 3 << 20, 0),
    (
        f"above {stores.WAL_TRUNCATE_BYTES >> 10} KiB after {stores.WAL_TRUNCATE_ROWS} rows "
        "(default)",
        stores.WAL_TRUNCATE_BYTES,
        stores.WAL_TRUNCATE_ROWS,
    ),
)


def size(path: Path | str) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


def on_disk(db: Path) -> tuple[int, int]:
    """(file, -wal) bytes now."""
    return size(db), size(f"{db}-wal")


def record(db: Path, steps: int, value: Any = SMALL) -> tuple[int, int]:
    """One run of ``steps`` steps returning ``value`` in ``db``; (file, -wal) bytes after close."""

    def produce() -> Any:
        return value

    with Journal("disk", path=db) as j:
        for i in range(steps):
            j.step(f"s{i}", produce)
    return on_disk(db)


def short_runs(db: Path, runs: int, first: int) -> float:
    """Mean seconds per run of 3 small steps, opened and closed, ``runs`` in a row."""

    def produce() -> Any:
        return SMALL

    t0 = time.perf_counter()
    for r in range(first, first + runs):
        with Journal("short", path=db, input=r) as j:
            j.step("a", produce)
            j.step("b", produce)
            j.step("c", produce)
    return (time.perf_counter() - t0) / runs


def wal_settings(folder: Path, repeats: int, runs: int) -> list[list[str]]:
    default = stores.WAL_TRUNCATE_BYTES, stores.WAL_TRUNCATE_ROWS
    files = {label: folder / f"short{i}.db" for i, (label, *_) in enumerate(SETTINGS)}
    per_run: dict[str, list[float]] = {label: [] for label, *_ in SETTINGS}
    ratios: dict[str, list[float]] = {label: [] for label, *_ in SETTINGS}
    left: dict[str, int] = {}
    long_left: dict[str, int] = {}
    try:
        for label, limit, rows in SETTINGS:
            stores.WAL_TRUNCATE_BYTES, stores.WAL_TRUNCATE_ROWS = limit, rows
            short_runs(files[label], runs, -runs)  # warm: the file made, its connection kept
        for rnd in range(repeats):
            this: dict[str, float] = {}
            for label, limit, rows in SETTINGS:
                stores.WAL_TRUNCATE_BYTES, stores.WAL_TRUNCATE_ROWS = limit, rows
                this[label] = short_runs(files[label], runs, rnd * runs)
                left[label] = size(f"{files[label]}-wal")
                per_run[label].append(this[label])
            base = this[SETTINGS[0][0]]
            for label in this:
                ratios[label].append(this[label] / base)
        for i, (label, limit, rows) in enumerate(SETTINGS):
            stores.WAL_TRUNCATE_BYTES, stores.WAL_TRUNCATE_ROWS = limit, rows
            long_left[label] = record(folder / f"long{i}.db", 1000)[1]
    finally:
        stores.WAL_TRUNCATE_BYTES, stores.WAL_TRUNCATE_ROWS = default
    return [
        [
            label,
            f"{statistics.median(per_run[label]) * 1e3:.3f} ms",
            f"{statistics.median(ratios[label]):.2f}x",
            f"{long_left[label] / 1024:,.0f} KiB",
            f"{left[label] / 1024:,.0f} KiB",
        ]
        for label, *_ in SETTINGS
    ]


def disk_rows(folder: Path) -> list[list[str]]:
    empty = record(folder / "empty.db", 0)
    rows = [["empty journal (schema, one run)", *_kib(empty), "", ""]]
    for label, value in (("small", SMALL), ("1 KB", KB)):
        sizes = {n: sum(record(folder / f"{label}{n}.db", n, value)) for n in (1_000, 10_000)}
        for n, total in sizes.items():
            f, w = on_disk(folder / f"{label}{n}.db")
            marginal = (total - sizes[1_000]) / 9 if n == 10_000 else None
            rows.append(
                [
                    f"{n:,} steps of {label} results",
                    *_kib((f, w)),
                    f"{total / n * 1000 / 1024:,.0f} KiB",
                    f"{marginal / 1024:,.0f} KiB" if marginal is not None else "",
                ]
            )
    return rows


def _kib(sizes: tuple[int, int]) -> list[str]:
    f, w = sizes
    return [f"{f / 1024:,.0f} KiB", f"{w / 1024:,.0f} KiB", f"{(f + w) / 1024:,.0f} KiB"]


def disk_after_1000(folder: Path) -> int:
    """File plus -wal bytes after close of one run of 1,000 small steps in a fresh file."""
    return sum(record(folder / "disk1000.db", 1000))


def disk_per_1000_more(folder: Path) -> float:
    """Bytes each 1,000 small steps add from 1,000 to 10,000 in one run (fixed cost out)."""
    ten = sum(record(folder / "more10000.db", 10_000))
    return (ten - sum(record(folder / "more1000.db", 1000))) / 9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--runs", type=int, default=170, help="short runs per block")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        settings = wal_settings(Path(d), args.repeats, args.runs)
        disk = disk_rows(Path(d))
    print(environment())
    print(
        f"\n## The -wal at the last close: {args.runs} runs of 3 steps a block, "
        f"median of {args.repeats} blocks\n"
    )
    print(
        table(
            [
                "-wal checkpointed and truncated at the last close",
                "3-step run, open + close",
                "ratio",
                "-wal after a 1,000-step run",
                "-wal after the short runs",
            ],
            settings,
        )
    )
    print("\n## Bytes on disk after close (process still running, its connection idle)\n")
    print(
        table(
            [
                "one run of",
                "file",
                "-wal",
                "file + -wal",
                "per 1,000 steps",
                "per 1,000 more (1,000 to 10,000)",
            ],
            disk,
        )
    )


if __name__ == "__main__":
    main()
