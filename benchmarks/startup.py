"""Start-up side by side: two (or more) checkouts of letitloop, measured in alternating rounds.

    python benchmarks/startup.py [--rounds 100] PATH [PATH ...]

Each PATH is a source checkout put on ``PYTHONPATH`` (``/work/main`` and a
worktree, say). A round measures every PATH once, in alternating order, and
each figure is the median over the rounds: on a shared machine whose speed
moves minute to minute, neighbours compare where two runs minutes apart do
not. Per PATH:

- ``import (in)``: ``import letitloop`` timed inside a fresh interpreter
  (what ``bench_steps.py`` reports), wall and CPU;
- ``import (wall - bare)``: ``python -c "import letitloop"`` less
  ``python -c pass``, spawn to exit (interpreter teardown included);
- ``spawn -> first step``: from spawning a process to its first step
  committed (``Journal`` opened, a step, read off the child's clock), on a
  new journal file and on an existing one; with the child's whole CPU time.

Bytecode caching is on (``PYTHONDONTWRITEBYTECODE`` is dropped), as an
installed package has it. Bias: wall figures move with the machine's load;
the CPU figures move less, so look at both.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_FIRST_STEP = (
    "import sys, time\nfrom letitloop import Journal\n"
    "with Journal('g', path=sys.argv[1]) as j:\n    j.step('a', str, 1)\n"
    "    print(time.time())\n"
)
_IMPORT = (
    "import time\nt, c = time.perf_counter(), time.process_time()\nimport letitloop\n"
    "print(time.perf_counter() - t, time.process_time() - c)\n"
)
#: The children's working folder, an empty one (see _run); set by main().
_CWD = ""

_FIGURES = (
    "import (in), wall",
    "import (in), CPU",
    "import (wall - bare)",
    "spawn -> first step, new file",
    "  its CPU",
    "spawn -> first step, existing file",
    "  its CPU",
)


def _run(code: str, env: dict[str, str], *args: str) -> tuple[float, float, float, str]:
    """(spawn time, wall to exit, the child's CPU seconds, its stdout) of ``python -c code``.

    Run in the empty folder ``_CWD``: ``python -c`` puts its working folder
    first on ``sys.path``, and a checkout there would shadow ``PYTHONPATH``.
    """
    t0 = time.time()
    child = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        cwd=_CWD,
    )
    assert child.stdout is not None
    out = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"python -c {code!r} failed")
    return t0, time.time() - t0, usage.ru_utime + usage.ru_stime, out


def _round(env: dict[str, str], new: Path, existing: Path) -> list[float]:
    _, _, _, out = _run(_IMPORT, env)
    wall, cpu = map(float, out.split())
    _, bare, _, _ = _run("pass", env)
    _, imported, _, _ = _run("import letitloop", env)
    t0, _, new_cpu, out = _run(_FIRST_STEP, env, str(new))
    first_new = float(out) - t0
    t0, _, old_cpu, out = _run(_FIRST_STEP, env, str(existing))
    first_old = float(out) - t0
    return [wall, cpu, imported - bare, first_new, new_cpu, first_old, old_cpu]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("paths", nargs="+", help="checkouts to put on PYTHONPATH")
    args = parser.parse_args()
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    envs = [dict(base, PYTHONPATH=str(Path(p).resolve())) for p in args.paths]
    figures: list[list[list[float]]] = [[] for _ in envs]
    global _CWD
    with tempfile.TemporaryDirectory() as folder:
        _CWD = str(Path(folder, "cwd"))
        os.mkdir(_CWD)
        for env, path in zip(envs, args.paths, strict=True):
            _, _, _, where = _run("import letitloop; print(letitloop.__file__)", env)
            if not where.startswith(str(Path(path).resolve())):
                raise SystemExit(f"{path}: letitloop was imported from {where.strip()}")
        existing = [Path(folder) / f"existing{i}.db" for i in range(len(envs))]
        for env, db in zip(envs, existing, strict=True):  # compile, and make the existing file
            _run(_FIRST_STEP, env, str(db))
        for r in range(args.rounds):
            order = range(len(envs)) if r % 2 == 0 else reversed(range(len(envs)))
            for i in order:
                new = Path(folder) / f"new{r}-{i}.db"
                figures[i].append(_round(envs[i], new, existing[i]))
    import sqlite3

    print(
        f"Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}, "
        f"{args.rounds} alternating rounds, medians in ms, "
        f"load average {os.getloadavg()[0]:.2f} at the end"
    )
    width = max(len(p) for p in args.paths)
    print(" " * 36 + "  ".join(p.rjust(width) for p in args.paths))
    for k, name in enumerate(_FIGURES):
        cells = [f"{statistics.median(row[k] for row in f) * 1000:.1f}" for f in figures]
        print(f"{name:<36}" + "  ".join(c.rjust(width) for c in cells))


if __name__ == "__main__":
    main()
