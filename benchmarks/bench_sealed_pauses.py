"""CPU per replayed sleep and run-scoped marker of a sealed run, with the key and without.

A run of N sleeps and N markers is written once with the key, then replayed whole
in alternating blocks with and without it (time.process_time, medians); the
difference over 2N rows is the key's cost per replayed row, the open's check of
the chain included (docs/audit.md, "A sealed run replays only what its seal
covers"). Usage: python benchmarks/bench_sealed_pauses.py [BLOCKS] [N].
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from letitloop import Journal

KEY = "k" * 32


def program(j: Journal, n: int) -> None:
    for i in range(n):
        j.sleep(f"s{i}", 0)
    for i in range(n):
        with j.atomic_marker(f"m{i}"):
            pass


def replay(db: Path, seal: str | None, n: int) -> float:
    began = time.process_time()
    with Journal("g", path=db, run="r", seal=seal) as j:
        program(j, n)
    return time.process_time() - began


def main() -> None:
    blocks = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    db = Path(tempfile.mkdtemp()) / "journal.db"
    with Journal("g", path=db, run="r", seal=KEY) as j:
        program(j, n)
    with_key, without = [], []
    for _ in range(blocks):
        with_key.append(replay(db, KEY, n))
        without.append(replay(db, None, n))
    a, b = statistics.median(with_key), statistics.median(without)
    print(
        f"{2 * n} rows replayed: {a * 1e3:.1f} ms CPU with the key, {b * 1e3:.1f} ms without; "
        f"the key's cost per replayed row: {(a - b) / (2 * n) * 1e6:.1f} us"
    )


if __name__ == "__main__":
    main()
