"""Each attempt records the version of the code it ran; ``lil runs``/``lil show`` say which.

Real child processes run a script whose source changes between attempts (the
first is SIGKILLed mid-run); the real ``lil`` reads the journal.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import lil_forked, run_forked, spawn_forked

from letitloop import Journal, durable
from letitloop.errors import InvalidNameError
from letitloop.identity.versions import source_version
from letitloop.inspection import list_runs, open_inspector, show_run

#: A @durable pipeline: fetch, then (under DIE=1) wait to be killed, then send.
PIPELINE = """
import os, sys, time
from letitloop import durable, step

@durable(goal_id="digest", path=sys.argv[1])
def digest():
    step("fetch", str, 1)
    if os.environ.get("DIE"):
        print("ready", flush=True)
        time.sleep(60)
    return step("send", str, 2)

digest()
"""

#: A plain ``with Journal`` block: its version is its own file's.
PLAIN = """
import sys
from letitloop import Journal

with Journal("plain", path=sys.argv[1]) as j:
    j.step("a", str, 1)
"""


def lil(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return lil_forked("--db", str(db), *args)


def blake(text: str) -> str:
    from hashlib import blake2b

    return blake2b(text.encode(), digest_size=6).hexdigest()


class TestARunResumedUnderChangedCode:
    @pytest.fixture
    def journal(self, tmp_path: Path) -> tuple[Path, str, str]:
        """A run killed under PIPELINE, resumed (and completed) under a changed PIPELINE."""
        db, script = tmp_path / "journal.db", tmp_path / "pipeline.py"
        script.write_text(PIPELINE, encoding="utf-8")
        child = spawn_forked(script, str(db), env={"DIE": "1"})
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready"
            child.send_signal(signal.SIGKILL)
        finally:
            child.wait(30)
        changed = PIPELINE.replace("digest()\n", "digest()  # v2\n")
        script.write_text(changed, encoding="utf-8")
        done = run_forked(script, str(db))
        assert done.returncode == 0, done.stderr
        return db, blake(PIPELINE), blake(changed)

    def test_each_attempt_records_the_hash_of_the_source_it_ran(
        self, journal: tuple[Path, str, str]
    ) -> None:
        db, old, new = journal
        journal_ = open_inspector(db)
        try:
            (run,) = list_runs(journal_)
            attempts = show_run(journal_, run).attempts
        finally:
            journal_.close()
        assert [a.version for a in attempts] == [old, new]
        assert run.version == new

    def test_lil_show_says_which_attempts_ran_which_version(
        self, journal: tuple[Path, str, str]
    ) -> None:
        db, old, new = journal
        shown = lil(db, "show", "digest")
        assert shown.returncode == 0, shown.stderr
        assert f"attempt 2 ran version {new}, attempt 1 ran version {old}" in shown.stdout
        assert "pid" in shown.stdout and f"version {old}" in shown.stdout

    def test_lil_runs_shows_the_latest_version_and_filters_on_its_first_digits(
        self, journal: tuple[Path, str, str]
    ) -> None:
        db, old, new = journal
        listed = lil(db, "runs")
        assert listed.returncode == 0, listed.stderr
        assert "VERSION" in listed.stdout and new in listed.stdout
        found = lil(db, "runs", "--version", new[:4], "--json")
        assert [r["version"] for r in json.loads(found.stdout)] == [new]
        if not new.startswith(old[:4]):
            none = lil(db, "runs", "--version", old[:4], "--json")
            assert json.loads(none.stdout) == []

    def test_the_web_view_names_each_attempts_version(self, journal: tuple[Path, str, str]) -> None:
        pytest.importorskip("starlette")
        from starlette.testclient import TestClient

        from letitloop.web import create_app

        db, old, new = journal
        html = TestClient(create_app(db), base_url="http://127.0.0.1").get("/runs/digest").text
        first = html[html.index('data-attempt="1"') : html.index('data-attempt="2"')]
        assert (
            f"version {old}" in first and f"version {new}" in html[html.index('data-attempt="2"') :]
        )


class TestTheDefaultVersion:
    def test_of_a_plain_journal_is_the_hash_of_the_file_that_made_it(self, tmp_path: Path) -> None:
        db, script = tmp_path / "journal.db", tmp_path / "plain.py"
        script.write_text(PLAIN, encoding="utf-8")
        assert run_forked(script, str(db)).returncode == 0
        found = lil(db, "runs", "--json")
        assert [r["version"] for r in json.loads(found.stdout)] == [blake(PLAIN)]

    def test_is_read_once_so_a_file_edited_after_import_keeps_the_version_it_ran(
        self, tmp_path: Path
    ) -> None:
        module = tmp_path / "edited.py"
        module.write_text("x = 1\n", encoding="utf-8")
        first = source_version(str(module))
        module.write_text("x = 2\n", encoding="utf-8")
        assert source_version(str(module)) == first == blake("x = 1\n")

    def test_of_code_with_no_source_file_is_unknown(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        code = "import sys\nfrom letitloop import Journal\nJournal('c', path=sys.argv[1]).open()"
        done = subprocess.run([sys.executable, "-c", code, str(db)], capture_output=True)
        assert done.returncode == 0, done.stderr
        assert [r["version"] for r in json.loads(lil(db, "runs", "--json").stdout)] == [None]


class TestAVersionGiven:
    def test_to_durable_is_recorded_instead_of_the_hash(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"

        @durable(goal_id="given", path=db, version="2026-12-02.1")
        def given() -> str:
            return "ok"

        assert given() == "ok"
        journal = open_inspector(db)
        try:
            assert [r.version for r in list_runs(journal)] == ["2026-12-02.1"]
        finally:
            journal.close()

    @pytest.mark.parametrize("bad", ["", " ", "a\nb", 7])
    def test_that_is_not_usable_text_is_refused_before_anything_is_written(
        self, tmp_path: Path, bad: object
    ) -> None:
        with pytest.raises(InvalidNameError, match="version name"):
            Journal("g", path=tmp_path / "journal.db", version=bad)  # type: ignore[arg-type]
        assert not (tmp_path / "journal.db").exists()
