"""Private by default: a new journal file, its -wal, -shm and locks folder are its owner's only."""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from letitloop import Journal
from letitloop.errors import JournalFileError


@pytest.fixture
def usual_umask() -> Iterator[None]:
    """The umask most systems give a user (022: new files readable by everyone)."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def modes_while_open(db: Path) -> dict[str, int]:
    """The modes of the file, its -wal and -shm and its locks folder, while a run holds it."""
    with Journal("g", path=db) as j:
        j.step("a", int)
        return {
            "file": mode(db),
            "wal": mode(Path(f"{db}-wal")),
            "shm": mode(Path(f"{db}-shm")),
            "locks": mode(Path(f"{db}-locks")),
        }


@pytest.mark.usefixtures("usual_umask")
class TestANewJournal:
    def test_its_file_wal_shm_and_locks_folder_are_its_owners_only(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("LETITLOOP_FILE_MODE", raising=False)
        got = modes_while_open(tmp_path / "journal.db")
        assert got == {"file": 0o600, "wal": 0o600, "shm": 0o600, "locks": 0o700}

    def test_letitloop_file_mode_chooses_another_for_a_shared_folder(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("LETITLOOP_FILE_MODE", "640")
        got = modes_while_open(tmp_path / "journal.db")
        assert got == {"file": 0o640, "wal": 0o640, "shm": 0o640, "locks": 0o750}

    def test_a_mode_that_is_not_octal_is_refused_in_one_line(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("LETITLOOP_FILE_MODE", "rw-r--r--")
        with pytest.raises(JournalFileError, match="expected an octal file mode"):
            Journal("g", path=tmp_path / "journal.db").open()


@pytest.mark.usefixtures("usual_umask")
class TestAnExistingJournal:
    def test_its_mode_is_left_as_it_was(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("LETITLOOP_FILE_MODE", raising=False)
        db = tmp_path / "journal.db"
        sqlite3.connect(db).close()  # made by someone else, with the umask's 0644
        os.chmod(db, 0o644)
        assert modes_while_open(db)["file"] == 0o644
        assert mode(db) == 0o644
