"""The compact row (migration 0011): small integer-keyed rows, read through views as before.

A file from before 0011 is migrated in place on its first open, one goal per
transaction, and a process killed at any point of that leaves a file the next
open finishes; an older letitloop refuses a file the migration has begun.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import sqlite3
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest
from helpers import first_line, forker

from benchmarks.compact_migration import build_old_file, readable_rows
from letitloop import Journal
from letitloop.errors import SchemaVersionError
from letitloop.stores.sqlite import compact_migration, migration_files, migration_records
from letitloop.stores.sqlite.pool import close_idle_stores
from letitloop.stores.sqlite.store import Store

ROOT = Path(__file__).resolve().parent.parent
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$")


def applied(db: Path) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        return [
            n
            for (n,) in conn.execute(
                "SELECT name FROM _sqlite_migrations WHERE migration_set = 'letitloop' ORDER BY id"
            )
        ]
    finally:
        conn.close()


def migrated_copy(original: Path, folder: Path) -> Path:
    db = folder / "expected.db"
    shutil.copy(original, db)
    Store(db).close()
    close_idle_stores()
    return db


def copy_file(original: Path, db: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    shutil.copy(original, db)


def fetch(user_id: int) -> dict[str, object]:
    return {"id": user_id, "name": "Ada"}


class TestAGoalsReadableView:
    def test_it_shows_run_ids_iso_times_function_names_and_results_as_text(self, db: Path) -> None:
        with Journal("customer_sync", path=db) as j:
            j.step("fetch", fetch, 7)
            with j.atomic_marker("mail") as go:
                assert go
            with j.atomic_marker("once", scope="goal") as go:
                assert go
        conn = sqlite3.connect(db)
        rows = conn.execute(
            "SELECT run, key, kind, status, fn, result, started_at, finished_at, duration_ms, "
            "json_extract(result, '$.name') FROM journal_customer_sync ORDER BY rowid"
        ).fetchall()
        conn.close()
        assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
            (j.run_id, "fetch", "step", "done"),
            (j.run_id, "mail", "marker", "done"),
            ("*", "once", "marker", "done"),
        ]
        step = rows[0]
        assert step[4] == f"{fetch.__module__}.fetch"
        assert step[5] == '{"id":7,"name":"Ada"}' and step[9] == "Ada"
        for r in rows:
            assert ISO.match(r[6]) and ISO.match(r[7]), r
            took = (
                datetime.fromisoformat(r[7]) - datetime.fromisoformat(r[6])
            ).total_seconds() * 1000.0
            assert abs(took - r[8]) < 0.0015, r

    def test_its_compact_table_holds_integers_where_text_was(self, db: Path) -> None:
        with Journal("g", path=db) as j:
            j.step("fetch", fetch, 7)
        conn = sqlite3.connect(db)
        types = conn.execute(
            "SELECT typeof(run), typeof(started), typeof(duration), typeof(fn) FROM _journal_g"
        ).fetchall()
        num = conn.execute("SELECT num FROM runs WHERE id = ?", (j.run_id,)).fetchone()
        run = conn.execute("SELECT run FROM _journal_g").fetchone()
        names = conn.execute("SELECT name FROM functions").fetchall()
        conn.close()
        assert types == [("integer", "integer", "integer", "integer")]
        assert run == num
        assert names == [(f"{fetch.__module__}.fetch",)]

    def test_an_async_steps_function_is_stored_by_its_id_too(self, db: Path) -> None:
        import asyncio

        async def produce(i: int) -> int:
            return i

        async def main() -> None:
            async with Journal("g", path=db, durability="power") as j:
                await asyncio.gather(*(j.async_step(f"s{i}", produce, i) for i in range(3)))

        asyncio.run(main())
        conn = sqlite3.connect(db)
        types = conn.execute("SELECT DISTINCT typeof(fn) FROM _journal_g").fetchall()
        shown = conn.execute("SELECT DISTINCT fn FROM journal_g").fetchall()
        conn.close()
        assert types == [("integer",)]
        assert shown == [(f"{produce.__module__}.{produce.__qualname__}",)]

    def test_a_write_through_the_view_reaches_the_compact_table(self, db: Path) -> None:
        with Journal("g", path=db, run="r") as j:
            j.step("a", fetch, 1)
            j.step("b", fetch, 2)
        conn = sqlite3.connect(db, isolation_level=None)
        conn.execute(
            "UPDATE journal_g SET result = '1', finished_at = '2030-01-01T00:00:01.000000+00:00', "
            "started_at = '2030-01-01T00:00:00.500000+00:00', fn = 'other.fn' WHERE key = 'a'"
        )
        conn.execute("DELETE FROM journal_g WHERE key = 'b'")
        conn.execute(
            "INSERT INTO journal_g (run, key, kind, status, attempt, started_at, duration_ms) "
            "VALUES (?, 'c', 'step', 'running', 1, '2030-01-01T00:00:00.000000+00:00', 2.5)",
            (j.run_id,),
        )
        shown = conn.execute(
            "SELECT key, status, fn, result, started_at, finished_at, duration_ms "
            "FROM journal_g ORDER BY rowid"
        ).fetchall()
        stored = conn.execute("SELECT count(*) FROM _journal_g").fetchone()
        conn.close()
        assert shown == [
            (
                "a",
                "done",
                "other.fn",
                "1",
                "2030-01-01T00:00:00.500000+00:00",
                "2030-01-01T00:00:01.000000+00:00",
                500.0,
            ),
            ("c", "running", None, None, "2030-01-01T00:00:00.000000+00:00", None, 2.5),
        ]
        assert stored == (2,)

    def test_journal_rows_shows_every_goals_rows(self, db: Path) -> None:
        for goal in ("alpha", "Beta goal"):
            with Journal(goal, path=db) as j:
                j.step("s", fetch, 1)
        conn = sqlite3.connect(db)
        got = conn.execute("SELECT goal, key, fn FROM journal_rows ORDER BY goal").fetchall()
        conn.close()
        name = f"{fetch.__module__}.fetch"
        assert got == [("Beta goal", "s", name), ("alpha", "s", name)]


class TestAFileFromBeforeTheCompactRow:
    def test_it_is_migrated_on_first_open_and_reads_as_before(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        build_old_file(db, 3000, goals=2, per_run=500)
        before = readable_rows(db)
        with Journal("goal0", path=db) as j:  # opening migrates it
            j.step("new", fetch, 1)
        after = [r for r in readable_rows(db) if r[2] != j.run_id]
        assert after == before
        # Migrated through the checksums and every migration after them (0016: traces).
        assert migration_records.CHECKSUMS in applied(db)
        assert applied(db)[-1] == migration_files.known_names()[-1]
        conn = sqlite3.connect(db)
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        kinds = {
            t
            for (t,) in conn.execute("SELECT type FROM sqlite_master WHERE name = 'journal_goal0'")
        }
        conn.close()
        assert kinds == {"view"}

    def test_its_recorded_steps_replay_after_the_migration(self, tmp_path: Path) -> None:
        # A step recorded by this version, written back in the shape a 0010 file had.
        source = tmp_path / "source.db"
        with Journal("goal0", path=source, run="real") as j:
            j.step("fetch", fetch, 7)
        conn = sqlite3.connect(source)
        fn, result, fp = conn.execute("SELECT fn, result, args_fp FROM journal_goal0").fetchone()
        conn.close()
        db = tmp_path / "journal.db"
        build_old_file(db, 1000, goals=1)
        conn = sqlite3.connect(db, isolation_level=None)
        conn.execute(
            "INSERT INTO runs (id, goal, name, status, attempts, started_at, updated_at) "
            "VALUES ('01JOLDRUN00000000000000000', 'goal0', 'real', 'completed', 1, 't', 't')"
        )
        conn.execute(
            "INSERT INTO journal_goal0 (run, key, kind, status, fn, result, started_at, "
            "finished_at, duration_ms, attempt, args_fp) VALUES ('01JOLDRUN00000000000000000', "
            "'fetch', 'step', 'done', ?, ?, '2026-01-01T00:00:00.000000+00:00', "
            "'2026-01-01T00:00:00.000100+00:00', 0.1, 1, ?)",
            (fn, result, fp),
        )
        conn.close()
        calls = []

        def counted(user_id: int) -> dict[str, object]:
            calls.append(user_id)
            return fetch(user_id)

        counted.__qualname__ = "fetch"
        with Journal("goal0", path=db, run="real") as j:
            assert j.step("fetch", counted, 7) == {"id": 7, "name": "Ada"}
        assert calls == []

    @pytest.mark.slow  # a child SIGKILLed at every point of the upgrade
    def test_a_sigkill_at_any_point_leaves_a_file_the_next_open_finishes(
        self, tmp_path: Path
    ) -> None:
        original = tmp_path / "old.db"
        build_old_file(original, 6000, goals=6, per_run=500)
        expected = readable_rows(migrated_copy(original, tmp_path))
        db = tmp_path / "journal.db"
        copy_file(original, db)
        # The child says when its imports are done, then opens (migrates) the file: a
        # process of its own, forked from an interpreter that imported letitloop.
        child_script = tmp_path / "child.py"
        child_script.write_text(
            "import sys, time; from letitloop.stores.sqlite.store import Store; "
            "print('ready', flush=True); "
            "t = time.perf_counter(); Store(sys.argv[1]).close(); "
            "print(time.perf_counter() - t, flush=True)\n"
        )
        with forker() as children:
            timed = children.run(child_script, str(db), cwd=ROOT)
            assert timed.returncode == 0, timed.stderr
            whole = float(timed.stdout.split()[-1])  # the open that migrates, alone
            states: Counter[str] = Counter()
            kills = 14
            for i in range(kills):
                # A path of its own each time: the open that finishes (in this process,
                # which starts no interpreter for it) finds a file it never saw.
                db = tmp_path / f"journal{i}.db"
                copy_file(original, db)
                child = children.start(child_script, str(db), cwd=ROOT)
                assert first_line(child) == "ready", child.wait()
                time.sleep(whole * 1.2 * i / kills)
                with contextlib.suppress(ProcessLookupError):  # it ended first: "done"
                    os.kill(child.pid, signal.SIGKILL)
                child.wait()
                names = applied(db)
                states[
                    "done"
                    if migration_records.COMPACT_ROWS in names
                    else "moving rows"
                    if names[-1] == migration_records.COMPACT_ROWS_MOVING
                    else "not begun"
                ] += 1
                Store(db).close()  # the next open: it finishes the migration
                assert migration_records.COMPACT_ROWS in applied(db), (i, states)
                assert migration_records.COMPACT_ROWS_MOVING not in applied(db)
                assert readable_rows(db) == expected, (i, states)
        # Some kills must have landed between the migration's transactions.
        assert states["moving rows"] >= 1, states

    def test_an_older_letitloop_refuses_a_half_migrated_file_untouched(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        db = tmp_path / "journal.db"
        build_old_file(db, 1500, goals=3, per_run=500)
        expected = readable_rows(migrated_copy(db, tmp_path))
        moved: list[str] = []
        move = compact_migration.move_goal_rows

        def die_at_the_second_goal(conn: sqlite3.Connection, table: str) -> None:
            if moved:
                raise KeyboardInterrupt  # as a process dying there: its transaction is lost
            moved.append(table)
            move(conn, table)

        monkeypatch.setattr(compact_migration, "move_goal_rows", die_at_the_second_goal)
        with pytest.raises(KeyboardInterrupt):
            Store(db)
        monkeypatch.undo()
        close_idle_stores()
        assert applied(db)[-1] == migration_records.COMPACT_ROWS_MOVING and len(moved) == 1
        # An older letitloop: the same runner with migrations up to 0010 only.
        folder = tmp_path / "older"
        shutil.copytree(migration_files.migrations_dir(), folder)
        for later in (migration_records.COMPACT_ROWS, migration_records.CHECKSUMS):
            (folder / f"{later}.sql").unlink()
        (folder / "schema.sql").unlink()
        monkeypatch.setattr(migration_files, "migrations_dir", lambda: folder)
        bytes_before = {p: p.read_bytes() for p in tmp_path.glob("journal.db*") if p.is_file()}
        with pytest.raises(SchemaVersionError, match="newer letitloop"):
            Store(db)
        assert {p: p.read_bytes() for p in bytes_before} == bytes_before
        monkeypatch.undo()
        Store(db).close()  # this version finishes it
        close_idle_stores()
        assert migration_records.COMPACT_ROWS in applied(db)
        assert readable_rows(db) == expected


class TestTheMigratedFile:
    def test_a_new_file_and_a_migrated_one_have_the_same_schema(self, tmp_path: Path) -> None:
        old = tmp_path / "old.db"
        build_old_file(old, 10, goals=1)
        Store(old).close()
        new = tmp_path / "new.db"
        with Journal("goal0", path=new):
            pass
        close_idle_stores()

        def schema(path: Path) -> list[tuple[str, str]]:
            conn = sqlite3.connect(path)
            try:
                return conn.execute(
                    "SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' "
                    "ORDER BY type, name"
                ).fetchall()
            finally:
                conn.close()

        assert schema(old) == schema(new)
        assert os.path.exists(old)
