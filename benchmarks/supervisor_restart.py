"""What a restart under ``lil watch`` costs beyond starting Python again.

Runs a trivial child that SIGKILLs itself N times and then exits 0, under
``lil watch --backoff 0`` (the watcher's bookkeeping: the policy, two or
three journal rows per event, the process-group cleanup), and side by side
the same N+1 plain ``python child.py`` runs in a shell-like loop. The
difference divided by N is the watcher's overhead per restart. On Linux it
also times the same plain starts through the exec shim that arms each
child's parent-death signal (``letitloop/supervision/_exec_shim.py``), which is part of
that overhead. Medians of several rounds; the machine is shared, so expect
noise of a few ms.

    python benchmarks/supervisor_restart.py [N] [ROUNDS]
"""

from __future__ import annotations

import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from letitloop.supervision._exec_shim import shim_argv

CHILD = """
import os, signal, sys
n = int(os.environ.get("LETITLOOP_ATTEMPT", "0"))
if 0 < n <= int(sys.argv[1]):
    os.kill(os.getpid(), signal.SIGKILL)
"""


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    lil = str(Path(sys.executable).with_name("lil"))
    print(
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"{platform.machine()} {os.cpu_count()} CPUs; {n} restarts x {rounds} rounds"
    )
    watched: list[float] = []
    single: list[float] = []
    plain: list[float] = []
    shimmed: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        child = Path(tmp) / "child.py"
        child.write_text(CHILD)
        env = {k: v for k, v in os.environ.items() if not k.startswith("LETITLOOP_")}
        env["LETITLOOP_DB"] = str(Path(tmp) / "journal.db")

        def watch(restarts: int) -> float:
            t0 = time.perf_counter()
            policy = ["--backoff", "0", "--burst", str(restarts + 1), "--max-restarts"]
            subprocess.run(
                [lil, "watch", *policy, str(restarts), str(child), str(restarts)],
                env=env,
                check=True,
                stderr=subprocess.DEVNULL,
            )
            return time.perf_counter() - t0

        for _ in range(rounds):
            watched.append(watch(n))
            single.append(watch(0))
            t0 = time.perf_counter()
            for _ in range(n + 1):
                subprocess.run([sys.executable, str(child), "0"], env=env, check=True)
            plain.append(time.perf_counter() - t0)
            if sys.platform.startswith("linux"):
                t0 = time.perf_counter()
                for _ in range(n + 1):
                    argv = shim_argv(os.getpid(), [sys.executable, str(child), "0"])
                    subprocess.run(argv, env=env, check=True)
                shimmed.append(time.perf_counter() - t0)
    w, one, p = (statistics.median(x) for x in (watched, single, plain))
    per_restart = (w - one) / n
    per_plain = p / (n + 1)
    print(f"lil watch, 1 start (no restart): median {one * 1000:.0f} ms")
    print(f"lil watch, {n + 1} starts: median {w * 1000:.0f} ms")
    print(f"each restart under lil watch --backoff 0: {per_restart * 1000:.1f} ms")
    print(f"each plain 'python child.py' start: {per_plain * 1000:.1f} ms")
    print(f"watcher overhead per restart: {(per_restart - per_plain) * 1000:.1f} ms")
    if shimmed:
        per_shim = statistics.median(shimmed) / (n + 1)
        print(f"each 'python child.py' start through the exec shim: {per_shim * 1000:.1f} ms")
        print(f"of which the shim (parent-death signal): {(per_shim - per_plain) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
