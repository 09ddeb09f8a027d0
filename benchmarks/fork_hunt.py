"""Children forked while other threads write journals: how many hang at their first SQLite call.

    python benchmarks/fork_hunt.py [--children 300] [--threads 2] [--reopen-every 1] [--timeout 3]

``--threads`` threads each write runs of 5 steps to a journal file of their
own, closing their idle connections after every ``--reopen-every``-th run
(so they keep opening and closing connections); meanwhile the main thread
forks ``--children`` children one after another, each of which opens a
journal of its own on a new file and records one step. A child still running
after ``--timeout`` seconds hung: it is SIGKILLed and counted, and where it
was stuck (its Python stack, from ``faulthandler``) is printed once.

A child forked while a thread was inside SQLite inherits SQLite's mutexes
locked and never returns from its first SQLite call; letitloop's fork gate
(``letitloop/stores/sqlite/connections.py``) makes a fork wait until no store is inside
SQLite. The target is zero hung children. ``tests/test_connections.py`` runs
this situation in small (one thread, reopening every 7th run, 100 children).
Bias: a warm page cache, a local disk, a tiny step.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import environment
from letitloop import Journal
from letitloop.stores.sqlite.pool import close_idle_stores


def hunt(children: int, threads: int, reopen_every: int, timeout: float) -> list[str]:
    """Fork ``children`` while ``threads`` write; the stacks of those that hung."""
    folder = Path(tempfile.mkdtemp(prefix="fork_hunt_"))
    stop = threading.Event()

    def keep_writing(name: str) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            with Journal("g", run=f"r{n % 5}", path=folder / f"{name}.db") as j:
                for i in range(5):
                    j.step(f"s{n}-{i}", str, i)
            if n % reopen_every == 0:
                close_idle_stores()

    writers = [threading.Thread(target=keep_writing, args=(f"parent{w}",)) for w in range(threads)]
    for writer in writers:
        writer.start()
    time.sleep(0.2)
    stacks = []
    try:
        for i in range(children):
            trace = folder / f"child{i}.txt"
            pid = os.fork()
            if pid == 0:  # the child: a journal of its own, then out
                status = 1
                try:
                    with trace.open("w") as out:
                        faulthandler.dump_traceback_later(timeout * 0.8, file=out)
                        with Journal("g", path=folder / f"child{i}.db") as j:
                            status = 0 if j.step("a", str, i) == str(i) else 2
                        faulthandler.cancel_dump_traceback_later()
                finally:
                    os._exit(status)
            deadline = time.monotonic() + timeout
            while not os.waitpid(pid, os.WNOHANG)[0]:
                if time.monotonic() > deadline:
                    os.kill(pid, 9)
                    os.waitpid(pid, 0)
                    stacks.append(f"child {i}:\n{trace.read_text()}")
                    break
                time.sleep(0.002)
    finally:
        stop.set()
        for writer in writers:
            writer.join()
    return stacks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--children", type=int, default=300)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reopen-every", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=3.0)
    args = parser.parse_args()
    print(environment())
    started = time.perf_counter()
    stacks = hunt(args.children, args.threads, args.reopen_every, args.timeout)
    took = time.perf_counter() - started
    print(f"{len(stacks)} of {args.children} children hung ({took:.0f} s)")
    if stacks:
        print(stacks[0])


if __name__ == "__main__":
    main()
