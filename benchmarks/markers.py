"""What a marker costs next to a step, in one process, one journal file.

Three loops, side by side in one run, each over N fresh names in a new run:

- step:         ``j.step(f"s{i}", noop)``: one INSERT transaction
- marker:       ``with j.atomic_marker(f"m{i}")``: process lock + lock file +
                claim transaction + commit transaction (the first entry)
- marker, done: entering a marker that is already done: one SELECT, no lock

Bias: a warm page cache, an idle local disk, a trivial body. Real side
effects (a network call) dwarf all of these. Medians of per-call times in
microseconds; run it on an otherwise idle machine.

    python benchmarks/markers.py [N]
"""

from __future__ import annotations

import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

from letitloop import Journal


def noop() -> None:
    return None


def main(n: int) -> None:
    print(
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"{platform.system()} {platform.machine()}, N={n}"
    )
    for durability in ("process", "power"):
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "journal.db"
            with Journal("bench", path=db, durability=durability) as j:  # type: ignore[arg-type]
                timings: dict[str, list[float]] = {"step": [], "marker": [], "marker, done": []}
                for i in range(n):
                    t0 = time.perf_counter()
                    j.step(f"s{i}", noop)
                    t1 = time.perf_counter()
                    with j.atomic_marker(f"m{i}") as m:
                        assert m
                    t2 = time.perf_counter()
                    with j.atomic_marker(f"m{i}") as m:
                        assert not m
                    t3 = time.perf_counter()
                    timings["step"].append(t1 - t0)
                    timings["marker"].append(t2 - t1)
                    timings["marker, done"].append(t3 - t2)
            for what, ts in timings.items():
                print(
                    f"durability={durability:7s} {what:13s} median "
                    f"{statistics.median(ts) * 1e6:8.1f} us"
                )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
