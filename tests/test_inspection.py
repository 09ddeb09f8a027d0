"""letitloop.inspection as a library: parsing, fork/reset/gc calls, the browsing views."""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import filelock
import pytest
from helpers import HAS_PROC_FD, descriptors_on, wait_until

from letitloop import Journal, unchecked, usage
from letitloop.errors import (
    JournalFileError,
    RunHeldError,
    RunNotFoundError,
    StepMismatchError,
)
from letitloop.inspection import (
    decode_result,
    find_run,
    is_run_held,
    json_ready,
    list_runs,
    open_journal_file,
    parse_duration,
    parse_since,
    show_run,
)
from letitloop.maintenance import fork_run, gc_runs, reset_run
from letitloop.maintenance.reset import delete_runs
from letitloop.primitives.clock import utc_iso
from letitloop.stores.sqlite import migration_files
from letitloop.stores.sqlite.goals import VIEW_MAX_GOALS
from letitloop.stores.sqlite.holding import run_lock_path
from letitloop.stores.sqlite.store import Store


def numbered(key: str, calls: list[str]) -> str:
    calls.append(key)
    return f"value of {key}"


class TestParsingDurations:
    @pytest.mark.parametrize(
        ("text", "seconds"),
        [("30d", 30 * 86400), ("12h", 43200), ("1h30m", 5400), ("90s", 90), ("2w", 1209600)],
    )
    def test_the_units_add_up(self, text: str, seconds: int) -> None:
        assert parse_duration(text) == timedelta(seconds=seconds)

    @pytest.mark.parametrize("text", ["", "30", "d", "30 days", "1x", "-5d", "5d!"])
    def test_anything_else_says_what_was_expected(self, text: str) -> None:
        with pytest.raises(ValueError, match="expected a duration such as 30d"):
            parse_duration(text)

    @pytest.mark.parametrize("text", ["36501d", "99999999999d", "9" * 400 + "s", "5300w"])
    def test_one_past_a_hundred_years_says_the_accepted_range(self, text: str) -> None:
        assert parse_duration("36500d") == timedelta(days=36500)
        with pytest.raises(
            ValueError, match=r"expected a duration of at most 36500d \(100 years\)"
        ):
            parse_duration(text)

    @pytest.mark.parametrize("text", ["99999999999d", "0001-01-01", "9999-12-31T23:00-05:00"])
    def test_a_point_in_time_out_of_range_says_the_accepted_range(self, text: str) -> None:
        with pytest.raises(ValueError, match=r"at most 36500d|between 0001-01-02 and 9999-12-30"):
            parse_since(text)


class TestValuesForStrictJson:
    def test_long_ints_and_non_finite_floats_are_tagged_as_the_journal_tags_them(self) -> None:
        longest_plain = 2**13_000 - 1  # 13,000 bits, as the codec's bound
        value = {"n": [10**5000, longest_plain, 7], "f": (math.nan, math.inf, -math.inf, 1.5)}
        ready = json_ready(value)
        assert ready == {
            "n": [{"!int": hex(10**5000)}, longest_plain, 7],
            "f": [{"!float": "nan"}, {"!float": "inf"}, {"!float": "-inf"}, 1.5],
        }
        json.dumps(ready, allow_nan=False)  # strict JSON, and no 4300-digit limit hit

    def test_a_damaged_stored_result_is_reported_not_raised(self) -> None:
        assert decode_result('{"a": 1}') == ({"a": 1}, None)
        assert decode_result(None) == (None, None)
        for damaged in ("{not json", '{"a": ', "[" * 100_000, b"\x00blob"):
            value, why = decode_result(damaged)
            assert value is None and why is not None and why.startswith("the stored result is")


class TestOpeningAFileToInspect:
    def test_a_missing_file_is_not_created(self, tmp_path: Path) -> None:
        with pytest.raises(JournalFileError, match="no journal file here"):
            open_journal_file(tmp_path / "nope.db")
        assert not (tmp_path / "nope.db").exists()


class TestFindingARunByAnIdPrefix:
    def test_a_unique_prefix_finds_it_and_a_shared_one_names_two(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        ids = []
        for i in range(3):  # ids made within about 17 minutes share their first 6 characters
            with Journal("g", run=f"n{i}", path=db) as j:
                ids.append(j.run_id)
        shared = ids[0][:6]
        assert all(i.startswith(shared) for i in ids)
        store = open_journal_file(db)
        try:
            for goal in (None, "g"):
                assert find_run(store, ids[1][:20].lower(), goal).id == ids[1]
                with pytest.raises(RunNotFoundError, match="give more characters") as info:
                    find_run(store, shared, goal)
                assert info.value.run == shared
                assert ("of goal 'g'" in str(info.value)) == (goal is not None)
        finally:
            store.close()


class TestForkingAsALibraryCall:
    def test_the_fork_replays_before_the_key_and_runs_the_rest(self, db: Path) -> None:
        calls: list[str] = []
        with Journal("g", path=db) as j:
            for key in "abcd":
                j.step(key, numbered, key, unchecked(calls))  # the list grows: not identity
            source = j.run_id
        store = open_journal_file(db, write=True)
        try:
            result = fork_run(store, source, "c")
            assert result.copied == ["a", "b"]
            assert result.run.state == "pending"
        finally:
            store.close()
        calls.clear()
        with Journal("g", path=db) as j:
            assert j.run_id == result.run.id
            assert [j.step(k, numbered, k, unchecked(calls)) for k in "abcd"] == [
                f"value of {k}" for k in "abcd"
            ]
        assert calls == ["c", "d"]

    def test_the_fork_replays_a_step_only_for_the_arguments_it_was_recorded_with(
        self, db: Path
    ) -> None:
        calls: list[str] = []

        def price(item: str) -> str:
            calls.append(item)
            usage(cost=0.5)
            return f"price of {item}"

        with Journal("g", path=db) as j:
            j.step("price", price, "A")
            j.step("ship", numbered, "ship", [])
            source = j.run_id
        store = open_journal_file(db, write=True)
        try:
            fork = fork_run(store, source, "ship").run
        finally:
            store.close()
        with pytest.raises(StepMismatchError, match="price"), Journal("g", path=db) as j:
            assert j.run_id == fork.id
            j.step("price", price, "B")
        with Journal("g", path=db) as j:
            assert j.run_id == fork.id
            assert j.step("price", price, "A") == "price of A"
        assert calls == ["A"]
        # The one paid call is counted once in the file, on the source's row.
        con = sqlite3.connect(db)
        try:
            assert con.execute("SELECT sum(cost) FROM journal_g").fetchone() == (0.5,)
        finally:
            con.close()

    def test_a_run_held_by_a_live_journal_is_refused(self, db: Path) -> None:
        with Journal("g", path=db) as j:
            j.step("a", numbered, "a", [])
            store = open_journal_file(db, write=True)
            try:
                assert is_run_held(store, j.run_id)
                with pytest.raises(RunHeldError, match="held by a live process"):
                    fork_run(store, j.run_id, "a")
                assert len(list_runs(store, "g")) == 1
            finally:
                store.close()


class TestAJournalWaitingForARunThatIsForgotten:
    @pytest.mark.skipif(not HAS_PROC_FD, reason="the handshake reads /proc/self/fd")
    def test_it_starts_a_new_run_instead_of_failing(self, db: Path) -> None:
        with Journal("g", path=db, run="nightly") as j:
            j.step("a", numbered, "a", [])
            forgotten = j.run_id
        store = open_journal_file(db, write=True)
        path = run_lock_path(store, forgotten)
        lock = filelock.FileLock(path)
        lock.acquire()  # as 'lil reset' does while it deletes the run
        opened: list[str] = []

        def open_it() -> None:
            with Journal("g", path=db, run="nightly", timeout=30) as j2:
                opened.append(j2.run_id)

        waiter = threading.Thread(target=open_it)
        waiter.start()
        # Handshake: the waiter has opened the lock file (the test's lock is one
        # descriptor, the waiter's poll another), so it looks again after the wait.
        wait_until(lambda: descriptors_on(path) >= 2, "the journal waits for the run")
        with store.write() as c:
            delete_runs(c, "journal_g", [forgotten])
        lock.release()
        waiter.join(30)
        store.close()
        assert opened and opened[0] != forgotten


class TestResettingAsALibraryCall:
    def test_an_unknown_goal_or_run_is_a_clear_error(self, db: Path) -> None:
        with Journal("g", path=db) as j:
            j.step("a", numbered, "a", [])
        store = open_journal_file(db, write=True)
        try:
            with pytest.raises(RunNotFoundError, match=r"no goal, run id.* 'h'.*known goals: g"):
                reset_run(store, "h")
            with pytest.raises(RunNotFoundError, match="no unfinished unnamed run"):
                reset_run(store, "g")
            with pytest.raises(RunNotFoundError, match="no run with id, id prefix or name 'x'"):
                reset_run(store, "g", "x")
        finally:
            store.close()


class TestCollectingGarbage:
    def test_a_run_opened_after_gc_listed_it_is_left_alone(
        self, db: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """gc takes each run's lock before deleting it: a run opened since it looked stays."""
        from letitloop.maintenance import gc  # gc_runs looks gc_candidates up in its module

        old = time.time() - 90 * 86400
        with pytest.raises(RuntimeError), Journal("g", path=db, clock=lambda: old) as first:
            first.step("a", str, 1)
            raise RuntimeError("left to resume")
        store = open_journal_file(db, write=True)
        try:
            listed = gc.gc_candidates(store, timedelta(days=30))
            assert [r.id for r in listed[0]] == [first.run_id]
            # The race: between gc's listing and its delete, a process resumes the run.
            monkeypatch.setattr(gc, "gc_candidates", lambda *a, **k: listed)
            with Journal("g", path=db) as resumed:
                assert resumed.run_id == first.run_id
                result = gc_runs(store, timedelta(days=30))
                assert result.removed == [] and [r.id for r in result.skipped_live] == [
                    first.run_id
                ]
                assert resumed.step("a", str, 1) == "1"  # its steps are all still there
        finally:
            store.close()

    def test_the_file_shrinks_after_old_runs_go(self, db: Path) -> None:
        old = time.time() - 90 * 86400
        payload = "x" * 2000
        with Journal("g", path=db, clock=lambda: old) as j:
            for i in range(1500):
                j.step(f"s{i}", str, payload)
        with Journal("g", path=db, run="kept") as j:
            j.step("a", str, 1)
        store = open_journal_file(db, write=True)
        try:
            result = gc_runs(store, timedelta(days=30))
            assert [r.name for r in list_runs(store)] == ["kept"]
        finally:
            store.close()
        assert len(result.removed) == 1 and result.rows_deleted == 1500
        assert result.bytes_after < result.bytes_before / 4
        assert db.stat().st_size == result.bytes_after  # the WAL was checkpointed away

    def test_an_age_past_year_one_removes_nothing_and_raises_nothing(self, db: Path) -> None:
        with Journal("g", path=db) as j:
            j.step("a", str, 1)
        store = open_journal_file(db, write=True)
        try:
            for dry_run in (True, False):
                result = gc_runs(store, timedelta(days=999_999_999), dry_run=dry_run)
                assert result.removed == [] and len(list_runs(store)) == 1
        finally:
            store.close()

    def test_old_watcher_events_go_with_the_runs_they_started(
        self, db: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        old = time.time() - 90 * 86400
        monkeypatch.setenv("LETITLOOP_WATCH_ID", "old-watch")
        with Journal("g", path=db, clock=lambda: old) as j:
            j.step("a", str, 1)
        monkeypatch.setenv("LETITLOOP_WATCH_ID", "new-watch")
        with Journal("g", path=db, run="kept") as j:
            j.step("a", str, 1)
        store = open_journal_file(db, write=True)
        try:
            for watch, at in (("old-watch", old), ("new-watch", time.time())):
                store.write1(
                    "INSERT INTO supervisor_events (watch_id, at, event, target, attempt, "
                    "watcher_pid, host) VALUES (?, ?, 'start', 'x.py', 1, 1, 'h')",
                    (watch, utc_iso(at)),
                )
            assert gc_runs(store, timedelta(days=30), dry_run=True).supervisor_events_deleted == 1
            assert gc_runs(store, timedelta(days=30)).supervisor_events_deleted == 1
            left = store.query("SELECT watch_id FROM supervisor_events")
        finally:
            store.close()
        assert left == [("new-watch",)]


@pytest.fixture
def migrations_before_views(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The migration runner pointed at a copy of migrations/ without 0004_views.sql."""
    folder = tmp_path / "migrations"
    shutil.copytree(migration_files.migrations_dir(), folder)
    (folder / "0004_views.sql").unlink()
    monkeypatch.setattr(migration_files, "migrations_dir", lambda: folder)
    migration_files.known_migrations.cache_clear()
    yield folder
    migration_files.known_migrations.cache_clear()


class TestTheJournalRowsView:
    def test_an_upgraded_file_sees_the_goals_it_already_had(
        self, db: Path, migrations_before_views: Path
    ) -> None:
        for goal in ("alpha", "Beta's goal"):
            with Journal(goal, path=db) as j:
                j.step("s", str, 1)
        source = Path(__file__).resolve().parent.parent / "migrations" / "0004_views.sql"
        shutil.copy(source, migrations_before_views)
        migration_files.known_migrations.cache_clear()
        with Journal("gamma", path=db) as j:  # opening upgrades, then adds a goal
            j.step("s", str, 1)
        conn = sqlite3.connect(db)
        rows = conn.execute("SELECT goal, key FROM journal_rows ORDER BY goal").fetchall()
        conn.close()
        assert rows == [("Beta's goal", "s"), ("alpha", "s"), ("gamma", "s")]

    def test_it_covers_up_to_view_max_goals_then_stays_empty(self, db: Path) -> None:
        store = Store(db)
        try:
            for i in range(VIEW_MAX_GOALS + 2):
                with store.write() as c:
                    table = store.ensure_goal(c, f"goal{i}", time.time())
                    # A row shows in a goal's view only with its run (since 0011).
                    c.execute(
                        "INSERT INTO runs (id, goal, status, attempts, started_at, updated_at) "
                        "VALUES (?, ?, 'completed', 1, 't', 't')",
                        (f"r{i}", f"goal{i}"),
                    )
                    c.execute(
                        f'INSERT INTO "{table}" (run, key, kind, status, attempt) '
                        "VALUES (?, 'k', 'step', 'done', 1)",
                        (f"r{i}",),
                    )
                if i == VIEW_MAX_GOALS - 1:
                    count = store.query("SELECT count(DISTINCT goal) FROM journal_rows")
                    assert count == [(VIEW_MAX_GOALS,)]
            assert store.query("SELECT count(*) FROM journal_rows") == [(0,)]
            # still valid: every run, its counts from the (empty) view
            assert store.query("SELECT count(*), sum(steps_done) FROM run_summary") == [
                (VIEW_MAX_GOALS + 2, 0)
            ]
        finally:
            store.close()

    def test_show_lists_rows_in_journal_order_not_key_order(self, db: Path) -> None:
        with Journal("g", path=db) as j:
            for key in ("zeta", "alpha", "mid"):
                j.step(key, str, key)
        store = open_journal_file(db, write=True)
        try:
            detail = show_run(store, find_run(store, "g"))
        finally:
            store.close()
        assert [r.key for r in detail.rows] == ["zeta", "alpha", "mid"]


class TestAFileWithAGapInItsMigrations:
    def test_the_missing_earlier_migration_is_applied_and_the_file_opens(
        self, db: Path, migrations_before_views: Path
    ) -> None:
        # A file written by a version that had 0001 and 0004 but not a 0002/0003
        # merged later: the lower-numbered migration arrives after a higher one.
        source = Path(__file__).resolve().parent.parent / "migrations" / "0004_views.sql"
        shutil.copy(source, migrations_before_views)
        # (0002 only: 0003 makes the markers table, which 0012 adds a column to.)
        early = sorted(p for p in migrations_before_views.glob("0002_*.sql"))
        held_back = {p: p.read_text(encoding="utf-8") for p in early}
        for p in held_back:
            p.unlink()
        migration_files.known_migrations.cache_clear()
        with Journal("g", path=db, run="r") as j:
            j.step("s", str, 1)
        for p, text in held_back.items():
            p.write_text(text, encoding="utf-8")
        migration_files.known_migrations.cache_clear()
        with Journal("g", path=db, run="r") as j:
            assert j.step("s", str, 1) == "1"
        conn = sqlite3.connect(db)
        applied = [r[0] for r in conn.execute("SELECT name FROM _sqlite_migrations")]
        conn.close()
        assert sorted(applied) == sorted(name for name, _ in migration_files.known_migrations())


class TestARunsRowsReadFromItsCompactTable:
    def test_they_say_what_the_goal_s_view_says(self, db: Path) -> None:
        with Journal("g", path=db) as j:
            j.step("a", lambda: {"x": 1})
            with pytest.raises(ZeroDivisionError):
                j.step("bad", lambda: 1 / 0)
            j.sleep("nap", 0)
            j.step("later", lambda: 2)
            run_id = j.run_id
        conn = sqlite3.connect(db)
        with conn:  # a step in flight: the view shows no finish for it
            conn.execute("UPDATE journal_g SET status = 'running' WHERE key = 'later'")
        view = conn.execute(
            "SELECT key, kind, status, fn, result, started_at, finished_at, duration_ms, "
            "attempt, error FROM journal_g WHERE run = ? ORDER BY rowid",
            (run_id,),
        ).fetchall()
        conn.close()
        store = open_journal_file(db)
        try:
            detail = show_run(store, find_run(store, run_id))
        finally:
            store.close()
        fields = "key kind status fn result started_at finished_at duration_ms attempt error"
        read = [tuple(getattr(r, f) for f in fields.split()) for r in detail.rows]
        assert read == view and len(read) == 4 and view[-1][6] is None
        assert detail.rows[0].fn is not None and str(detail.rows[0].started_at).endswith("+00:00")
        assert [r.seq for r in detail.rows] == sorted(r.seq for r in detail.rows)

    @pytest.mark.parametrize(
        "us", [0, 999_999, 1_764_646_323_000_000, 1_764_646_323_123_456, 2.5e15]
    )
    def test_their_times_are_the_text_the_view_makes_in_sql(self, us: float) -> None:
        from letitloop.inspection.sqlite_runs import iso_us as _iso_us
        from letitloop.stores.sqlite.goals import iso_sql

        conn = sqlite3.connect(":memory:")
        (in_sql,) = conn.execute(f"SELECT {iso_sql(':us')}", {"us": us}).fetchone()
        conn.close()
        assert _iso_us(us) == in_sql and in_sql.endswith("+00:00")
