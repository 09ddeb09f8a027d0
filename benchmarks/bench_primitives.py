"""What the primitives cost: a retry policy that never fires, and how soon a wait wakes.

    python benchmarks/bench_primitives.py [--steps 2000] [--repeats 9] [--wakes 30]

1. A fresh step with ``retry=RetryPolicy()`` whose function never raises,
   against the same step without a policy, in alternating blocks; each
   repeat's ratio is taken within its own pair of blocks (as
   ``bench_steps.py`` does), and the headline is the median ratio. It must
   stay within the noise of a plain step: the policy costs nothing until a
   try fails.
2. The wake-up latency of ``wait_for``: a child process waits, this process
   sends it a value, the child notes when ``wait_for`` returned. Measured
   three ways: from a ``send_text`` on an open connection (the wake-up
   itself: the waiter's nap, its look at the file, its read), from a
   ``letitloop.send()`` call (plus opening the journal file), and from
   starting ``lil send`` (plus a Python interpreter and click). Each send
   comes a random 0-60 ms after the waiter began waiting, so that every
   phase of its nap is sampled.
3. The CPU a process uses while it waits (or sleeps) for 5 s: read from
   ``/proc/<pid>/stat`` (Linux), in percent of one core.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import environment, ms, publish, table, us
from letitloop import Journal, RetryPolicy
from letitloop.inspection import open_journal_file
from letitloop.supervision.control import send_text

WAITER = """
import sys, time
from letitloop import Journal

db, n, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with Journal("bench", path=db) as j:
    if mode == "idle":  # wait (or sleep) with nothing coming, for the CPU figure
        print("ready", flush=True)
        if sys.argv[4] == "sleep":
            j.sleep("nap", 5)
        else:
            try:
                j.wait_for("never", timeout=5)
            except TimeoutError:
                pass
        sys.exit(0)
    for i in range(n):
        j.wait_for("v")
        print("woke", repr(time.time()), flush=True)
"""


def _produce() -> dict[str, int]:
    return {"i": 1}


def steps(n: int, policy: RetryPolicy | None, folder: Path, tag: str) -> float:
    """Seconds per fresh step of ``_produce``, with ``policy`` (never firing) or none."""
    with Journal("bench", path=folder / f"{tag}.db") as j:
        if policy is None:
            t0 = time.perf_counter()
            for i in range(n):
                j.step(f"s{i}", _produce)
        else:
            t0 = time.perf_counter()
            for i in range(n):
                j.step(f"s{i}", _produce, retry=policy)
        return (time.perf_counter() - t0) / n


def retry_cost(n: int, repeats: int) -> tuple[float, float, float, list[float]]:
    """(median plain, median with policy, median ratio, every ratio), in alternating blocks."""
    policy = RetryPolicy(max_attempts=5, initial_backoff=0.5, jitter=0.1)
    plain, with_policy, ratios = [], [], []
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        for r in range(repeats):
            a = steps(n, None, folder, f"plain{r}")
            b = steps(n, policy, folder, f"policy{r}")
            plain.append(a)
            with_policy.append(b)
            ratios.append(b / a)
    return (
        statistics.median(plain),
        statistics.median(with_policy),
        statistics.median(ratios),
        ratios,
    )


def _waiting(store: object, n: int) -> bool:
    """Whether the waiter's ``n``-th wait (``v``, ``v#2``, …) is written and waiting."""
    key = "v" if n == 1 else f"v#{n}"
    rows = store.query(  # type: ignore[attr-defined]
        "SELECT status FROM journal_bench WHERE key = ?", (key,)
    )
    return bool(rows) and rows[0][0] == "waiting"


def wake_latency(wakes: int, how: str, rng: random.Random) -> list[float]:
    """Seconds from the start of a send to the waiter's return from wait_for, ``wakes`` times."""
    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "j.db"
        script = Path(d) / "waiter.py"
        script.write_text(WAITER, encoding="utf-8")
        Journal("bench", path=db).open().close()  # the file and the goal's table
        waiter = subprocess.Popen(
            [sys.executable, str(script), str(db), str(wakes), "wakes"],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert waiter.stdout is not None
        store = open_journal_file(db)
        out = []
        try:
            for n in range(1, wakes + 1):
                while not _waiting(store, n):
                    time.sleep(0.002)
                time.sleep(rng.uniform(0, 0.06))
                t0 = time.time()
                if how == "send_text":
                    send_text(store, "bench", "v", "1")
                elif how == "send":
                    from letitloop import send

                    send("bench", "v", 1, path=db)
                else:
                    subprocess.run(
                        [
                            sys.executable,
                            "-m",
                            "letitloop",
                            "--db",
                            str(db),
                            "send",
                            "bench",
                            "v",
                            "1",
                        ],
                        check=True,
                        capture_output=True,
                    )
                line = waiter.stdout.readline().split()
                out.append(float(line[1]) - t0)
        finally:
            store.close()
            waiter.wait(timeout=60)
    return out


def idle_cpu(what: str) -> float:
    """Percent of one core a process uses while it waits (or sleeps) 5 s in a journal."""
    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "j.db"
        script = Path(d) / "waiter.py"
        script.write_text(WAITER, encoding="utf-8")
        waiter = subprocess.Popen(
            [sys.executable, str(script), str(db), "0", "idle", what],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert waiter.stdout is not None
        waiter.stdout.readline()
        tick = os.sysconf("SC_CLK_TCK")

        def cpu() -> float:
            fields = Path(f"/proc/{waiter.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / tick  # utime + stime

        time.sleep(0.5)  # past the first look
        c0, t0 = cpu(), time.monotonic()
        time.sleep(4)
        c1, t1 = cpu(), time.monotonic()
        waiter.wait(timeout=60)
    return (c1 - c0) / (t1 - t0) * 100


def _p(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--wakes", type=int, default=30)
    parser.add_argument("--no-write", action="store_true", help="Print only.")
    args = parser.parse_args()
    rng = random.Random(20261130)

    plain, policy, ratio, ratios = retry_cost(args.steps, args.repeats)
    body = f"{args.steps} fresh steps per block, {args.repeats} alternating pairs of blocks\n\n"
    body += table(
        ["measure", "median", "ratio"],
        [
            ["fresh step, no retry policy", us(plain), "1.00x"],
            ["fresh step, retry=RetryPolicy() that never fires", us(policy), f"{ratio:.3f}x"],
            [
                "per-pair ratios (min … max)",
                "",
                f"{min(ratios):.3f}x … {max(ratios):.3f}x",
            ],
        ],
    )
    rows = []
    for how, label in (
        ("send_text", "send_text() on an open connection: the wake-up itself"),
        ("send", "letitloop.send() (opens the journal file)"),
        ("lil", "lil send (a new interpreter)"),
    ):
        got = wake_latency(args.wakes if how != "lil" else max(5, args.wakes // 3), how, rng)
        rows.append([label, len(got), ms(statistics.median(got)), ms(_p(got, 0.95)), ms(max(got))])
    body += "\n\nFrom the start of a send to the waiter's return from `wait_for`:\n\n"
    body += table(["sent with", "wakes", "median", "p95", "max"], rows)
    if Path("/proc/self/stat").exists():
        body += "\n\nCPU of a process waiting with nothing coming (4 s measured):\n\n"
        body += table(
            ["waiting in", "CPU, % of one core"],
            [
                ["wait_for (timeout 5 s)", f"{idle_cpu('wait'):.2f} %"],
                ["sleep (5 s)", f"{idle_cpu('sleep'):.2f} %"],
            ],
        )
    command = (
        f"python benchmarks/bench_primitives.py --steps {args.steps} --repeats {args.repeats} "
        f"--wakes {args.wakes}"
    )
    if args.no_write:
        print(environment() + "\n\n" + body)
    else:
        publish("primitives", "What the primitives cost", command, body)


if __name__ == "__main__":
    main()
