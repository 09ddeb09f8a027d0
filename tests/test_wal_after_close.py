"""The ``-wal`` beside a journal file once the last journal of the file closes in a process.

A process keeps its connection to a journal file after the journal closes
(``stores.py``), so SQLite would keep the ``-wal`` at its high-water mark
(about 4 MB after 1,000 steps) until the process exits. The last close of a
large one checkpoints and truncates it, without waiting for and without
disturbing another process that reads or writes the file meanwhile. Sizes
are read from outside, with ``os.stat``, while the writer is still alive.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from helpers import write_script

from letitloop import Journal

#: A -wal above this after the last close was left at its high-water mark
#: (a bare SQLite program leaves about 90 KB; a truncated one is empty).
SMALL_WAL = 128 * 1024


def wal_size(db: Path) -> int:
    try:
        return os.stat(f"{db}-wal").st_size
    except FileNotFoundError:
        return 0


def steps_in(db: Path, goal: str) -> int:
    """Rows of ``goal``'s journal table, read by a connection of another process's kind."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(conn.execute(f'SELECT count(*) FROM "journal_{goal}"').fetchone()[0])
    finally:
        conn.close()


def spawn(script: Path, db: Path) -> subprocess.Popen[str]:
    """``script`` on ``db`` in a fresh interpreter, its stdin and stdout pipes to the test."""
    return subprocess.Popen(
        [sys.executable, "-u", str(script), str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def record(db: Path, goal: str, steps: int, run: str) -> None:
    with Journal(goal, path=db, run=run) as j:
        for i in range(steps):
            j.step(f"s{i}", dict, i=i)


class TestTheLastJournalOfAFileToClose:
    def test_it_leaves_a_small_wal_while_its_process_lives_on(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        script = write_script(
            tmp_path,
            "writer.py",
            """
            import sys
            from letitloop import Journal

            with Journal("long", path=sys.argv[1]) as j:
                for i in range(1000):
                    j.step(f"s{i}", dict, i=i)
            print("closed", flush=True)
            sys.stdin.readline()  # alive, its connection idle, until the test has looked
            """,
        )
        writer = spawn(script, db)
        try:
            assert writer.stdout is not None
            assert writer.stdout.readline().strip() == "closed", writer.stderr
            after_close = wal_size(db)
            assert steps_in(db, "long") == 1000
        finally:
            writer.kill()
            writer.communicate()
        assert after_close <= SMALL_WAL, (
            f"-wal of {after_close:,} bytes beside a closed 1,000-step run"
        )

    def test_a_journal_still_open_on_the_file_keeps_it_as_it_is(self, db: Path) -> None:
        with Journal("other", path=db) as other:
            other.step("first", dict)
            record(db, "long", 1000, "r1")
            # Not the last: the checkpoint's fsync is paid once, when the file is let go.
            assert wal_size(db) > SMALL_WAL
        assert wal_size(db) <= SMALL_WAL


class TestAnotherProcessOnTheFileMeanwhile:
    def test_a_reader_holding_a_snapshot_does_not_hold_up_the_close(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        record(db, "long", 300, "r1")
        script = write_script(
            tmp_path,
            "reader.py",
            """
            import select, sqlite3, sys

            conn = sqlite3.connect(sys.argv[1], isolation_level=None)
            conn.execute("BEGIN")
            count = conn.execute('SELECT count(*) FROM "journal_long"').fetchone()[0]
            print(count, flush=True)
            # Holds its snapshot (its read mark in the -wal) until told, or 20 s: a
            # close that waited for it would be let go only by this timeout.
            if not select.select([sys.stdin], [], [], 20)[0]:
                print("gave up waiting", flush=True)
                sys.exit(3)
            sys.stdin.readline()
            again = conn.execute('SELECT count(*) FROM "journal_long"').fetchone()[0]
            conn.execute("COMMIT")
            print(again, flush=True)
            """,
        )
        reader = spawn(script, db)
        try:
            assert reader.stdout is not None and reader.stdin is not None
            assert reader.stdout.readline().strip() == "300", reader.stderr
            record(db, "long", 1000, "r2")  # its close meets the reader's snapshot
            still_reading = reader.poll() is None
            with contextlib.suppress(BrokenPipeError):  # it gave up meanwhile: reported below
                reader.stdin.write("go\n")
                reader.stdin.flush()
            out, err = reader.communicate(timeout=60)
        finally:
            if reader.poll() is None:
                reader.kill()
                reader.communicate()
        assert still_reading and "gave up" not in out, (
            "the journal's close returned only once the reader had given up"
        )
        assert reader.returncode == 0, out + err
        assert out.split() == ["300"], "the reader's snapshot changed under it"
        assert steps_in(db, "long") == 1300

    def test_a_writer_loses_nothing_and_fails_nothing(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        record(db, "mine", 1, "warm")  # the file and its schema exist before both start
        script = write_script(
            tmp_path,
            "writer.py",
            """
            import select, sys
            from letitloop import Journal

            with Journal("theirs", path=sys.argv[1]) as j:
                i = 0
                while True:
                    j.step(f"s{i}", dict, i=i)
                    i += 1
                    if i == 1:
                        print("writing", flush=True)
                    if select.select([sys.stdin], [], [], 0)[0]:
                        break
            print(i, flush=True)
            """,
        )
        writer = spawn(script, db)
        try:
            assert writer.stdout is not None and writer.stdin is not None
            assert writer.stdout.readline().strip() == "writing", writer.stderr
            for r in range(6):  # each close finds a -wal over the limit, the writer busy
                record(db, "mine", 400, f"r{r}")
            writer.stdin.write("stop\n")
            writer.stdin.flush()
            out, err = writer.communicate(timeout=120)
        finally:
            if writer.poll() is None:
                writer.kill()
                writer.communicate()
        assert writer.returncode == 0, err
        written = int(out.split()[-1])
        assert steps_in(db, "theirs") == written
        assert steps_in(db, "mine") == 1 + 6 * 400
