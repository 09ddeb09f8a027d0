"""The durability contract, run over every mode that must keep it.

Every promise here is checked in each combination of storage backend,
durability and sync/async code, from outside the writer (a second
connection, a fresh process, a child killed with SIGKILL):

- a step's result is committed before ``step()`` returns;
- a fresh process replays it without calling the function;
- after a SIGKILL at a random point, no step that had returned runs again;
- one holder at a time enters a marker, and its body runs once.

A new storage backend (an implementation of ``letitloop.storage.Storage``)
joins by one entry in ``BACKENDS`` and nothing else: a ``Backend`` with its
``name``, its ``location`` (what the child scripts below pass as the
journal's ``path=``, which must select that backend) and its ``done_keys``
(the keys of a goal's done steps, read from outside any writer with the
backend's own client). Nothing else in this file names a backend.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import run_python, spawn_python, write_script


@dataclass(frozen=True)
class Backend:
    """A storage backend the contract runs over; this one is the SQLite journal file."""

    name: str

    def location(self, tmp_path: Path) -> str:
        """What ``path=`` of the journal is for this backend."""
        return str(tmp_path / "journal.db")

    def done_keys(self, location: str, goal: str) -> list[str]:
        """The keys of the goal's done steps, read from outside any writer."""
        conn = sqlite3.connect(location)
        try:
            (table,) = conn.execute(
                "SELECT journal_table FROM goals WHERE goal = ?", (goal,)
            ).fetchone()
            return [
                k
                for (k,) in conn.execute(
                    f"SELECT key FROM \"{table}\" WHERE kind = 'step' AND status = 'done' "
                    f"ORDER BY rowid"
                )
            ]
        finally:
            conn.close()


BACKENDS = [Backend("sqlite")]


@dataclass(frozen=True)
class Mode:
    backend: Backend
    durability: str
    kind: str  # "sync" or "async"

    def __str__(self) -> str:
        return f"{self.backend.name}-{self.durability}-{self.kind}"


MODES = [Mode(b, d, k) for b in BACKENDS for d in ("process", "power") for k in ("sync", "async")]


@pytest.fixture(params=MODES, ids=str)
def mode(request: pytest.FixtureRequest) -> Mode:
    return request.param  # type: ignore[no-any-return]


#: Runs steps s0..s{n-1} of one run; each step's function writes "start i" and
#: "done i" to a side file around a short sleep, and prints "returned i" after
#: the step returned (so the harness knows what returned before a kill).
STEPS = """
    import asyncio, os, sys, time
    from letitloop import Journal

    location, durability, kind, side, n = sys.argv[1:6]
    n = int(n)
    pause = len(sys.argv) > 6  # wait for a line on stdin after each step returned

    def log(line):
        with open(side, "a") as f:
            f.write(line + "\\n")

    def work(i):
        log(f"start {i} {os.getpid()}")
        time.sleep(0.002)
        log(f"done {i} {os.getpid()}")
        return {"i": i, "twice": i * 2}

    async def awork(i):
        log(f"start {i} {os.getpid()}")
        await asyncio.sleep(0.002)
        log(f"done {i} {os.getpid()}")
        return {"i": i, "twice": i * 2}

    def sync_main():
        with Journal("contract", run="r", path=location, durability=durability) as j:
            for i in range(n):
                got = j.step(f"s{i}", work, i)
                assert got == {"i": i, "twice": i * 2}, got
                print("returned", i, flush=True)
                if pause:
                    sys.stdin.readline()

    async def async_main():
        async with Journal("contract", run="r", path=location, durability=durability) as j:
            for i in range(n):
                got = await j.async_step(f"s{i}", awork, i)
                assert got == {"i": i, "twice": i * 2}, got
                print("returned", i, flush=True)
                if pause:
                    sys.stdin.readline()

    if kind == "sync":
        sync_main()
    else:
        asyncio.run(async_main())
    print("finished", flush=True)
"""


def starts(side: Path) -> list[tuple[int, int]]:
    if not side.exists():
        return []
    out = []
    for line in side.read_text().splitlines():
        word, i, pid = line.split()
        if word == "start":
            out.append((int(i), int(pid)))
    return out


class TestAStepThatReturned:
    def test_is_committed_before_step_returns(self, tmp_path: Path, mode: Mode) -> None:
        location = mode.backend.location(tmp_path)
        side = tmp_path / "side.log"
        script = write_script(tmp_path, "steps.py", STEPS)
        child = subprocess.Popen(
            [
                sys.executable,
                "-u",
                str(script),
                location,
                mode.durability,
                mode.kind,
                str(side),
                "3",
                "pause",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdin is not None and child.stdout is not None
        try:
            for i in range(3):
                assert child.stdout.readline().split() == ["returned", str(i)]
                # The child now waits: what another process sees is what step i committed.
                assert mode.backend.done_keys(location, "contract") == [
                    f"s{k}" for k in range(i + 1)
                ]
                child.stdin.write("\n")
                child.stdin.flush()
            child.communicate(timeout=60)
        finally:
            child.kill()
            child.wait()
        assert child.returncode == 0

    def test_is_replayed_by_a_fresh_process_without_calling_the_function(
        self, tmp_path: Path, mode: Mode
    ) -> None:
        location = mode.backend.location(tmp_path)
        side = tmp_path / "side.log"
        script = write_script(tmp_path, "steps.py", STEPS)
        args = (location, mode.durability, mode.kind, str(side), "5")
        first = run_python(script, *args)
        assert first.returncode == 0, first.stderr
        again = run_python(script, *args)
        assert again.returncode == 0, again.stderr
        assert [i for i, _ in starts(side)] == [0, 1, 2, 3, 4]  # the second run called nothing
        assert again.stdout.split().count("returned") == 5


class TestAProcessKilledAtARandomPoint:
    def test_no_step_that_returned_runs_again(self, tmp_path: Path, mode: Mode) -> None:
        rng = random.Random(f"{os.environ.get('LETITLOOP_TEST_SEED', '20261130')}-{mode}")
        location = mode.backend.location(tmp_path)
        side = tmp_path / "side.log"
        script = write_script(tmp_path, "steps.py", STEPS)
        args = (location, mode.durability, mode.kind, str(side), "12")
        returned: set[int] = set()
        for _ in range(6):
            child = spawn_python(script, *args)
            assert child.stdout is not None
            deadline = time.monotonic() + rng.uniform(0.02, 0.15)
            lines: list[str] = []
            while time.monotonic() < deadline and child.poll() is None:
                time.sleep(0.002)
            if child.poll() is None:
                os.kill(child.pid, signal.SIGKILL)
            out, _ = child.communicate(timeout=60)
            lines = out.splitlines()
            before = set(returned)
            returned |= {int(x.split()[1]) for x in lines if x.startswith("returned")}
            # Steps this attempt started that had returned in an earlier attempt: none.
            pid_starts = {i for i, pid in starts(side) if pid == child.pid}
            assert not pid_starts & before, (pid_starts, before)
            if "finished" in lines:
                break
        final = run_python(script, *args)
        assert final.returncode == 0 and "finished" in final.stdout, final.stderr
        runs_of = [i for i, _ in starts(side)]
        for i in returned:
            assert runs_of.count(i) >= 1
        # Each step ran at most once per attempt, and once more only if it was in flight.
        assert sorted(set(runs_of)) == list(range(12))
        assert mode.backend.done_keys(location, "contract") == [f"s{i}" for i in range(12)]


MARKER = """
    import asyncio, os, sys, time
    from letitloop import Journal

    location, durability, kind, side, go = sys.argv[1:6]

    def body():
        with open(side, "a") as f:
            f.write(f"body {os.getpid()}\\n")
        time.sleep(0.05)

    while not os.path.exists(go):  # start together
        time.sleep(0.001)

    def sync_main():
        with Journal("contract", run=f"p{os.getpid()}", path=location, durability=durability) as j:
            with j.atomic_marker("charge", scope="goal", timeout=30) as should:
                if should:
                    body()
                print("offer", bool(should), flush=True)

    async def async_main():
        async with Journal(
            "contract", run=f"p{os.getpid()}", path=location, durability=durability
        ) as j:
            async with j.atomic_marker("charge", scope="goal", timeout=30) as should:
                if should:
                    body()
                print("offer", bool(should), flush=True)

    if kind == "sync":
        sync_main()
    else:
        asyncio.run(async_main())
"""


class TestAMarker:
    def test_one_process_at_a_time_enters_and_the_body_runs_once(
        self, tmp_path: Path, mode: Mode
    ) -> None:
        location = mode.backend.location(tmp_path)
        side, go = tmp_path / "side.log", tmp_path / "go"
        script = write_script(tmp_path, "marker.py", MARKER)
        children = [
            spawn_python(script, location, mode.durability, mode.kind, str(side), str(go))
            for _ in range(4)
        ]
        time.sleep(0.3)
        go.touch()
        outs = [c.communicate(timeout=60) for c in children]
        assert [c.returncode for c in children] == [0] * 4, outs
        offers = sorted(out.strip() for out, _ in outs)
        assert offers == ["offer False"] * 3 + ["offer True"]
        assert len(side.read_text().splitlines()) == 1
