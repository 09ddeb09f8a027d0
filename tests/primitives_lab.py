"""A laboratory for the primitives' crash tests: a child script whose time is the test's.

The child reads the time from a file (``Journal(clock=...)``), so a test
moves time on by writing it: a backoff, a sleep or a wait's deadline passes
when the test says so, and what the child did at which time is exact, not
a race against the machine's load. The child notes what it does in a side
log; the journal is read from a second connection.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from helpers import ForkedProcess, spawn_forked, write_script

#: Read the time from the clock file (a line of the child script's own).
CLOCK = """
def clock():
    with open(clock_file) as f:
        return float(f.read())
"""


class Lab:
    """A journal, a child script, its side log and the clock file it reads its time from."""

    def __init__(self, folder: Path, script: str) -> None:
        self.db, self.log, self.clock = folder / "j.db", folder / "log", folder / "clock"
        self.script = write_script(folder, "child.py", script)
        self.children: list[ForkedProcess] = []
        self.set_clock(1000)

    def close(self) -> None:
        """Kill what a failed test left running."""
        for child in self.children:
            if child.poll() is None:
                child.kill()
            child.communicate()

    def set_clock(self, t: float) -> None:
        tmp = self.clock.with_suffix(".tmp")
        tmp.write_text(str(t))
        os.replace(tmp, self.clock)  # a reader never sees a half-written time

    def spawn(self, mode: str, *more: str) -> ForkedProcess:
        """Start the script with: journal, side log, clock file, ``mode``, ``more`` (a process
        of its own, forked: helpers.spawn_forked)."""
        child = spawn_forked(self.script, str(self.db), str(self.log), str(self.clock), mode, *more)
        self.children.append(child)
        return child

    def lines(self, word: str) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [ln.split() for ln in self.log.read_text().splitlines() if ln.startswith(word)]

    def until(self, what: str, check: Any, proc: ForkedProcess | None = None) -> Any:
        deadline = time.monotonic() + 30
        while True:
            got = check()
            if got:
                return got
            if proc is not None and proc.poll() is not None:
                # It may have done it, then ended, after the look above: look once more.
                got = check()
                if got:
                    return got
                raise AssertionError(f"the child ended before {what}: {proc.communicate()}")
            assert time.monotonic() < deadline, f"never: {what}"
            time.sleep(0.02)

    def sql(self, query: str, params: tuple[Any, ...] = ()) -> list[Any]:
        if not self.db.exists():
            return []
        conn = sqlite3.connect(self.db)
        try:
            return conn.execute(query, params).fetchall()
        except sqlite3.OperationalError:
            return []  # the schema is not made yet
        finally:
            conn.close()
