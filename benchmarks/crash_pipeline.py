"""The pipeline that benchmarks/crash.py kills: sync steps, gathered async steps, a marker.

    python benchmarks/crash_pipeline.py DB SIDE_LOG TRIAL DURABILITY [FAULT_PLAN]

Every step writes what it does to SIDE_LOG, an append-only file kept outside
the journal, so the benchmark counts real executions rather than trusting the
journal. Steps sleep a few milliseconds to stand in for LLM and API calls and
"spend" a deterministic number of tokens. FAULT_PLAN, if given, names a step
key at which this process kills itself once with ``os._exit`` (or runs out of
memory under an address-space limit) — an in-process crash.
"""

from __future__ import annotations

import time

PROCESS_START = time.time()  # before any import: what a restarted child costs

import asyncio  # noqa: E402
import dataclasses  # noqa: E402
import datetime as dt  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from letitloop import async_step, atomic_marker, durable, step  # noqa: E402
from letitloop.codec import register  # noqa: E402

DB, LOG, TRIAL, DURABILITY = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
PLAN = Path(sys.argv[5]) if len(sys.argv) > 5 else None
IMPORTED = time.time()


@dataclasses.dataclass(frozen=True)
class Doc:
    """A typed step result: it must come back as a Doc, not a dict."""

    id: int
    text: str
    fetched_at: dt.datetime


register(Doc)


def log(*fields: object) -> None:
    with open(LOG, "a", encoding="utf-8") as f:
        f.write(" ".join(str(x) for x in (time.time(), os.getpid(), *fields)) + "\n")


def tokens(key: str) -> int:
    return 100 + sum(map(ord, key)) % 400


def maybe_fault(key: str) -> None:
    """Crash here, once, if the fault plan says so (the plan file is consumed first)."""
    if PLAN is None or not PLAN.exists():
        return
    kind, at = PLAN.read_text().split()
    if at != key:
        return
    PLAN.unlink()
    log("fault", kind, key)
    if kind == "exit":
        os._exit(70)
    if kind == "oom":
        # Allocate until an address-space limit refuses memory, then die the way
        # the kernel's OOM killer ends a process: SIGKILL, no cleanup. (Letting
        # the MemoryError propagate instead leaves a process that cannot even
        # start a thread, which is not what an OOM kill looks like.)
        import resource
        import signal

        limit = 512 * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
        hog = []
        try:
            while True:
                hog.append(bytearray(16 * 1024 * 1024))
        except MemoryError:
            hog.clear()
            os.kill(os.getpid(), signal.SIGKILL)


def work(key: str, ms: float) -> None:
    log("start", key)
    maybe_fault(key)
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:  # spin part, sleep part: a stand-in for a call
        time.sleep(0.0005)
    log("done", key, tokens(key))


def fetch(i: int) -> Doc:
    work(f"fetch:{i}", 3)
    return Doc(i, f"document {i}", dt.datetime(2026, 11, 30, 12, i, tzinfo=dt.timezone.utc))


async def summarize(doc: Doc) -> dict[str, object]:
    key = f"summarize:{doc.id}"
    log("start", key)
    maybe_fault(key)
    await asyncio.sleep(0.002 + (doc.id % 4) * 0.001)
    log("done", key, tokens(key))
    return {"id": doc.id, "summary": doc.text.upper(), "when": doc.fetched_at}


async def summarize_one(doc: Doc) -> dict[str, object]:
    out = await async_step(f"summarize:{doc.id}", summarize, doc)
    log("returned", f"summarize:{doc.id}")  # the step returned: it must never run again
    return out


async def summarize_all(docs: list[Doc]) -> list[dict[str, object]]:
    return list(await asyncio.gather(*(summarize_one(d) for d in docs)))


def fetch_step(i: int) -> Doc:
    doc = step(f"fetch:{i}", fetch, i)
    log("returned", f"fetch:{i}")
    return doc


def report(summaries: list[dict[str, object]]) -> str:
    work("report", 3)
    return ";".join(str(s["summary"]) for s in summaries)


@durable(goal_id="crash", run=f"trial-{TRIAL}", path=DB, durability=DURABILITY)  # type: ignore[arg-type]
def pipeline() -> str:
    log("attempt", PROCESS_START, IMPORTED)
    docs = [fetch_step(i) for i in range(6)]
    assert all(isinstance(d, Doc) for d in docs), "typed results came back as other types"
    summaries = asyncio.run(summarize_all(docs))
    with atomic_marker("publish") as go:
        if go:
            # Whether an earlier holder may have acted (it died inside the block):
            # only a body entered again *without* that warning is a duplicate.
            log("marker", "publish", "crashed_before" if go.crashed_before else "first")
            work("publish", 2)
    final = step("report", report, summaries)
    log("returned", "report")
    return final


if __name__ == "__main__":
    result = pipeline()
    log("result", result)
