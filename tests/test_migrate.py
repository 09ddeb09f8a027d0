"""The schema only moves forward, in numbered steps, and ships inside the wheel."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest
from helpers import first_line, forker, run_python, write_script

import letitloop.stores.sqlite.migrate as migrate
from letitloop import Journal
from letitloop.errors import JournalFileError
from letitloop.stores.sqlite import migration_files, migration_records, schema_file
from letitloop.stores.sqlite.pool import close_idle_stores

ROOT = Path(__file__).resolve().parent.parent


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


@pytest.fixture
def extra_migrations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Point the migration runner at a copy of migrations/ that a test can add files to."""
    folder = tmp_path / "migrations"
    shutil.copytree(migration_files.migrations_dir(), folder)
    monkeypatch.setattr(migration_files, "migrations_dir", lambda: folder)
    migration_files.known_migrations.cache_clear()
    yield folder
    migration_files.known_migrations.cache_clear()


class TestOpeningAJournal:
    def test_a_new_file_gets_every_migration_with_its_record(self, db: Path) -> None:
        with Journal("g", path=db):
            pass
        names = [name for name, _ in migration_files.known_migrations()]
        assert applied(db) == names
        assert names[0] == "0001_initial"

    def test_four_processes_opening_a_fresh_file_at_once_all_succeed(self, tmp_path: Path) -> None:
        """Started on a barrier, so their first opens really race.

        Without the barrier, process start-up jitter (tens of ms) spreads
        the opens apart and the WAL switch never collides; with it, two
        switchers meet and one is refused at once by SQLite (see
        pragmas.switch_to_wal), which must retry, not fail.
        """
        db, go = tmp_path / "journal.db", tmp_path / "go"
        script = write_script(
            tmp_path,
            "open.py",
            """
            import os, sys
            from letitloop import Journal
            print("ready", flush=True)
            while not os.path.exists(sys.argv[3]):
                pass
            with Journal(sys.argv[2], path=sys.argv[1]) as j:
                j.step("a", lambda: 1)
            print("ok")
            """,
        )
        with forker() as forks:  # processes of their own, forked: ready together at once
            for trial in range(3):
                db.unlink(missing_ok=True)
                go.unlink(missing_ok=True)
                children = [forks.start(script, str(db), f"goal{i}", str(go)) for i in range(4)]
                for c in children:
                    assert first_line(c) == "ready", c.wait()
                go.touch()
                outs = [c.wait() for c in children]
                assert [c.returncode for c in outs] == [0, 0, 0, 0], (trial, outs)
                assert applied(db) == [name for name, _ in migration_files.known_migrations()]


class TestTheBookkeeping:
    def test_sqlite_utils_reads_the_records_letitloop_writes(self, db: Path) -> None:
        from sqlite_utils import Database, Migrations

        with Journal("g", path=db):
            pass
        conn = sqlite3.connect(db)
        try:
            applied = Migrations(migration_records.MIGRATION_SET).applied(Database(conn))
        finally:
            conn.close()
        assert [m.name for m in applied] == [name for name, _ in migration_files.known_migrations()]
        assert all(m.applied_at.endswith("+00:00") for m in applied)

    def test_creating_a_journal_imports_neither_sqlite_utils_nor_click(
        self, tmp_path: Path
    ) -> None:
        done = run_python(
            write_script(
                tmp_path,
                "first.py",
                """
                import sys
                from letitloop import Journal
                with Journal("g", path=sys.argv[1]) as j:
                    j.step("a", str, 1)
                print(sorted(m for m in ("sqlite_utils", "click") if m in sys.modules))
                """,
            ),
            str(tmp_path / "new.db"),
        )
        assert done.stdout.strip() == "[]", done.stderr


class TestALaterMigration:
    def test_a_change_to_the_journal_table_reaches_every_goals_table(
        self, db: Path, extra_migrations: Path
    ) -> None:
        for goal in ("alpha", "Beta goal", "γ"):
            with Journal(goal, path=db) as j:
                j.step("s", lambda: 1)
        (extra_migrations / "0999_add_note.sql").write_text(
            'ALTER TABLE "{journal}" ADD COLUMN note TEXT;\n'
            'CREATE INDEX "{journal}_by_status" ON "{journal}" (status);\n'
        )
        migration_files.known_migrations.cache_clear()
        with Journal("delta", path=db) as j:  # opening upgrades; a new goal gets the new shape
            j.step("s", lambda: 1)
        conn = sqlite3.connect(db)
        tables = [t for (t,) in conn.execute("SELECT journal_table FROM goals")]
        assert len(tables) == 4
        # From 0011 on a goal's rows are in its compact table, _journal_<goal> (its
        # journal_table is the readable view over it).
        for table in [*(f"_{t}" for t in tables), "_journal_template"]:
            columns = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
            assert "note" in columns, table
            indexes = [r[1] for r in conn.execute(f'PRAGMA index_list("{table}")')]
            assert f"{table}_by_status" in indexes
        assert applied(db)[-1] == "0999_add_note"

    def test_a_failing_migration_is_rolled_back_and_leaves_the_journal_usable(
        self, db: Path, extra_migrations: Path
    ) -> None:
        with Journal("g", run="r", path=db) as j:
            j.step("s", lambda: 41)
        (extra_migrations / "0999_broken.sql").write_text(
            "CREATE TABLE half_done (x INTEGER);\nINSERT INTO no_such_table VALUES (1);\n"
        )
        migration_files.known_migrations.cache_clear()
        with pytest.raises(JournalFileError, match="no such table"):
            Journal("g", run="r", path=db).open()
        conn = sqlite3.connect(db)
        assert (
            conn.execute("SELECT name FROM sqlite_master WHERE name = 'half_done'").fetchall() == []
        )
        conn.close()
        assert "0999_broken" not in applied(db)
        (extra_migrations / "0999_broken.sql").unlink()
        migration_files.known_migrations.cache_clear()
        with Journal("g", run="r", path=db) as j:
            assert j.step("s", lambda: 0) == 41


class TestTheMigrationThatLoosensTwoChecks:
    """0007_primitives edits two CHECKs in place (writable_schema): nothing is rewritten or lost."""

    def test_a_file_of_version_6_keeps_every_row_and_accepts_the_new_values(
        self, db: Path, extra_migrations: Path
    ) -> None:
        from letitloop.stores.sqlite.store import Store

        # Version 6: 0007 and every later migration held back (0010 alters 0007's table).
        later = {
            f.name: f.read_text(encoding="utf-8")
            for f in sorted(extra_migrations.glob("*.sql"))
            if f.name[:4].isdigit() and f.name >= "0007"
        }
        for name in later:
            (extra_migrations / name).unlink()
        migration_files.known_migrations.cache_clear()
        # A file as letitloop wrote it at version 6: two goals, three runs, their attempts.
        old = Store(db)
        with old.write() as c:
            for i, goal in enumerate(("alpha", "Beta goal")):
                table = old.ensure_goal(c, goal, 0.0)
                for n in range(i + 1):
                    run = f"run-{goal}-{n}"
                    c.execute(
                        "INSERT INTO runs (id, goal, status, attempts, started_at, updated_at) "
                        "VALUES (?, ?, 'failed', 1, 't', 't')",
                        (run, goal),
                    )
                    c.execute(
                        "INSERT INTO attempts (run, attempt, pid, host, started_at) "
                        "VALUES (?, 1, 1, 'h', 't')",
                        (run,),
                    )
                    c.execute(
                        f'INSERT INTO "{table}" (run, key, kind, status, fn, attempt, result) '
                        f"VALUES (?, 's', 'step', 'done', 'builtins.int', 1, '1')",
                        (run,),
                    )
        old.close()
        before = sqlite3.connect(db, isolation_level=None)
        attempts = before.execute("SELECT * FROM attempts ORDER BY run, attempt").fetchall()
        assert len(attempts) == 3
        # A connection that read the old schema before the upgrade, and keeps it open.
        assert before.execute("SELECT count(*) FROM runs").fetchone() == (3,)
        for name, text in later.items():
            (extra_migrations / name).write_text(text, encoding="utf-8")
        migration_files.known_migrations.cache_clear()
        close_idle_stores()  # as a new process would: a fresh connection, which upgrades
        with Journal("gamma", path=db) as j:  # opening upgrades the file
            j.step("s", lambda: 1)
        with Journal("alpha", path=db) as j:  # and resumes the failed run, as before
            assert j.run_id == "run-alpha-0" and j.step("s", int) == 1  # replayed
        assert applied(db)[-len(later) :] == [name.removesuffix(".sql") for name in later]
        after = before.execute("SELECT * FROM attempts ORDER BY run, attempt").fetchall()
        # Later migrations may add columns (0014: version, 0016: trace): the old ones stay.
        width = len(attempts[0])
        assert [a[:width] for a in after if a[0].startswith("run-") and a[1] == 1] == attempts
        assert before.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        # Both the new statuses and the new kinds pass the CHECKs, also through the
        # connection that had parsed the old schema (the upgrade raised schema_version).
        run = before.execute("SELECT id FROM runs LIMIT 1").fetchone()[0]
        before.execute("UPDATE runs SET status = 'waiting' WHERE id = ?", (run,))
        before.execute("UPDATE runs SET status = 'cancelled' WHERE id = ?", (run,))
        with pytest.raises(sqlite3.IntegrityError):
            before.execute("UPDATE runs SET status = 'paused' WHERE id = ?", (run,))
        tables = [t for (t,) in before.execute("SELECT journal_table FROM goals")]
        assert len(tables) == 3
        # The goals' rows are in their compact tables since 0011 (journal_table: a view).
        for table in [*(f"_{t}" for t in tables), "_journal_template"]:
            for kind in ("sleep", "wait"):
                before.execute(
                    f'INSERT INTO "{table}" (run, key, kind, status, attempt) '
                    f"VALUES ('r', ?, ?, 'done', 1)",
                    (kind, kind),
                )
            with pytest.raises(sqlite3.IntegrityError):
                before.execute(
                    f'INSERT INTO "{table}" (run, key, kind, status, attempt) '
                    f"VALUES ('r', 'x', 'nap', 'done', 1)"
                )
            columns = [r[1] for r in before.execute(f'PRAGMA table_info("{table}")')]
            assert columns[-6:] == [
                *("input_tokens", "output_tokens", "cost", "model", "wake_at"),
                "checksum",  # 0012
            ]
        before.close()

    def test_the_runner_raises_schema_version_so_open_connections_see_an_edit(
        self, db: Path, extra_migrations: Path
    ) -> None:
        with Journal("g", path=db) as j:
            j.step("s", lambda: 1)
        other = sqlite3.connect(db, isolation_level=None)
        other.execute("SELECT count(*) FROM markers").fetchall()  # parses today's schema
        (extra_migrations / "0999_loosen.sql").write_text(
            "PRAGMA writable_schema = ON;\n"
            "UPDATE sqlite_master SET sql = replace(sql, '''failed'')', '''failed'', ''x'')') "
            "WHERE type = 'table' AND name = 'markers';\n"
            "PRAGMA writable_schema = OFF;\n"
        )
        migration_files.known_migrations.cache_clear()
        close_idle_stores()
        with Journal("g", path=db) as j:
            j.step("t", lambda: 1)
        assert applied(db)[-1] == "0999_loosen"
        # The old CHECK would refuse 'x': this connection reloaded the schema.
        other.execute("INSERT INTO markers (key, status, claims) VALUES ('k', 'x', 1)")
        other.close()

    def test_an_edit_that_does_not_parse_is_rolled_back(
        self, db: Path, extra_migrations: Path
    ) -> None:
        with Journal("g", run="r", path=db) as j:
            j.step("s", lambda: 41)
        (extra_migrations / "0999_garbled.sql").write_text(
            "PRAGMA writable_schema = ON;\n"
            "UPDATE sqlite_master SET sql = 'CREATE TABLE markers (' "
            "WHERE type = 'table' AND name = 'markers';\n"
            "PRAGMA writable_schema = OFF;\n"
        )
        migration_files.known_migrations.cache_clear()
        close_idle_stores()
        with pytest.raises(JournalFileError, match="schema"):
            Journal("g", run="r", path=db).open()
        assert "0999_garbled" not in applied(db)
        (extra_migrations / "0999_garbled.sql").unlink()
        migration_files.known_migrations.cache_clear()
        close_idle_stores()
        with Journal("g", run="r", path=db) as j:
            assert j.step("s", lambda: 0) == 41


class TestTheWheel:
    @pytest.mark.slow  # a wheel built and a venv made
    def test_it_ships_the_migrations_and_opens_a_journal_from_a_fresh_venv(
        self, tmp_path: Path
    ) -> None:
        wheels = tmp_path / "wheels"
        build = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--no-deps",
                "--no-build-isolation",
                "-w",
                str(wheels),
                str(ROOT),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            # .ci/run pins pip's build environments (PIP_BUILD_CONSTRAINT), which pip refuses
            # beside --no-build-isolation: this build uses the installed, pinned hatchling.
            env={k: v for k, v in os.environ.items() if k != "PIP_BUILD_CONSTRAINT"},
        )
        assert build.returncode == 0, build.stderr
        (wheel,) = wheels.glob("letitloop-*.whl")
        env_dir = tmp_path / "venv"
        venv.EnvBuilder(with_pip=False).create(env_dir)
        python = env_dir / "bin" / "python"
        install = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "--python",
                str(python),
                "install",
                "--no-deps",
                "--quiet",
                str(wheel),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert install.returncode == 0, install.stderr
        # The dependencies come from this environment; letitloop only from the wheel.
        site = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        (Path(site) / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
        probe = subprocess.run(
            [
                str(python),
                "-c",
                "import letitloop, letitloop.stores.sqlite.migration_files as m, sys\n"
                "from letitloop import Journal\n"
                "with Journal('g', path=sys.argv[1]) as j:\n"
                "    j.step('a', lambda: 1)\n"
                "print(letitloop.__file__)\n"
                "print(m.migrations_dir())\n",
                str(tmp_path / "journal.db"),
            ],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=60,
        )
        assert probe.returncode == 0, probe.stderr
        package_file, migrations_folder = probe.stdout.split()
        assert package_file.startswith(str(env_dir))
        assert migrations_folder.startswith(str(env_dir))
        assert Path(migrations_folder, "0001_initial.sql").is_file()
        # What a new journal file is created from (schema_file.create_current).
        assert Path(migrations_folder, "schema.sql").is_file()
        assert applied(tmp_path / "journal.db") == [
            n for n, _ in migration_files.known_migrations()
        ]


class TestTheDocumentedSchema:
    def test_applying_every_migration_gives_migrations_schema_sql(self, db: Path) -> None:
        from letitloop.stores.sqlite.store import Store

        store = Store(db, migrate=False)
        try:
            migrate.migrate(store, stepwise=True)  # not the shortcut that reads schema.sql
            dumped = schema_file.schema_dump(store)
        finally:
            store.close()
        documented = (ROOT / "migrations" / "schema.sql").read_text(encoding="utf-8")
        body = "".join(
            line for line in documented.splitlines(keepends=True) if not line.startswith("-- ")
        ).lstrip("\n")
        assert dumped == body, (
            "regenerate: python -m letitloop.stores.sqlite.migrate > migrations/schema.sql"
        )


def _made(db: Path, *, stepwise: bool) -> Path:
    from letitloop.stores.sqlite.store import Store

    store = Store(db, migrate=False)
    try:
        migrate.migrate(store, stepwise=stepwise)
    finally:
        store.close()
    return db


def _contents(db: Path) -> dict[str, object]:
    """Everything of a file but its page layout: schema, rows of every table, records, pragmas."""
    conn = sqlite3.connect(db)
    try:
        master = sorted(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"))
        tables = [name for kind, name, _, _ in master if kind == "table"]
        rows = {
            t: sorted(conn.execute(f'SELECT * FROM "{t}"'))
            for t in tables
            if t != "_sqlite_migrations"
        }
        records = conn.execute(
            "SELECT migration_set, name FROM _sqlite_migrations ORDER BY id"
        ).fetchall()
        pragmas = {
            p: conn.execute(f"PRAGMA {p}").fetchone()[0]
            for p in ("user_version", "application_id", "journal_mode", "auto_vacuum")
        }
        columns = {t: conn.execute(f'PRAGMA table_xinfo("{t}")').fetchall() for t in tables}
        indexes = {t: conn.execute(f'PRAGMA index_list("{t}")').fetchall() for t in tables}
    finally:
        conn.close()
    return {
        "master": master,
        "rows": rows,
        "records": records,
        "pragmas": pragmas,
        "columns": columns,
        "indexes": indexes,
    }


class TestANewFileCreatedFromTheSchemaDump:
    def test_it_equals_a_file_migrated_step_by_step(self, tmp_path: Path) -> None:
        fast = _made(tmp_path / "fast.db", stepwise=False)
        slow = _made(tmp_path / "slow.db", stepwise=True)
        assert _contents(fast) == _contents(slow)
        assert applied(fast) == [name for name, _ in migration_files.known_migrations()]

    def test_a_journal_opening_a_new_file_takes_the_shortcut(
        self, db: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from letitloop.stores.sqlite.store import Store

        taken: list[bool] = []
        real = schema_file.create_current

        def create_current(store: Store) -> bool:
            taken.append(real(store))
            return taken[-1]

        monkeypatch.setattr(schema_file, "create_current", create_current)
        with Journal("g", path=db) as j:
            j.step("s", str, 1)
        assert taken == [True]
        assert _contents(db)["records"] == [
            ("letitloop", name) for name, _ in migration_files.known_migrations()
        ]

    def test_a_file_that_is_not_empty_is_migrated_step_by_step(self, db: Path) -> None:
        from letitloop.stores.sqlite.store import Store

        store = Store(db, migrate=False)
        try:
            with store.write() as conn:
                conn.execute(
                    'CREATE TABLE "_sqlite_migrations" (\n'
                    '   "id" INTEGER PRIMARY KEY,\n'
                    '   "migration_set" TEXT,\n'
                    '   "name" TEXT,\n'
                    '   "applied_at" TEXT\n'
                    ")"
                )
            assert schema_file.create_current(store) is False
            assert applied(db) == []
        finally:
            store.close()

    def test_a_dump_that_names_other_migrations_is_not_used(
        self, db: Path, extra_migrations: Path
    ) -> None:
        (extra_migrations / "0999_add_note.sql").write_text(
            'ALTER TABLE "{journal}" ADD COLUMN note TEXT;\n'
        )
        migration_files.known_migrations.cache_clear()
        assert schema_file.current_schema() is None
        with Journal("g", path=db) as j:
            j.step("s", str, 1)
        assert applied(db)[-1] == "0999_add_note"
        conn = sqlite3.connect(db)
        try:
            columns = [r[1] for r in conn.execute('PRAGMA table_info("_journal_template")')]
        finally:
            conn.close()
        assert "note" in columns
