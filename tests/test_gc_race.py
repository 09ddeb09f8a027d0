"""gc racing a live program that opens runs: the two never conflict (issue 50).

A gc process deletes every run and drops the goal it leaves empty, again and
again, while a program opens, steps and completes runs of that goal in a loop.
Before the fix, on a journal file, 16 to 48 opens of 420 to 650 in this race failed
with "FOREIGN KEY constraint failed" (issue 50 measured 20 of 29,159 with a
``lil gc`` loop): the program's connection remembered the goal's table from
before gc dropped it (checked when the connection was reused, a moment before
the open's own transaction) and inserted a run naming a goal that was gone.
On PostgreSQL the opens held, but gc itself died with a raw ``DeadlockDetected``
(three runs of three): it locked its tables one by one while a journal's
transaction held one of them and asked for another.

Each is a real process, a child forked from one interpreter that imported
letitloop once (tests/preloaded.py). The gc process runs
``letitloop.maintenance.gc_runs``, the function ``lil gc``
calls, without its VACUUM: VACUUM holds the file for most of a ``lil gc`` (a
loop of them drops the goal twice in 6 s on this machine, this one about 150
times), and it is not where the race is. One real ``lil gc`` at the end checks
the file the race left.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pg_server
import pytest
from helpers import LIL_ENTRY, write_script
from preloaded import Preloaded

#: How long the program opens runs while gc runs (seconds) at most: CI-sized.
SECONDS = 5.0
#: The opens after which the program stops sooner, and the gc loop with it: three times
#: the 100 the file's test asks for (issue 50 saw 3 to 7 in 100 opens fail, 420 to 650
#: opens in its 5 s on a quiet machine).
OPENS = 300

OPENER = """
import json, sys, time
from letitloop import Journal

path, seconds, opens, stop = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
opened, failed = 0, []
end = time.monotonic() + seconds
while True:  # at least once: a run of 0 seconds makes the journal the gc loop opens
    try:
        with Journal("g", path=path) as j:
            j.step("s", lambda: 1)
        opened += 1
    except Exception as exc:
        failed.append(f"{type(exc).__name__}: {exc}")
    if time.monotonic() >= end or opened + len(failed) >= opens:
        break
    time.sleep(0.002)  # between runs, as a service between requests: the goal is empty
open(stop, "w").close()  # the gc loop stops too
print(json.dumps({"opened": opened, "failed": failed}))
"""

GC = """
import json, sys, time
from datetime import timedelta
from letitloop.inspection import open_inspector
from letitloop.maintenance import gc_runs

import os

path, seconds, stop = sys.argv[1], float(sys.argv[2]), sys.argv[3]
runs = dropped = 0
end = time.monotonic() + seconds
while time.monotonic() < end and not os.path.exists(stop):  # until the program ended
    journal = open_inspector(path, write=True)
    try:
        result = gc_runs(journal, timedelta(0), vacuum=False)
    finally:
        journal.close()
    runs += 1
    dropped += len(result.goals_removed)
print(json.dumps({"runs": runs, "dropped": dropped}))
"""


@pytest.fixture(scope="module")
def forker() -> Iterator[Preloaded]:
    """The program's, the gc loop's and ``lil gc``'s processes: children forked from one
    interpreter that imported letitloop (and PostgreSQL's driver and store) once."""
    with Preloaded(
        "letitloop.maintenance",
        "letitloop.inspection",
        "psycopg",
        "letitloop.stores.postgres.storage",
        with_letitloop=True,
    ) as p:
        yield p


def race(forker: Preloaded, tmp_path: Path, location: str) -> tuple[dict[str, Any], dict[str, int]]:
    """The program's report and the gc loop's (both real processes, run side by side: for
    :data:`SECONDS`, or until the program opened :data:`OPENS` runs)."""
    opener = write_script(tmp_path, "opener.py", OPENER)
    gc = write_script(tmp_path, "gc.py", GC)
    stop = str(tmp_path / "stop")
    # The program first: the gc loop needs the journal to exist.
    first = forker.run(opener, location, "0", "1", str(tmp_path / "first"))
    assert first.returncode == 0, first.stderr
    children = [
        forker.start(opener, location, str(SECONDS), str(OPENS), stop),
        forker.start(gc, location, str(SECONDS), stop),
    ]
    reports = []
    for child in children:
        done = child.wait()
        assert done.returncode == 0, done.stderr
        reports.append(json.loads(done.stdout))
    return reports[0], reports[1]


def lil_gc(forker: Preloaded, location: str) -> subprocess.CompletedProcess[str]:
    return forker.run(LIL_ENTRY, "--db", location, "gc", "--older-than", "0s", "--yes")


class TestGcRacingAProgramThatOpensRuns:
    def test_no_open_fails_on_a_journal_file(self, forker: Preloaded, tmp_path: Path) -> None:
        db = str(tmp_path / "journal.db")
        program, gc = race(forker, tmp_path, db)
        assert program["failed"] == [], (program["failed"][:3], program["opened"], gc)
        assert program["opened"] > 100, program
        assert gc["dropped"] > 3, gc  # the goal really was dropped under the program
        done = lil_gc(forker, db)
        assert done.returncode == 0, done.stderr

    def test_no_open_fails_on_postgresql(self, forker: Preloaded, tmp_path: Path) -> None:
        location = pg_server.location()
        program, gc = race(forker, tmp_path, location)
        assert program["failed"] == [], (program["failed"][:3], program["opened"], gc)
        assert program["opened"] > 5, (program, gc)
        assert gc["runs"] > 2, gc  # each a change under the tables' locks
        done = lil_gc(forker, location)
        assert done.returncode == 0, done.stderr
