"""The cost of a durable step on PostgreSQL, beside the raw floor, side by side in one run.

    python benchmarks/bench_postgres.py [--url postgresql://…] [--steps 500] [--repeats 5]

Without ``--url`` it starts a throwaway server as the tests do
(tests/pg_server.py: initdb and pg_ctl in a temporary folder, a Unix socket,
``fsync=off``). Rows, each the median over ``--repeats`` rounds of
``--steps`` steps, in microseconds per step:

- **floor**: one INSERT of a row of the same shape, autocommit (its own
  COMMIT), through psycopg on the same server: the least a journaled step
  can cost (one round trip);
- **fresh step**: ``j.step(key, fn, i)`` of a new key (one round trip);
- **replayed step**: the same steps in a new journal of the same run (one
  query for the run's recorded steps and one for their results, per run).

Not measured: DBOS on the same server (not installed here), network latency
(a Unix socket), a server with ``fsync=on``.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a postgresql:// URL (default: a throwaway server)")
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    import pg_server
    import psycopg

    from letitloop import Journal

    def location() -> str:
        if args.url:
            return str(args.url)
        return pg_server.location()

    n = args.steps
    floor, fresh, replay = [], [], []
    for r in range(args.repeats):
        url = location()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS floor (goal text, run text, key text, status text, "
                "fn text, result text, started_at text, finished_at text, duration_ms float8, "
                "attempt int, args_fp text, PRIMARY KEY (goal, run, key))"
            )
            t = time.perf_counter()
            for i in range(n):
                conn.execute(
                    "INSERT INTO floor VALUES (%s, %s, %s, 'done', %s, %s, %s, %s, %s, 1, %s)",
                    ("g", f"r{r}", f"s{i}", "m.f", '{"i": 1}', "t0", "t1", 0.1, "fp"),
                )
            floor.append((time.perf_counter() - t) / n * 1e6)
        with Journal("bench", run=f"r{r}", path=url) as j:
            t = time.perf_counter()
            for i in range(n):
                j.step(f"s{i}", str, i)
            fresh.append((time.perf_counter() - t) / n * 1e6)
        with Journal("bench", run=f"r{r}", path=url) as j:
            t = time.perf_counter()
            for i in range(n):
                j.step(f"s{i}", str, i)
            replay.append((time.perf_counter() - t) / n * 1e6)
    with psycopg.connect(location(), autocommit=True) as conn:
        row = conn.execute("SHOW server_version").fetchone()
        server = row[0] if row else "?"
    print(
        f"Python {platform.python_version()}, psycopg {psycopg.__version__}, "
        f"PostgreSQL {server}; {n} steps x {args.repeats} rounds, medians"
    )
    f, s, p = (statistics.median(x) for x in (floor, fresh, replay))
    print(f"floor (INSERT + COMMIT)   {f:8.1f} µs")
    print(f"fresh step                {s:8.1f} µs  ({s / f:.2f}x the floor)")
    print(f"replayed step             {p:8.1f} µs")


if __name__ == "__main__":
    main()
