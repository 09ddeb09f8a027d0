"""Lock files: bounded in number, safe to remove, released with the process that held them."""

from __future__ import annotations

import os
import signal
import time
from datetime import timedelta
from pathlib import Path

import pytest
from helpers import run_python, spawn_python, write_script

from letitloop import Journal
from letitloop.errors import RunHeldError
from letitloop.inspection import open_journal_file
from letitloop.maintenance import gc_runs


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
        children = [spawn_python(script, str(db), str(inside), str(go), "60") for _ in range(4)]
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
        run_python(write_script(tmp_path, "die.py", DIE_HOLDING), str(db))
        assert len(lock_files(db)) == 2  # its run's and its marker's
        with Journal("g", run="r", path=db) as j, j.atomic_marker("m") as go:
            assert go and go.crashed_before
        assert lock_files(db) == []

    def test_lil_gc_reclaims_them(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        run_python(write_script(tmp_path, "die.py", DIE_HOLDING), str(db))
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

        from letitloop import locks

        lock = locks.new_lock(tmp_path / "x.lock")
        assert lock.fallback_to_soft is False  # a SIGKILLed soft lock would never be released
        error = locks.lock_error(tmp_path / "x.lock", OSError(errno.ENOSYS, "not implemented"))
        kind = locks.filesystem_of(tmp_path)
        assert f"its filesystem ({kind}) does not support flock()" in str(error)
        if Path("/proc/self/mounts").exists():
            assert kind != "unknown"
