"""``lil`` on something that is not a regular file (a FIFO, a device, a socket, a folder)
refuses at once with one line, before SQLite opens it (issue 50, item 6).

SQLite's open of a FIFO waits for a writer at its other end, and ignores
Ctrl-C meanwhile: each command runs with a timeout, so a regression fails
instead of hanging the suite.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest
from helpers import lil_forked

from letitloop import Journal
from letitloop.errors import JournalFileError

#: Far longer than a refusal takes (a lil: about a second on a loaded machine).
TIMEOUT = 20

#: A key long enough for the commands that ask for one (verify, rekey).
KEY = "0123456789abcdef0123456789abcdef"

#: Every lil command that opens a journal, with the arguments it needs to reach the open.
COMMANDS = [
    ["runs"],
    ["show", "g"],
    ["show", "g", "--follow"],
    ["export", "g"],
    ["reset", "g"],
    ["fork", "g", "--from-step", "a"],
    ["gc", "--older-than", "1d"],
    ["cancel", "g"],
    ["send", "g", "v", "1"],
    ["verify", "--all"],
    ["rekey"],
    ["upgrade"],
    ["fixture", "g", "--to", "out.db"],
    ["ui", "--port", "0"],
    ["check", "mod:f"],
    ["copy", "{db}", "out.db"],
    ["diff", "{db}", "{db}"],
]


def lil(db: Path, args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {
        **os.environ,
        "LETITLOOP_SEAL_KEY": KEY,
        "LETITLOOP_ENCRYPTION_KEY": KEY,
        "LETITLOOP_NEW_ENCRYPTION_KEY": KEY[::-1],
    }
    started = time.monotonic()
    # A child forked from an interpreter that imported lil (about a fifth of a fresh one's
    # CPU); a hang fails the test at pytest's timeout rather than blocking the suite.
    done = lil_forked("--db", str(db), *(a.format(db=db) for a in args), cwd=cwd, env=env)
    return done, time.monotonic() - started


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    (tmp_path / "mod.py").write_text("def f():\n    return 1\n")
    path = tmp_path / "journal.db"
    os.mkfifo(path)
    return path


class TestLilOnAFifo:
    @pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a))
    def test_refuses_at_once_with_one_line(self, fifo: Path, args: list[str]) -> None:
        # Before: 11 of these blocked in SQLite's open until killed.
        done, took = lil(fifo, args, fifo.parent)
        assert done.returncode == 1, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert "pipe" in lines[0] and str(fifo) in lines[0]
        assert took < TIMEOUT / 2
        assert fifo.is_fifo()  # nothing was made or replaced
        assert sorted(p.name for p in fifo.parent.iterdir()) == ["journal.db", "mod.py"]


class TestLilOnOtherFilesThatAreNotFiles:
    def test_a_device_is_refused(self, tmp_path: Path) -> None:
        done, _ = lil(Path(os.devnull), ["runs"], tmp_path)
        assert done.returncode == 1 and "device, pipe or socket" in done.stderr

    def test_a_socket_is_refused(self, tmp_path: Path) -> None:
        path = tmp_path / "s.db"
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(str(path))
            done, _ = lil(path, ["show", "g"], tmp_path)
        assert done.returncode == 1 and "device, pipe or socket" in done.stderr

    def test_a_folder_is_refused(self, tmp_path: Path) -> None:
        (tmp_path / "j.db").mkdir()
        done, _ = lil(tmp_path / "j.db", ["runs"], tmp_path)
        assert done.returncode in (1, 2) and "folder" in done.stderr  # click's own check: 2


class TestAJournalOnAFifo:
    def test_is_refused_at_once_as_lil_refuses_it(self, fifo: Path) -> None:
        with pytest.raises(JournalFileError, match="pipe"):
            Journal("g", path=fifo, timeout=1).open()
