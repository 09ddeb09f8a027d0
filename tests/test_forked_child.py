"""A journal belongs to the process that opened it: what a forked child may do with its parent's.

Real forks of this process (``os.fork``, ``multiprocessing`` pools started
with ``fork``) and real programs whose pools start with ``spawn`` and
``forkserver``; the journal file is read from outside the writer.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from helpers import run_python, sqlite_store, write_script
from test_readme import blocks

from letitloop import Journal, atomic_marker, sleep, step
from letitloop.errors import ForkedJournalError
from letitloop.inspection import open_journal_file
from letitloop.run.closing import aclose
from letitloop.stores.sqlite.locks import is_held
from letitloop.stores.sqlite.pool import close_idle_stores

pytestmark = [
    pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork"),
    # Python 3.12+ warns about fork() in a process with threads (pytest has some).
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

URLS = [f"https://example.com/{i}" for i in range(8)]

#: The journal the forked workers of a test inherit (set before the pool starts).
_JOURNAL: Journal | None = None


def fetch(calls: Path, url: str) -> str:
    """A page, and a line in ``calls`` for every real call."""
    with open(calls, "a", encoding="utf-8") as f:
        f.write(url + "\n")
    return f"<html>{url}</html>"


def fetch_with_free_step(calls: Path, url: str) -> str:
    return step("fetch", fetch, calls, url)


def fetch_with_journal_method(calls: Path, url: str) -> str:
    assert _JOURNAL is not None
    return _JOURNAL.step(f"fetch:{url}", fetch, calls, url)


def fetch_in_own_journal(db: Path, calls: Path, url: str) -> str:
    with Journal("fetch_page", run=url, path=db) as j:
        return j.step("fetch", fetch, calls, url)


def journal_and_locks(db: Path) -> tuple[int, bool]:
    """In a worker: a journal of its own on ``db``, a step, and whether it holds the DMS lock."""
    from test_connections import dms_held

    with Journal("w", run="1", path=db) as j:
        j.step("s", str, 1)
        return os.getpid(), dms_held(db, os.getpid())


def rows_seen_by_a_fresh_process(db: Path, goal: str) -> list[list[Any]]:
    """The goal's rows (key, status, result) as a new interpreter reads them from the file."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
            "(t,) = c.execute('SELECT journal_table FROM goals WHERE goal = ?', "
            "(sys.argv[2],)).fetchone(); "
            'print(json.dumps(c.execute(f\'SELECT key, status, result FROM "{t}" '
            "ORDER BY key, result').fetchall()))",
            str(db),
            goal,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout))


def rows(db: Path, goal: str) -> list[tuple[Any, ...]]:
    """The goal's rows as another connection sees them: (key, status, result)."""
    con = sqlite3.connect(db)
    try:
        (table,) = con.execute("SELECT journal_table FROM goals WHERE goal = ?", (goal,)).fetchone()
        return con.execute(
            f'SELECT key, status, result FROM "{table}" ORDER BY key, result'
        ).fetchall()
    finally:
        con.close()


def run_status(db: Path, run_id: str) -> str:
    con = sqlite3.connect(db)
    try:
        (status,) = con.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()
        return str(status)
    finally:
        con.close()


def in_forked_child(action: Callable[[], object]) -> tuple[int, str, str]:
    """Run ``action`` in a child forked from this process: (its pid, error type, message).

    The error type is "" when ``action`` returned. The child never returns
    into the test: it ends with ``os._exit``.
    """
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        try:
            os.close(read)
            try:
                action()
                out = ["", ""]
            except BaseException as exc:
                out = [type(exc).__name__, str(exc)]
            os.write(write, json.dumps(out).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    kind, message = json.loads(data)
    return pid, kind, message


def _enter(marker: Any) -> None:
    marker.__enter__()


#: What a child may try on the journal its parent opened; every one is refused.
OPERATIONS: dict[str, Callable[[Journal], object]] = {
    "step": lambda j: j.step("s", str, 1),
    "async step": lambda j: asyncio.run(j.async_step("s", str, 1)),
    "marker": lambda j: _enter(j.atomic_marker("m")),
    "goal-scoped marker": lambda j: _enter(j.atomic_marker("m", scope="goal")),
    "sleep": lambda j: j.sleep("nap", 0),
    "async sleep": lambda j: asyncio.run(j.async_sleep("nap", 0)),
    "wait_for": lambda j: j.wait_for("approval", timeout=1),
    "set_result": lambda j: j.set_result(1),
    "close": lambda j: j.close(),
    "close as 'async with' does": lambda j: asyncio.run(aclose(j, None)),
    "open again": lambda j: j.open(),
    "free step() (the inherited current journal)": lambda j: step("s", str, 1),
    "free atomic_marker()": lambda j: _enter(atomic_marker("m")),
    "free sleep()": lambda j: sleep("nap", 0),
    "free step() in a thread with no current journal": lambda j: _in_thread(
        lambda: step("s", str, 1)
    ),
}


def _in_thread(fn: Callable[[], object]) -> None:
    failed: list[BaseException] = []

    def target() -> None:
        try:
            fn()
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]


class TestAForkedChildOfTheOpener:
    @pytest.mark.parametrize("operation", list(OPERATIONS))
    def test_it_is_refused_with_both_pids_and_the_parents_run_keeps_its_rows(
        self, db: Path, operation: str
    ) -> None:
        with Journal("crawl", run="c1", path=db) as j:
            j.step("seed", str, 1)
            before = rows(db, "crawl")
            pid, kind, message = in_forked_child(lambda: OPERATIONS[operation](j))
            assert kind == "ForkedJournalError", (kind, message)
            assert f"opened by process {os.getpid()}" in message
            assert f"this is process {pid}, a child forked from it" in message
            assert "'spawn' or 'forkserver' pool" in message
            assert "nothing was recorded" in message
            assert rows(db, "crawl") == before
            assert run_status(db, j.run_id) == "running"
            assert is_held(sqlite_store(j).lock_file("run", j.run_id))
            j.step("after", str, 2)
            run_id = j.run_id
        assert rows(db, "crawl") == [("after", "done", '"2"'), ("seed", "done", '"1"')]
        assert run_status(db, run_id) == "completed"

    def test_leaving_a_marker_block_entered_before_the_fork_is_refused(self, db: Path) -> None:
        with Journal("crawl", run="c1", path=db) as j:
            marker = j.atomic_marker("charge", scope="goal")
            with marker as offer:
                assert offer
                # The block's exit in the child: no 'done' written, no lock released.
                _, kind, message = in_forked_child(lambda: marker.__exit__(None, None, None))
                assert kind == "ForkedJournalError", (kind, message)
                assert is_held(marker.lock_file)
                assert [r[:2] for r in rows(db, "crawl")] == [("charge", "pending")]
            assert [r[:2] for r in rows(db, "crawl")] == [("charge", "done")]
            assert not marker.lock_file.exists()

    def test_a_step_in_flight_at_the_fork_is_recorded_by_the_parent_alone(self, db: Path) -> None:
        parent = os.getpid()
        child_exit: list[int] = []

        def forks() -> str:
            pid = os.fork()
            if pid == 0:
                return "the child's"  # the child carries on the parent's step
            _, status = os.waitpid(pid, 0)
            child_exit.append(os.waitstatus_to_exitcode(status))
            return "the parent's"

        with Journal("crawl", run="c1", path=db) as j:
            try:
                value = j.step("s", forks)
            except ForkedJournalError:
                if os.getpid() != parent:
                    os._exit(7)  # refused: the expected end of the child
                raise
            finally:
                if os.getpid() != parent:
                    os._exit(3)  # the child's step returned: it must not
            assert value == "the parent's"
        assert child_exit == [7]
        assert rows(db, "crawl") == [("s", "done", '"the parent\'s"')]


class TestAForkPoolStartedInsideAnOpenJournal:
    @pytest.mark.parametrize("work", [fetch_with_free_step, fetch_with_journal_method])
    def test_the_workers_steps_are_refused_and_the_parent_keeps_exactly_its_rows(
        self, db: Path, tmp_path: Path, work: Callable[[Path, str], str]
    ) -> None:
        global _JOURNAL
        calls = tmp_path / "calls.txt"
        with Journal("crawl", run="c1", path=db) as j:
            j.step("seed", str, 1)
            before = rows(db, "crawl")
            _JOURNAL = j
            try:
                with (
                    multiprocessing.get_context("fork").Pool(2) as pool,
                    pytest.raises(ForkedJournalError) as caught,
                ):
                    pool.map(partial(work, calls), URLS)
            finally:
                _JOURNAL = None
            error = caught.value
            assert (error.opener_pid, error.goal, error.run_id) == (os.getpid(), "crawl", j.run_id)
            assert error.pid != os.getpid()
            assert f"this is process {error.pid}, a child forked from it" in str(error)
            assert "multiprocessing.get_context('spawn').Pool()" in str(error)
            assert not calls.exists()  # refused before any fetch ran
            assert rows(db, "crawl") == before
            j.step("after", str, 2)
            run_id = j.run_id
        assert rows(db, "crawl") == [("after", "done", '"2"'), ("seed", "done", '"1"')]
        assert run_status(db, run_id) == "completed"

    def test_workers_that_open_a_journal_on_another_file_record_8_of_8(
        self, db: Path, tmp_path: Path
    ) -> None:
        calls, other = tmp_path / "calls.txt", tmp_path / "pages.db"
        with Journal("crawl", run="c1", path=db) as j:
            with multiprocessing.get_context("fork").Pool(2) as pool:
                pages = pool.map(partial(fetch_in_own_journal, other, calls), URLS)
            j.step("count", len, pages)
        assert pages == [f"<html>{u}</html>" for u in URLS]
        assert sorted(calls.read_text().split()) == sorted(URLS)
        assert rows(other, "fetch_page") == [("fetch", "done", f'"<html>{u}</html>"') for u in URLS]

    def test_workers_that_open_a_journal_on_the_parents_file_are_refused(
        self, db: Path, tmp_path: Path
    ) -> None:
        # SQLite's locks of the file are the parent's in the child's memory: a
        # connection opened there would hold none (its commits could be lost).
        calls = tmp_path / "calls.txt"
        with Journal("crawl", run="c1", path=db) as j:
            with (
                multiprocessing.get_context("fork").Pool(2) as pool,
                pytest.raises(
                    ForkedJournalError, match=f"journal file {db}: .* had the file open"
                ) as caught,
            ):
                pool.map(partial(fetch_in_own_journal, db, calls), URLS)
            assert caught.value.opener_pid == os.getpid()
            j.step("count", len, [])
        assert not calls.exists()
        assert [g for (g,) in sqlite3.connect(db).execute("SELECT goal FROM goals")] == ["crawl"]


KILLED_WRITER = """
import os, signal, sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("CREATE TABLE IF NOT EXISTS other (x)")
c.execute("INSERT INTO other VALUES (1)")
os.kill(os.getpid(), signal.SIGKILL)  # before any close: the commit is in the -wal alone
"""


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="reads /proc/locks (Linux)")
class TestAForkedChildOfAProcessThatUsedTheFileBefore:
    """The parent used a journal on the file and closed it; it keeps an idle connection."""

    def test_its_own_connection_holds_sqlites_locks(self, db: Path) -> None:
        from test_connections import dms_held

        with Journal("crawl", path=db) as j:
            j.step("seed", str, 1)
        assert dms_held(db)  # the parent's idle connection, copied into the child
        with multiprocessing.get_context("fork").Pool(1) as pool:
            pid, held = pool.apply(journal_and_locks, (db,))
        assert pid != os.getpid()
        assert held  # before: no lock at all for the child's pid
        assert dms_held(db)  # and the parent's is untouched

    def test_a_fork_pool_records_8_of_8_once_and_nothing_is_lost_when_the_parent_closes(
        self, db: Path, tmp_path: Path
    ) -> None:
        calls = tmp_path / "calls.txt"
        with Journal("crawl", run="c1", path=db) as j:
            j.step("seed", str, 1)
        with multiprocessing.get_context("fork").Pool(2) as pool:
            pages = pool.map(partial(fetch_in_own_journal, db, calls), URLS[:4])
            # The parent's last connection closes while the workers have the file open:
            # were they lockless, SQLite would checkpoint and delete the -wal under them.
            close_idle_stores()
            pages += pool.map(partial(fetch_in_own_journal, db, calls), URLS[4:])
            with Journal("crawl", run="c2", path=db) as j:
                j.step("after", str, 2)
            close_idle_stores()
        assert pages == [f"<html>{u}</html>" for u in URLS]
        assert sorted(calls.read_text().split()) == sorted(URLS)  # each fetched once
        expected = [["fetch", "done", f'"<html>{u}</html>"'] for u in URLS]
        assert rows_seen_by_a_fresh_process(db, "fetch_page") == expected
        assert rows_seen_by_a_fresh_process(db, "crawl") == [
            ["after", "done", '"2"'],
            ["seed", "done", '"1"'],
        ]
        runs = "SELECT count(*), count(DISTINCT name) FROM runs WHERE goal = 'fetch_page'"
        assert sqlite3.connect(db).execute(runs).fetchone() == (8, 8)

    def test_closing_its_copy_of_the_idle_connection_leaves_the_parents_rows_and_wal(
        self, db: Path
    ) -> None:
        with Journal("crawl", path=db) as j:
            j.step("seed", str, 1)
        wal, shm = os.stat(f"{db}-wal"), os.stat(f"{db}-shm")
        _, kind, message = in_forked_child(lambda: journal_and_locks(db))
        assert kind == "", message
        # Neither deleted nor truncated by the child (its own step only added to the -wal).
        after = os.stat(f"{db}-wal")
        assert after.st_ino == wal.st_ino and after.st_size >= wal.st_size
        assert os.stat(f"{db}-shm").st_ino == shm.st_ino
        assert rows(db, "crawl") == [("seed", "done", '"1"')]
        assert rows(db, "w") == [("s", "done", '"1"')]

    def test_its_copy_is_closed_without_deleting_a_wal_written_after_the_parent_closed(
        self, db: Path, tmp_path: Path
    ) -> None:
        # The parent closes its last connection after the fork, and another process
        # commits and is killed: its commit lives in the -wal alone. The child's copy
        # of the parent's connection must not take itself for the file's last user.
        with Journal("crawl", path=db) as j:
            j.step("seed", str, 1)
        go_read, go_write = os.pipe()
        out_read, out_write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: opens the file once the parent has done the above
            try:
                os.read(go_read, 1)
                try:
                    journal_and_locks(db)
                    out = ""
                except BaseException as exc:
                    out = repr(exc)
                os.write(out_write, out.encode())
            finally:
                os._exit(0)
        os.close(out_write)
        try:
            close_idle_stores()  # checkpoints and deletes the -wal and -shm
            assert not Path(f"{db}-wal").exists()
            writer = write_script(tmp_path, "killed.py", KILLED_WRITER)
            assert run_python(writer, str(db)).returncode == -9
            assert Path(f"{db}-wal").exists()
        finally:
            os.write(go_write, b"x")
            with os.fdopen(out_read, "rb") as f:
                out = f.read().decode()
            os.waitpid(pid, 0)
        assert out == ""
        assert sqlite3.connect(db).execute("SELECT x FROM other").fetchall() == [(1,)]
        assert rows_seen_by_a_fresh_process(db, "w") == [["s", "done", '"1"']]
        assert rows_seen_by_a_fresh_process(db, "crawl") == [["seed", "done", '"1"']]


class TestAForkedChildOfAProcessWithAReaderOpen:
    def test_its_journal_on_that_file_is_refused_and_the_reader_kept(self, db: Path) -> None:
        with Journal("crawl", path=db) as j:
            j.step("seed", str, 1)
        reader = open_journal_file(db, live=True)
        try:
            _, kind, message = in_forked_child(lambda: journal_and_locks(db))
            assert kind == "ForkedJournalError", message
            assert f"journal file {db.resolve()}: " in message
            assert "still in use there" in message
            assert "multiprocessing.get_context('spawn').Pool()" in message
            assert reader.query("SELECT count(*) FROM runs") == [(1,)]
        finally:
            reader.close()
        assert [g for (g,) in sqlite3.connect(db).execute("SELECT goal FROM goals")] == ["crawl"]

    def test_a_reader_closed_before_the_fork_leaves_nothing_in_the_way(self, db: Path) -> None:
        with Journal("crawl", path=db) as j:
            j.step("seed", str, 1)
        open_journal_file(db, live=True).close()
        _, kind, message = in_forked_child(lambda: journal_and_locks(db))
        assert kind == "", message
        assert rows(db, "w") == [("s", "done", '"1"')]


FORKING_PARENT = """
    import os, sqlite3, sys
    from letitloop import Journal

    db, how = sys.argv[1], sys.argv[2]

    def status(run_id):
        con = sqlite3.connect(db)
        try:
            return con.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
        finally:
            con.close()

    with Journal("crawl", run="c1", path=db) as j:
        j.step("a", str, 1)
        pid = os.fork()
        if pid == 0:
            if how == "os._exit":
                os._exit(0)  # as a multiprocessing worker ends
            sys.exit(0)  # through the journal's 'with' block, then the interpreter's exit
        _, code = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(code), flush=True)
        print("after the child", status(j.run_id), flush=True)
        j.step("b", str, 2)
        run_id = j.run_id
    print("at the end", status(run_id), flush=True)
"""


class TestAForkedChildThatSimplyExits:
    @pytest.mark.parametrize("how", ["os._exit", "sys.exit"])
    def test_the_parent_continues_and_its_run_completes(
        self, db: Path, tmp_path: Path, how: str
    ) -> None:
        script = write_script(tmp_path, "parent.py", FORKING_PARENT)
        done = run_python(script, str(db), how)
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        if how == "os._exit":
            assert lines[0] == "child 0"
        else:  # the child's exit from the block is refused, and says why
            assert lines[0] == "child 1"
            assert "ForkedJournalError" in done.stderr
            assert "closing it (marking the run's end) was refused" in done.stderr
        assert lines[1:] == ["after the child running", "at the end completed"]
        assert rows(db, "crawl") == [("a", "done", '"1"'), ("b", "done", '"2"')]
        assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert not list((tmp_path / "journal.db-locks").glob("*.lock"))


CRAWL = """
    import multiprocessing, sys
    from functools import partial
    from letitloop import Journal

    def fetch(calls, url):
        with open(calls, "a", encoding="utf-8") as f:
            f.write(url + "\\n")
        return f"<html>{url}</html>"

    def fetch_page(db, calls, url):  # runs in a worker: its own Journal, its own run
        with Journal("fetch_page", run=url, path=db) as j:
            return j.step("fetch", fetch, calls, url)

    if __name__ == "__main__":
        method, db, calls = sys.argv[1:]
        urls = [f"https://example.com/{i}" for i in range(8)]
        with Journal("crawl", run="c1", path=db) as j:
            with multiprocessing.get_context(method).Pool(2) as pool:
                pages = pool.map(partial(fetch_page, db, calls), urls)
            j.step("count", len, pages)
        print(len(pages), pages[0])
"""


class TestASpawnOrForkserverPool:
    @pytest.mark.parametrize("method", ["spawn", "forkserver"])
    def test_workers_opening_their_own_journal_record_8_of_8_each_once(
        self, db: Path, tmp_path: Path, method: str
    ) -> None:
        script = write_script(tmp_path, "crawl.py", CRAWL)
        calls = tmp_path / "calls.txt"
        for _ in range(2):  # the second run replays every page
            done = run_python(script, method, str(db), str(calls), timeout=120)
            assert done.returncode == 0, done.stderr
            assert done.stdout.split() == ["8", "<html>https://example.com/0</html>"]
        urls = [f"https://example.com/{i}" for i in range(8)]
        assert sorted(calls.read_text().split()) == sorted(urls)  # each fetched once
        assert rows(db, "fetch_page") == [("fetch", "done", f'"<html>{u}</html>"') for u in urls]
        runs = "SELECT count(*), count(DISTINCT name) FROM runs WHERE goal = 'fetch_page'"
        assert sqlite3.connect(db).execute(runs).fetchone() == (8, 8)
        assert rows(db, "crawl") == [("count", "done", "8")]


class TestTheProcessesPage:
    def test_its_pool_example_runs_as_printed_and_replays_on_a_second_run(
        self, tmp_path: Path
    ) -> None:
        page = (Path(__file__).resolve().parent.parent / "docs" / "processes.md").read_text()
        (example,) = blocks("python", page)
        script = tmp_path / "crawl.py"
        script.write_text(example, encoding="utf-8")
        for _ in range(2):
            done = subprocess.run(
                [sys.executable, str(script)],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, done.stderr
            assert done.stdout == "8 pages\n"
        db = tmp_path / ".letitloop" / "journal.db"
        urls = [f"https://example.com/{i}" for i in range(8)]
        assert rows(db, "fetch_page") == [("fetch", "done", f'"<html>{u}</html>"') for u in urls]
        runs = "SELECT count(*), count(DISTINCT name) FROM runs WHERE goal = 'fetch_page'"
        assert sqlite3.connect(db).execute(runs).fetchone() == (8, 8)
