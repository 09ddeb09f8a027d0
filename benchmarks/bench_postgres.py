"""The cost of a durable step on PostgreSQL, beside the raw floor and DBOS, side by side.

    python benchmarks/bench_postgres.py [--url postgresql://…] [--steps 500] [--repeats 5]

Without ``--url`` it starts a throwaway server as the tests do
(tests/pg_server.py: initdb and pg_ctl in a temporary folder, a Unix socket,
``fsync=off``). Rows, each the median over ``--repeats`` rounds of
``--steps`` steps, in microseconds per step:

- **floor**: one INSERT of a row of the same shape, autocommit (its own
  COMMIT), through psycopg on the same server (``conn.execute``, which psycopg
  prepares from its 6th run): the least a journaled step can cost (one round
  trip);
- **floor, kept cursor**: the same INSERT through one cursor kept for it,
  prepared at once (``cursor.execute(…, prepare=True)``), as the journal's
  steps are written: the floor by the cheapest client path;
- **fresh step**: ``j.step(key, fn, i)`` of a new key, each one timed right
  after a floor INSERT (the two interleaved, so that the machine's load falls
  on both alike; each row is the median of its single timings);
- **replayed step**: the same steps in a new journal of the same run;
- **DBOS step** (when ``dbos`` is installed: ``pip install -e '.[bench]'``):
  a ``@DBOS.step`` called from a ``@DBOS.workflow`` of ``--steps`` steps, its
  system database on the same server (a database of its own).

Then the round trips, counted on the wire (libpq's trace of the journal's
connection: one ``Sync`` or ``Query`` message per round trip): per fresh
step, and per replayed run of ``--steps`` steps (opening the run excluded).

Not measured: network latency (a Unix socket), a server with ``fsync=on``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def backend_cpu_ns(conn: Any) -> int:
    """CPU time the server's backend of ``conn`` has used, in ns (Linux's schedstat), or -1."""
    try:
        with open(f"/proc/{conn.info.backend_pid}/schedstat") as f:
            return int(f.read().split()[0])
    except OSError:  # another machine's server, or no schedstat
        return -1


def cpu_per_step(conn: Any, work: Callable[[int], None], n: int) -> tuple[float, float]:
    """CPU µs per call of ``work`` in this thread and in ``conn``'s server backend."""
    client, server = time.thread_time_ns(), backend_cpu_ns(conn)
    for i in range(n):
        work(i)
    client, server = time.thread_time_ns() - client, backend_cpu_ns(conn) - server
    return client / n / 1000, (server / n / 1000 if server >= 0 else float("nan"))


def dbos_steps(server: str, n: int) -> Callable[[], float] | None:
    """A function timing ``n`` DBOS steps in one workflow (µs per step), or None without dbos."""
    try:
        from dbos import DBOS
    except ImportError:
        return None
    import logging

    logging.getLogger("dbos").setLevel(logging.WARNING)
    base, _, query = server.partition("?")
    DBOS(config={"name": "bench", "system_database_url": f"{base}_dbos?{query}"})

    @DBOS.step()
    def one(i: int) -> str:
        return str(i)

    @DBOS.workflow()
    def workflow(count: int) -> int:
        for i in range(count):
            one(i)
        return count

    DBOS.launch()

    def timed() -> float:
        t = time.perf_counter()
        workflow(n)
        return (time.perf_counter() - t) / n * 1e6

    return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a postgresql:// URL (default: a throwaway server)")
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-dbos", action="store_true", help="leave DBOS out")
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
    dbos = None if args.no_dbos else dbos_steps(args.url or pg_server.server_url(), n)
    floor, kept, fresh, replay, theirs = [], [], [], [], []
    cpu_floor: list[tuple[float, float]] = []
    cpu_step: list[tuple[float, float]] = []
    trips_fresh = trips_replay = 0
    for r in range(args.repeats):
        url = location()
        with (
            psycopg.connect(url, autocommit=True) as conn,
            Journal("bench", run=f"r{r}", path=url) as j,
        ):
            conn.execute(
                "CREATE TABLE IF NOT EXISTS floor (goal text, run text, key text, status text, "
                "fn text, result text, started_at text, finished_at text, duration_ms float8, "
                "attempt int, args_fp text, PRIMARY KEY (goal, run, key))"
            )
            # Interleaved, one floor INSERT of each kind then one step: a machine's load
            # falls on all three alike.
            insert = "INSERT INTO floor VALUES (%s, %s, %s, 'done', %s, %s, %s, %s, %s, 1, %s)"
            cursor = conn.cursor()
            floor_us, kept_us, step_us = [], [], []
            for i in range(n):
                t0 = time.perf_counter()
                conn.execute(
                    insert, ("g", f"r{r}", f"s{i}", "m.f", '{"i": 1}', "t0", "t1", 0.1, "fp")
                )
                t1 = time.perf_counter()
                cursor.execute(
                    insert,
                    ("g", f"k{r}", f"s{i}", "m.f", '{"i": 1}', "t0", "t1", 0.1, "fp"),
                    prepare=True,
                )
                t2 = time.perf_counter()
                j.step(f"s{i}", str, i)
                t3 = time.perf_counter()
                floor_us.append((t1 - t0) * 1e6)
                kept_us.append((t2 - t1) * 1e6)
                step_us.append((t3 - t2) * 1e6)
            floor.append(statistics.median(floor_us))
            kept.append(statistics.median(kept_us))
            fresh.append(statistics.median(step_us))
            store: Any = j.store
            trips_fresh = pg_server.round_trips(store.conn, lambda: j.step("one more", str, -1))
            # CPU, which the machine's load does not inflate: client and server backend.
            cpu_floor.append(
                cpu_per_step(
                    conn,
                    lambda i, run=f"c{r}": conn.execute(
                        "INSERT INTO floor VALUES (%s, %s, %s, 'done', %s, %s, %s, %s, %s, 1, %s)",
                        ("g", run, f"s{i}", "m.f", '{"i": 1}', "t0", "t1", 0.1, "fp"),
                    ),
                    n,
                )
            )
            cpu_step.append(cpu_per_step(store.conn, lambda i: j.step(f"c{i}", str, i), n))
        with Journal("bench", run=f"r{r}", path=url) as j:

            def replayed() -> None:
                for i in range(n):
                    j.step(f"s{i}", str, i)

            t = time.perf_counter()
            replayed()
            replay.append((time.perf_counter() - t) / n * 1e6)
        with Journal("bench", run=f"r{r}", path=url) as j:  # again, counting round trips
            trips_replay = pg_server.round_trips(j.store.conn, replayed)  # type: ignore[union-attr]
        if dbos is not None:
            theirs.append(dbos())
    with psycopg.connect(location(), autocommit=True) as conn:
        row = conn.execute("SHOW server_version").fetchone()
        server = row[0] if row else "?"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"Python {platform.python_version()}, psycopg {psycopg.__version__}, "
        f"PostgreSQL {server}; {n} steps x {args.repeats} rounds, medians; load {load:.1f}"
    )
    f, k, s, p = (statistics.median(x) for x in (floor, kept, fresh, replay))
    print(f"floor (INSERT + COMMIT)   {f:8.1f} µs")
    print(f"floor, kept cursor        {k:8.1f} µs")
    print(f"fresh step                {s:8.1f} µs  ({s / f:.2f}x the floor, {s / k:.2f}x kept)")
    print(f"replayed step             {p:8.1f} µs")
    if theirs:
        from importlib.metadata import version

        d = statistics.median(theirs)
        print(f"DBOS {version('dbos')} step        {d:8.1f} µs  ({d / f:.2f}x the floor)")
    for name, cpu in (("floor", cpu_floor), ("fresh step", cpu_step)):
        client = statistics.median(c for c, _ in cpu)
        server = statistics.median(s for _, s in cpu)
        print(f"CPU per {name:10}  {client:6.1f} µs client + {server:6.1f} µs server backend")
    print(f"round trips per fresh step: {trips_fresh}")
    print(f"round trips per replayed run of {n} steps: {trips_replay}")
    if dbos is not None:
        from dbos import DBOS

        DBOS.destroy()


if __name__ == "__main__":
    main()
