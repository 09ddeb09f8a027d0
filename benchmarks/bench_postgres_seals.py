"""The cost of a seal key and of an encryption key on a PostgreSQL step, side by side.

    python benchmarks/bench_postgres_seals.py [--url postgresql://…] [--steps 300] [--repeats 5]

Without ``--url`` it starts a throwaway server as the tests do
(tests/pg_server.py: a Unix socket, ``fsync=off``). Four journals of the
same server write fresh steps in turn, one step each in every round (so a
machine's load falls on all alike): no key, ``seal=``, ``encryption_key=``,
both. Each row is the median of its single timings, µs per fresh step of a
small result, then the round trips of one step counted on the wire (libpq's
trace: one ``Sync`` or ``Query`` message per round trip).

Its bias: a Unix socket, no network latency, which is what a round trip
costs most on a real server: there, the sealed step's extra round trips
weigh more than here.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

SEAL = "s" * 16 + "-bench-seal-key"
ENCRYPTION = "e" * 16 + "-bench-encryption"
KINDS: dict[str, dict[str, str]] = {
    "no key": {},
    "seal=": {"seal": SEAL},
    "encryption_key=": {"encryption_key": ENCRYPTION},
    "both": {"seal": SEAL, "encryption_key": ENCRYPTION},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a postgresql:// URL (default: a throwaway server)")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    import pg_server
    import psycopg

    from letitloop import Journal

    url = args.url or pg_server.location()
    times: dict[str, list[float]] = {k: [] for k in KINDS}
    trips: dict[str, int] = {}
    for r in range(args.repeats):
        journals = {
            kind: Journal("bench", run=f"{kind}-{r}", path=url, **keys)  # type: ignore[arg-type]
            for kind, keys in KINDS.items()
        }
        for j in journals.values():
            j.open()
        try:
            single: dict[str, list[float]] = {k: [] for k in KINDS}
            for i in range(args.steps):
                for kind, j in journals.items():
                    t = time.perf_counter()
                    j.step(f"s{i}", str, i)
                    single[kind].append((time.perf_counter() - t) * 1e6)
            for kind, j in journals.items():
                times[kind].append(statistics.median(single[kind]))
                store: Any = j.store
                trips[kind] = pg_server.round_trips(store.conn, lambda j=j: j.step("one", str, 1))
        finally:
            for j in journals.values():
                j.close()
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SHOW server_version").fetchone()
        server = row[0] if row else "?"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"Python {platform.python_version()}, psycopg {psycopg.__version__}, "
        f"PostgreSQL {server}; {args.steps} steps x {args.repeats} rounds, medians; "
        f"load {load:.1f}"
    )
    base = statistics.median(times["no key"])
    for kind in KINDS:
        m = statistics.median(times[kind])
        print(
            f"fresh step, {kind:16} {m:8.1f} µs  ({m / base:.2f}x)  "
            f"round trips per step: {trips[kind]}"
        )


if __name__ == "__main__":
    main()
