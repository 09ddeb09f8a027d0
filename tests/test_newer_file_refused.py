"""A journal file from a newer letitloop is refused and left as it was: not a byte
changed, and nothing made beside it (issue 50, item 9).

Before, each writing command and ``Journal()`` said "The file was not changed"
and left an empty ``-wal`` and ``-shm`` beside it.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import lil_forked

from letitloop import Journal
from letitloop.errors import SchemaVersionError


@pytest.fixture
def newer(tmp_path: Path) -> Path:
    """A closed journal whose records name a migration this letitloop does not know."""
    path = tmp_path / "journal.db"
    made = (
        "import sys\nfrom letitloop import Journal\n"
        "with Journal('g', run='r', path=sys.argv[1]) as j:\n    j.step('a', str, 1)\n"
    )
    # In a process of its own: its last close checkpoints and deletes the -wal.
    subprocess.run([sys.executable, "-c", made, str(path)], check=True, timeout=60)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(
            "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
            "VALUES ('letitloop', '9999_from_the_future', '2027-01-01 00:00:00+00:00')"
        )
    conn.close()
    assert not Path(f"{path}-wal").exists()
    return path


def beside(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir())


WRITING = [
    ["reset", "r"],
    ["fork", "r", "--from-step", "a"],
    ["gc", "--older-than", "0s"],
    ["cancel", "r"],
    ["send", "r", "v", "1"],
    ["upgrade"],
]


class TestAFileFromANewerLetitloop:
    @pytest.mark.parametrize("args", WRITING, ids=lambda a: a[0])
    def test_a_writing_command_refuses_it_and_leaves_nothing_beside_it(
        self, newer: Path, args: list[str]
    ) -> None:
        before, listing = newer.read_bytes(), beside(newer)
        done = lil_forked("--db", str(newer), *args)
        assert done.returncode == 1 and "newer" in done.stderr, done.stderr
        assert beside(newer) == listing  # no -wal, no -shm
        assert newer.read_bytes() == before

    def test_journal_refuses_it_and_leaves_nothing_beside_it(self, newer: Path) -> None:
        before, listing = newer.read_bytes(), beside(newer)
        with pytest.raises(SchemaVersionError):
            Journal("g", path=newer).open()
        assert beside(newer) == listing
        assert newer.read_bytes() == before
