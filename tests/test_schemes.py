"""The store is chosen from the path in one place (letitloop/stores/schemes.py), and a URL
is never a file.

A path that looks like a URL (``scheme://…``) opens the store registered for
its scheme, or is refused with UnknownStoreError naming the supported
schemes and the extra to install; nothing is created on disk either way.
Before, ``Journal("g", path="postgresql://app@db.internal/jobs")`` made a
folder ``postgresql:`` in the working directory and journalled there.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import lil_forked

from letitloop import Journal, durable
from letitloop.errors import LetItLoopError, UnknownStoreError
from letitloop.stores import schemes
from letitloop.stores.memory.storage import MemoryStorage, open_memory

POSTGRES = "postgresql://app@db.internal/jobs"


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working folder, and no LETITLOOP_DB."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LETITLOOP_DB", raising=False)
    return tmp_path


def lil(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "LETITLOOP_DB"}
    return lil_forked(*args, cwd=cwd, env={**environ, **(env or {})})


@pytest.fixture
def no_driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """An installation without the extra letitloop[postgres]: psycopg fails to import, here
    and in the ``lil`` processes run with the environment returned."""
    monkeypatch.setitem(sys.modules, "psycopg", None)
    hidden = tmp_path.parent / f"{tmp_path.name}-hidden"
    hidden.mkdir(exist_ok=True)
    (hidden / "psycopg.py").write_text("raise ImportError('hidden by the test')\n")
    return {"PYTHONPATH": str(hidden)}


@pytest.mark.usefixtures("no_driver")
class TestAPostgresUrlWithoutAPostgresStore:
    def test_journal_refuses_it_naming_the_schemes_and_the_extra(self, here: Path) -> None:
        with pytest.raises(UnknownStoreError) as caught:
            Journal("g", path=POSTGRES).open()
        message = str(caught.value)
        assert "postgresql" in message
        assert "the postgresql store is the extra letitloop[postgres]" in message
        assert "pip install -e '.[postgres]'" in message
        assert "memory://" in message and "a file path (SQLite)" in message
        assert caught.value.scheme == "postgresql"
        assert isinstance(caught.value, LetItLoopError)

    def test_journal_creates_no_folder_or_file(self, here: Path) -> None:
        with pytest.raises(UnknownStoreError), Journal("g", path=POSTGRES) as j:
            j.step("a", str, 1)
        assert os.listdir(here) == []

    def test_durable_refuses_it_and_does_not_call_the_function(self, here: Path) -> None:
        calls: list[int] = []

        @durable(goal_id="g", path=POSTGRES)
        def job(x: int) -> int:
            calls.append(x)
            return x

        with pytest.raises(UnknownStoreError, match="letitloop\\[postgres\\]"):
            job(1)
        assert calls == []
        assert os.listdir(here) == []

    def test_letitloop_db_refuses_it_too(self, here: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("LETITLOOP_DB", "postgres://app@db.internal/jobs")
        with pytest.raises(UnknownStoreError, match="postgres"):
            Journal("g").open()
        assert os.listdir(here) == []

    @pytest.mark.parametrize(
        "command", [["runs"], ["show", "g"], ["gc", "--older-than", "1d", "--yes"]]
    )
    def test_lil_refuses_it_in_one_line(
        self, here: Path, command: list[str], no_driver: dict[str, str]
    ) -> None:
        done = lil("--db", POSTGRES, *command, cwd=here, env=no_driver)
        assert done.returncode == 1, done
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert "postgresql" in lines[0] and "letitloop[postgres]" in lines[0]
        assert "Traceback" not in done.stderr
        assert os.listdir(here) == []

    def test_lil_refuses_it_from_letitloop_db(self, here: Path, no_driver: dict[str, str]) -> None:
        done = lil("runs", cwd=here, env={"LETITLOOP_DB": POSTGRES, **no_driver})
        assert done.returncode == 1, done
        assert "letitloop[postgres]" in done.stderr
        assert os.listdir(here) == []


class TestAUrlOfAnUnknownScheme:
    def test_is_refused_naming_the_supported_schemes(self, here: Path) -> None:
        with pytest.raises(UnknownStoreError) as caught:
            Journal("g", path="s3://bucket/journal.db").open()
        message = str(caught.value)
        assert "no store for s3:// URLs" in message
        assert "memory://" in message
        assert os.listdir(here) == []

    def test_a_relative_path_written_with_dot_slash_is_a_file(self, here: Path) -> None:
        # The way to name a file whose path looks like a URL: not a URL any more.
        with Journal("g", path="./weird://journal.db") as j:
            j.step("a", str, 1)
        assert (here / "weird:" / "journal.db").is_file()


class TestTheMemoryUrl:
    def test_opens_the_in_memory_store(self, here: Path) -> None:
        with Journal("g", path="memory://schemes-test") as j:
            assert isinstance(j.store, MemoryStorage)
            assert j.step("a", str, 1) == "1"
        assert os.listdir(here) == []

    def test_lil_says_it_lives_in_one_process(self, here: Path) -> None:
        done = lil("--db", "memory://x", "runs", cwd=here)
        assert done.returncode == 1, done
        assert "lives in the memory of the process that opened it" in done.stderr
        assert os.listdir(here) == []


class TestARegisteredScheme:
    def test_opens_its_store_with_no_journal_module_changed(self, here: Path) -> None:
        opened: list[str] = []

        def opener(location: str, durability: str) -> MemoryStorage:
            opened.append(location)
            return open_memory("memory://" + location.split("://", 1)[1])

        schemes.register("Testdb", opener)
        try:
            with Journal("g", run="r", path="testdb://one") as j:
                j.step("a", str, 1)
            with Journal("g", run="r", path="testdb://one") as j:
                assert j.was_completed  # the same database: the run replays
        finally:
            schemes.unregister("testdb")
        assert opened == ["testdb://one", "testdb://one"]
        with pytest.raises(UnknownStoreError):
            Journal("g", path="testdb://one").open()

    def test_a_scheme_that_is_not_one_is_refused(self) -> None:
        with pytest.raises(ValueError, match="a scheme is a letter"):
            schemes.register("my store", open_memory)
