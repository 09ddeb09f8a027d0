"""Opening a journal file that a SIGKILL left half-way: the saver does not stall or fail.

A writer killed right after it restarted SQLite's write-ahead log leaves a
``-wal`` holding only a new header and a ``-shm`` index describing the old
log. ``Store``'s read-only probe (``readonly_shm=1``) cannot recover that: it
retries inside SQLite for about ten seconds, then fails with "locking
protocol", and so does every later open. The state is made here exactly: a
child opens the file and dies (``os._exit``) with the index initialised,
then the log gets a fresh header, as the killed writer's restart wrote it.
"""

from __future__ import annotations

import hashlib
import sqlite3
import struct
from pathlib import Path

import pytest

pytest.importorskip("langgraph.graph", reason="LangGraph is not installed (letitloop[langgraph])")

from helpers import run_python, write_script
from langgraph.checkpoint.base.id import uuid6

from letitloop.adapters.langgraph import LetItLoopCheckpointSaver
from letitloop.errors import JournalFileError

DIE_WITH_THE_INDEX_OPEN = """
    import os, sqlite3, sys
    conn = sqlite3.connect(sys.argv[1])
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    os._exit(9)
"""


def _restarted_log_header(page_size: int = 4096) -> bytes:
    """A write-ahead log header with new salts and a valid checksum (SQLite's format)."""
    words = [0x377F0682, 3007000, page_size, 0, 0x1234ABCD, 0x0BADF00D]
    s1 = s2 = 0
    for i in range(0, 6, 2):  # SQLite's walChecksumBytes, little-endian words (magic & 1 == 0)
        s1 = (s1 + words[i] + s2) & 0xFFFFFFFF
        s2 = (s2 + words[i + 1] + s1) & 0xFFFFFFFF
    return struct.pack(">6I", *words) + struct.pack(">2I", s1, s2)


def _killed_after_restarting_its_log(tmp_path: Path, db: Path) -> None:
    run_python(write_script(tmp_path, "die.py", DIE_WITH_THE_INDEX_OPEN), str(db))
    assert Path(f"{db}-shm").exists()
    Path(f"{db}-wal").write_bytes(_restarted_log_header())


def _checkpoint() -> dict[str, object]:
    return {
        "v": 1,
        "id": str(uuid6(clock_seq=-1)),
        "ts": "2026-11-30T00:00:00+00:00",
        "channel_values": {"n": 1},
        "channel_versions": {"n": 1},
        "versions_seen": {},
        "pending_sends": [],
    }


class TestAJournalWhoseLastWriterWasKilledMidRestart:
    def test_the_saver_opens_it_and_reads_what_was_committed(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        with LetItLoopCheckpointSaver(db) as saver:
            saver.put(
                {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
                _checkpoint(),
                {"source": "input", "step": -1},
                {"n": 1},
            )
        _killed_after_restarting_its_log(tmp_path, db)
        with LetItLoopCheckpointSaver(db) as saver:
            tup = saver.get_tuple({"configurable": {"thread_id": "t"}})
            saver.put(
                {"configurable": {"thread_id": "u", "checkpoint_ns": ""}},
                _checkpoint(),
                {"source": "input", "step": -1},
                {"n": 1},
            )
        assert tup is not None and tup.checkpoint["channel_values"] == {"n": 1}

    def test_another_applications_file_with_a_pending_log_is_still_left_byte_for_byte(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "app.db"
        script = """
            import os, sqlite3, sys
            conn = sqlite3.connect(sys.argv[1])
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
            conn.execute("INSERT INTO customers VALUES (1, 'ada')")
            conn.commit()
            os._exit(9)
        """
        run_python(write_script(tmp_path, "app.py", script), str(db))

        def digests() -> dict[str, str | None]:
            return {
                suffix: hashlib.sha256(Path(f"{db}{suffix}").read_bytes()).hexdigest()
                if Path(f"{db}{suffix}").exists()
                else None
                for suffix in ("", "-wal", "-shm")
            }

        before = digests()
        assert before["-wal"] is not None
        with pytest.raises(JournalFileError, match="not changed"):
            LetItLoopCheckpointSaver(db)
        assert digests() == before
        with sqlite3.connect(db) as conn:  # and it is still the application's file
            assert conn.execute("SELECT name FROM customers").fetchall() == [("ada",)]
