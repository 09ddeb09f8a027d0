"""Lock files: bounded in number, safe to remove, released with the process that held them."""

from __future__ import annotations

import os
import signal
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from helpers import run_forked, spawn_forked, spawn_python, write_script

from letitloop import Journal
from letitloop.errors import JournalFileError, RunHeldError
from letitloop.inspection import open_journal_file
from letitloop.maintenance import gc_runs
from letitloop.stores.sqlite import locks


def lock_files(db: Path) -> list[str]:
    folder = Path(f"{db}-locks")
    return sorted(os.listdir(folder)) if folder.exists() else []


class TestLockFilesDoNotPileUp:
    def test_fifty_runs_with_ten_markers_each_leave_no_lock_file(self, db: Path) -> None:
        for r in range(50):
            with Journal("g", run=f"r{r}", path=db) as j:
                for m in range(10):
                    with j.atomic_marker(f"m{m}") as go:
                        assert go
                    with j.atomic_marker(f"shared{m}", scope="goal"):
                        pass
        assert lock_files(db) == []

    def test_a_held_run_has_exactly_its_own_lock_file(self, db: Path) -> None:
        with Journal("g", run="r", path=db):
            assert len(lock_files(db)) == 1
        assert lock_files(db) == []


HAMMER = """
    import os, sys
    from letitloop import Journal
    db, inside, go, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    while not os.path.exists(go):
        pass
    overlaps = 0
    for _ in range(n):
        with Journal("g", run="r", path=db, timeout=60):
            try:  # exactly one holder: nobody else can be inside now
                fd = os.open(inside, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                overlaps += 1
                continue
            os.close(fd)
            os.unlink(inside)
    print("overlaps", overlaps)
"""


class TestRemovingLockFilesWhileOthersWaitForThem:
    def test_processes_taking_one_run_in_turn_never_hold_it_together(self, tmp_path: Path) -> None:
        """Every release unlinks the lock file while waiters poll it.

        A waiter that locked the file just unlinked (it opened it before the
        unlink) must not count itself the holder: a newcomer would lock the
        new file at the path, and two processes would hold the run at once.
        """
        db, inside, go = tmp_path / "journal.db", tmp_path / "inside", tmp_path / "go"
        with Journal("g", run="r", path=db):
            pass
        script = write_script(tmp_path, "hammer.py", HAMMER)
        children = [spawn_forked(script, str(db), str(inside), str(go), "60") for _ in range(4)]
        go.touch()
        outs = [c.communicate(timeout=120) for c in children]
        assert [c.returncode for c in children] == [0] * 4, outs
        assert [out.split() for out, _ in outs] == [["overlaps", "0"]] * 4
        assert lock_files(db) == []


DIE_HOLDING = """
    import os, signal, sys
    from letitloop import Journal
    j = Journal("g", run="r", path=sys.argv[1]).open()
    with j.atomic_marker("m") as go:
        os.kill(os.getpid(), signal.SIGKILL)
"""


class TestLockFilesLeftByAHolderThatDied:
    def test_the_next_holder_reuses_and_removes_them(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        run_forked(write_script(tmp_path, "die.py", DIE_HOLDING), str(db))
        assert len(lock_files(db)) == 2  # its run's and its marker's
        with Journal("g", run="r", path=db) as j, j.atomic_marker("m") as go:
            assert go and go.crashed_before
        assert lock_files(db) == []

    def test_lil_gc_reclaims_them(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        run_forked(write_script(tmp_path, "die.py", DIE_HOLDING), str(db))
        assert len(lock_files(db)) == 2
        store = open_journal_file(db, write=True)
        try:
            gc_runs(store, timedelta(days=30))
        finally:
            store.close()
        assert lock_files(db) == []

    def test_lil_gc_leaves_a_held_lock_file_alone(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        with Journal("g", run="r", path=db):
            store = open_journal_file(db, write=True)
            try:
                gc_runs(store, timedelta(days=30))
            finally:
                store.close()
            assert len(lock_files(db)) == 1
            with pytest.raises(RunHeldError):
                Journal("g", run="r", path=db, timeout=0).open()


FORKING_HOLDER = """
    import os, signal, sys, time
    from letitloop import Journal
    j = Journal("g", run="r", path=sys.argv[1]).open()
    j.step("a", str, 1)
    child = os.fork()
    if child == 0:
        os.close(1)  # let the harness read the parent's output to its end
        os.close(2)
        time.sleep(30)  # a worker that lives on after its parent
        os._exit(0)
    print(child, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
class TestAForkedWorkerOfTheHolder:
    def test_it_does_not_keep_the_run_held_once_the_holder_died(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        # A fresh interpreter, its stdout a pipe: read to its end, once the worker closed its
        # copy, which it does after its fork's handlers ran (a forked child's file has no end).
        holder = spawn_python(write_script(tmp_path, "fork.py", FORKING_HOLDER), str(db))
        out, _ = holder.communicate(timeout=60)
        worker = int(out.split()[0])
        try:
            os.kill(worker, 0)  # the forked worker is alive
            with Journal("g", run="r", path=db, timeout=0) as j:  # no wait at all
                assert j.attempt == 2 and j.step("a", str, 1) == "1"
        finally:
            os.kill(worker, signal.SIGKILL)
            # It is our grandchild's orphan, reparented; wait until it is gone.
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    os.kill(worker, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.01)


class TestAFilesystemWithoutFlock:
    def test_is_refused_naming_the_filesystem_never_a_soft_lock(self, tmp_path: Path) -> None:
        import errno

        from letitloop.stores.sqlite import locks

        lock = locks.new_lock(tmp_path / "x.lock")
        assert lock.fallback_to_soft is False  # a SIGKILLed soft lock would never be released
        error = locks.lock_error(tmp_path / "x.lock", OSError(errno.ENOSYS, "not implemented"))
        kind = locks.filesystem_of(tmp_path)
        assert f"its filesystem ({kind}) does not support flock()" in str(error)
        if Path("/proc/self/mounts").exists():
            assert kind != "unknown"


#: Both ways a lock is taken: letitloop's own flock() (POSIX) and filelock's
#: FileLock (where there is no flock); each case below runs over both.
BACKENDS = {"flock": "FlockLock", "filelock": "filelock_lock"}


def make_lock(backend: str, path: Path) -> locks.Lock:
    factory: Any = getattr(locks, BACKENDS[backend])
    made: locks.Lock = factory(path)
    return made


FORK_THEN_DIE = """
    import os, signal, sys, time
    from pathlib import Path
    from letitloop.stores.sqlite import locks
    lock = getattr(locks, sys.argv[2])(Path(sys.argv[1]))
    assert locks.acquire(lock, 0)
    child = os.fork()
    if child == 0:
        os.close(1)
        os.close(2)
        time.sleep(30)  # a worker that lives on after its parent
        os._exit(0)
    print(child, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("backend", list(BACKENDS))
class TestBothLockBackendsKeepTheSameRules:
    def test_a_held_lock_is_refused_to_another_holder_until_released(
        self, tmp_path: Path, backend: str
    ) -> None:
        path = tmp_path / "locks" / "x.lock"
        first, second = make_lock(backend, path), make_lock(backend, path)
        assert locks.acquire(first, 0)  # the folder is created on the way
        assert not locks.acquire(second, 0)
        assert not locks.acquire(second, 0.12)  # waited, then timed out
        assert locks.is_held(path)
        locks.release(first, remove=False)
        assert not locks.is_held(path)
        assert locks.acquire(second, 0)
        locks.release(second)
        assert not path.exists()

    def test_a_waiter_gets_it_when_the_holder_lets_go(self, tmp_path: Path, backend: str) -> None:
        path = tmp_path / "x.lock"
        holder, waiter = make_lock(backend, path), make_lock(backend, path)
        assert locks.acquire(holder, 0)
        got: list[bool] = []
        thread = threading.Thread(target=lambda: got.append(locks.acquire(waiter, -1)))
        thread.start()
        time.sleep(0.1)
        assert got == []  # still waiting
        locks.release(holder)  # unlinks the file it holds, then lets go
        thread.join(10)
        assert got == [True]
        # The waiter holds the file now at the path, where newcomers meet it,
        # not the unlinked one it was waiting on.
        newcomer = make_lock(backend, path)
        assert not locks.acquire(newcomer, 0)
        locks.release(waiter)
        assert locks.acquire(newcomer, 0)
        locks.release(newcomer)

    def test_the_other_backend_is_excluded_too(self, tmp_path: Path, backend: str) -> None:
        # Processes of two letitloop versions (one on filelock) share lock files.
        path = tmp_path / "x.lock"
        other = "filelock" if backend == "flock" else "flock"
        mine, theirs = make_lock(backend, path), make_lock(other, path)
        assert locks.acquire(mine, 0)
        assert not locks.acquire(theirs, 0)
        locks.release(mine)
        assert locks.acquire(theirs, 0)
        assert not locks.acquire(make_lock(backend, path), 0)
        locks.release(theirs)

    def test_a_lock_file_that_is_a_symlink_is_refused(self, tmp_path: Path, backend: str) -> None:
        (tmp_path / "target").touch()
        (tmp_path / "x.lock").symlink_to(tmp_path / "target")
        with pytest.raises(JournalFileError, match="cannot use the lock file"):
            locks.acquire(make_lock(backend, tmp_path / "x.lock"), 0)

    @pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
    def test_a_forked_child_does_not_keep_it_after_the_holder_died(
        self, tmp_path: Path, backend: str
    ) -> None:
        path = tmp_path / "x.lock"
        script = write_script(tmp_path, "fork.py", FORK_THEN_DIE)
        holder = spawn_python(script, str(path), BACKENDS[backend])
        out, _ = holder.communicate(timeout=60)
        worker = int(out.split()[0])
        try:
            os.kill(worker, 0)  # the forked worker is alive
            lock = make_lock(backend, path)
            assert locks.acquire(lock, 0)
            locks.release(lock)
        finally:
            os.kill(worker, signal.SIGKILL)

    @pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
    def test_a_forked_child_letting_go_leaves_the_parents_lock_alone(
        self, tmp_path: Path, backend: str
    ) -> None:
        path = tmp_path / "x.lock"
        lock = make_lock(backend, path)
        assert locks.acquire(lock, 0)
        child = os.fork()
        if child == 0:  # pragma: no cover - the child's coverage is not collected
            try:
                locks.release(lock)  # e.g. a Journal closed in the child
            finally:
                os._exit(0)
        os.waitpid(child, 0)
        assert path.exists() and locks.is_held(path)  # not unlinked from under its holder
        assert not locks.acquire(make_lock(backend, path), 0)
        locks.release(lock)
