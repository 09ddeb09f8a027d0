"""What a program pays before its first step: modules a resume never loads (issue 30).

Each check runs in a fresh interpreter (``sys.executable``), since this
test process has loaded everything already. pathlib, with the
``urllib.parse`` and ``ipaddress`` it imports, was about 17 M instructions
(3 ms) of every ``import letitloop`` and every resume; a journal's open now
works on paths as text, and the codec loads pathlib only when a recorded
path is read.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from letitloop.stores.sqlite.files import file_uri

#: Modules a step's open, its steps and a resume never load: pathlib and what it
#: imports; the seal chain's modules, without a seal key; the default journal's
#: discovery, for a journal that names its file.
NO_PATHLIB = ["pathlib", "urllib.parse", "ipaddress"]
NO_SEALS = [
    "letitloop.integrity.seals",
    "letitloop.integrity.chains",
    "letitloop.stores.sqlite.seals",
]
NEVER_ON_A_RESUME = [*NO_PATHLIB, *NO_SEALS, "letitloop.stores.discovery"]

_KILLED = """\
import os, signal, sys
from letitloop import Journal
def work(i):
    return {"i": i}
with Journal("g", path=sys.argv[1]) as j:
    for i in range(5):
        j.step("s", work, i)
    os.kill(os.getpid(), signal.SIGKILL)
"""

_RESUMED = """\
import sys
from letitloop import Journal
def work(i):
    return {"i": i}
with Journal("g", path=sys.argv[1]) as j:
    got = [j.step("s", work, i)["i"] for i in range(6)]
print(got)
print([m for m in NEVER if m in sys.modules])
""".replace("NEVER", repr(NEVER_ON_A_RESUME))


def _run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120
    )


class TestARunResumedAfterSIGKILL:
    def test_its_open_steps_and_close_load_no_pathlib(self, tmp_path: Path) -> None:
        db = str(tmp_path / "j.db")
        killed = _run(_KILLED, db)
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        assert os.path.exists(f"{db}-wal")  # the crash state: a log nobody checkpointed
        resumed = _run(_RESUMED, db)
        assert resumed.returncode == 0, resumed.stderr
        got, loaded = resumed.stdout.splitlines()
        assert got == str(list(range(6)))
        assert loaded == "[]"

    def test_a_new_journal_in_the_default_place_loads_no_pathlib(self, tmp_path: Path) -> None:
        code = (
            "import sys\nfrom letitloop import Journal\n"
            "with Journal('g') as j:\n    j.step('a', str, 1)\n"
            f"print([m for m in {NO_PATHLIB + NO_SEALS!r} if m in sys.modules])\n"
        )
        env = {k: v for k, v in os.environ.items() if k != "LETITLOOP_DB"}
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=dict(env, LETITLOOP_CEILING_DIRECTORIES=str(tmp_path.parent)),
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "[]"
        assert (tmp_path / ".letitloop" / "journal.db").is_file()


class TestARecordedPath:
    def test_it_comes_back_as_a_path_in_a_process_that_never_imported_pathlib(
        self, tmp_path: Path
    ) -> None:
        db = str(tmp_path / "j.db")
        record = (
            "import sys, pathlib\nfrom letitloop import Journal\n"
            "with Journal('g', path=sys.argv[1], run='r') as j:\n"
            "    j.step('p', lambda: [pathlib.PurePosixPath('a/b'), pathlib.Path('/x y')])\n"
        )
        assert _run(record, db).returncode == 0
        replay = (
            "import sys\nfrom letitloop import Journal\n"
            "before = 'pathlib' in sys.modules\n"
            "with Journal('g', path=sys.argv[1], run='r') as j:\n"
            "    got = j.step('p', lambda: None)\n"
            "print(before, [type(p).__name__ for p in got], [str(p) for p in got])\n"
        )
        done = _run(replay, db)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "False ['PurePosixPath', 'PosixPath'] ['a/b', '/x y']"

    def test_a_path_made_after_the_import_is_encoded_and_refused_as_a_registration(
        self,
    ) -> None:
        code = (
            "import letitloop, sys\nfrom letitloop import codec\n"
            "assert 'pathlib' not in sys.modules\n"
            "import pathlib\n"
            "print(codec.encode([pathlib.PurePosixPath('a')]))\n"
            "try:\n    codec.CodecRegistry().register(pathlib.PosixPath)\n"
            "except TypeError as e:\n    print(e)\n"
        )
        done = _run(code)
        assert done.returncode == 0, done.stderr
        text, refusal = done.stdout.splitlines()
        assert codec_decode(text) == [PurePosixPath("a")]
        assert "built in" in refusal


def codec_decode(text: str) -> object:
    from letitloop import codec

    return codec.decode(text)


class TestAFileURI:
    @pytest.mark.parametrize(
        "name",
        ["j.db", "a b.db", "q?x#y%z.db", "été.db", "semi;colon&eq=.db", "tilde~_-.db"],
    )
    def test_it_is_the_uri_pathlib_writes(self, tmp_path: Path, name: str) -> None:
        path = tmp_path / name
        assert file_uri(str(path)) == path.as_uri()

    def test_a_relative_path_is_made_absolute(self, tmp_path: Path, monkeypatch: Any) -> None:
        monkeypatch.chdir(tmp_path)
        assert file_uri("x/j.db") == (tmp_path / "x" / "j.db").as_uri()

    def test_a_name_that_is_not_utf8_keeps_its_bytes(self, tmp_path: Path) -> None:
        name = os.fsdecode(b"bad\xff.db")
        path = tmp_path / name
        assert file_uri(str(path)) == path.as_uri()


_LAYER = """\
import sys
import letitloop
from letitloop.stores import schemes
for name in schemes._SQLITE_LAYER:
    have = set(sys.modules)
    __import__(name)
    print(name, sorted(m for m in set(sys.modules) - have if m.startswith("letitloop")))
"""

_OPENED = """\
import sys
from letitloop import Journal; from letitloop.stores import schemes
before = set(sys.modules)
with Journal("g", path=sys.argv[1]) as j:
    j.step("a", str, 1)
print(sorted(m for m in set(sys.modules) - before
             if m.startswith("letitloop") and m not in schemes._SQLITE_LAYER))
"""

#: What a new file's first open loads beyond the file layer: its schema, made once.
NEW_FILE_ONLY = [
    "letitloop.stores.sqlite.compact_migration",
    "letitloop.stores.sqlite.migration_sql",
    "letitloop.stores.sqlite.schema_file",
]


class TestTheFileLayerLoadsFromOneFrame:
    """``schemes._SQLITE_LAYER`` is imported leaf first at a process's first open, so a
    program deep in its recursion nests one module's import frames, not a chain of them.
    A module the open needs that the list leaves out would load nested in another's."""

    def test_each_module_of_the_layer_loads_only_itself(self) -> None:
        done = _run(_LAYER)
        assert done.returncode == 0, done.stderr
        for line in done.stdout.splitlines():
            name, new = line.split(" ", 1)
            assert new == repr([name]), f"{name} also loaded {new}: add it to _SQLITE_LAYER first"

    def test_opening_an_existing_file_loads_nothing_outside_the_layer(self, tmp_path: Path) -> None:
        db = str(tmp_path / "j.db")
        first = _run(_OPENED, db)
        assert first.returncode == 0, first.stderr
        assert first.stdout.strip() == repr(NEW_FILE_ONLY)
        again = _run(_OPENED, db)
        assert again.returncode == 0, again.stderr
        assert again.stdout.strip() == "[]"
