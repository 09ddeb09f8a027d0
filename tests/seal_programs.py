"""The child programs the seal and encryption tests run, on a journal file or a
PostgreSQL URL (argv[1]), and the environment they run in: test_seals.py and
test_encryption.py run them on SQLite, test_postgres_seals.py on PostgreSQL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECRET = "PLAINTEXT-SECRET-4711"

#: Run "r1" of goal "g": steps a..e (the t:i from threads, e with a child step), a
#: marker, a sleep; then, with argv[2] == "kill", SIGKILL before step f.
SEALED = """
import os, signal, sys, threading
from letitloop import Journal

with Journal("g", path=sys.argv[1], run="r1") as j:
    j.step("a", lambda: {"n": 1})
    j.step("b", lambda: [2, "two"])
    threads = [threading.Thread(target=j.step, args=(f"t:{i}", lambda i=i: i)) for i in range(6)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    j.step("e", lambda: j.step("child", lambda: "inner") + "!")
    with j.atomic_marker("notify") as go:
        pass
    j.sleep("nap", 0)
    if len(sys.argv) > 2 and sys.argv[2] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    j.step("f", lambda: "last")
    print(j.run_id)
"""

#: Run "r1": step a (a secret result, "called a" printed when it runs), step b (fails with
#: a secret message, caught); SIGKILL when argv[2] == "kill", else step c and the result.
ENCRYPTED = f"""
import os, signal, sys
from letitloop import Journal
from letitloop.errors import LetItLoopError

def a():
    print("called a", flush=True)
    return {{"token": "{SECRET}-a"}}

def b():
    raise ValueError("{SECRET}-error")

try:
    with Journal("g", path=sys.argv[1], run="r1", input={{"user": "{SECRET}-input"}}) as j:
        print("got", j.step("a", a)["token"], flush=True)
        try:
            j.step("b", b)
        except ValueError:
            pass
        if sys.argv[2] == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        j.step("c", lambda: "{SECRET}-c")
        j.set_result("{SECRET}-run")
except LetItLoopError as exc:
    print(type(exc).__name__, exc)
"""

#: Run "r1" of goal "w" waits for "approval" (argv[2] == "live": in the process, with
#: "waiting" printed first; else it stops to wait, exit 75), prints the value's note and
#: returns the value as the run's result.
WAITER = """
import sys
from letitloop import Journal, RunWaiting
from letitloop.errors import LetItLoopError

try:
    with Journal("w", path=sys.argv[1], run="r1") as j:
        if sys.argv[2] == "live":
            print("waiting", flush=True)
            value = j.wait_for("approval", timeout=60)
        else:
            value = j.wait_for("approval", stop_after=0)
        print("got", value["note"], flush=True)
        j.set_result(value)
except LetItLoopError as exc:
    print(type(exc).__name__, exc, flush=True)
"""

#: The value ``lil send`` sends the waiter.
SENT = '{"note": "' + SECRET + '-sent"}'


def keyless_env(**extra: str) -> dict[str, str]:
    """This process's environment without a seal or an encryption key, then ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("LETITLOOP_SEAL_KEY", "LETITLOOP_ENCRYPTION_KEY")
    }
    env.update(extra)
    return env


def run_program(
    program: str, location: str | Path, *args: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """``program`` run to its end in a process of its own (helpers.run_forked: forked from
    an interpreter that imported letitloop and opened nothing) with the journal's location
    as argv[1], in the checkout's folder."""
    from helpers import preload_for, program_file, run_forked

    script, preload = program_file(program), preload_for(location)
    return run_forked(script, str(location), *args, cwd=ROOT, env=env, preload=preload)


def run_lil(
    location: str | Path, *args: str, env: dict[str, str], stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``lil --db location ARGS`` in a process of its own: forked (helpers.lil_forked)
    unless it reads ``stdin``, then a fresh interpreter."""
    if stdin is None:
        from helpers import lil_forked, preload_for

        return lil_forked(
            "--db", str(location), *args, cwd=ROOT, env=env, preload=preload_for(location)
        )
    return subprocess.run(
        [sys.executable, "-m", "letitloop", "--db", str(location), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        input=stdin,
    )
