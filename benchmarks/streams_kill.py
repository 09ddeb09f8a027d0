"""Streams SIGKILLed at random points: what each recovery pays, and what a reader sees.

    python -m benchmarks.streams_kill [--streams 20] [--seed 55] [--modes response,chat,restart]

For each mode, ``--streams`` runs of tests/test_streams_killed.py's program (the
``openai`` client against tests/openai_server.py's fake SSE server, in this
process), each SIGKILLed after a random number of chunks (1 to the answer's length
less one; the program kills itself, so the point is exact) and run again until it
completes, while a reader (``letitloop.streams.follow``, in a thread of this
process) follows the stream from offset 0 across the kill. Counted per mode:

- the tokens the server billed beyond one uninterrupted answer (re-attach: 0; continue:
  the killed call's output, and the prefix once more as input; restart: the killed
  call's output);
- streams whose final text differs from the uninterrupted answer (must be 0);
- streams whose reader missed or repeated a chunk, or saw them out of order (must be
  0), and the resets readers were told of.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import publish, table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def trial(program: Path, server: Any, mode: str, kill: int, folder: Path) -> dict[str, Any]:
    """One stream killed after ``kill`` chunks and run again; what it cost and showed."""
    from letitloop.streams import follow, read

    db = str(folder / "journal.db")
    before = len(server.bills)
    args = [sys.executable, str(program), db, mode, "sync", str(kill), server.url]
    first = subprocess.run(args, capture_output=True, text=True, timeout=120)
    killed = first.returncode == -signal.SIGKILL
    seen: list[Any] = []
    reader = threading.Thread(target=lambda: seen.extend(follow("q", path=db, timeout=60)))
    reader.start()
    second = subprocess.run(args, capture_output=True, text=True, timeout=120)
    reader.join(timeout=90)
    assert second.returncode == 0, second.stderr
    result = json.loads(second.stdout)
    chunks = read("q", path=db)
    first_seq = seen[0].seq if seen else 0
    in_order = [c.seq for c in seen] == list(range(first_seq, len(chunks))) and seen == chunks[
        first_seq:
    ]
    bills = server.bills[before:]
    return {
        "killed": killed,
        "text": result["text"],
        "recoveries": result["recoveries"],
        "billed_in": sum(b["input"] for b in bills),
        "billed_out": sum(b["output"] for b in bills),
        "reader_ok": in_order and bool(seen) and seen[-1].kind == "end",
        "resets": sum(c.kind == "reset" for c in seen),
    }


def main(argv: list[str] | None = None) -> None:
    import test_streams_killed
    from openai_server import LENGTH, FakeOpenAI, answer, words

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--seed", type=int, default=55)
    parser.add_argument("--modes", default="response,chat,restart")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    whole = "".join(answer("Tell me a story"))
    prompt_in = words([{"content": "Tell me a story"}])
    server = FakeOpenAI().start()
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            program = Path(tmp) / "program.py"
            program.write_text(textwrap.dedent(test_streams_killed.PROGRAM))
            for mode in args.modes.split(","):
                results = []
                for i in range(args.streams):
                    folder = Path(tmp) / f"{mode}-{i}"
                    folder.mkdir()
                    kill = rng.randint(1, LENGTH - 1)
                    results.append(trial(program, server, mode, kill, folder))
                once_out = LENGTH
                extra_out = [r["billed_out"] - once_out for r in results]
                extra_in = [r["billed_in"] - prompt_in for r in results]
                rows.append(
                    [
                        mode,
                        sum(r["killed"] for r in results),
                        ", ".join(sorted({"/".join(r["recoveries"]) or "none" for r in results})),
                        f"{sum(extra_out)} ({min(extra_out)}-{max(extra_out)})",
                        f"{sum(extra_in)} ({min(extra_in)}-{max(extra_in)})",
                        sum(r["text"] != whole for r in results),
                        sum(not r["reader_ok"] for r in results),
                        sum(r["resets"] for r in results),
                    ]
                )
    finally:
        server.stop()
    body = table(
        [
            "mode",
            "killed",
            "recoveries",
            "extra output tokens billed (range)",
            "extra input tokens billed (range)",
            "wrong texts",
            "readers missing/repeating",
            "resets told",
        ],
        rows,
    )
    body += (
        f"\n\n{args.streams} streams a mode, each a {LENGTH}-token answer killed after a random "
        f"number of chunks (seed {args.seed}); the program batches every 4 chunks."
    )
    command = "python -m benchmarks.streams_kill " + " ".join(argv or sys.argv[1:])
    publish("streams_kill", "Streams SIGKILLed at random points", command.strip(), body)


if __name__ == "__main__":
    main()
