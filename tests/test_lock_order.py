"""The orders that keep one holder per run and per marker, each pinned at the exact instant.

Each rule is an order between two actions; a test records the state of the
other action at the instant of the first (by wrapping the function at the
boundary: ``os.unlink``, the storage's completion write, ``locks.release``)
or makes the second action fail for real (an SQLite trigger), so swapping
the order in the code fails the test every time, with no sleep and no luck.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import sqlite_store
from test_locks import BACKENDS, make_lock

from letitloop import Journal, RetryPolicy
from letitloop.primitives.waits import RunWaiting
from letitloop.stores.sqlite import locks
from letitloop.stores.sqlite.holding import run_lock_path
from letitloop.stores.sqlite.storage import SqliteStorage


@pytest.fixture
def unlinks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, bool]]]:
    """Every lock file unlinked meanwhile: (its name, whether its lock was held at that instant)."""
    seen: list[tuple[str, bool]] = []
    real = os.unlink

    def unlink(path: Any, *args: Any, **kwargs: Any) -> None:
        if str(path).endswith(".lock"):
            seen.append((Path(path).name, locks.is_held(Path(path))))
        real(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", unlink)
    yield seen


class TestALockFileIsUnlinkedWhileItsLockIsStillHeld:
    """Else a waiter locks the old inode while a newcomer creates a new file: two holders."""

    @pytest.mark.parametrize("backend", list(BACKENDS))
    def test_a_lock_let_go(
        self, tmp_path: Path, backend: str, unlinks: list[tuple[str, bool]]
    ) -> None:
        path = tmp_path / "x.lock"
        lock = make_lock(backend, path)
        assert locks.acquire(lock, 0)
        locks.release(lock)
        assert unlinks == [("x.lock", True)]
        assert not path.exists() and not locks.is_held(path)

    def test_a_run_and_its_markers_at_close(
        self, db: Path, unlinks: list[tuple[str, bool]]
    ) -> None:
        with Journal("sync", path=db) as j:
            for scope in ("run", "goal", "global"):
                with j.atomic_marker(f"m-{scope}", scope=scope) as offer:
                    assert offer
            run_lock = run_lock_path(sqlite_store(j), j.run_id)
        assert len(unlinks) == 4  # three markers, then the run
        assert unlinks[-1] == (run_lock.name, True)
        assert all(held for _, held in unlinks), unlinks

    def test_lil_gc_sweeping_a_dead_holders_file(
        self, tmp_path: Path, unlinks: list[tuple[str, bool]]
    ) -> None:
        folder = tmp_path / "journal.db-locks"
        folder.mkdir()
        (folder / "run-dead.lock").touch()  # left by a holder that died
        assert locks.sweep(folder) == 1
        assert unlinks == [("run-dead.lock", True)]


def _end_writes(monkeypatch: pytest.MonkeyPatch, db: Path) -> dict[str, list[Any]]:
    """Record, at the instant of each run-ending write, whether the run's lock is held;
    and, at the instant the run's lock is let go, the run's status as another
    connection reads it."""
    seen: dict[str, list[Any]] = {"held at the write": [], "status at the release": []}
    for name in ("complete_run", "fail_run", "leave_waiting", "cancel_run"):
        real = getattr(SqliteStorage, name)

        def write(self: SqliteStorage, run_id: str, *args: Any, _real: Any = real) -> None:
            lock = run_lock_path(self.store, run_id)
            seen["held at the write"].append(locks.is_held(lock))
            _real(self, run_id, *args)

        monkeypatch.setattr(SqliteStorage, name, write)
    real_release = locks.release

    def release(lock: Any, **kwargs: Any) -> None:
        if Path(lock.lock_file).name.startswith("run-"):
            con = sqlite3.connect(db)
            try:
                seen["status at the release"].append(
                    con.execute("SELECT status FROM runs WHERE name = 'r'").fetchone()[0]
                )
            finally:
                con.close()
        real_release(lock, **kwargs)

    monkeypatch.setattr(locks, "release", release)
    return seen


def _complete(j: Journal) -> None:
    j.step("a", str, 1)


def _fail(j: Journal) -> None:
    j.step("a", str, 1)
    raise ValueError("the block failed")


def _leave_waiting(j: Journal) -> None:
    j.wait_for("approval", stop_after=0)


ENDINGS: dict[str, tuple[Callable[[Journal], None], type[BaseException] | None, str]] = {
    "completed": (_complete, None, "completed"),
    "failed": (_fail, ValueError, "failed"),
    "waiting": (_leave_waiting, RunWaiting, "waiting"),
}


class TestTheRunLockIsReleasedOnlyAfterTheRunsEndIsWritten:
    """Else a waiting opener (overlapping cron jobs) resumes a run about to be marked ended."""

    @pytest.mark.parametrize("ending", list(ENDINGS))
    def test_closing_with_block(
        self, db: Path, monkeypatch: pytest.MonkeyPatch, ending: str
    ) -> None:
        body, raised, status = ENDINGS[ending]
        seen = _end_writes(monkeypatch, db)
        try:
            with Journal("sync", run="r", path=db) as j:
                body(j)
        except BaseException as exc:
            assert raised is not None and isinstance(exc, raised)
        assert seen == {"held at the write": [True], "status at the release": [status]}

    def test_closing_async_with_block(self, db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        async def main() -> None:
            async with Journal("sync", run="r", path=db) as j:
                await j.async_step("a", str, 1)

        seen = _end_writes(monkeypatch, db)
        asyncio.run(main())
        assert seen == {"held at the write": [True], "status at the release": ["completed"]}


def _journal_table(db: Path, goal: str) -> str:
    con = sqlite3.connect(db)
    try:
        return str(
            con.execute("SELECT journal_table FROM goals WHERE goal = ?", (goal,)).fetchone()[0]
        )
    finally:
        con.close()


def _fail_writes(db: Path, table: str, of: str) -> None:
    """Make SQLite refuse every write of the retrying row, or of the failed try (a trigger).

    Every retrying row written is also logged in ``retrying_log``, whose rows
    stay only if their transaction commits (the step's failed row overwrites
    the retrying one afterwards).
    """
    table = f"_{table}"  # the goal's compact table, behind its view (since 0011)
    con = sqlite3.connect(db)
    try:
        con.execute("CREATE TABLE retrying_log (key TEXT)")
        for when in ("INSERT", "UPDATE"):
            con.execute(
                f'CREATE TRIGGER log_retrying_{when} AFTER {when} ON "{table}" '
                f"WHEN NEW.status = 'retrying' "
                f"BEGIN INSERT INTO retrying_log VALUES (NEW.key); END"
            )
        if of == "the retrying row":
            for when in ("INSERT", "UPDATE"):
                con.execute(
                    f'CREATE TRIGGER no_retrying_{when} BEFORE {when} ON "{table}" '
                    f"WHEN NEW.status = 'retrying' BEGIN SELECT RAISE(ABORT, 'refused'); END"
                )
        else:
            con.execute(
                "CREATE TRIGGER no_try BEFORE INSERT ON step_tries "
                "BEGIN SELECT RAISE(ABORT, 'refused'); END"
            )
        con.commit()
    finally:
        con.close()


class TestAFailedTryAndItsRetryingRowAreOneTransaction:
    """Else a crash between them leaves a try without its backoff, or a backoff without its try."""

    @pytest.mark.parametrize("refused", ["the retrying row", "the failed try"])
    def test_when_sqlite_refuses_one_neither_is_recorded(self, db: Path, refused: str) -> None:
        calls: list[int] = []

        def flaky() -> str:
            calls.append(1)
            raise ConnectionError("try again")

        with Journal("sync", run="r", path=db) as j:
            j.step("seed", str, 0)
            _fail_writes(db, _journal_table(db, "sync"), refused)
            policy = RetryPolicy(max_attempts=3, initial_backoff=0, jitter=0)
            with pytest.raises(Exception, match="refused"):
                j.step("call", flaky, retry=policy)
        assert calls == [1]  # the first try failed, and recording it failed
        con = sqlite3.connect(db)
        table = _journal_table(db, "sync")
        assert con.execute("SELECT count(*) FROM step_tries").fetchone() == (0,)
        assert con.execute("SELECT count(*) FROM retrying_log").fetchone() == (0,)
        assert con.execute(f"SELECT status FROM \"{table}\" WHERE key = 'call'").fetchall() == [
            ("failed",)
        ]
        con.close()


class TestMarkersOfTwoJournalFilesWithOneNameAndScope:
    """One process's markers are told apart by their file, whatever their names."""

    @pytest.mark.parametrize("scope", ["goal", "global"])
    def test_never_wait_for_each_other(self, tmp_path: Path, scope: Any) -> None:
        entered, leave = threading.Event(), threading.Event()

        def hold(path: Path) -> None:
            with Journal("sync", path=path) as j, j.atomic_marker("charge", scope=scope) as offer:
                assert offer
                entered.set()
                leave.wait(60)

        holder = threading.Thread(target=hold, args=(tmp_path / "a.db",))
        holder.start()
        try:
            assert entered.wait(60)
            with (
                Journal("sync", path=tmp_path / "b.db") as j,
                j.atomic_marker("charge", scope=scope, timeout=0) as offer,
            ):
                assert offer  # not MarkerHeldError: a.db's holder is not b.db's
        finally:
            leave.set()
            holder.join()

    def test_but_one_file_reached_by_two_paths_is_one_marker(self, tmp_path: Path) -> None:
        from letitloop.errors import MarkerHeldError

        (tmp_path / "a").mkdir()
        (tmp_path / "b").symlink_to(tmp_path / "a")
        entered, leave = threading.Event(), threading.Event()

        def hold() -> None:
            with (
                Journal("holder", path=tmp_path / "a" / "j.db") as j,
                j.atomic_marker("charge", scope="global") as offer,
            ):
                assert offer
                entered.set()
                leave.wait(60)

        holder = threading.Thread(target=hold)
        holder.start()
        try:
            assert entered.wait(60)
            with (
                Journal("other", path=tmp_path / "b" / "j.db") as j,
                pytest.raises(MarkerHeldError),
            ):
                j.atomic_marker("charge", scope="global", timeout=0).__enter__()
        finally:
            leave.set()
            holder.join()
