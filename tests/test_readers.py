"""Readers never write: `lil runs`, `show` and `export` leave the journal exactly as it was."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import lil_forked

from letitloop import Journal
from letitloop.stores.sqlite import migration_files
from letitloop.stores.sqlite.pool import close_idle_stores
from letitloop.stores.sqlite.store import Store

READERS = (["runs"], ["show", "g"], ["show", "g", "--full"], ["export", "g"])


def lil(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return lil_forked("--db", str(db), *args)


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (lock folder included) with the digest of its bytes."""
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            out[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            out[str(path.relative_to(folder))] = "folder"
    return out


class TestReadingAJournalClosedCleanly:
    def test_creates_changes_and_removes_nothing(self, tmp_path: Path) -> None:
        db = tmp_path / "data" / "journal.db"
        db.parent.mkdir()
        with Journal("g", path=db) as j:
            j.step("a", str, 1)
        close_idle_stores()  # as after the writer's process exit: no -wal left
        before = snapshot(db.parent)
        assert not Path(f"{db}-wal").exists()
        for args in READERS:
            done = lil(db, *args)
            assert done.returncode == 0, done.stderr
        assert snapshot(db.parent) == before


class TestReadingAJournalAWriterHasOpen:
    def test_leaves_the_file_and_its_wal_as_they_were(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        with Journal("g", path=db) as j:
            j.step("a", str, 1)
            db_bytes, wal_bytes = db.read_bytes(), Path(f"{db}-wal").read_bytes()
            for args in READERS:
                done = lil(db, *args)
                assert done.returncode == 0, done.stderr
            assert db.read_bytes() == db_bytes and Path(f"{db}-wal").read_bytes() == wal_bytes


@pytest.fixture
def older_migrations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """This process's migration runner without the newest migration (an older letitloop)."""
    folder = tmp_path / "migrations"
    shutil.copytree(migration_files.migrations_dir(), folder)
    newest = sorted(folder.glob("0*.sql"))[-1]
    newest.unlink()
    monkeypatch.setattr(migration_files, "migrations_dir", lambda: folder)
    migration_files.known_migrations.cache_clear()
    yield folder
    migration_files.known_migrations.cache_clear()


class TestReadingAJournalFromAnOlderLetitloop:
    def test_is_refused_with_the_way_to_upgrade_then_upgrade_makes_it_readable(
        self, tmp_path: Path, older_migrations: Path
    ) -> None:
        db = tmp_path / "old" / "journal.db"
        db.parent.mkdir()
        Store(db).close()  # the schema as the older version leaves it (this version's
        # Journal needs the newest columns, so the older file is made by its migrations)
        before = snapshot(db.parent)
        refused = lil(db, "runs")
        assert refused.returncode == 1
        line = refused.stderr.strip()
        assert "older letitloop" in line and "lil upgrade" in line and "\n" not in line
        assert snapshot(db.parent) == before  # the reader changed nothing
        upgraded = lil(db, "upgrade")
        assert upgraded.returncode == 0, upgraded.stderr
        assert lil(db, "runs").returncode == 0
        assert os.path.exists(db)
