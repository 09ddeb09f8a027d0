"""Cost of a durable step, side by side with the raw SQLite floor, in one run.

    python benchmarks/bench_steps.py [--steps 2000] [--repeats 7]

The floor (one INSERT + COMMIT per row with sqlite3, same table shape and
mode) and letitloop's fresh steps are measured in alternating blocks, a block
of floor steps then a block of letitloop steps, and each repeat's ratio is
taken within its own pair of blocks: on a shared machine whose speed moves
minute to minute, the ratio of neighbours is stable where two medians taken
minutes apart are not. The headline is the median of those ratios.

Also: replay per step, the argument fingerprint a fresh step pays, the cost
of a whole short run (open + close in a warm process), opening a journal of
10,000 steps, the bytes on disk after closing a run of 1,000 steps (more in
``benchmarks/disk.py``), ``import letitloop``, what OpenTelemetry spans add to a
step (``benchmarks/otel_steps.py``), and which modules ``import letitloop``
loads beyond what its step path needs (the check fails, with exit status 1,
on any module not in ``STEP_PATH_MODULES``). The fuller picture (large
results, growth to 100k steps, memory) is ``python -m benchmarks.overhead``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import overhead
from benchmarks._report import environment, median_of, ms, table, us
from benchmarks.disk import disk_after_1000, disk_per_1000_more
from benchmarks.otel_steps import otel_rows, traced_step_cost
from benchmarks.overhead import (
    ARGS,
    SMALL,
    args_of,
    clock,
    fingerprint_cost,
    fresh_steps,
    fresh_steps_with_args,
    open_time,
    plain_call,
    raw_floor,
    record,
    replay_steps,
    use_cpu_clock,
)
from letitloop import Journal
from letitloop.stores.sqlite import connect

#: The page size of a journal's new files (a tree from before it was chosen: SQLite's).
PAGE_SIZE: int = getattr(connect, "PAGE_SIZE", 4096)

#: What the step path needs, and so what ``import letitloop`` may load: the
#: modules these imports bring into a bare interpreter. Anything else that
#: ``import letitloop`` loads is reported, and fails the check.
STEP_PATH_IMPORTS = (
    "sqlite3",
    "msgspec",
    "msgspec.json",
    "msgspec.msgpack",
    "datetime",
    "threading",
    "contextvars",
    "bisect",
    "collections",
    "functools",
    "itertools",
    "re",
    "typing",
    "weakref",
    "math",
    "operator",
    "gc",
    "errno",
    "stat",
    "contextlib",
    "decimal",  # Decimal results
    "uuid",  # UUID results
    "enum",
    "base64",
    "_blake2",
    "atexit",  # a builtin module: the shared connections are closed at exit
    "fcntl",  # a builtin module: the run's lock is a flock() (locks.py)
    "zlib",  # each step row's CRC-32 (checksums.py)
)


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"import sys\n{code}\nprint(' '.join(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(out.stdout.split())


def needless_modules() -> list[str]:
    """Modules ``import letitloop`` loads that its step path does not need."""
    floor = _modules_after("import " + ", ".join(STEP_PATH_IMPORTS))
    loaded = _modules_after("import letitloop")
    return sorted(m for m in loaded - floor if m != "letitloop" and not m.startswith("letitloop."))


def _compiled_env() -> dict[str, str]:
    """The environment with bytecode caching on, as an installed package has it.

    With PYTHONDONTWRITEBYTECODE set (some sandboxes set it) every import
    compiles letitloop's modules again, which is not what users pay.
    """
    import os

    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def import_time() -> float:
    code = "import time; t = time.perf_counter(); import letitloop; print(time.perf_counter() - t)"
    env = _compiled_env()
    subprocess.run([sys.executable, "-c", "import letitloop"], env=env, check=True)  # compile
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    return float(out.stdout)


_FIRST_STEP = (
    "import sys, time\nfrom letitloop import Journal\n"
    "with Journal('g', path=sys.argv[1]) as j:\n    j.step('a', str, 1)\n"
    "    print(time.time())\n"
)


def spawn_to_first_step(db: Path) -> float:
    """Wall time from spawning a process to its first step committed (read off its clock)."""
    t0 = time.time()
    out = subprocess.run(
        [sys.executable, "-c", _FIRST_STEP, str(db)],
        check=True,
        env=_compiled_env(),
        capture_output=True,
        text=True,
    )
    return float(out.stdout) - t0


def bare_interpreter() -> float:
    """Wall time of ``python -c pass``: what every process pays before importing anything."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - t0


def short_runs(runs: int, steps: int, db: Path) -> float:
    """Seconds per run of ``steps`` small steps, ``runs`` runs in a row in this process."""

    def produce(i: int) -> dict[str, int]:
        return {"i": i}

    t0 = clock()
    for r in range(runs):
        with Journal("short", path=db, input=r) as j:
            for i in range(steps):
                j.step(f"s{i}", produce, i)
    return (clock() - t0) / runs


def interleaved_ratio(
    n: int, repeats: int, floor: tuple[str, int], step: tuple[str, int]
) -> tuple[float, float, float, float, float]:
    """(median floor, median step overhead, median per-repeat ratio, and the floor and
    ratio again with the floor's file at the journal's page size), in alternating blocks.

    The floor is SQLite's default file (4 KiB pages); a journal makes its new files
    with 1 KiB pages (``connect.PAGE_SIZE``), so a commit of the floor at that page
    size is shown too: how much of the ratio is the page size and how much the code.
    """
    (sync, fn), (mode, m) = floor, step
    floors, steps, ratios, floors_p, ratios_p = [], [], [], [], []
    for _ in range(repeats):
        f = raw_floor(SMALL, fn, sync)
        s = fresh_steps(SMALL, m, mode) - plain_call(SMALL, m)
        fp = raw_floor(SMALL, fn, sync, PAGE_SIZE)
        floors.append(f)
        steps.append(s)
        ratios.append(s / f)
        floors_p.append(fp)
        ratios_p.append(s / fp)
    return (
        statistics.median(floors),
        statistics.median(steps),
        statistics.median(ratios),
        statistics.median(floors_p),
        statistics.median(ratios_p),
    )


def checksum_cost(n: int) -> float:
    """Seconds per row checksum of a small step with 2 arguments (``checksums.step_sum``),
    paid once when the step is recorded and once when it replays."""
    from letitloop import codec
    from letitloop.identity.fingerprint import Fingerprinter
    from letitloop.identity.ids import new_run_id
    from letitloop.integrity.checksums import step_sum

    run_id, fp = new_run_id(time.time()), Fingerprinter().call(ARGS, {})
    fn, result = "benchmarks.overhead.fetch_user", codec.encode(SMALL)
    t0 = clock()
    for _ in range(n):
        step_sum(run_id, "fetch_user", "done", fn, fp, result, None)
    return (clock() - t0) / n


def keyed_cost(n: int, repeats: int, option: str) -> tuple[float, float]:
    """(seconds per fresh step without a key, extra seconds per step with the key ``option``
    of ``Journal``), the two measured in alternating blocks. ``seal``: a chain entry per row
    (letitloop/stores/sqlite/seals.py); ``encryption_key``: the result encrypted (encryption.py)."""
    plain, extra = [], []
    for _ in range(repeats):
        times = []
        for key in (None, "bench-key-0123456789abcdef"):
            with (
                tempfile.TemporaryDirectory() as d,
                Journal("bench", path=Path(d) / "j.db", **{option: key}) as j,
            ):
                t0 = time.perf_counter()
                for i in range(n):
                    j.step(f"s{i}", str, i)
                times.append((time.perf_counter() - t0) / n)
        plain.append(times[0])
        extra.append(times[1] - times[0])
    return statistics.median(plain), statistics.median(extra)


def sealed_replay_cost(n: int, repeats: int) -> tuple[float, float]:
    """(seconds per replayed step of a sealed run without the key, extra seconds per replayed
    step with it), the two in alternating blocks over one sealed run of ``n`` steps. Each
    block times a whole attempt (open, ``n`` replays, close), so the extra holds each row's
    check against its seal (a SHA-256) and its share of the open's read and check of the
    chain (an HMAC-SHA256 per entry): letitloop/integrity/chains.py, ``SealedRows``."""
    key = "bench-key-0123456789abcdef"
    plain, extra = [], []
    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "sealed.db"
        with Journal("bench", run="sealed", path=db, seal=key) as j:
            for i in range(n):
                j.step(f"s{i}", str, i)
        for r in range(repeats):
            times: dict[str | None, float] = {}
            for k in (None, key) if r % 2 == 0 else (key, None):
                t0 = overhead.clock()
                with Journal("bench", run="sealed", path=db, seal=k) as j:
                    for i in range(n):
                        j.step(f"s{i}", str, i)
                times[k] = (overhead.clock() - t0) / n
            plain.append(times[None])
            extra.append(times[key] - times[None])
    return statistics.median(plain), statistics.median(extra)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="in-process rows in CPU time (user + system) instead of wall time: on a loaded "
        "machine they swing less; a power-mode commit's fsync is then not counted",
    )
    args = parser.parse_args()
    n, r = args.steps, args.repeats
    if args.cpu:
        use_cpu_clock()

    call = median_of(r, lambda: plain_call(SMALL, n))
    floor_n, step_n, ratio_n, floor_np, ratio_np = interleaved_ratio(
        n, r, ("NORMAL", n), ("process", n)
    )
    # Power steps fsync: fewer per block, as many blocks.
    floor_f, step_f, ratio_f, floor_fp, ratio_fp = interleaved_ratio(
        n, r, ("FULL", n // 8), ("power", n // 8)
    )
    step_args = median_of(r, lambda: fresh_steps_with_args(SMALL, n))
    fingerprint = median_of(r, lambda: fingerprint_cost(n * 10, args_of))
    fingerprint_again = median_of(r, lambda: fingerprint_cost(n * 10))
    checksum = median_of(r, lambda: checksum_cost(n * 10))
    unsealed, sealing = keyed_cost(n, r, "seal")
    unencrypted, encrypting = keyed_cost(n, r, "encryption_key")
    unsealed_replay, sealed_replay = sealed_replay_cost(n, r)
    with tempfile.TemporaryDirectory() as d:
        small, big = Path(d) / "small.db", Path(d) / "big.db"
        record(small, n)
        replay = median_of(r, lambda: replay_steps(small, n))
        with_args, same_args = Path(d) / "args.db", Path(d) / "same.db"
        record(with_args, n, args=args_of)
        replay_args = median_of(r, lambda: replay_steps(with_args, n, args=args_of))
        record(same_args, n, args=ARGS)
        replay_same = median_of(r, lambda: replay_steps(same_args, n, args=ARGS))
        record(big, 10_000)
        opened = median_of(r, lambda: open_time(big))
        disk = disk_after_1000(Path(d))
        disk_more = disk_per_1000_more(Path(d))
        runs_db = Path(d) / "runs.db"
        short_runs(50, 3, runs_db)  # warm: the file exists, the process has opened it
        per_run3 = median_of(r, lambda: short_runs(1000 // max(1, r // 3), 3, runs_db))
    per_run = per_run3 - 3 * (step_n + call)
    imported = median_of(r, import_time)
    with tempfile.TemporaryDirectory() as d:
        new_files = iter(Path(d) / f"new{i}.db" for i in range(1000))
        first_new = median_of(r, lambda: spawn_to_first_step(next(new_files)))
        existing = Path(d) / "existing.db"
        spawn_to_first_step(existing)
        first_existing = median_of(r, lambda: spawn_to_first_step(existing))
    bare = median_of(r, bare_interpreter)
    needless = needless_modules()
    traced = traced_step_cost(n, r)  # last: it sets the process's tracer provider

    print(environment())
    print(f"{n} steps per repeat, median of {r} repeats; ratios are per repeat, then median")
    print(
        "in-process rows in CPU time (user + system; processes: wall)\n"
        if args.cpu
        else "wall time\n"
    )
    print(
        table(
            ["measure", "median", "ratio"],
            [
                ["plain call of the step function", us(call), ""],
                ["raw floor: INSERT+COMMIT, WAL, synchronous=NORMAL", us(floor_n), "1.00x"],
                [
                    'fresh step, durability="process", overhead over the call',
                    us(step_n),
                    f"{ratio_n:.2f}x floor",
                ],
                [
                    f"the same floor in a file of {PAGE_SIZE:,}-byte pages (the journal's)",
                    us(floor_np),
                    f"step: {ratio_np:.2f}x this floor",
                ],
                ["raw floor: INSERT+COMMIT, WAL, synchronous=FULL", us(floor_f), "1.00x"],
                [
                    'fresh step, durability="power", overhead over the call',
                    us(step_f),
                    f"{ratio_f:.2f}x floor",
                ],
                [
                    f"the same floor in a file of {PAGE_SIZE:,}-byte pages (the journal's)",
                    us(floor_fp),
                    f"step: {ratio_fp:.2f}x this floor",
                ],
                [
                    "fresh step with 2 small arguments (new at every step), over the call",
                    us(step_args - call),
                    f"{(step_args - call) / floor_n:.2f}x floor",
                ],
                [
                    "argument fingerprint of 2 small arguments (in the above)",
                    us(fingerprint),
                    f"the same 2 again: {us(fingerprint_again)}",
                ],
                [
                    "row checksum of a small step (in a fresh step and in its replay)",
                    us(checksum),
                    "",
                ],
                [
                    "seal key set: extra per fresh step (its chain entry, HMAC-SHA256)",
                    us(sealing),
                    f"step without {us(unsealed)}",
                ],
                [
                    "encryption key set: extra per fresh step (AES-GCM of its result)",
                    us(encrypting),
                    f"step without {us(unencrypted)}",
                ],
                ["replay of a recorded step", us(replay), ""],
                [
                    "seal key set: extra per replayed step (checked against its seal)",
                    us(sealed_replay),
                    f"replay without {us(unsealed_replay)} (with open and close)",
                ],
                [
                    "replay of a recorded step with 2 small arguments (new at every step)",
                    us(replay_args),
                    f"the same 2 at every step: {us(replay_same)}",
                ],
                [
                    "a run of 3 steps in a warm process, open + close (steps taken out)",
                    f"{per_run * 1e3:.2f} ms",  # the target is 0.4 ms: one more digit
                    "",
                ],
                ["open a journal holding 10,000 steps", ms(opened), ""],
                [
                    "disk after close, one run of 1,000 small steps (file + -wal)",
                    f"{disk / 1024:,.0f} KiB",
                    "benchmarks/disk.py",
                ],
                [
                    "disk per 1,000 more small steps (1,000 to 10,000 in one run)",
                    f"{disk_more / 1024:,.0f} KiB",
                    "the file's fixed cost out",
                ],
                [
                    "import letitloop, timed inside a fresh interpreter",
                    ms(imported),
                    f"bare interpreter {ms(bare)}",
                ],
                [
                    "spawn -> first step committed, new journal file",
                    ms(first_new),
                    "",
                ],
                ["spawn -> first step committed, existing journal file", ms(first_existing), ""],
                ["modules import letitloop loads needlessly", " ".join(needless) or "none", ""],
                *otel_rows(traced),
            ],
        )
    )
    if needless:
        print(
            f"\nFAIL: import letitloop loads {len(needless)} module(s) its step path does not "
            f"need: {' '.join(needless)}"
        )
        sys.exit(1)


if __name__ == "__main__":
    main()
