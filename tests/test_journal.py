"""The journal's promises, run against both durability modes."""

from __future__ import annotations

import functools
import pickle
import shutil
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, ClassVar

import pytest
from helpers import sqlite_store

from letitloop import Journal, durable, step
from letitloop.errors import (
    ConcurrentStepError,
    EncodeError,
    InvalidNameError,
    LetItLoopError,
    NoJournalError,
    RunHeldError,
    StepMismatchError,
)

if sys.version_info < (3, 11):  # the backport anyio installs there
    from exceptiongroup import ExceptionGroup


class Counter:
    """Counts calls per argument, so a test can tell a replay from a call."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def __call__(self, x: Any) -> Any:
        self.calls.append(x)
        return {"x": x, "items": [1, 2.5, None, "s", True]}


def fetch(x: Any) -> Any:
    return {"fetched": x}


def summarize(x: Any) -> Any:
    return {"summary": x}


def rows(db: Path, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    """Read through a separate connection: what any other process would see."""
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


@pytest.fixture(params=["process", "power"], autouse=True)
def durability(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run this whole contract suite in both durability modes (the default is switched)."""
    mode = str(request.param)
    for fn in (Journal.__init__, durable):
        assert fn.__kwdefaults__ is not None
        monkeypatch.setitem(fn.__kwdefaults__, "durability", mode)
    return mode


class TestAStepThatReturned:
    def test_it_is_replayed_without_calling_the_function(self, db: Path, durability: Any) -> None:
        f = Counter()
        with Journal("g", run="r", path=db, durability=durability) as j:
            first = j.step("s", f, 1)
        with Journal("g", run="r", path=db, durability=durability) as j:
            again = j.step("s", f, 1)
        assert f.calls == [1]
        assert again == first

    def test_its_row_is_visible_to_another_connection_the_moment_it_returns(
        self, db: Path, durability: Any
    ) -> None:
        with Journal("g", path=db, durability=durability) as j:
            j.step("s", fetch, 7)
            table = j.table
            seen = rows(db, f'SELECT key, status, result FROM "{table}" WHERE run = ?', (j.run_id,))
            assert seen == [("s", "done", '{"fetched":7}')]


class TestRepeatedNames:
    def test_they_get_numbered_keys_in_call_order(self, db: Path) -> None:
        with Journal("g", path=db) as j:
            for i in range(3):
                j.step("fetch", fetch, i)
            keys = rows(db, f'SELECT key FROM "{j.table}" ORDER BY rowid')
        assert keys == [("fetch",), ("fetch#2",), ("fetch#3",)]

    def test_each_replays_its_own_result(self, db: Path) -> None:
        first = Counter()
        with Journal("g", run="r", path=db) as j:
            recorded = [j.step("fetch", first, i) for i in range(3)]
        again = Counter()
        with Journal("g", run="r", path=db) as j:
            got = [j.step("fetch", again, i) for i in range(3)]
        assert first.calls == [0, 1, 2]
        assert got == recorded and [g["x"] for g in got] == [0, 1, 2]
        assert again.calls == []

    def test_a_name_that_looks_like_a_numbered_key_is_refused(self, db: Path) -> None:
        with Journal("g", path=db) as j, pytest.raises(InvalidNameError, match="#<number>"):
            j.step("fetch#2", fetch, 1)


class TestAStepThatRaised:
    def test_it_is_recorded_as_failed_with_its_error_and_traceback(self, db: Path) -> None:
        def boom() -> None:
            raise ValueError("upstream said no")

        with pytest.raises(ValueError), Journal("g", path=db) as j:
            j.step("ok", fetch, 1)
            j.step("boom", boom)
        ((status, error, tb),) = rows(
            db, f"SELECT status, error, traceback FROM \"{j.table}\" WHERE key = 'boom'"
        )
        assert status == "failed"
        assert error == "ValueError: upstream said no"
        assert "raise ValueError" in tb
        assert rows(db, "SELECT status, error FROM runs") == [
            ("failed", "ValueError: upstream said no")
        ]

    def test_an_exception_group_of_one_error_records_that_error_however_deep(
        self, db: Path
    ) -> None:
        def boom() -> None:
            inner = ExceptionGroup("unhandled errors in a TaskGroup", [OSError("refused")])
            raise ExceptionGroup("unhandled errors in a TaskGroup", [inner])

        with pytest.raises(ExceptionGroup), Journal("g", path=db) as j:
            j.step("boom", boom)
        assert rows(db, f"SELECT error FROM \"{j.table}\" WHERE key = 'boom'") == [
            ("OSError: refused",)
        ]
        assert rows(db, "SELECT error FROM runs") == [("OSError: refused",)]

    def test_an_exception_group_of_several_errors_names_each_briefly(self, db: Path) -> None:
        def boom() -> None:
            nested = ExceptionGroup("inner", [KeyError("k"), OSError("x" * 1000)])
            raise ExceptionGroup("outer", [ValueError("bad value"), nested])

        with pytest.raises(ExceptionGroup), Journal("g", path=db) as j:
            j.step("boom", boom)
        ((error,),) = rows(db, f"SELECT error FROM \"{j.table}\" WHERE key = 'boom'")
        assert error.startswith(
            "ExceptionGroup: 3 errors: ValueError: bad value; KeyError: 'k'; OSError: xxx"
        )
        assert error.endswith("x…") and len(error) < 300

    def test_the_failed_run_resumes_from_the_failed_step(self, db: Path) -> None:
        f = Counter()
        fail = [True]

        def flaky() -> str:
            if fail[0]:
                raise RuntimeError("transient")
            return "fine"

        with pytest.raises(RuntimeError), Journal("g", path=db) as j:
            j.step("first", f, 1)
            j.step("flaky", flaky)
        run_id = j.run_id
        fail[0] = False
        with Journal("g", path=db) as j:
            assert j.run_id == run_id
            j.step("first", f, 1)
            assert j.step("flaky", flaky) == "fine"
        assert f.calls == [1]
        assert rows(db, "SELECT status, attempts, error FROM runs") == [("completed", 2, None)]


class TestCodeThatChangedUnderARecordedRun:
    def test_a_different_function_at_a_recorded_key_is_refused(self, db: Path) -> None:
        with Journal("customer_sync", run="r", path=db) as j:
            j.step("summarize", fetch, 1)
            run_id = j.run_id
        with (
            pytest.raises(StepMismatchError) as info,
            Journal("customer_sync", run="r", path=db) as j,
        ):
            j.step("summarize", summarize, 1)
        message = str(info.value)
        assert run_id in message
        assert "'summarize'" in message
        assert "test_journal.fetch" in message and "test_journal.summarize" in message
        assert "lil reset customer_sync" in message and "lil fork" in message

    def test_the_refusal_loses_nothing(self, db: Path) -> None:
        with Journal("g", run="r", path=db) as j:
            j.step("s", fetch, 1)
        with pytest.raises(StepMismatchError), Journal("g", run="r", path=db) as j:
            j.step("s", summarize, 1)
        with Journal("g", run="r", path=db) as j:
            assert j.step("s", fetch, 1) == {"fetched": 1}


class TestRuns:
    def test_a_completed_unnamed_run_is_followed_by_a_new_run(self, db: Path) -> None:
        with Journal("g", path=db) as j:
            first = j.run_id
        with Journal("g", path=db) as j:
            assert j.run_id != first
        assert [r[0] for r in rows(db, "SELECT status FROM runs")] == ["completed", "completed"]

    def test_a_named_run_is_an_idempotency_key(self, db: Path) -> None:
        f = Counter()
        for _ in range(3):
            with Journal("g", run="2026-11-30", path=db) as j:
                j.step("a", f, 1)
                assert j.run_name == "2026-11-30"
        assert f.calls == [1]
        assert rows(db, "SELECT name, status, attempts FROM runs") == [
            ("2026-11-30", "completed", 1)
        ]

    def test_goals_and_run_names_are_independent(self, db: Path) -> None:
        f = Counter()
        with Journal("a", run="r", path=db) as j:
            j.step("s", f, "a")
        with Journal("b", run="r", path=db) as j:
            j.step("s", f, "b")
        assert f.calls == ["a", "b"]

    def test_a_second_journal_on_a_held_run_in_the_same_thread_is_refused_at_once(
        self, db: Path
    ) -> None:
        with Journal("g", run="r", path=db) as j:
            with pytest.raises(RunHeldError, match="already open in this thread"):
                Journal("g", run="r", path=db, timeout=30).open()
            j.step("s", fetch, 1)  # the first journal is unaffected

    def test_a_second_journal_in_another_thread_waits_for_the_holder_then_gets_the_run(
        self, db: Path
    ) -> None:
        got: list[Any] = []
        with Journal("g", run="r", path=db) as j:
            j.step("s", fetch, 1)

            def second() -> None:
                with Journal("g", run="r", path=db, timeout=30) as k:
                    got.append((k.run_id, k.step("s", fetch, 1)))

            t = threading.Thread(target=second)
            t.start()
            t.join(0.3)
            assert t.is_alive() and got == []  # waiting, as a second process would
        t.join(30)
        assert got == [(j.run_id, {"fetched": 1})]

    def test_a_second_journal_in_another_thread_that_waits_too_long_names_the_holder(
        self, db: Path
    ) -> None:
        errors: list[BaseException] = []
        with Journal("g", run="r", path=db):

            def second() -> None:
                try:
                    Journal("g", run="r", path=db, timeout=0.2).open()
                except RunHeldError as exc:
                    errors.append(exc)

            t = threading.Thread(target=second)
            t.start()
            t.join(30)
        assert len(errors) == 1 and "another Journal of this process" in str(errors[0])


class TestLeavingTheBlockEarly:
    def test_sys_exit_0_completes_the_run(self, db: Path) -> None:
        with pytest.raises(SystemExit), Journal("g", path=db) as j:
            j.step("a", fetch, 1)
            raise SystemExit(0)  # "nothing more to do today"
        assert rows(db, "SELECT status, error FROM runs") == [("completed", None)]
        with Journal("g", path=db) as k:  # a completed unnamed run: the next is new
            assert k.run_id != j.run_id

    @pytest.mark.parametrize("stop", [KeyboardInterrupt(), SystemExit(3)])
    def test_an_interrupt_or_a_failing_exit_leaves_the_run_to_resume(
        self, db: Path, stop: BaseException
    ) -> None:
        with pytest.raises(type(stop)), Journal("g", path=db) as j:
            j.step("a", fetch, 1)
            raise stop
        ((status, error),) = rows(db, "SELECT status, error FROM runs")
        assert status == "failed" and error.startswith(type(stop).__name__)
        with Journal("g", path=db) as k:
            assert (k.run_id, k.attempt) == (j.run_id, 2)


class TestGoalNames:
    ODD: ClassVar[list[str]] = [
        "customer sync",
        "Customer_Sync",
        "customer_sync",
        'quote\'s "double"',
        "émoji 🚀 ünïcode",
        '"; drop table runs; --',
        "a/b\\c",
        "x" * 300,
    ]

    def test_any_goal_string_gets_its_own_table(self, db: Path) -> None:
        for goal in self.ODD:
            with Journal(goal, path=db) as j:
                j.step("s", fetch, goal)
        mapping = dict(rows(db, "SELECT goal, journal_table FROM goals"))
        assert set(mapping) == set(self.ODD)
        assert len(set(mapping.values())) == len(self.ODD)
        for goal, table in mapping.items():
            assert rows(db, f'SELECT result FROM "{table}"') == [
                (f'{{"fetched":{__import__("json").dumps(goal, ensure_ascii=False)}}}',)
            ]
        assert rows(db, "SELECT count(*) FROM runs") == [(len(self.ODD),)]

    def test_a_plain_goal_keeps_a_readable_table_name(self, db: Path) -> None:
        with Journal("customer_sync", path=db) as j:
            assert j.table == "journal_customer_sync"
        with Journal("Customer Sync", path=db) as j:
            assert j.table.startswith("journal_customer_sync_")

    @pytest.mark.parametrize("bad", ["", "   ", "a\nb", "nul\x00", 42, None])
    def test_an_unusable_goal_name_is_refused_clearly(self, db: Path, bad: Any) -> None:
        with pytest.raises(InvalidNameError, match="goal name"):
            Journal(bad, path=db)


class TestResults:
    def test_an_unencodable_result_is_refused_before_anything_is_written(self, db: Path) -> None:
        with pytest.raises(EncodeError) as info, Journal("g", run="r", path=db) as j:
            j.step("ok", fetch, 1)
            j.step("bad", lambda: {"items": [1, 2, 3, object()]})
        assert "step 'bad'" in str(info.value)
        assert "$.items[3]" in str(info.value)
        assert [k for (k,) in rows(db, f'SELECT key FROM "{j.table}"')] == ["ok"]
        with Journal("g", run="r", path=db) as j:
            assert j.step("ok", fetch, 1) == {"fetched": 1}

    def test_json_native_values_come_back_equal(self, db: Path) -> None:
        value = {
            "s": "ü",
            "i": 2**70,
            "f": 1.5,
            "n": None,
            "b": False,
            "l": [[], {}, [1, {"a": 2}]],
        }
        with Journal("g", run="r", path=db) as j:
            j.step("v", lambda: value)
        with Journal("g", run="r", path=db) as j:
            got = j.step("v", lambda: None)
        assert got == value


SIDE_CALLS: list[tuple[int, int]] = []


def side_result(r: int, i: int) -> dict[str, int] | None:
    SIDE_CALLS.append((r, i))
    return None if i % 7 == 0 else {"run": r, "i": i}


class TestRunsWrittenSideBySide:
    """A run's results are read back in chunks (replay.Results), by a range of rowids
    where the run's rows fill it, else row by row: both give each run its own results."""

    @pytest.mark.parametrize("runs", [2, 3])
    def test_each_run_replays_its_own_results(self, db: Path, runs: int) -> None:
        journals = [Journal("g", run=f"r{r}", path=db).open() for r in range(runs)]
        for i in range(300):  # interleaved: each run's rowids are every runs-th row
            for r, j in enumerate(journals):
                j.step(f"s{i}", side_result, r, i)
        for j in journals:
            j.close()
        SIDE_CALLS.clear()
        for r in range(runs):
            with Journal("g", run=f"r{r}", path=db) as j:
                got = [j.step(f"s{i}", side_result, r, i) for i in range(300)]
            assert got == [None if i % 7 == 0 else {"run": r, "i": i} for i in range(300)]
        assert SIDE_CALLS == []  # every step replayed, none called again

    def test_failed_steps_and_markers_among_a_runs_rows_are_passed_over(self, db: Path) -> None:
        def boom() -> None:
            raise ValueError("no")

        with Journal("g", run="r", path=db) as j:
            for i in range(40):
                j.step(f"s{i}", side_result, 0, i)
                if i % 5 == 0:
                    with pytest.raises(ValueError):
                        j.step(f"bad{i}", boom)
                    with j.atomic_marker(f"m{i}") as go:
                        assert go
        SIDE_CALLS.clear()
        with Journal("g", run="r", path=db) as j:
            got = [j.step(f"s{i}", side_result, 0, i) for i in range(40)]
        assert got == [None if i % 7 == 0 else {"run": 0, "i": i} for i in range(40)]
        assert SIDE_CALLS == []


def worker_step(i: int) -> int:
    return i * i


class TestThreads:
    def test_steps_from_many_threads_are_all_recorded_and_replayed(self, db: Path) -> None:
        def work(j: Journal, t: int) -> None:
            for i in range(20):
                assert j.step(f"t{t}:{i}", worker_step, i) == i * i

        for _ in range(2):
            with Journal("g", run="r", path=db) as j:
                threads = [threading.Thread(target=work, args=(j, t)) for t in range(8)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
        assert rows(db, f"SELECT count(*) FROM \"{j.table}\" WHERE status = 'done'") == [(160,)]

    def test_two_concurrent_calls_of_one_name_are_refused(self, db: Path) -> None:
        inside = threading.Event()
        release = threading.Event()
        errors: list[BaseException] = []

        def slow() -> int:
            inside.set()
            release.wait(10)
            return 1

        with Journal("g", path=db) as j:
            t = threading.Thread(target=j.step, args=("same", slow))
            t.start()
            inside.wait(10)
            try:
                j.step("same", worker_step, 2)
            except ConcurrentStepError as exc:
                errors.append(exc)
            release.set()
            t.join()
        assert len(errors) == 1
        assert "distinct names" in str(errors[0])


class TestDurableDecorator:
    def test_the_return_value_is_the_runs_result(self, db: Path) -> None:
        f = Counter()

        @durable(goal_id="g", run="r", path=db)
        def wf() -> Any:
            return step("a", f, 1)

        assert wf() == wf()
        assert f.calls == [1]
        assert rows(db, "SELECT result FROM runs") == [('{"x":1,"items":[1,2.5,null,"s",true]}',)]

    def test_a_completed_named_run_returns_its_result_without_running_the_body(
        self, db: Path
    ) -> None:
        bodies: list[int] = []

        @durable(goal_id="g", run="r", path=db)
        def wf() -> int:
            bodies.append(1)
            return 42

        assert wf() == 42 and wf() == 42
        assert bodies == [1]

    def test_run_can_be_a_function_of_the_arguments(self, db: Path) -> None:
        f = Counter()

        @durable(goal_id="sync", run=lambda user_id: f"user-{user_id}", path=db)
        def wf(user_id: int) -> Any:
            return step("fetch", f, user_id)

        wf(1), wf(2), wf(1)
        assert f.calls == [1, 2]
        assert sorted(n for (n,) in rows(db, "SELECT name FROM runs")) == ["user-1", "user-2"]

    def test_step_outside_any_journal_is_a_clear_error(self) -> None:
        with pytest.raises(NoJournalError, match="@durable"):
            step("a", fetch, 1)

    def test_step_in_a_worker_thread_uses_the_one_open_journal(self, db: Path) -> None:
        from concurrent.futures import ThreadPoolExecutor

        @durable(goal_id="g", path=db)
        def wf() -> list[int]:
            with ThreadPoolExecutor(4) as pool:
                return list(pool.map(lambda i: step(f"sq:{i}", worker_step, i), range(8)))

        assert wf() == [i * i for i in range(8)]


class TestErrors:
    def test_every_error_pickles_with_its_details(self, db: Path) -> None:
        with Journal("g", run="r", path=db) as j:
            j.step("s", fetch, 1)
        with pytest.raises(StepMismatchError) as info, Journal("g", run="r", path=db) as j:
            j.step("s", summarize, 1)
        clone = pickle.loads(pickle.dumps(info.value))
        assert isinstance(clone, StepMismatchError) and isinstance(clone, LetItLoopError)
        assert str(clone) == str(info.value)
        assert clone.key == "s" and clone.run_id == info.value.run_id


class TestDurabilityModes:
    def test_the_connection_uses_the_stated_synchronous_and_wal_modes(
        self, db: Path, durability: str
    ) -> None:
        with Journal("g", path=db) as j:
            assert j.durability == durability
            conn = sqlite_store(j).conn
            sync = conn.execute("PRAGMA synchronous").fetchone()[0]
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            full = conn.execute("PRAGMA fullfsync").fetchone()[0]
            checkpoint_full = conn.execute("PRAGMA checkpoint_fullfsync").fetchone()[0]
        assert (mode, sync) == ("wal", {"process": 1, "power": 2}[durability])
        # F_FULLFSYNC (macOS: through the drive's cache) exactly where power loss is promised.
        assert (full, checkpoint_full) == {"process": (0, 0), "power": (1, 1)}[durability]

    @pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
    def test_a_new_files_first_step_waits_for_no_fsync_unless_power_loss_is_promised(
        self, db: Path, durability: str
    ) -> None:
        # Counted by strace from outside the process: SQLite's fsyncs, up to the moment
        # the first step returned (the stat of a marker path nothing else looks at).
        mark = db.parent / "MARK-first-step-committed"
        program = (
            "import os, sys\nfrom letitloop import Journal\n"
            "with Journal('g', path=sys.argv[1], durability=sys.argv[2]) as j:\n"
            "    j.step('a', str, 1)\n    os.path.exists(sys.argv[3])\n"
        )
        trace = db.parent / "trace"
        subprocess.run(
            ["strace", "-f", "-o", str(trace), "-e", "trace=fsync,fdatasync,newfstatat,stat",
             sys.executable, "-c", program, str(db), durability, str(mark)],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        before = trace.read_text().split(str(mark))[0]
        syncs = before.count("fsync(") + before.count("fdatasync(")
        assert (syncs == 0) == (durability == "process"), before[-2000:]
        with Journal("g", path=db) as j:  # and the file is whole (durability: the fixture)
            assert j.step("a", str, 1) == "1" and j.was_completed is False

    def test_an_unknown_mode_is_refused(self, db: Path) -> None:
        with pytest.raises(ValueError, match="'process' or 'power'"):
            Journal("g", path=db, durability="sometimes")  # type: ignore[arg-type]

    def test_every_detail_an_error_carries_is_declared_on_its_class(self) -> None:
        """A detail passed where an error is raised (``pid=``, ``key=``) is a typed,
        documented attribute of that class, and reads as None where it was not given."""
        import letitloop.errors as errors

        assert undeclared_error_details() == []
        assert errors.RunHeldError("held").pid is None
        assert errors.MarkerLostError("lost", name="m").name == "m"


@functools.cache  # the package's source, read once for both durabilities' runs
def undeclared_error_details() -> list[str]:
    """``file:line Class(detail=)`` for each detail a raise passes that its class does not
    declare, in every module of the package."""
    import ast

    from package_trees import PACKAGE as package
    from package_trees import package_files, walked

    import letitloop.errors as errors

    undeclared = []
    for source in package_files():
        for node in walked(source):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            cls = getattr(errors, node.func.id, None)
            if not (isinstance(cls, type) and issubclass(cls, LetItLoopError)):
                continue
            declared = {n for c in cls.__mro__ for n in getattr(c, "__annotations__", {})}
            for kw in node.keywords:
                if kw.arg is not None and kw.arg not in declared:
                    where = f"{source.relative_to(package)}:{node.lineno}"
                    undeclared.append(f"{where} {cls.__name__}({kw.arg}=)")
    return undeclared
