"""Bad input gets a clear LetItLoopError and loses nothing already recorded."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import in_mount_namespace, write_script

from letitloop import Journal
from letitloop.errors import JournalFileError, LetItLoopError, SchemaVersionError


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_journal(db: Path, steps: int = 200) -> None:
    with Journal("g", run="r", path=db) as j:
        for i in range(steps):
            j.step(f"s{i}", _value, i)
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything into the main file
    conn.close()


def _value(i: int) -> dict[str, object]:
    return {"i": i, "pad": "x" * 200}


def recorded_steps(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(
            conn.execute("SELECT count(*) FROM journal_g WHERE status = 'done'").fetchone()[0]
        )
    finally:
        conn.close()


class TestAFileThatIsNotAJournal:
    def test_a_text_file_is_refused_and_left_as_it_was(self, tmp_path: Path) -> None:
        path = tmp_path / "notes.db"
        path.write_text("these are my notes, not a database\n" * 50)
        before = digest(path)
        with pytest.raises(JournalFileError, match="expected a letitloop journal") as info:
            Journal("g", path=path).open()
        assert "file is not a database" in str(info.value)
        assert digest(path) == before

    def test_a_truncated_journal_is_refused_and_left_as_it_was(self, tmp_path: Path) -> None:
        good = tmp_path / "good.db"
        make_journal(good)
        cut = tmp_path / "cut.db"
        data = good.read_bytes()
        cut.write_bytes(data[: len(data) // 2])
        before = digest(cut)
        with (
            pytest.raises(JournalFileError, match="move it aside"),
            Journal("g", run="r", path=cut) as j,
        ):
            j.step("more", _value, 1)
        assert digest(cut) == before

    def test_a_corrupted_page_is_refused(self, tmp_path: Path) -> None:
        path = tmp_path / "journal.db"
        make_journal(path)
        data = bytearray(path.read_bytes())
        data[4096 : 4096 * 4] = b"\xde\xad\xbe\xef" * 3072
        path.write_bytes(bytes(data))
        with (
            pytest.raises(JournalFileError, match="cannot read"),
            Journal("g", run="r", path=path) as j,
        ):
            j.step("s0", _value, 0)

    def test_another_applications_database_is_refused_untouched(self, tmp_path: Path) -> None:
        path = tmp_path / "app.db"
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
        conn.commit()
        conn.close()
        before = digest(path)
        with pytest.raises(JournalFileError, match=r"other tables \(customers\)"):
            Journal("g", path=path).open()
        assert digest(path) == before

    def test_an_empty_file_becomes_a_journal(self, tmp_path: Path) -> None:
        path = tmp_path / "empty.db"
        path.touch()
        with Journal("g", path=path) as j:
            assert j.step("a", _value, 1) == _value(1)


class TestAJournalFromANewerLetitloop:
    def test_it_is_refused_with_a_clear_error_and_left_untouched(self, tmp_path: Path) -> None:
        path = tmp_path / "journal.db"
        make_journal(path, steps=3)
        conn = sqlite3.connect(path)
        conn.execute(
            "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
            "VALUES ('letitloop', '9999_from_the_future', '2030-01-01')"
        )
        conn.commit()
        conn.close()
        before = digest(path)
        with pytest.raises(SchemaVersionError, match="newer letitloop") as info:
            Journal("g", run="r", path=path).open()
        assert "9999_from_the_future" in str(info.value)
        assert "upgrade letitloop" in str(info.value)
        assert digest(path) == before
        assert isinstance(info.value, LetItLoopError)


def _in_mount_namespace(shell: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return in_mount_namespace(shell, tmp_path)


READ_ONLY_CHILD = """
    import sys
    from letitloop import Journal
    from letitloop.errors import JournalFileError
    try:
        with Journal("g", run="r", path=sys.argv[1]) as j:
            j.step("one-more", lambda: 1)
    except JournalFileError as exc:
        print("JournalFileError", exc)
"""


class TestAReadOnlyFolder:
    def test_writing_gives_a_clear_error_and_the_journal_keeps_every_step(
        self, tmp_path: Path
    ) -> None:
        folder = tmp_path / "ro"
        folder.mkdir()
        db = folder / "journal.db"
        make_journal(db, steps=20)
        child = write_script(tmp_path, "ro.py", READ_ONLY_CHILD)
        done = _in_mount_namespace(
            f"mount --bind {folder} {folder}; mount -o remount,bind,ro {folder}; "
            f"{sys.executable} {child} {db}",
            tmp_path,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("JournalFileError"), done.stdout + done.stderr
        assert "permissions" in done.stdout or "writable" in done.stdout
        assert "Traceback" not in done.stderr
        assert recorded_steps(db) == 20
        with Journal("g", run="r", path=db) as j:  # writable again: nothing was lost
            assert j.step("s7", _value, 7) == _value(7)


FULL_DISK_CHILD = """
    import os, sqlite3, sys
    from letitloop import Journal
    from letitloop.errors import JournalFileError
    folder = sys.argv[1]
    db = os.path.join(folder, "journal.db")
    returned = 0
    try:
        with Journal("g", run="r", path=db) as j:
            for i in range(100000):
                j.step(f"s{i}", lambda i=i: {"i": i, "pad": "x" * 2000})
                returned += 1
    except JournalFileError as exc:
        print("error:", exc)
    conn = sqlite3.connect(db)
    done = conn.execute("SELECT count(*) FROM journal_g WHERE status = 'done'").fetchone()[0]
    conn.close()
    print("returned", returned, "recorded", done)
    os.remove(os.path.join(folder, "filler"))       # free space, then resume
    calls = []
    with Journal("g", run="r", path=db) as j:
        for i in range(returned + 5):
            j.step(f"s{i}", lambda i=i: calls.append(i) or {"i": i, "pad": "x" * 2000})
    print("resumed calls", len(calls), min(calls))
"""


class TestAFullDisk:
    def test_the_failed_write_is_reported_and_every_returned_step_stays_recorded(
        self, tmp_path: Path
    ) -> None:
        folder = tmp_path / "tiny"
        folder.mkdir()
        child = write_script(tmp_path, "full.py", FULL_DISK_CHILD)
        done = _in_mount_namespace(
            f"mount -t tmpfs -o size=2m tmpfs {folder}; "
            f"dd if=/dev/zero of={folder}/filler bs=64k count=8 2>/dev/null; "
            f"{sys.executable} {child} {folder}",
            tmp_path,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        lines = done.stdout.splitlines()
        assert lines[0].startswith("error:") and "disk is full" in lines[0], done.stdout
        _, returned, _, recorded = lines[1].split()
        assert int(returned) > 0 and int(recorded) == int(returned)
        _, _, calls, first = lines[2].split()
        assert int(calls) == 5 and int(first) == int(returned)
