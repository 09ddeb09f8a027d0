"""The pipeline benchmarks/primitives_crash.py kills: every primitive, sync or async.

    python benchmarks/primitives_pipeline.py DB LOG TRIAL MODE

A step that reports usage, a step with a retry policy whose first tries fail,
a durable sleep, a wait for outside input (the harness sends the value), and
a last step. Every event goes to an append-only side log with the wall time
and the pid: what the harness checks the journal against.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from letitloop import Journal, RetryPolicy, usage

DB, LOG, TRIAL, MODE = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]

#: Tries of 'flaky' that fail, counted over every attempt (those cut by a kill too).
FAILING_TRIES = 2
POLICY = RetryPolicy(max_attempts=10, initial_backoff=0.4, multiplier=1.5, jitter=0.2)
NAP = 0.3


def log(*fields: object) -> None:
    with open(LOG, "a", encoding="utf-8") as f:
        f.write(" ".join(str(x) for x in (repr(time.time()), os.getpid(), *fields)) + "\n")


def tries_so_far() -> int:
    with open(LOG, encoding="utf-8") as f:
        return sum(1 for line in f if line.split()[2:4] == ["start", "flaky"])


def prepare() -> str:
    log("start", "prepare")
    time.sleep(0.08)
    usage(input_tokens=1000, output_tokens=100, cost=0.01, model="m")
    return "prepared"


def flaky() -> str:
    n = tries_so_far()
    log("start", "flaky")
    time.sleep(0.05)
    if n < FAILING_TRIES:
        raise TimeoutError(f"try {n + 1} failed on purpose")
    return "flaky ok"


def finish(value: object) -> str:
    log("start", "finish")
    time.sleep(0.08)
    usage(input_tokens=2000, output_tokens=200, cost=0.02, model="m")
    return f"finished with {value}"


async def a_prepare() -> str:
    return prepare()


async def a_flaky() -> str:
    return flaky()


def run_sync() -> str:
    with Journal("prim", run=f"trial-{TRIAL}", path=DB) as j:
        log("attempt", j.attempt)
        j.step("prepare", prepare)
        log("returned", "prepare")
        j.step("flaky", flaky, retry=POLICY)
        log("returned", "flaky")
        j.sleep("nap", NAP)
        log("woke", "nap")
        value = j.wait_for("approval")
        log("got", value)
        out = j.step("finish", finish, value)
        log("returned", "finish")
        return out


async def run_async() -> str:
    async with Journal("prim", run=f"trial-{TRIAL}", path=DB) as j:
        log("attempt", j.attempt)
        await j.async_step("prepare", a_prepare)
        log("returned", "prepare")
        await j.async_step("flaky", a_flaky, retry=POLICY)
        log("returned", "flaky")
        await j.async_sleep("nap", NAP)
        log("woke", "nap")
        value = await j.async_wait_for("approval")
        log("got", value)
        out = await j.async_step("finish", finish, value)
        log("returned", "finish")
        return out


if __name__ == "__main__":
    result = run_sync() if MODE == "sync" else asyncio.run(run_async())
    log("result", result.replace(" ", "_"))
