"""A LlamaIndex workflow killed with SIGKILL inside a step, then resumed: what runs again?

Offline and deterministic: no model, no API key.

    python examples/llamaindex_resume.py [--crash] [--db PATH]

The workflow (``Pipeline(runtime=LetItLoopRuntime())``) fetches a text and keeps
its topic in the context state (``ctx.store``), counts its words, then writes a
summary that reads the topic back. Every tick of the workflow (a step's result,
an event added) is a step of the journal file; each real step execution is
appended to a ledger file, so you can see what ran in which process.

Without ``--crash`` the workflow runs once. With ``--crash`` it runs in a child
process that is killed with a real SIGKILL from outside while ``count`` is
running; a second child resumes the same run:

- ``fetch`` is not run again: its result and the context state it left are
  restored from the journal;
- ``count`` runs again (it never returned), then ``summarize``;
- the result is the same as an uninterrupted run's, and ``lil show llama-demo``
  lists the ticks (``Pipeline.00002:step_result:fetch``, …).

Needs ``pip install -e '.[llamaindex]'``, run from a checkout of this repository.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HOLD = "count"  # with --crash, the child waits inside this step until it is killed


def workflow_main(db: str, ledger: str, hold: bool) -> None:
    """The workflow itself, run in a child process."""
    from workflows import Context, Workflow, step
    from workflows.events import Event, StartEvent, StopEvent

    from letitloop import Journal
    from letitloop.adapters.llamaindex import LetItLoopRuntime

    def note(line: str) -> None:
        with open(ledger, "a") as f:
            f.write(f"pid {os.getpid()}: step {line}\n")

    class Fetched(Event):
        text: str

    class Counted(Event):
        words: int

    class Pipeline(Workflow):
        @step
        async def fetch(self, ctx: Context, ev: StartEvent) -> Fetched:
            note("fetch")
            await ctx.store.set("topic", ev.topic)
            return Fetched(text=f"{ev.topic} is a city in Norway by a fjord")

        @step
        async def count(self, ev: Fetched) -> Counted:
            note("count")
            if hold:
                print("ready-to-be-killed", flush=True)
                time.sleep(60)  # killed here
            return Counted(words=len(ev.text.split()))

        @step
        async def summarize(self, ctx: Context, ev: Counted) -> StopEvent:
            note("summarize")
            topic = await ctx.store.get("topic")
            return StopEvent(result=f"{topic}: {ev.words} words")

    async def run() -> str:
        wf = Pipeline(runtime=LetItLoopRuntime(), timeout=120)
        async with Journal("llama-demo", path=db):
            result: str = await wf.run(topic="Oslo")
        return result

    print(f"result: {asyncio.run(run())}", flush=True)


def child(db: Path, ledger: Path, hold: bool) -> subprocess.Popen[str]:
    args = [sys.executable, __file__, "--workflow", "--db", str(db), "--ledger", str(ledger)]
    if hold:
        args.append("--hold")
    return subprocess.Popen(args, stdout=subprocess.PIPE, text=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crash", action="store_true", help="kill the workflow inside a step")
    parser.add_argument("--db", help="the journal file (default: a new temporary one)")
    parser.add_argument("--ledger", help=argparse.SUPPRESS)
    parser.add_argument("--workflow", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--hold", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.workflow:
        workflow_main(args.db, args.ledger, args.hold)
        return
    folder = Path(tempfile.mkdtemp(prefix="llamaindex-resume-"))
    db = Path(args.db) if args.db else folder / "journal.db"
    ledger = folder / "ledger.txt"
    if args.crash:
        first = child(db, ledger, hold=True)
        assert first.stdout is not None
        for line in first.stdout:  # wait until it is inside the count step
            if line.strip() == "ready-to-be-killed":
                break
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        print(f"killed pid {first.pid} inside the '{HOLD}' step (SIGKILL)")
    last = child(db, ledger, hold=False)
    out, _ = last.communicate()
    print(out.strip())
    print("what really ran, process by process:")
    print(ledger.read_text().rstrip())
    print(f"journal: {db}  (lil show llama-demo --db {db})")


if __name__ == "__main__":
    main()
