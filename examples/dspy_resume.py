"""A DSPy program killed with SIGKILL inside a tool call, then resumed: what runs again?

Offline and deterministic: the LM is DSPy's ``DummyLM``, no API key.

    python examples/dspy_resume.py [--crash] [--db PATH]

The program (a ``dspy.Module``) asks the LM for a city, calls a weather tool,
then asks the LM for an answer. The LM is wrapped in ``JournaledLM`` and the
tool in ``journaled_tool``, so each call is a step of the journal file
(``dspy.lm``, ``dspy.tool:weather``, ``dspy.lm#2``). Each real call is
appended to a ledger file, so you can see what ran in which process.

Without ``--crash`` the program runs once. With ``--crash`` it runs in a child
process that is killed with a real SIGKILL from outside while the tool is
running; a second child resumes the same run:

- the first LM call is replayed from the journal, not made again;
- the tool runs again (it never returned), then the second LM call;
- the answer is the same as an uninterrupted run's.

Needs ``pip install -e '.[dspy]'``, run from a checkout of this repository.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HOLD = "tool weather"  # with --crash, the child waits inside the tool until it is killed


def program_main(db: str, ledger: str, hold: bool) -> None:
    """The DSPy program itself, run in a child process."""
    import dspy
    from dspy.utils.dummies import DummyLM

    from letitloop import Journal
    from letitloop.adapters.dspy import JournaledLM, journaled_tool

    def note(line: str) -> None:
        with open(ledger, "a") as f:
            f.write(f"pid {os.getpid()}: {line}\n")

    class LedgerLM(DummyLM):  # type: ignore[misc]
        def __call__(self, prompt: Any = None, *, messages: Any = None, **kwargs: Any) -> Any:
            note("lm answer" if "snow in Oslo" in messages[-1]["content"] else "lm plan")
            return super().__call__(prompt, messages=messages, **kwargs)

    def weather(city: str) -> str:
        """The weather in a city."""
        note("tool weather")
        if hold:
            print("ready-to-be-killed", flush=True)
            time.sleep(60)  # killed here
        return f"snow in {city}"

    class Trip(dspy.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.plan = dspy.Predict("question -> city")
            self.weather = journaled_tool(weather)
            self.answer = dspy.Predict("city, weather -> answer")

        def forward(self, question: str) -> Any:
            city = self.plan(question=question).city
            return self.answer(city=city, weather=self.weather(city=city))

    lm = LedgerLM(
        {
            "Where is it snowing?": {"city": "Oslo"},
            "snow in Oslo": {"answer": "Go to Oslo: snow in Oslo"},
        }
    )
    dspy.configure(lm=JournaledLM(lm))
    with Journal("dspy-demo", path=db):
        answer = Trip()(question="Where is it snowing?").answer
    print(f"answer: {answer}", flush=True)


def child(db: Path, ledger: Path, hold: bool) -> subprocess.Popen[str]:
    args = [sys.executable, __file__, "--program", "--db", str(db), "--ledger", str(ledger)]
    if hold:
        args.append("--hold")
    return subprocess.Popen(args, stdout=subprocess.PIPE, text=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crash", action="store_true", help="kill the program inside a tool call")
    parser.add_argument("--db", help="the journal file (default: a new temporary one)")
    parser.add_argument("--ledger", help=argparse.SUPPRESS)
    parser.add_argument("--program", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--hold", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.program:
        program_main(args.db, args.ledger, args.hold)
        return
    folder = Path(tempfile.mkdtemp(prefix="dspy-resume-"))
    db = Path(args.db) if args.db else folder / "journal.db"
    ledger = folder / "ledger.txt"
    if args.crash:
        first = child(db, ledger, hold=True)
        assert first.stdout is not None
        for line in first.stdout:  # wait until it is inside the tool
            if line.strip() == "ready-to-be-killed":
                break
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        print(f"killed pid {first.pid} inside the '{HOLD}' call (SIGKILL)")
    last = child(db, ledger, hold=False)
    out, _ = last.communicate()
    print(out.strip())
    print("what really ran, process by process:")
    print(ledger.read_text().rstrip())
    print(f"journal: {db}  (lil show dspy-demo --db {db})")
    if args.db:  # the journal lives elsewhere: the ledger's folder is not kept
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
