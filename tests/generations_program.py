"""A user's program with a named run: three paid steps, each logged to a side file.

``python tests/generations_program.py LOCATION NAME SIDE [options]``, or
:func:`run` in this process (the in-memory store has no second process).
Each step's function writes ``start i`` and ``end i`` lines around a short
pause; the tests count those lines, never the journal's rows. Prints the
run's generation, whether it was completed when opened, and the answer, as
one JSON line.

Options: ``--reuse S`` (seconds), ``--fresh``, ``--async``, ``--kill-at I``
(SIGKILL itself at step I's start), ``--shift S`` (the journal's clock runs
S seconds ahead: a day later without waiting a day), ``--pause S`` (each
step's pause), ``--timeout S`` (the journal's wait for a holder; ``inf``), ``--go
PATH`` (print ``ready``, then open the journal once PATH exists: copies started
together open it together, however long each took to start).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import time
from typing import Any

from letitloop import Journal, unchecked

STEPS = 3


def _log(side: str, line: str) -> None:
    with open(side, "a") as f:
        f.write(line + "\n")


def paid(side: str, i: int, kill_at: int | None, pause: float) -> str:
    _log(side, f"start {i}")
    if i == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(pause)
    _log(side, f"end {i}")
    return f"answer {i}"


def run(
    location: str,
    name: str,
    side: str,
    *,
    reuse: float | None = None,
    fresh: bool = False,
    is_async: bool = False,
    kill_at: int | None = None,
    shift: float = 0.0,
    pause: float = 0.0,
    timeout: float = 30.0,
) -> dict[str, Any]:
    """Open run ``name`` the way a user's program does, run its steps, say what it got."""
    options: dict[str, Any] = {
        "run": name,
        "path": location,
        "timeout": timeout,
        "clock": lambda: time.time() + shift,
    }
    # Only when given: the same program wrote tests/golden/'s file with letitloop 0.1.0.
    if reuse is not None:
        options["reuse"] = reuse
    if fresh:
        options["fresh"] = fresh
    # What only this attempt is told (its side file, where it dies, its pause) is no part
    # of a step's arguments as recorded.
    args = (unchecked(side), unchecked(kill_at), unchecked(pause))
    if is_async:

        async def main() -> dict[str, Any]:
            async with Journal("generations", **options) as j:
                answers = [
                    await j.async_step(f"s{i}", paid, args[0], i, *args[1:]) for i in range(STEPS)
                ]
                return {
                    "generation": getattr(j, "generation", name),
                    "was_completed": j.was_completed,
                    "answer": answers,
                }

        return asyncio.run(main())
    with Journal("generations", **options) as j:
        answers = [j.step(f"s{i}", paid, args[0], i, *args[1:]) for i in range(STEPS)]
        return {
            "generation": getattr(j, "generation", name),
            "was_completed": j.was_completed,
            "answer": answers,
        }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("location")
    parser.add_argument("name")
    parser.add_argument("side")
    parser.add_argument("--reuse", type=float)
    parser.add_argument("--fresh", action="store_true")
    parser.add_argument("--async", dest="is_async", action="store_true")
    parser.add_argument("--kill-at", type=int)
    parser.add_argument("--shift", type=float, default=0.0)
    parser.add_argument("--pause", type=float, default=0.0)
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--go")
    args = vars(parser.parse_args())
    go = args.pop("go")
    if go is not None:  # started beside another copy: open the journal together
        print("ready", flush=True)
        while not os.path.exists(go):
            time.sleep(0.001)
    found = run(args.pop("location"), args.pop("name"), args.pop("side"), **args)
    print(json.dumps(found), flush=True)


if __name__ == "__main__":
    main()
