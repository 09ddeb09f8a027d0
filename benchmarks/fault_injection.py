"""Flip bytes in real journal files, replay them, and count wrong values (there must be none).

    python benchmarks/fault_injection.py [--files 400] [--seed 1] [--mode random|result|both]
                                         [--seal]

A journal of one run of STEPS steps (with a sleep and a wait answered with
``letitloop.send`` halfway) is written and checkpointed into its main file
(``--seal``: written and replayed with a seal key, so its chain is in the file
too); then, for each trial, a copy of that file gets one byte flipped (XOR a
random non-zero byte) and the run is replayed from the copy in this process.
``random`` flips a byte anywhere in the file; ``result`` flips one inside the
bytes of a recorded result (where a flip, before row checksums, was replayed as
a wrong value). Each trial ends as one of:

* ``intact``: every step replayed its recorded value;
* ``reran``: some step's function was called again (its row was not found:
  a damaged key, run or status), every value still right;
* ``refused``: a LetItLoopError (a damaged row, a malformed file), every value
  handed back before it right;
* ``wrong``: a step handed back a value other than the one it recorded. The
  promise is that this count is 0;
* ``other``: any other exception (listed by type).

Prints one JSON object (the counts, the mode, the seed, the Python and SQLite
versions). tests/test_checksums.py runs this small; the figures in
docs/audit.md come from the long run.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sqlite3
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from letitloop import Journal, LetItLoopError, send
from letitloop.primitives.waits import RunWaiting
from letitloop.stores.sqlite.pool import close_idle_stores

GOAL = "faults"
RUN = "r1"
STEPS = 20
#: The value sent to the wait, and the seal key of ``--seal`` (None: no seal).
ANSWER = {"answer": "sent-value-0042", "n": 42}
SEAL: list[str | None] = [None]


#: The steps whose function ran in this trial (a replay calls none).
CALLED: list[int] = []


def value(i: int) -> dict[str, Any]:
    """The result step ``s<i>`` records: distinct text and numbers per step."""
    CALLED.append(i)
    return expected(i)


def expected(i: int) -> dict[str, Any]:
    return {"n": i, "text": f"value-{i:04d}", "items": [i, i * 7, f"x{i}"]}


def replay(j: Journal) -> bool:
    """The run's steps, its sleep and its wait; whether every value came back as recorded."""
    right = True
    for i in range(STEPS):
        right = j.step(f"s{i}", value, i) == expected(i) and right
        if i == STEPS // 2:
            j.sleep("nap", 0)
            right = j.wait_for("answer", stop_after=0) == ANSWER and right
    return right


def build(path: Path) -> list[bytes]:
    """Write the run to ``path``, checkpointed into the main file; the results' JSON bytes."""
    try:
        with Journal(GOAL, path=path, run=RUN, seal=SEAL[0]) as j:
            replay(j)
    except RunWaiting:
        send(RUN, "answer", ANSWER, path=path)
    with Journal(GOAL, path=path, run=RUN, seal=SEAL[0]) as j:
        replay(j)
    close_idle_stores()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    texts = [
        t.encode()
        for (t,) in conn.execute(f'SELECT result FROM "_journal_{GOAL}" WHERE result IS NOT NULL')
    ]
    conn.close()
    return texts


def flip(data: bytearray, rng: random.Random, mode: str, texts: list[bytes]) -> int:
    """Flip one byte of ``data`` (XOR a non-zero byte); returns its offset."""
    if mode == "result":
        text = rng.choice(texts)
        starts = [i for i in range(len(data)) if data.startswith(text, i)]
        at = rng.choice(starts) + rng.randrange(len(text))
    else:
        at = rng.randrange(len(data))
    data[at] ^= rng.randrange(1, 256)
    return at


def trial(path: Path) -> str:
    """Replay the run from ``path``; its outcome (see the module's docstring)."""
    CALLED.clear()
    try:
        with Journal(GOAL, path=path, run=RUN, seal=SEAL[0]) as j:
            if not replay(j):
                return "wrong"
    except (LetItLoopError, RunWaiting):  # a damaged wait's status: it waits again
        return "refused"
    except Exception as exc:  # counted and shown, never hidden
        return f"other: {type(exc).__name__}: {exc}"
    finally:
        close_idle_stores()
    return "reran" if CALLED else "intact"


def run(files: int, seed: int, mode: str, seal: bool = False) -> dict[str, Any]:
    SEAL[0] = "fault-injection-seal-key" if seal else None
    rng = random.Random(seed)
    outcomes: Counter[str] = Counter()
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder) / "base.db"
        texts = build(base)
        original = base.read_bytes()
        for n in range(files):
            how = mode if mode != "both" else ("result" if n % 2 else "random")
            data = bytearray(original)
            flip(data, rng, how, texts)
            path = Path(folder) / f"t{n}.db"
            path.write_bytes(data)
            outcome = trial(path)
            outcomes[outcome if not outcome.startswith("other") else "other"] += 1
            if outcome.startswith("other"):
                outcomes[outcome] += 1
            for p in Path(folder).glob(f"t{n}.db*"):  # the file, -wal, -shm, -locks
                shutil.rmtree(p) if p.is_dir() else p.unlink()
    return {
        "files": files,
        "seed": seed,
        "mode": mode,
        "sealed": seal,
        "steps": STEPS,
        **{k: outcomes.get(k, 0) for k in ("intact", "reran", "refused", "wrong", "other")},
        "others": sorted(k for k in outcomes if k.startswith("other:")),
        "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--mode", choices=("random", "result", "both"), default="both")
    parser.add_argument("--seal", action="store_true", help="Write and replay with a seal key.")
    args = parser.parse_args()
    print(json.dumps(run(args.files, args.seed, args.mode, args.seal)))


if __name__ == "__main__":
    main()
