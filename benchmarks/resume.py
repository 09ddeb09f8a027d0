"""Resuming a SIGKILLed run: spawn to result, side by side with its floors, in one run.

    python benchmarks/resume.py [--rounds 30] [--steps 1000] [PATH ...]

Setup: a child runs ``PROGRAM``, a ``@durable`` function of ``--steps``
small steps (each returns a two-key dict), and kills itself with a real
``SIGKILL`` inside the last step's function, once that step's call has
started. The journal file then holds ``--steps - 1`` recorded steps and a run
still marked running, with the ``-wal``, ``-shm`` and lock folder exactly as
the killed process left them (the log is not checkpointed: nobody closed the
file). That crash state is copied afresh before every measurement.

Each round measures, in alternating order (so a change in the machine's load
hits every row alike), each a fresh ``python`` process:

- **bare**: ``python -c pass``, spawn to exit: what any process pays;
- **import sqlite3 + msgspec**: the floor's imports and nothing else, spawn
  to a printed clock. ``msgspec`` loads ``datetime``, ``decimal``, ``uuid``
  and, where ``typing_extensions`` is installed (any environment with
  Pydantic; this repository's dev environment), ``inspect`` with ``ast``,
  ``dis`` and ``tokenize``: about a fifth of its import;
- **sqlite3 + msgspec floor**: imports only ``sqlite3`` and ``msgspec``, opens
  the same copy with ``sqlite3`` (recovering its ``-wal``, as any first
  connection after a crash does), reads the run's recorded result texts in
  journal order from the goal's compact table and decodes each with
  ``msgspec.json``: the least a resume from this file could cost in Python;
- **letitloop resume**, for each PATH (a checkout put on ``PYTHONPATH``, by
  default the one this script is in): runs ``PROGRAM`` again on the copy; it
  resumes the run, replays the recorded steps, runs the last one and prints
  the result.

Reported, medians over the rounds: spawn to the result printed (read off the
child's clock), spawn to exit (the child's interpreter shutdown included,
and for letitloop the checkpoint of the log into the file when the last
connection closes), the child's CPU time, and each figure's excess over the
bare interpreter, taken within its round. Every round is checked, not timed
only: the result is right, the step functions ran once in all (the last
step; every recorded step replayed), and afterwards the journal holds every
step done, the recorded ones untouched by the resumed attempt.

What it does not show: a cold page cache (the copy was just written, so the
file is in memory, as it is after most crashes); a journal holding other
runs or goals; results larger than a small dict; supervision (``lil watch``
adds its own restart delay). Bytecode caching is on (``PYTHONDONTWRITEBYTECODE``
is dropped), as an installed package has it. Bias: wall figures move with
the machine's load; compare the rows of one run, not runs across days.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import environment, table

ROOT = Path(__file__).resolve().parent.parent

#: The program that is killed, then resumed. ``argv``: journal file, steps.
#: ``calls`` counts the step functions that really ran in this process.
PROGRAM = """\
import os, sys, time
from letitloop import durable, step

calls = 0

def work(i):
    global calls
    calls += 1
    return {"i": i, "sq": i * i}

def last(i):
    global calls
    calls += 1
    if os.environ.get("RESUME_BENCH_KILL"):
        import signal  # here: the resume (and the floor) never loads it

        os.kill(os.getpid(), signal.SIGKILL)  # a real SIGKILL, inside the last step's call
    return {"i": i, "sq": i * i}

@durable(goal_id="resume", path=sys.argv[1])
def run(n):
    total = 0
    for i in range(n - 1):
        total += step("s", work, i)["sq"]
    return total + step("s", last, n - 1)["sq"]

result = run(int(sys.argv[2]))
print(result, calls, time.time(), flush=True)
"""

#: The floor: the run's recorded results read and decoded with sqlite3 and msgspec
#: alone. ``argv``: journal file, the goal's compact table, run id. It reads the
#: compact table (``_journal_<goal>``, rows keyed by the run's integer ``num``), as
#: a resume does, not the goal's readable view: the view joins ``runs`` and
#: ``functions`` per row (for these 999 rows 21 M more instructions, counted by
#: valgrind: more than the reading and decoding themselves), which no resume pays.
FLOOR = """\
import sqlite3, sys, time, msgspec
conn = sqlite3.connect(sys.argv[1])
rows = conn.execute(
    f'SELECT result FROM "{sys.argv[2]}" '
    f'WHERE run = (SELECT num FROM runs WHERE id = ?) AND status = \\'done\\' ORDER BY rowid',
    (sys.argv[3],),
).fetchall()
decode = msgspec.json.decode
total = sum(decode(r)["sq"] for (r,) in rows)
print(total, len(rows), time.time(), flush=True)
"""

#: The floor's imports alone: what any resume pays before it reads the file.
IMPORTS = """\
import sqlite3, sys, time, msgspec
print(time.time(), flush=True)
"""

#: The rows of the report, in order; the resume rows follow, one per PATH.
BARE = "bare `python -c pass`"
SQLITE_IMPORTS = "import sqlite3 + msgspec (the floor's imports, nothing read)"
SQLITE_FLOOR = "sqlite3 + msgspec floor: open, read and decode the recorded results"


def expected_total(steps: int) -> int:
    """What ``PROGRAM`` returns for ``steps`` steps: the sum of ``i * i``."""
    return sum(i * i for i in range(steps))


@dataclass
class Crash:
    """A journal file as a SIGKILLed ``PROGRAM`` left it, and what is in it."""

    folder: Path
    table: str
    run_id: str
    steps: int

    def fresh_copy(self, into: Path) -> Path:
        """A copy of the crash state (the file, its -wal, -shm and lock folder) under ``into``."""
        if into.exists():
            shutil.rmtree(into)
        shutil.copytree(self.folder, into)
        return into / "j.db"


def _env(path: Path) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    base.pop("RESUME_BENCH_KILL", None)
    return dict(base, PYTHONPATH=str(path))


def crash(work: Path, path: Path, steps: int) -> Crash:
    """Run ``PROGRAM`` with ``path`` on ``PYTHONPATH`` until it SIGKILLs itself in its last step.

    Raises SystemExit unless it died by SIGKILL leaving ``steps - 1``
    recorded steps and its run marked running.
    """
    folder = work / "crash"
    folder.mkdir(parents=True)
    script = work / "program.py"
    script.write_text(PROGRAM, encoding="utf-8")
    db = folder / "j.db"
    env = dict(_env(path), RESUME_BENCH_KILL="1")
    done = subprocess.run(
        [sys.executable, str(script), str(db), str(steps)],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
    )
    if done.returncode != -signal.SIGKILL:
        raise SystemExit(f"the run to be killed ended with {done.returncode}: {done.stderr}")
    if not Path(f"{db}-wal").exists():
        raise SystemExit("the killed run left no -wal file: not the crash state measured here")
    c = Crash(folder, "", "", steps)
    # Checked on a copy: even a read-only connection rebuilds the -shm index.
    conn = sqlite3.connect(f"{c.fresh_copy(work / 'check').resolve().as_uri()}?mode=ro", uri=True)
    try:
        (table,) = conn.execute("SELECT journal_table FROM goals WHERE goal = 'resume'").fetchone()
        (run_id, status) = conn.execute("SELECT id, status FROM runs").fetchone()
        (recorded,) = conn.execute(
            f"SELECT count(*) FROM \"{table}\" WHERE run = ? AND status = 'done'", (run_id,)
        ).fetchone()
    finally:
        conn.close()
    if status != "running" or recorded != steps - 1:
        raise SystemExit(f"the killed run is {status} with {recorded} steps, not {steps - 1}")
    c.table, c.run_id = table, run_id
    return c


@dataclass
class Timing:
    """One child process: spawn to the result it printed, spawn to exit, its CPU, its output."""

    to_result: float
    to_exit: float
    cpu: float
    out: list[str]


def spawn(args: list[str], env: dict[str, str], cwd: Path) -> Timing:
    """Spawn ``python args``; the last field of its output line is its clock at the result."""
    t0 = time.time()
    child = subprocess.Popen(
        [sys.executable, *args], env=env, cwd=cwd, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    out = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    t_exit = time.time() - t0
    child.stdout.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"python {' '.join(args)} exited with {status}")
    fields = out.split()
    result_at = float(fields[-1]) - t0 if fields else t_exit
    return Timing(result_at, t_exit, usage.ru_utime + usage.ru_stime, fields[:-1])


def resume_once(work: Path, path: Path, c: Crash, label: str) -> Timing:
    """Resume a fresh copy of ``c`` with ``path``'s letitloop, timed, then check what it did.

    Raises SystemExit unless the result is right, only the last step's
    function ran, and the journal afterwards holds every step done, the
    recorded ones as the killed attempt wrote them and the last one by this attempt.
    """
    db = c.fresh_copy(work / f"copy-{label}")
    t = spawn([str(work / "program.py"), str(db), str(c.steps)], _env(path), work)
    result, calls = (int(x) for x in t.out)
    if result != expected_total(c.steps) or calls != 1:
        raise SystemExit(f"{label}: resumed to {result} with {calls} step calls, expected 1")
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    try:
        by_attempt = dict(
            conn.execute(
                f"SELECT attempt, count(*) FROM \"{c.table}\" WHERE run = ? AND status = 'done' "
                f"GROUP BY attempt",
                (c.run_id,),
            ).fetchall()
        )
        (status, attempts) = conn.execute(
            "SELECT status, attempts FROM runs WHERE id = ?", (c.run_id,)
        ).fetchone()
    finally:
        conn.close()
    if by_attempt != {1: c.steps - 1, 2: 1} or (status, attempts) != ("completed", 2):
        raise SystemExit(f"{label}: after the resume the run is {status}, rows {by_attempt}")
    return t


def floor_once(work: Path, path: Path, c: Crash) -> Timing:
    """The sqlite3 + msgspec floor on a fresh copy of ``c``; checks what it read."""
    db = c.fresh_copy(work / "copy-floor")
    compact = f"_{c.table}"  # goals.rows_table: the view's name with a leading underscore
    t = spawn(["-c", FLOOR, str(db), compact, c.run_id], _env(path), work)
    total, rows = (int(x) for x in t.out)
    if rows != c.steps - 1 or total != expected_total(c.steps - 1):
        raise SystemExit(f"the floor read {rows} rows summing to {total}")
    return t


def imports_once(work: Path, path: Path) -> Timing:
    return spawn(["-c", IMPORTS], _env(path), work)


def bare_once(work: Path, path: Path) -> Timing:
    t = spawn(["-c", "pass"], _env(path), work)
    return Timing(t.to_exit, t.to_exit, t.cpu, [])


def measure(
    rounds: int, steps: int, paths: list[Path], work: Path
) -> tuple[dict[str, list[Timing]], dict[str, list[float]]]:
    """Timings per row and, per row, its excess over the bare interpreter within each round."""
    crashes = []
    for i, path in enumerate(paths):
        where = subprocess.run(
            [sys.executable, "-c", "import letitloop; print(letitloop.__file__)"],
            env=_env(path),
            cwd=work,
            capture_output=True,
            text=True,
        ).stdout.strip()
        if not where.startswith(str(path)):
            raise SystemExit(f"{path}: letitloop was imported from {where or 'nowhere'}")
        crashes.append(crash(work / f"path{i}", path, steps))
    labels = [BARE, SQLITE_IMPORTS, SQLITE_FLOOR] + [f"letitloop resume ({p})" for p in paths]
    runs: list[Callable[[], Timing]] = [
        partial(bare_once, work, paths[0]),
        partial(imports_once, work, paths[0]),
        partial(floor_once, work, paths[0], crashes[0]),
    ]
    for i, path in enumerate(paths):
        runs.append(partial(resume_once, work / f"path{i}", path, crashes[i], str(i)))
    for run in runs:  # warm: bytecode compiled, files in the page cache
        run()
    timings: dict[str, list[Timing]] = {label: [] for label in labels}
    excess: dict[str, list[float]] = {label: [] for label in labels}
    for r in range(rounds):
        order = list(range(len(runs)))
        if r % 2:
            order.reverse()
        got = {labels[k]: runs[k]() for k in order}
        bare = got[BARE].to_exit
        for label, t in got.items():
            timings[label].append(t)
            excess[label].append(t.to_result - bare)
    return timings, excess


def report(timings: dict[str, list[Timing]], excess: dict[str, list[float]]) -> str:
    def med(xs: list[float]) -> str:
        return f"{statistics.median(xs) * 1000:.1f} ms"

    rows = []
    for label, ts in timings.items():
        is_bare = label == BARE
        rows.append(
            [
                label,
                "" if is_bare else med([t.to_result for t in ts]),
                "" if is_bare else "+" + med(excess[label]),
                med([t.to_exit for t in ts]),
                med([t.cpu for t in ts]),
            ]
        )
    return table(["process", "spawn -> result", "over bare", "spawn -> exit", "CPU"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument(
        "paths", nargs="*", type=Path, help="checkouts to put on PYTHONPATH (default: this one)"
    )
    args = parser.parse_args()
    paths = [p.resolve() for p in args.paths] or [ROOT]
    with tempfile.TemporaryDirectory() as folder:
        timings, excess = measure(args.rounds, args.steps, paths, Path(folder))
    print(environment())
    print(
        f"`python benchmarks/resume.py --rounds {args.rounds} --steps {args.steps}"
        + "".join(f" {p}" for p in args.paths)
        + f"`: a run of {args.steps} steps SIGKILLed in its last step, resumed; "
        f"{args.rounds} alternating rounds, medians; 'over bare' is taken within each round. "
        f"Every round checked: the result right, {args.steps - 1} steps replayed, "
        f"the last one run once. Load average {os.getloadavg()[0]:.2f} at the end.\n"
    )
    print(report(timings, excess))


if __name__ == "__main__":
    main()
