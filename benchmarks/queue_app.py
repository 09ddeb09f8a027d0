"""The program of the queue tests and benchmark: a queue and its tasks, and its workers.

Its journal, ledger and limits come from the environment (QUEUE_DB, QUEUE_LEDGER,
QUEUE_CONCURRENCY; QUEUE_LISTEN=0: no LISTEN/NOTIFY on PostgreSQL), so that
``lil worker queue_app.py --queue work`` imports it as it is. Every step appends a
line to the ledger (O_APPEND: one write, whole, whatever the process) when it starts
(S) and when its side effect is done (E), with its pid and the machine's monotonic
clock, so the tests count from the steps themselves how many ran at once and which
ran twice. ``parent`` and ``aparent`` enqueue a ``hang`` as their child run and wait
for it (suspended meanwhile; tests/test_queue_kill.py kills the child's worker).
``python queue_app.py serve THREADS PROCESSES`` runs the workers (Worker.run) until
SIGTERM.
"""

from __future__ import annotations

import os
import sys
import time

from letitloop import Queue, async_step, step

concurrency = os.environ.get("QUEUE_CONCURRENCY")
queue = Queue(
    "work",
    concurrency=int(concurrency) if concurrency else None,
    path=os.environ["QUEUE_DB"],
    listen=os.environ.get("QUEUE_LISTEN", "1") == "1",
)


def note(*words: object) -> None:
    line = (" ".join(map(str, words)) + "\n").encode()
    fd = os.open(os.environ["QUEUE_LEDGER"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def part(i: int, k: int) -> int:
    note("S", i, k, os.getpid(), time.monotonic())
    time.sleep(float(os.environ.get("QUEUE_STEP_SECONDS", "0.01")))
    note("E", i, k, os.getpid(), time.monotonic())
    return k


@queue.task(name="three")
def three(i: int) -> int:
    """A run of three steps."""
    return sum(step(f"part{k}", part, i, k) for k in range(3))


def first(flag: str) -> int:
    note("F", flag, os.getpid(), time.monotonic())
    if not os.path.exists(flag):  # the first holder stays in this step until killed
        open(flag, "w").close()
        note("H", flag, os.getpid(), time.monotonic())
        time.sleep(60)
    return 1


@queue.task(name="hang")
def hang(flag: str) -> int:
    """A run whose first holder hangs in its step (to be killed); the next finishes it."""
    return step("first", first, flag)


def before(flag: str) -> int:
    note("B", flag, os.getpid(), time.monotonic())
    return 10


@queue.task(name="parent")
def parent(flag: str) -> int:
    """A run that enqueues a child (``hang``) and waits for its result, both as its steps."""
    ten = step("before", before, flag)
    child = queue.enqueue(hang, flag)
    note("P", flag, os.getpid(), time.monotonic())  # outside a step: again on each attempt
    return ten + int(child.result())


@queue.task(name="aparent")
async def aparent(flag: str) -> int:
    """``parent``, async: its child's result awaited."""
    ten = await async_step("before", before, flag)
    child = queue.enqueue(hang, flag)
    note("P", flag, os.getpid(), time.monotonic())
    return int(ten) + int(await child)


if __name__ == "__main__" and sys.argv[1:2] == ["serve"]:
    raise SystemExit(queue.worker(threads=int(sys.argv[2]), processes=int(sys.argv[3])).run())
