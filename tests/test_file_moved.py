"""A journal file deleted or replaced under an open journal (issue 50).

SQLite in WAL mode notices neither: a program went on committing to the file it
had opened, which no later run finds at the path, and exited 0; its steps ran
again on the next attempt. Now the next commit raises one JournalFileError,
nothing after it is reported as recorded, and once the file is back the run
resumes from what it holds. Real processes: a program steps while the test
deletes or replaces its file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import run_forked, write_script

PROGRAM = """
import sys
from letitloop import Journal

with Journal("g", path=sys.argv[1]) as j:
    for i in range(6):
        def work(i=i):
            with open("calls.log", "a") as f:
                f.write(f"{i}\\n")
            return i
        j.step(f"s{i}", work)
        print(f"returned {i}", flush=True)
        sys.stdin.readline()  # the test's go-ahead
print("finished", flush=True)
"""


def start(tmp_path: Path) -> subprocess.Popen[str]:
    script = write_script(tmp_path, "program.py", PROGRAM)
    return subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "journal.db")],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def calls(tmp_path: Path) -> list[int]:
    return [int(x) for x in (tmp_path / "calls.log").read_text().split()]


def run_to_end(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    program = start(tmp_path)
    out, err = program.communicate("\n" * 10, timeout=60)
    return subprocess.CompletedProcess(program.args, program.returncode, out, err)


def interrupted(tmp_path: Path, change: str) -> subprocess.CompletedProcess[str]:
    """The program run while, after its step 2 returned, the test ``change``s its file
    (keeping the file as opened at ``kept.db``)."""
    db, kept = tmp_path / "journal.db", tmp_path / "kept.db"
    program = start(tmp_path)
    assert program.stdout is not None and program.stdin is not None
    for i in range(3):
        assert program.stdout.readline() == f"returned {i}\n"
        if i < 2:
            program.stdin.write("\n")
            program.stdin.flush()
    if change == "rm":
        os.link(db, kept)  # the operator's hard link: the file can come back
        os.remove(db)
    else:  # mv other.db journal.db, the file as opened moved aside first
        other = tmp_path / "other.db"
        done = run_to_end_elsewhere(tmp_path, other)
        assert done.returncode == 0, done.stderr
        os.rename(db, kept)
        os.rename(other, db)
    out, err = program.communicate("\n" * 10, timeout=60)
    return subprocess.CompletedProcess(program.args, program.returncode, out, err)


def run_to_end_elsewhere(tmp_path: Path, path: Path) -> subprocess.CompletedProcess[str]:
    """Another journal file, made by a run of another goal (in a folder of its own)."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    code = (
        f"from letitloop import Journal\n"
        f"with Journal('other', path={str(path)!r}) as j: j.step('x', int)"
    )
    return run_forked(write_script(folder, "other.py", code), cwd=folder)


@pytest.mark.parametrize("change", ["rm", "mv other.db journal.db"])
class TestAJournalFileDeletedOrReplacedUnderAnOpenJournal:
    def test_the_next_step_raises_one_clear_error(self, tmp_path: Path, change: str) -> None:
        done = interrupted(tmp_path, change)
        assert done.returncode == 1, (done.stdout, done.stderr)
        assert "returned 3" not in done.stdout  # nothing after it reported as recorded
        assert done.stderr.count("letitloop.errors.JournalFileError:") == 1, done.stderr
        assert "During handling" not in done.stderr
        assert "deleted, replaced or moved away while the journal was open" in done.stderr
        assert "put that file back" in done.stderr

    def test_the_run_resumes_once_the_file_is_back(self, tmp_path: Path, change: str) -> None:
        interrupted(tmp_path, change)
        os.replace(tmp_path / "kept.db", tmp_path / "journal.db")  # the file is back
        done = run_to_end(tmp_path)
        assert done.returncode == 0, done.stderr
        assert "finished" in done.stdout
        # Each step ran once: 0-2 returned before the change; 3 ran and its row reached
        # the file as opened (the error came after its commit), so it replays.
        assert calls(tmp_path) == [0, 1, 2, 3, 4, 5]
