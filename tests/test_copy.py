"""``lil copy FROM TO``: runs moved to another journal file or to PostgreSQL, whole, and resumed
there.

A real program is SIGKILLed half-way through a sealed run (its finished steps
include a retried one, usage, a marker and a sleep); the real ``lil copy``
copies it; ``lil verify`` passes on the target with the same key; a fresh
process resumes the run from the target and calls none of its finished steps
again. Every store pair a user has: a file to another file, and a file to
PostgreSQL (skipped with one line where no server can start; CI runs it).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import POSTGRES, lil_forked, preload_for, run_forked, write_script

from letitloop import Journal
from letitloop.inspection import RunFilter, open_inspector
from letitloop.stores.sqlite.goals import VIEW_COLUMNS

KEY = "a seal key of at least sixteen bytes"

PROGRAM = """
    import os, signal, sys
    from letitloop import Journal, RetryPolicy, usage

    LEDGER = os.environ["LEDGER"]


    def call(name):
        with open(LEDGER, "a") as f:
            f.write(name + "\\n")
        if name == "summarize" and os.environ.get("KILL"):
            os.kill(os.getpid(), signal.SIGKILL)  # half-way: fetch and rank are done
        if name == "rank" and sum(1 for _ in open(LEDGER)) == 2:
            raise ConnectionError("the ranking service hung up")  # a failed try, retried
        if name != "notify":
            usage(input_tokens=100, output_tokens=20, cost=0.001)
        return {"step": name, "items": [1, 2, 3]}


    with Journal("pipeline", path=os.environ.get("DB"), run="2026-12-07") as j:
        fetched = j.step("fetch", call, "fetch")
        ranked = j.step("rank", call, "rank", retry=RetryPolicy(initial_backoff=0.01))
        with j.atomic_marker("notify") as first:
            if first:
                call("notify")
        with j.atomic_marker("daily-report", scope="goal"), j.atomic_marker(
            "invoice-7", scope="global"
        ):
            pass
        j.sleep("cool_down", 0.01)
        summary = j.step("summarize", call, "summarize")
    print(summary["step"], fetched["items"], ranked["step"])
"""


def run_program(
    folder: Path,
    db: str | None,
    *,
    kill: bool = False,
    seal: bool = True,
    encryption_key: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """The program, in ``folder``; its journal ``db`` (None: the default one, found as a
    program finds it)."""
    script = write_script(folder, "pipeline.py", PROGRAM)
    env = {**os.environ, "LEDGER": str(folder / "ledger.txt")}
    for name in ("LETITLOOP_SEAL_KEY", "LETITLOOP_ENCRYPTION_KEY", "LETITLOOP_DB", "DB"):
        env.pop(name, None)
    if encryption_key is not None:
        env["LETITLOOP_ENCRYPTION_KEY"] = encryption_key
    if db is not None:
        env["DB"] = db
    if seal:
        env["LETITLOOP_SEAL_KEY"] = KEY
    if kill:
        env["KILL"] = "1"
    # A process of its own, forked from an interpreter that imported letitloop.
    return run_forked(script, env=env, cwd=folder, preload=preload_for(db or ""))


def lil(*args: str, key: str | None = KEY) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("LETITLOOP_SEAL_KEY", "LETITLOOP_DB", "LETITLOOP_ENCRYPTION_KEY")
    }
    if key is not None:
        env["LETITLOOP_SEAL_KEY"] = key
    on_postgresql = any(a.startswith("postgresql") for a in args)
    return lil_forked(*args, env=env, preload=POSTGRES if on_postgresql else ())


def ledger(folder: Path) -> list[str]:
    return (folder / "ledger.txt").read_text().splitlines()


@pytest.fixture(scope="module")
def killed_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder whose journal file source.db holds a sealed run SIGKILLed in its last step
    (and ledger.txt, the steps' calls): written once for the module."""
    folder = tmp_path_factory.mktemp("killed")
    died = run_program(folder, str(folder / "source.db"), kill=True)
    assert died.returncode == -signal.SIGKILL, died.stderr
    assert ledger(folder) == ["fetch", "rank", "rank", "notify", "summarize"]
    return folder


@pytest.fixture
def killed(tmp_path: Path, killed_once: Path) -> tuple[Path, Path]:
    """A journal file holding a sealed run SIGKILLed in its last step; and its folder: a
    copy of :func:`killed_once`'s (the file, its -wal as the killed writer left it, the
    ledger)."""
    for name in ("source.db", "source.db-wal", "ledger.txt"):
        if (killed_once / name).exists():
            shutil.copyfile(killed_once / name, tmp_path / name)
    return tmp_path / "source.db", tmp_path


def image(location: str | Path) -> Any:
    """The run as ``lil copy`` reads it, its rows by the columns every store shows."""
    inspector = open_inspector(location)
    try:
        (run,) = inspector.runs(RunFilter(), limit=None)
        got = inspector.run_image(run)
    finally:
        inspector.close()

    def shown(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: r.get(k) for k in VIEW_COLUMNS if k != "run"} for r in rows]

    markers = shown(got.goal_markers), shown(got.global_markers)
    return got.run, shown(got.rows), markers, got.tries, got.replays, got.seals, got.key_check


class TestACopiedRun:
    @pytest.mark.parametrize("store", ["file", "postgresql"])
    def test_verifies_on_the_target_and_resumes_there_without_calling_finished_steps(
        self, killed: tuple[Path, Path], store: str
    ) -> None:
        source, folder = killed
        if store == "file":
            target = str(folder / "moved" / "target.db")
            (folder / "moved").mkdir()
        else:
            from pg_server import location

            target = location()
        copied = lil("copy", str(source), target)
        assert copied.returncode == 0, copied.stderr
        assert copied.stdout.splitlines()[0].startswith("copied 1 run (")
        assert "1 sealed run(s): chains verified with LETITLOOP_SEAL_KEY" in copied.stdout
        assert image(target) == image(source)  # every value as stored, the chain too
        verified = lil("verify", "--all", "--db", target)
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert "sealed" in verified.stdout
        resumed = run_program(folder, target)
        assert resumed.returncode == 0, resumed.stderr
        assert resumed.stdout == "summarize [1, 2, 3] rank\n"
        # Only the step that was in flight ran again: in the new process, from the target.
        assert ledger(folder) == ["fetch", "rank", "rank", "notify", "summarize", "summarize"]
        after = lil("verify", "--all", "--db", target)
        assert after.returncode == 0, after.stdout + after.stderr
        shown = lil("show", "2026-12-07", "--db", target, "--json")
        detail = json.loads(shown.stdout)
        assert detail["run"]["state"] == "completed" and detail["run"]["attempts"] == 2
        assert len(detail["tries"]) == 1  # the failed try of rank came along
        assert detail["usage"]["input_tokens"] == 300  # fetch, rank and summarize reported

    def test_leaves_the_source_as_it_was(self, killed: tuple[Path, Path]) -> None:
        """The file and its -wal byte for byte (the -shm is SQLite's index of the -wal, which
        any reader of a file a killed writer left updates)."""
        source, folder = killed
        files = ("source.db", "source.db-wal")
        before = [(folder / f).read_bytes() for f in files]
        assert lil("copy", str(source), str(folder / "target.db")).returncode == 0
        assert [(folder / f).read_bytes() for f in files] == before
        assert run_program(folder, str(source)).returncode == 0  # and it resumes there too

    def test_comes_back_from_postgresql_to_a_file_the_same(self, killed: tuple[Path, Path]) -> None:
        from pg_server import location

        source, folder = killed
        database, back = location(), str(folder / "back.db")
        assert lil("copy", str(source), database).returncode == 0
        returned = lil("copy", database, back)
        assert returned.returncode == 0, returned.stderr
        assert image(back) == image(source)
        assert lil("verify", "--all", "--db", back).returncode == 0
        assert run_program(folder, back).returncode == 0
        assert ledger(folder).count("summarize") == 2 and ledger(folder).count("fetch") == 1

    @pytest.mark.parametrize("store", ["file", "postgresql"])
    def test_without_a_seal_copies_and_resumes_the_same(self, tmp_path: Path, store: str) -> None:
        source = tmp_path / "source.db"
        died = run_program(tmp_path, str(source), kill=True, seal=False)
        assert died.returncode == -signal.SIGKILL, died.stderr
        if store == "file":
            target = str(tmp_path / "target.db")
        else:
            from pg_server import location

            target = location()
        copied = lil("copy", str(source), target, key=None)
        assert copied.returncode == 0, copied.stderr
        assert "sealed run(s)" not in copied.stdout  # no chain to check
        assert image(target) == image(source)
        resumed = run_program(tmp_path, target, seal=False)
        assert resumed.returncode == 0, resumed.stderr
        assert ledger(tmp_path).count("summarize") == 2 and ledger(tmp_path).count("fetch") == 1


ENCRYPTION_KEY = "an encryption key of sixteen bytes or more"


class TestAnEncryptedRun:
    @pytest.mark.parametrize("store", ["file", "postgresql"])
    def test_stays_encrypted_and_resumes_on_the_target_with_its_key(
        self, tmp_path: Path, store: str
    ) -> None:
        source = tmp_path / "source.db"
        died = run_program(tmp_path, str(source), kill=True, encryption_key=ENCRYPTION_KEY)
        assert died.returncode == -signal.SIGKILL, died.stderr
        if store == "file":
            target = str(tmp_path / "target.db")
        else:
            from pg_server import location

            target = location()
        copied = lil("copy", str(source), target)
        assert copied.returncode == 0, copied.stderr
        _, rows, *_ = image(target)
        fetched = next(r for r in rows if r["key"] == "fetch")
        assert "fetch" not in fetched["result"] and "!enc" in fetched["result"]
        resumed = run_program(tmp_path, target, encryption_key=ENCRYPTION_KEY)
        assert resumed.returncode == 0, resumed.stderr
        assert resumed.stdout == "summarize [1, 2, 3] rank\n"
        assert ledger(tmp_path).count("fetch") == 1

    def test_into_a_goal_the_target_encrypts_with_another_key_is_refused(
        self, tmp_path: Path
    ) -> None:
        source, target = tmp_path / "source.db", tmp_path / "target.db"
        with Journal("g", path=source, encryption_key=ENCRYPTION_KEY) as j:
            j.step("s", str, 1)
        with Journal("g", path=target, encryption_key="another key of sixteen bytes") as j:
            j.step("s", str, 1)
        refused = lil("copy", str(source), str(target))
        assert refused.returncode == 1 and refused.stderr.count("\n") == 1, refused.stderr
        assert "encrypted with another key" in refused.stderr
        with sqlite3.connect(target) as conn:
            assert conn.execute("SELECT count(*) FROM runs").fetchone() == (1,)


class TestRunsTheTargetHasAlready:
    def test_refuse_the_copy_in_one_line_writing_nothing(self, killed: tuple[Path, Path]) -> None:
        source, folder = killed
        target = folder / "target.db"
        assert lil("copy", str(source), str(target)).returncode == 0
        with Journal("other", path=target) as j:
            j.step("s", str, 1)
        again = lil("copy", str(source), str(target))
        assert again.returncode == 1
        assert again.stderr.count("\n") == 1 and "--skip-existing" in again.stderr
        assert "already" in again.stderr and "nothing was copied" in again.stderr

    def test_are_left_alone_with_skip_existing_and_the_others_copied(
        self, killed: tuple[Path, Path]
    ) -> None:
        source, folder = killed
        target = folder / "target.db"
        assert lil("copy", str(source), str(target)).returncode == 0
        with Journal("later", path=source) as j:
            j.step("s", str, 1)
        again = lil("copy", str(source), str(target), "--skip-existing")
        assert again.returncode == 0, again.stderr
        assert again.stdout.splitlines()[0].startswith("copied 1 run (1 rows)")
        assert "skipped 1 run" in again.stdout
        with sqlite3.connect(target) as conn:
            assert conn.execute("SELECT count(*) FROM runs").fetchone() == (2,)


class TestWhichRunsAreCopied:
    def test_only_and_goal_select_them(self, killed: tuple[Path, Path]) -> None:
        source, folder = killed
        with Journal("later", path=source) as j:
            j.step("s", str, 1)
        finished = lil("copy", str(source), str(folder / "a.db"), "--only", "finished", "--json")
        assert json.loads(finished.stdout)["rows"] == 1
        unfinished = lil("copy", str(source), str(folder / "b.db"), "--only", "unfinished")
        assert unfinished.stdout.startswith("copied 1 run (4 rows)"), unfinished.stdout
        by_goal = lil("copy", str(source), str(folder / "c.db"), "--goal", "later", "--json")
        assert json.loads(by_goal.stdout)["copied"] and json.loads(by_goal.stdout)["rows"] == 1
        missing = lil("copy", str(source), str(folder / "d.db"), "--goal", "nope")
        assert missing.returncode == 1 and "has no goal 'nope'" in missing.stderr


class TestARunHeldByALiveProcess:
    def test_refuses_the_copy(self, tmp_path: Path) -> None:
        source = tmp_path / "source.db"
        with Journal("live", path=source) as j:
            j.step("s", str, 1)
            held = lil("copy", str(source), str(tmp_path / "target.db"))
        assert held.returncode == 1
        assert "held by a live process" in held.stderr and held.stderr.count("\n") == 1
        assert "nothing was copied" in held.stderr


class TestBadInput:
    def test_a_missing_source_is_one_line(self, tmp_path: Path) -> None:
        got = lil("copy", str(tmp_path / "none.db"), str(tmp_path / "target.db"))
        assert got.returncode == 1 and got.stderr.count("\n") == 1, got.stderr
        assert "no journal file here" in got.stderr
        assert not (tmp_path / "target.db").exists()

    def test_the_same_file_twice_is_one_line(self, killed: tuple[Path, Path]) -> None:
        source, folder = killed
        link = folder / "link.db"
        link.symlink_to(source)
        got = lil("copy", str(source), str(link))
        assert got.returncode == 1 and got.stderr.count("\n") == 1, got.stderr
        assert "is the journal the runs are copied from" in got.stderr

    def test_a_target_of_a_newer_letitloop_is_one_line_and_untouched(
        self, killed: tuple[Path, Path]
    ) -> None:
        source, folder = killed
        target = folder / "newer.db"
        with Journal("other", path=target) as j:
            j.step("s", str, 1)
        with sqlite3.connect(target) as conn:
            conn.execute(
                'INSERT INTO "_sqlite_migrations" (migration_set, name, applied_at) '
                "VALUES ('letitloop', '9999_from_the_future', '2030-01-01')"
            )
        before = target.read_bytes()
        got = lil("copy", str(source), str(target))
        assert got.returncode == 1 and got.stderr.count("\n") == 1, got.stderr
        assert "newer" in got.stderr
        assert target.read_bytes() == before


class TestThePostgresPagesBlock:
    def test_runs_as_printed_and_the_killed_run_resumes_on_postgresql(self, tmp_path: Path) -> None:
        """docs/postgres.md's "Moving runs from a file to PostgreSQL", pasted into a shell in
        the folder of a program whose run was SIGKILLed half-way in .letitloop/journal.db."""
        from pg_server import location
        from test_readme import blocks

        page = (Path(__file__).resolve().parent.parent / "docs" / "postgres.md").read_text()
        section = page[page.index("## Moving runs from a file to PostgreSQL") :]
        block = blocks("sh", section)[0]
        assert block.startswith("lil copy .letitloop/journal.db")
        died = run_program(tmp_path, None, kill=True)
        assert died.returncode == -signal.SIGKILL, died.stderr
        assert (tmp_path / ".letitloop" / "journal.db").exists()
        env = {k: v for k, v in os.environ.items() if k not in ("LETITLOOP_DB",)}
        env.update(
            DATABASE_URL=location(),
            LETITLOOP_SEAL_KEY=KEY,
            LEDGER=str(tmp_path / "ledger.txt"),
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        )
        pasted = subprocess.run(
            ["bash", "-e", "-c", block],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert pasted.returncode == 0, pasted.stdout + pasted.stderr
        assert "copied 1 run (4 rows)" in pasted.stdout
        assert pasted.stdout.endswith("summarize [1, 2, 3] rank\n")
        assert ledger(tmp_path) == ["fetch", "rank", "rank", "notify", "summarize", "summarize"]


class TestAMemoryStore:
    def test_copies_to_a_file_inside_its_process_and_resumes_there(self, tmp_path: Path) -> None:
        """``memory://`` lives in one process (lil cannot reach it): the library's
        copy_runs moves its runs to a file from inside that process."""
        from letitloop.maintenance import copy_runs, open_ends

        calls: list[str] = []

        def call(name: str) -> str:
            calls.append(name)
            return name

        memory = "memory://test-copy"
        with pytest.raises(RuntimeError), Journal("g", path=memory, run="r") as j:
            j.step("a", call, "a")
            j.step("b", call, "b")
            raise RuntimeError("stopped half-way")
        reader, writer = open_ends(memory, str(tmp_path / "target.db"), separate_process=False)
        try:
            result = copy_runs(reader, writer)
        finally:
            reader.close()
            writer.close()
        assert result.rows == 2 and len(result.copied) == 1
        with Journal("g", path=tmp_path / "target.db", run="r") as j:
            assert (j.step("a", call, "a"), j.step("b", call, "b"), j.step("c", call, "c")) == (
                "a",
                "b",
                "c",
            )
        assert calls == ["a", "b", "c"]


class TestATargetFileThatCannotBeMade:
    def test_a_missing_folder_is_one_line_and_nothing_is_made(
        self, killed: tuple[Path, Path]
    ) -> None:
        source, folder = killed
        got = lil("copy", str(source), str(folder / "no" / "such" / "target.db"))
        assert got.returncode == 1 and got.stderr.count("\n") == 1, got.stderr
        assert "mkdir -p" in got.stderr
        assert not (folder / "no").exists()


class TestARunWaitingForAValue:
    @pytest.mark.parametrize("store", ["file", "postgresql"])
    def test_takes_the_value_sent_on_the_target_and_resumes_there(
        self, tmp_path: Path, store: str
    ) -> None:
        from letitloop import RunWaiting

        calls: list[str] = []

        def build() -> str:
            calls.append("build")
            return "artifact-7"

        source = tmp_path / "source.db"
        with pytest.raises(RunWaiting), Journal("deploy", path=source) as j:
            j.step("build", build)
            j.wait_for("approval", stop_after=0)
        if store == "file":
            target = str(tmp_path / "target.db")
        else:
            from pg_server import location

            target = location()
        assert lil("copy", str(source), target, key=None).returncode == 0
        sent = lil("send", "deploy", "approval", "true", "--db", target, key=None)
        assert sent.returncode == 0, sent.stderr
        with Journal("deploy", path=target) as j:
            assert j.step("build", build) == "artifact-7"
            assert j.wait_for("approval", stop_after=0) is True
        assert calls == ["build"]
