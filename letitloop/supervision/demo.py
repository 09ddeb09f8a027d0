"""``lil demo``: a five-step workflow, SIGKILLed in step 3, resumed, and shown as a table.

The workflow is deterministic and offline: each step "works" for a few
tenths of a second and records what it did in a side log kept outside the
journal, so the table shows what really ran, not what the journal claims.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

STEPS = ["fetch_orders", "enrich_customers", "price_items", "summarize", "notify"]
#: Seconds each step spends "working": long enough to kill the child inside step 3.
STEP_SECONDS = 0.3
#: The demo gives up on a child that has not reached step 3 in this long.
START_TIMEOUT = 30.0


def _work(name: str, value: Any, log: str) -> Any:
    with open(log, "a", encoding="utf-8") as f:
        f.write(json.dumps({"pid": os.getpid(), "event": "start", "step": name}) + "\n")
    time.sleep(STEP_SECONDS)
    out = {"step": name, "input": value, "n": len(STEPS)}
    with open(log, "a", encoding="utf-8") as f:
        f.write(json.dumps({"pid": os.getpid(), "event": "done", "step": name}) + "\n")
    return out


def child(log: str, timings: str) -> None:
    """The demo workflow, run in a child interpreter."""
    from ..identity.step_names import Named
    from ..run.durable import durable, step

    @durable(goal_id="demo", run="demo-run")
    def workflow() -> Any:
        value: Any = {"orders": [101, 102, 103]}
        for name in STEPS:
            t0 = time.perf_counter()
            value = step(name, Named("letitloop:demo.work", _work), name, value, log)
            elapsed = time.perf_counter() - t0
            with open(timings, "a", encoding="utf-8") as f:
                f.write(json.dumps({"pid": os.getpid(), "step": name, "s": elapsed}) + "\n")
        return value

    workflow()


def _read(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _spawn(folder: Path, log: Path, timings: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, LETITLOOP_DB=str(folder / "journal.db"))
    code = f"from letitloop.supervision.demo import child; child({str(log)!r}, {str(timings)!r})"
    return subprocess.Popen([sys.executable, "-c", code], env=env, cwd=folder)


def _fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 0.001:
        return f"{seconds * 1e6:.0f} µs"
    return f"{seconds * 1000:.1f} ms"


def run_demo(*, keep: bool = False) -> int:
    """Run the demo; return 0 only if the resume skipped exactly the completed steps."""
    folder = Path(tempfile.mkdtemp(prefix="letitloop-demo-"))
    log, timings = folder / "side-log.jsonl", folder / "timings.jsonl"
    try:
        print("letitloop demo: a five-step workflow, SIGKILLed in step 3, then run again")
        if keep:
            print(f"journal: {folder / 'journal.db'} (kept: lil demo --keep)\n")
        else:
            print(
                f"journal: {folder / 'journal.db'}\n"
                f"(a temporary folder, deleted when the demo ends; lil demo --keep keeps it)\n"
            )

        first = _spawn(folder, log, timings)
        deadline = time.monotonic() + START_TIMEOUT
        while not any(e["event"] == "start" and e["step"] == STEPS[2] for e in _read(log)):
            if first.poll() is not None or time.monotonic() > deadline:
                first.kill()
                print("lil demo: the first attempt never reached step 3", file=sys.stderr)
                return 1
            time.sleep(0.01)
        time.sleep(STEP_SECONDS / 3)  # well inside step 3
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        print(f"attempt 1: pid {first.pid} killed with SIGKILL inside step 3 ({STEPS[2]})")

        second = _spawn(folder, log, timings)
        status = second.wait()
        print(f"attempt 2: pid {second.pid} exited with status {status}\n")

        events = _read(log)
        ran_first = {e["step"]: e["event"] for e in events if e["pid"] == first.pid}
        started_second = {e["step"] for e in events if e["pid"] == second.pid}
        took = {t["step"]: t["s"] for t in _read(timings) if t["pid"] == second.pid}

        print(f"{'step':<22}{'attempt 1':<18}{'attempt 2':<14}{'time':>10}")
        ok = status == 0
        for i, name in enumerate(STEPS, 1):
            first_state = {"done": "done", "start": "killed mid-step"}.get(
                ran_first.get(name, ""), "not reached"
            )
            second_state = "ran" if name in started_second else "replayed"
            if first_state == "killed mid-step" and second_state == "ran":
                second_state = "ran again"
            print(
                f"{i} {name:<20}{first_state:<18}{second_state:<14}{_fmt_time(took.get(name)):>10}"
            )
            expected_replay = first_state == "done"
            if expected_replay == (name in started_second):
                ok = False
        replayed = sum(1 for n in STEPS if ran_first.get(n) == "done")
        print()
        if ok:
            print(
                f"OK: the resume replayed the {replayed} steps that had completed and ran "
                f"only the rest ({len(STEPS) - replayed})."
            )
        else:
            print("FAILED: the second attempt did not skip exactly the completed steps")
        if keep:
            print(
                f"kept: {folder}  (look inside: lil --db {folder / 'journal.db'} show demo; "
                f"open journal.db in any SQLite browser; remove it with: rm -r {folder})"
            )
        else:
            print(f"deleted {folder} (lil demo --keep keeps it)")
        return 0 if ok else 1
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
