"""A process's connections to one journal file: its SQLite locks kept, one -shm mapping.

POSIX record locks belong to the process: closing any descriptor of a file
drops all of them. SQLite's "dead man switch" (DMS) is a shared lock on byte
128 of the ``-shm`` file, held by every process that has the file open; a
process that finds no one holding it takes itself for the first user and
rebuilds the index under the others' mappings (SIGBUS). These tests read the
locks from ``/proc/locks`` after every kind of reopen, and run real processes
and threads against one file.
"""

from __future__ import annotations

import functools
import gc
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from helpers import (
    forked_exit_codes,
    in_fresh_interpreter,
    program_file,
    run_forked,
    sqlite_store,
    start_forked,
    wait_until,
    write_script,
)

from letitloop import Journal
from letitloop.deploycheck import journalcopy as deploycheck_copy
from letitloop.errors import JournalFileError
from letitloop.stores.sqlite import connections
from letitloop.stores.sqlite.pool import close_idle_stores
from letitloop.stores.sqlite.store import Store

if TYPE_CHECKING:
    from preloaded import Child

pytestmark = pytest.mark.skipif(
    not Path("/proc/locks").exists(), reason="reads the process's locks from /proc/locks (Linux)"
)


#: The check, as source that the child programs below run too. /proc/locks is written in
#: page-sized batches, and a lock any process takes or drops between two batches shifts
#: the rest: one read can miss a held lock (28 of 3,000 reads of a held lock missed it
#: while two other processes took and dropped 300 locks each). A lock is taken for not
#: held only when five reads in a row miss it; nothing of the holder's changes meanwhile.
DMS_HELD = """
def dms_held(db, pid):
    ino, who = os.stat(f"{db}-shm").st_ino, str(pid)
    for _ in range(5):
        with open("/proc/locks") as f:  # not a journal file: closing it drops nothing
            for line in f:
                p = line.split()  # p[1] "->": a waiter, not a holder
                if p[1] != "->" and p[4] == who and p[5].endswith(f":{ino}") and p[6] == "128":
                    return True
    return False
"""
_check: dict[str, Any] = {"os": os}
exec(DMS_HELD, _check)


def with_dms_held(program: str) -> str:
    """``program`` with :func:`dms_held` defined at its top."""
    return "import os\n" + DMS_HELD + textwrap.dedent(program)


def dms_held(db: Path, pid: int | None = None) -> bool:
    """Whether process ``pid`` (this one) holds SQLite's DMS lock (byte 128) on ``db``'s -shm."""
    return bool(_check["dms_held"](db, os.getpid() if pid is None else pid))


def open_files() -> list[str]:
    """What this process's descriptors point to (``/proc/self/fd``)."""
    names = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            names.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue  # closed meanwhile (the listing's own descriptor)
    return names


def write_from_another_process(db: Path) -> None:
    """A commit by another process (plain sqlite3: it starts in milliseconds)."""
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
            "c.execute('CREATE TABLE IF NOT EXISTS other (x)'); "
            "c.execute('INSERT INTO other VALUES (1)'); c.commit(); c.close()",
            str(db),
        ],
        check=True,
        timeout=60,
    )


#: Writes a journal with one run at argv[1].
MADE_ELSEWHERE = """
import sys
from letitloop import Journal
with Journal('g', run='made', path=sys.argv[1]) as j:
    j.step('a', str, 1)
"""


def journal_made_elsewhere(db: Path) -> None:
    """A journal with one run, written and closed by another process (forked from an
    interpreter that imported letitloop and opened nothing: helpers.run_forked)."""
    done = run_forked(program_file(MADE_ELSEWHERE), str(db))
    assert done.returncode == 0, done.stderr


def _threads_opening_at_once(db: Path, n: int) -> tuple[list[BaseException], list[bool]]:
    """``n`` threads open a journal on ``db`` at once; the first looks at the DMS lock
    while all are open. Returns the errors and what it saw."""
    start, opened = threading.Barrier(n), threading.Barrier(n)
    errors: list[BaseException] = []
    held: list[bool] = []

    def open_one(i: int) -> None:
        try:
            start.wait()
            with Journal("g", run=f"t{i}", path=db) as j:
                j.step("a", str, i)
                opened.wait()
                if i == 0:
                    held.append(dms_held(db))
                opened.wait()
        except BaseException as exc:
            errors.append(exc)
            opened.abort()

    threads = [threading.Thread(target=open_one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return errors, held


class TestTheDmsLockIsKeptAcrossEveryReopen:
    def test_a_cached_connection_reused_after_another_process_wrote(self, db: Path) -> None:
        with Journal("g", run="long", path=db) as j:
            j.step("a", str, 1)
            assert dms_held(db)
            write_from_another_process(db)
            for i in range(3):
                with Journal("g", run=f"r{i}", path=db) as k:
                    k.step("a", str, 1)
                assert dms_held(db)
                write_from_another_process(db)
        write_from_another_process(db)
        with Journal("g", run="again", path=db) as k:  # the idle connection, file changed
            k.step("a", str, 1)
            assert dms_held(db)

    def test_a_power_journal_beside_a_process_one(self, db: Path) -> None:
        with Journal("g", run="process", path=db) as j:
            j.step("a", str, 1)
            with Journal("g", run="power", path=db, durability="power") as k:
                k.step("a", str, 1)
                assert dms_held(db)
            assert dms_held(db)
            j.step("b", str, 2)
        assert dms_held(db)

    def test_threads_opening_at_once(self, tmp_path: Path) -> None:
        for round_ in range(5):
            db = tmp_path / f"journal{round_}.db"
            journal_made_elsewhere(db)  # a file with content: every open probes it
            errors, held = _threads_opening_at_once(db, 6)
            assert errors == []
            assert held == [True], f"round {round_}"

    def test_a_durable_node_after_the_saver(self, db: Path) -> None:
        pytest.importorskip("langgraph.graph", reason="LangGraph is not installed")
        from langgraph.graph import END, START, StateGraph
        from typing_extensions import TypedDict

        from letitloop import step
        from letitloop.adapters.langgraph import LetItLoopCheckpointSaver, durable_node

        class State(TypedDict):
            text: str

        @durable_node
        def work(state: State) -> dict[str, str]:
            return {"text": step("upper", str.upper, state["text"])}

        graph = StateGraph(State)
        graph.add_node("work", work)
        graph.add_edge(START, "work")
        graph.add_edge("work", END)
        with LetItLoopCheckpointSaver(db) as saver:
            app = graph.compile(checkpointer=saver)
            for thread in ("a", "b"):
                assert app.invoke({"text": thread}, {"configurable": {"thread_id": thread}}) == {
                    "text": thread.upper()
                }
                assert dms_held(db)


LONG_LIVED = """
    import os, sys, time
    from pathlib import Path
    from letitloop import Journal
    db, stop = sys.argv[1], Path(sys.argv[2])
    me = os.getpid()

    lost = 0
    with Journal("g", run="long", path=db) as j:
        print("ready", flush=True)
        i = 0
        while not stop.exists():
            i += 1
            j.step(f"s{i}", str, i)
            # Every kind of reopen a long-lived process makes, between steps.
            with Journal("g", run=f"power{i}", path=db, durability="power") as k:
                k.step("a", str, i)
            with Journal("g", run=f"again{i}", path=db) as k:
                k.step("a", str, i)
            lost += not dms_held(db, me)
            time.sleep(0.005)
    print("steps", i, "lost", lost, flush=True)
"""

#: 200 short-lived openers, one after the other: each opens the file, writes,
#: reads and closes its only connection (SQLite then lets go of every lock of
#: this process on the file, as a process that exits does), and checks that
#: the long-lived process is alive and holds its DMS lock.
OPENERS = """
    import os, sqlite3, sys
    db, pid = sys.argv[1], sys.argv[2]

    for i in range(200):
        c = sqlite3.connect(db, timeout=30)
        c.execute("PRAGMA journal_mode = WAL")
        c.execute("CREATE TABLE IF NOT EXISTS other (x)")
        c.execute("INSERT INTO other VALUES (1)")
        c.commit()
        c.execute("SELECT count(*) FROM runs").fetchone()
        c.close()
        os.kill(int(pid), 0)  # alive
        if not dms_held(db, pid):
            print("lost after", i + 1, flush=True)
            sys.exit(1)
    print("ok", flush=True)
"""


class TestALongLivedProcessAmongShortLivedOpeners:
    def test_it_keeps_its_dms_lock_and_never_dies_of_sigbus(self, tmp_path: Path) -> None:
        db, stop = tmp_path / "journal.db", tmp_path / "stop"
        long_lived = start_forked(
            write_script(tmp_path, "long.py", with_dms_held(LONG_LIVED)), str(db), str(stop)
        )
        try:
            wait_until(lambda: long_lived.printed() == "ready\n", "the long-lived one is ready")
            openers = write_script(tmp_path, "openers.py", with_dms_held(OPENERS))
            # A fresh interpreter that imports no more than sqlite3: it starts in milliseconds.
            done = subprocess.run(
                [sys.executable, str(openers), str(db), str(long_lived.pid)],
                capture_output=True,
                text=True,
                timeout=120,
            )
            stop.touch()
        except BaseException:
            os.kill(long_lived.pid, signal.SIGKILL)
            raise
        finally:
            ended = long_lived.wait()
        assert ended.returncode != -signal.SIGBUS, "the long-lived process died of SIGBUS"
        assert done.stdout.strip() == "ok", (done.stdout, done.stderr, ended.returncode)
        assert ended.returncode == 0, (ended.returncode, ended.stderr)
        fields = ended.stdout.split()
        assert fields[0] == "ready" and fields[1] == "steps" and int(fields[2]) > 0
        assert fields[3:] == ["lost", "0"], ended.stdout


OPEN_AT_ONCE = """
    import sys, threading, time, traceback
    from pathlib import Path
    from letitloop import Journal
    folder, rounds, me = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    errors = 0

    def open_one(db, t):
        global errors
        try:
            with Journal("g", run=f"{me}-{t}", path=db) as j:
                j.step("a", str, t)
                j.step("b", str, t)
        except Exception:
            errors += 1
            traceback.print_exc()

    print("ready", flush=True)
    for r in range(rounds):
        go = folder / f"go{r}"
        while not go.exists():
            time.sleep(0.001)
        db = folder / f"journal{r}.db"
        threads = [threading.Thread(target=open_one, args=(db, t)) for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    # The process's connections must still write (none left read-only).
    for r in range(rounds):
        open_one(folder / f"journal{r}.db", 99)
    print("errors", errors, flush=True)
"""


def printed_ready(child: Child) -> bool:
    return child.printed() == "ready\n"


class TestProcessesAndThreadsOpeningOneFileAtOnce:
    def test_four_processes_of_eight_threads_never_fail_to_open(self, tmp_path: Path) -> None:
        rounds = 4
        for r in range(rounds):  # files with content: every first open in a process probes
            journal_made_elsewhere(tmp_path / f"journal{r}.db")
        script = write_script(tmp_path, "at_once.py", OPEN_AT_ONCE)
        children = [start_forked(script, str(tmp_path), str(rounds), f"p{p}") for p in range(4)]
        try:
            for c in children:
                wait_until(functools.partial(printed_ready, c), "each process is ready")
            for r in range(rounds):
                (tmp_path / f"go{r}").touch()
                time.sleep(0.2)
        except BaseException:
            for c in children:
                os.kill(c.pid, signal.SIGKILL)
            raise
        finally:
            outs = [c.wait() for c in children]
        assert [o.returncode for o in outs] == [0] * 4, outs
        assert [o.stdout.split()[1:] for o in outs] == [["errors", "0"]] * 4, outs
        for r in range(rounds):
            conn = sqlite3.connect(tmp_path / f"journal{r}.db")
            runs = conn.execute("SELECT count(*) FROM runs WHERE status = 'completed'").fetchone()
            conn.close()
            assert runs == (4 * 9 + 1,)


class TestConnectionsLeftBehind:
    def test_the_idle_connection_to_a_deleted_file_is_closed(self, tmp_path: Path) -> None:
        def fds_on(db: Path) -> int:
            return sum(1 for name in open_files() if name.startswith(str(db)))

        first, second = tmp_path / "first.db", tmp_path / "second.db"
        with Journal("g", path=first) as j:
            j.step("a", str, 1)
        assert fds_on(first) > 0  # kept idle, for the next run
        for suffix in ("", "-wal", "-shm"):
            Path(f"{first}{suffix}").unlink(missing_ok=True)
        with Journal("g", path=second) as j:
            j.step("a", str, 1)
        assert fds_on(first) == 0
        close_idle_stores()


class ForkedWorker:
    """A hammer worker forked from an interpreter that imported letitloop (helpers.start_forked)
    instead of a fresh interpreter (about 0.1 s of CPU each), with what hammer.one_run uses
    of a ``Popen``."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        import letitloop

        # The benchmark's PYTHONPATH names the code its workers run: the checkout the
        # forking interpreter imported, as the tests' own.
        assert Path(env["PYTHONPATH"]).resolve() == Path(letitloop.__file__).parents[1]
        env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
        if "PYTHONPATH" in os.environ:
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        assert argv[0] == sys.executable
        self.child = start_forked(Path(argv[1]), *argv[2:], env=env)
        self.stdout = self
        self.returncode: int | None = None

    def readline(self) -> str:
        """Its first line ("ready"), once it printed it, or "" if it ended first."""
        wait_until(
            lambda: "\n" in self.child.printed() or not self.child.running(), "a worker is ready"
        )
        return (self.child.printed().splitlines(keepends=True) or [""])[0]

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        done = self.child.wait()
        self.returncode = done.returncode
        return done.stdout, done.stderr

    def kill(self) -> None:
        os.kill(self.child.pid, signal.SIGKILL)


class TestTheHammerSmokeRun:
    def test_eight_processes_of_four_threads_on_a_new_file_lose_nothing(self) -> None:
        from benchmarks import hammer

        for _ in range(2):
            got = hammer.one_run(procs=8, threads=4, opens=2, code=hammer.ROOT, start=ForkedWorker)
            assert (got["errors"], got["lost"], got["duplicates"]) == (0, 0, 0), got
            assert got["steps"] == 8 * 4 * 2 * 3


class TestAFileReplacedWhileItsConnectionIsInUse:
    def test_a_new_journal_on_the_path_writes_the_new_file(self, db: Path) -> None:
        # The first journal's next write, its run's end, goes to the file it opened,
        # which is no longer at the path: it raises (files.check_unmoved, issue 50).
        with (
            pytest.raises(JournalFileError, match="deleted, replaced or moved away"),
            Journal("g", run="first", path=db) as j,
        ):
            j.step("a", str, 1)
            for suffix in ("", "-wal", "-shm"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
            journal_made_elsewhere(db)  # a new file at the path, run "made"
            with Journal("g", run="second", path=db) as k:
                assert sqlite_store(k) is not sqlite_store(j)
                k.step("a", str, 2)
        conn = sqlite3.connect(db)
        runs = sorted(r for (r,) in conn.execute("SELECT name FROM runs"))
        conn.close()
        assert runs == ["made", "second"]


FORK_CHILD_OK = 0


class TestForkWhileAnotherThreadWrites:
    def test_a_hundred_forked_children_open_a_journal_without_hanging(self, tmp_path: Path) -> None:
        # In an interpreter of its own (helpers.in_fresh_interpreter says why).
        codes, errors = in_fresh_interpreter(
            "test_connections", "forks_while_writing", str(tmp_path)
        )
        assert [i for i, code in enumerate(codes) if code is None] == []  # none hung
        assert {code for code in codes if code is not None} <= {FORK_CHILD_OK}, codes
        assert errors == []


def forks_while_writing(into: str) -> tuple[list[int | None], list[str]]:
    """A hundred children forked while another thread keeps writing steps (and now and
    then dropping its idle connection), each opening a journal of its own in the folder
    ``into``: their exit codes (None: it hung) and the errors of the writing thread."""
    folder = Path(into)
    stop = threading.Event()
    errors: list[BaseException] = []

    def keep_writing() -> None:
        n = 0
        try:
            while not stop.is_set():
                n += 1
                with Journal("g", run=f"r{n % 5}", path=folder / "parent.db") as j:
                    for i in range(5):
                        j.step(f"s{n}-{i}", str, i)
                if n % 7 == 0:
                    close_idle_stores()  # a new connection now and then
        except BaseException as exc:
            errors.append(exc)

    writer = threading.Thread(target=keep_writing)
    writer.start()
    try:
        time.sleep(0.2)

        def child(i: int) -> int:  # a journal of its own, then out
            with Journal("g", path=folder / f"child{i}.db") as j:
                return FORK_CHILD_OK if j.step("a", str, i) == str(i) else 2

        codes = forked_exit_codes([functools.partial(child, i) for i in range(100)])
    finally:
        stop.set()
        writer.join(60)
    return codes, [repr(e) for e in errors]


class TestAStoreOpenedWhileAForkStarts:
    def test_its_connection_waits_until_the_fork_is_done(self, tmp_path: Path) -> None:
        # What os.fork runs first (os.register_at_fork): every store's lock
        # taken, the SQLite calls outside them drained. A store made after
        # that moment would open its connection (SQLite's process-wide mutexes
        # held for moments) under a lock of its own the fork never took: a
        # child forked then hangs at its first SQLite call.
        opened: list[Store] = []
        errors: list[BaseException] = []

        def open_one() -> None:
            try:
                opened.append(Store(tmp_path / "new.db"))
            except BaseException as exc:
                errors.append(exc)

        connections._before_fork()
        try:
            opener = threading.Thread(target=open_one)
            opener.start()
            opener.join(1.0)
            during_the_fork = list(opened)
        finally:
            connections._after_fork_in_parent()
        opener.join(60)
        assert during_the_fork == []
        assert errors == []
        assert len(opened) == 1
        opened[0].close()


def _during_a_fork(work: Callable[[], object]) -> tuple[list[object], list[object]]:
    """``work()`` in another thread while a fork holds every store's lock and the gate
    (what ``os.fork`` runs first), and until that thread ends: (what it returned by the
    time the fork was done, what it returned)."""
    done: list[object] = []
    thread = threading.Thread(target=lambda: done.append(work()))
    connections._before_fork()
    try:
        thread.start()
        thread.join(1.0)
        during_the_fork = list(done)
    finally:
        connections._after_fork_in_parent()
    thread.join(60)
    return during_the_fork, done


class TestAStoreDroppedWithoutClose:
    def test_its_connection_is_closed_after_a_fork_under_way_not_during_it(
        self, tmp_path: Path
    ) -> None:
        # sqlite3 closes a connection whose object is garbage in the collection,
        # in whichever thread, outside any store's lock: SQLite's process-wide
        # mutexes held for moments while a fork copies them.
        wal = tmp_path / "j.db-wal"
        held = [Store(tmp_path / "j.db")]
        assert wal.exists()

        def drop() -> bool:
            held.clear()
            gc.collect()
            return wal.exists()  # the last connection's close deletes it

        during_the_fork, done = _during_a_fork(drop)
        assert during_the_fork == []
        assert done == [False]


class TestLilCheckReadingItsCopy:
    def test_a_fork_waits_for_its_sqlite_calls(self, tmp_path: Path) -> None:
        with Journal("g", path=tmp_path / "j.db") as j:
            j.step("a", str, 1)
        copy = deploycheck_copy.copy_journal(tmp_path / "j.db", tmp_path / "copy")
        during_the_fork, done = _during_a_fork(lambda: deploycheck_copy.unfinished_runs(copy, "g"))
        assert during_the_fork == []
        assert done == [[]]  # the run completed: nothing for lil check to replay
