"""A new journal file's page size: bytes on disk and CPU time per step, side by side.

    python benchmarks/page_size.py [--rounds 5] [--sizes 1024,4096]

For each page size (``letitloop.stores.sqlite.connect.PAGE_SIZE``, set for the files this
process makes): the bytes on disk after close (file + ``-wal``, as
``disk.py`` reads them) of an empty journal, of one run of 1,000 small steps,
per 1,000 more small steps (1,000 to 10,000 in one run) and per 1,000 more
steps of 1 KB results; then, in alternating rounds, the CPU time (user +
system, ``time.process_time``: the machine's load moves it less than wall
time) of a fresh step returning a small dict, a 1 KB and a 100 KB result, of
opening a run of 10,000 steps and of replaying one of its steps. Minimum over
the rounds.

What it does not show: wall time (a commit's ``write()`` and, in power mode,
its fsync), a cold page cache, results much larger than 100 KB, or the
LangGraph saver's checkpoints (blobs), which live in the same file.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import environment, table
from benchmarks.disk import KB, record
from benchmarks.overhead import LARGE, SMALL
from letitloop import Journal
from letitloop.stores.sqlite import connect

clock = time.process_time


def small() -> Any:
    return SMALL


def fresh(value: Any, n: int) -> float:
    """CPU seconds per fresh step returning ``value``, in a new file."""
    with tempfile.TemporaryDirectory() as d, Journal("b", path=Path(d) / "j.db") as j:
        t0 = clock()
        for i in range(n):
            j.step(f"s{i}", lambda: value)
        return (clock() - t0) / n


def open_and_replay(db: Path, n: int) -> tuple[float, float]:
    """CPU seconds to open the run of ``n`` steps in ``db``, and per replayed step."""
    t0 = clock()
    with Journal("b", run="r", path=db) as j:
        t1 = clock()
        for i in range(n):
            j.step(f"s{i}", small)
        t2 = clock()
    return t1 - t0, (t2 - t1) / n


def sizes(folder: Path) -> list[str]:
    """KiB: empty, 1,000 small steps, per 1,000 more small, per 1,000 more of 1 KB."""
    empty = sum(record(folder / "empty.db", 0))
    small1, small10 = (sum(record(folder / f"s{n}.db", n)) for n in (1000, 10_000))
    kb1, kb10 = (sum(record(folder / f"k{n}.db", n, KB)) for n in (1000, 10_000))
    return [
        f"{empty / 1024:,.0f} KiB",
        f"{small1 / 1024:,.0f} KiB",
        f"{(small10 - small1) / 9 / 1024:,.0f} KiB",
        f"{(kb10 - kb1) / 9 / 1024:,.0f} KiB",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sizes", default="1024,4096")
    args = parser.parse_args()
    page_sizes = [int(s) for s in args.sizes.split(",")]
    default = connect.PAGE_SIZE
    disk: dict[int, list[str]] = {}
    cpu: dict[tuple[int, str], list[float]] = {}
    try:
        with tempfile.TemporaryDirectory() as d:
            recorded = {}
            for size in page_sizes:
                connect.PAGE_SIZE = size
                folder = Path(d) / str(size)
                folder.mkdir()
                disk[size] = sizes(folder)
                recorded[size] = folder / "replay.db"
                with Journal("b", run="r", path=recorded[size]) as j:
                    for i in range(10_000):
                        j.step(f"s{i}", small)
            for _ in range(args.rounds):
                for size in page_sizes:
                    connect.PAGE_SIZE = size
                    cpu.setdefault((size, "small"), []).append(fresh(SMALL, 1000))
                    cpu.setdefault((size, "1 KB"), []).append(fresh(KB, 1000))
                    cpu.setdefault((size, "100 KB"), []).append(fresh(LARGE, 100))
                    opened, replayed = open_and_replay(recorded[size], 10_000)
                    cpu.setdefault((size, "open"), []).append(opened)
                    cpu.setdefault((size, "replay"), []).append(replayed)
    finally:
        connect.PAGE_SIZE = default
    print(environment())
    print(f"\nCPU times: minimum of {args.rounds} alternating rounds\n")
    print(
        table(
            [
                "page size",
                "empty journal",
                "1,000 small steps",
                "per 1,000 more small",
                "per 1,000 more of 1 KB",
                "fresh step, small",
                "fresh step, 1 KB",
                "fresh step, 100 KB",
                "open 10,000 steps",
                "replay a step",
            ],
            [
                [
                    f"{size:,} B",
                    *disk[size],
                    f"{min(cpu[(size, 'small')]) * 1e6:.1f} µs",
                    f"{min(cpu[(size, '1 KB')]) * 1e6:.1f} µs",
                    f"{min(cpu[(size, '100 KB')]) * 1e6:.0f} µs",
                    f"{min(cpu[(size, 'open')]) * 1e3:.1f} ms",
                    f"{min(cpu[(size, 'replay')]) * 1e6:.2f} µs",
                ]
                for size in page_sizes
            ],
        )
    )


if __name__ == "__main__":
    main()
