"""Identity: the right run for these arguments, the right result for this call, one lock per file.

Each class is a way the journal once handed back a result recorded for a
different call, or let two processes hold one run. Execution is counted in a
side file written by the step functions, from real child processes killed
with real SIGKILL where a crash is the point.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    HAS_PROC_FD,
    descriptors_on,
    run_forked,
    run_python,
    spawn_forked,
    wait_until,
    write_script,
)

from letitloop import Journal, atomic_marker, durable, step, unchecked
from letitloop.errors import (
    ConcurrentStepError,
    FingerprintError,
    RunHeldError,
    StepMismatchError,
)
from letitloop.inspection import open_journal_file
from letitloop.maintenance import reset_run
from letitloop.stores.sqlite.holding import run_lock_path


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def query(db: Path, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    """Read through a separate connection: what any other process would see."""
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


WELCOME = """
    import os, sys, time
    from letitloop import durable, step

    db, side, uid, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]

    def send_email(uid):
        with open(side, "a") as f:
            f.write(f"send {uid}\\n")
        if mode == "hang":
            print("inside", flush=True)
            time.sleep(60)
        if mode == "raise":
            raise RuntimeError("smtp down")
        return f"emailed user-{uid}"

    @durable(goal_id="welcome_email", path=db)
    def welcome(uid):
        return step("send", send_email, uid)

    print(welcome(uid), flush=True)
"""


class TestDurableResumesOnlyARunOfTheSameArguments:
    def _killed_inside_send(self, tmp_path: Path, script: Path, uid: int) -> None:
        db, side = tmp_path / "journal.db", tmp_path / "side.log"
        child = spawn_forked(script, str(db), str(side), str(uid), "hang")
        assert child.stdout is not None and child.stdout.readline().strip() == "inside"
        os.kill(child.pid, signal.SIGKILL)
        child.communicate()

    def test_other_arguments_start_their_own_run_after_a_sigkill(self, tmp_path: Path) -> None:
        script = write_script(tmp_path, "welcome.py", WELCOME)
        db, side = tmp_path / "journal.db", tmp_path / "side.log"
        self._killed_inside_send(tmp_path, script, 1)
        done = run_forked(script, str(db), str(side), "2", "ok")
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "emailed user-2"  # not user 1's run replayed
        runs = query(db, "SELECT input, status FROM runs ORDER BY rowid")
        assert [(json.loads(i), s) for i, s in runs] == [
            ({"uid": 1}, "running"),  # uid 1's crashed run stays resumable
            ({"uid": 2}, "completed"),
        ]
        again = run_forked(script, str(db), str(side), "1", "ok")
        assert again.stdout.strip() == "emailed user-1"
        assert query(db, "SELECT count(*), min(status), max(attempts) FROM runs") == [
            (2, "completed", 2)
        ]
        assert lines(side) == ["send 1", "send 2", "send 1"]

    def test_other_arguments_start_their_own_run_after_an_exception(self, tmp_path: Path) -> None:
        script = write_script(tmp_path, "welcome.py", WELCOME)
        db, side = tmp_path / "journal.db", tmp_path / "side.log"
        failed = run_forked(script, str(db), str(side), "1", "raise")
        assert failed.returncode != 0 and "smtp down" in failed.stderr
        done = run_forked(script, str(db), str(side), "2", "ok")
        assert done.stdout.strip() == "emailed user-2"
        assert query(db, "SELECT status FROM runs ORDER BY rowid") == [("failed",), ("completed",)]

    def test_the_same_arguments_by_keyword_or_default_are_the_same_call(self, db: Path) -> None:
        calls: list[Any] = []

        @durable(goal_id="g", path=db)
        def work(uid: int, lang: str = "en") -> str:
            step("a", calls.append, (uid, lang))
            raise RuntimeError("crash after a")

        same: list[Callable[[], str]] = [
            lambda: work(1),
            lambda: work(uid=1),
            lambda: work(1, "en"),
        ]
        for call in same:
            with pytest.raises(RuntimeError):
                call()
        assert calls == [(1, "en")]  # one run, resumed twice: 'a' replayed
        assert query(db, "SELECT count(*), max(attempts) FROM runs") == [(1, 3)]

    def test_two_processes_with_different_arguments_each_get_their_own_run_at_once(
        self, tmp_path: Path
    ) -> None:
        script = write_script(tmp_path, "welcome.py", WELCOME)
        db, side = tmp_path / "journal.db", tmp_path / "side.log"
        holder = spawn_forked(script, str(db), str(side), "1", "hang")
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "inside"

            @durable(goal_id="welcome_email", path=db, timeout=0)  # no waiting at all
            def welcome(uid: int) -> str:
                return step("send", lambda u: f"emailed user-{u}", uid)

            assert welcome(2) == "emailed user-2"
            with pytest.raises(RunHeldError):  # the same arguments: uid 1's run, held
                welcome(1)
        finally:
            holder.kill()
            holder.communicate()

    def test_an_argument_the_codec_cannot_encode_is_recorded_by_its_type(self, db: Path) -> None:
        lock = threading.Lock()

        @durable(goal_id="g", path=db, run="named")  # a named run: the input picks nothing
        def work(guard: Any, n: int) -> int:
            return n

        assert work(lock, 3) == 3
        ((text,),) = query(db, "SELECT input FROM runs")
        assert json.loads(text) == {"guard": f"<_thread.{type(lock).__name__}>", "n": 3}

    def test_an_argument_with_no_fingerprint_cannot_pick_an_unnamed_run(self, db: Path) -> None:
        ran: list[int] = []

        @durable(goal_id="g", path=db)
        def work(guard: Any, n: int) -> int:
            ran.append(n)
            return n

        with pytest.raises(FingerprintError) as caught:
            work(threading.Lock(), 3)
        message = str(caught.value)
        assert "the run's input holds at $.guard a _thread." in message
        for way_out in ("register_fingerprint(", "run=", "unchecked("):
            assert way_out in message
        assert ran == []
        assert not db.exists() or query(db, "SELECT count(*) FROM runs") == [(0,)]

    def test_an_unchecked_argument_is_left_out_of_the_input_and_reaches_the_function(
        self, db: Path
    ) -> None:
        got: list[Any] = []

        @durable(goal_id="g", path=db)
        def work(guard: Any, items: list[Any]) -> None:
            got.append((guard, items))
            raise RuntimeError("crash")

        lock = threading.Lock()
        for stamp in ("monday", "tuesday"):
            with pytest.raises(RuntimeError):
                work(unchecked(lock), [{"at": unchecked(stamp)}, 1])
        assert got == [(lock, [{"at": "monday"}, 1]), (lock, [{"at": "tuesday"}, 1])]
        # the second call resumed the first one's run: one run, two attempts
        assert query(db, "SELECT count(*), max(attempts) FROM runs") == [(1, 2)]

    def test_a_call_that_does_not_fit_the_signature_opens_no_run(self, db: Path) -> None:
        @durable(goal_id="g", path=db)
        def work(n: int) -> int:
            return n

        with pytest.raises(TypeError):
            work(1, 2)  # type: ignore[call-arg]
        assert not db.exists() or query(db, "SELECT count(*) FROM runs") == [(0,)]


class TestJournalInput:
    def test_an_unnamed_journal_resumes_only_the_run_opened_for_the_same_input(
        self, db: Path
    ) -> None:
        for uid in (1, 2):
            with pytest.raises(RuntimeError), Journal("g", path=db, input={"uid": uid}):
                raise RuntimeError("crash")
        with Journal("g", path=db, input={"uid": 1}) as j:
            assert j.attempt == 2
        with Journal("g", path=db) as j:  # no input: none of those
            assert j.attempt == 1
        assert query(db, "SELECT input, attempts FROM runs ORDER BY rowid") == [
            ('{"uid":1}', 2),
            ('{"uid":2}', 1),
            (None, 1),
        ]

    def test_equal_inputs_match_whatever_their_order_and_hash_seed(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        script = write_script(
            tmp_path,
            "open.py",
            """
            import sys
            from letitloop import Journal
            value = {"tags": {"b", "a", "c"}, "z": 1, "a": [1, 2]} if sys.argv[2] == "1" else \\
                {"a": [1, 2], "z": 1, "tags": {"c", "a", "b"}}
            try:
                with Journal("g", path=sys.argv[1], input=value) as j:
                    print(j.attempt, flush=True)
                    raise RuntimeError("crash")
            except RuntimeError:
                pass
            """,
        )
        first = run_python(script, str(db), "1", env={"PYTHONHASHSEED": "1"})
        second = run_python(script, str(db), "2", env={"PYTHONHASHSEED": "2"})
        assert (first.stdout.strip(), second.stdout.strip()) == ("1", "2"), second.stderr


def value_of(x: Any, page: int = 0) -> dict[str, Any]:
    return {"for": x}


class TestAStepReplaysOnlyTheResultOfTheSameCall:
    def test_threads_that_ran_in_another_order_each_get_their_own_result(self, db: Path) -> None:
        calls: list[Any] = []

        def get(x: int) -> dict[str, Any]:
            calls.append(x)
            return {"for": x}

        def attempt(order: list[int]) -> dict[int, Any]:
            got: dict[int, Any] = {}
            with Journal("g", run="r", path=db):
                for x in order:  # one thread after the other: never both in flight
                    t = threading.Thread(target=lambda x=x: got.update({x: step("fetch", get, x)}))
                    t.start()
                    t.join()
            return got

        assert attempt([1, 2]) == {1: {"for": 1}, 2: {"for": 2}}
        assert attempt([2, 1]) == {1: {"for": 1}, 2: {"for": 2}}
        assert calls == [1, 2]

    def test_a_step_inside_a_step_is_keyed_under_it_and_numbering_never_shifts(
        self, db: Path
    ) -> None:
        calls: list[str] = []

        def fetch(x: str) -> str:
            calls.append(x)
            return f"fetched {x}"

        def outer() -> str:
            return step("fetch", fetch, "inner")

        def attempt() -> tuple[str, str]:
            with Journal("g", run="r", path=db):
                a = step("outer", outer)
                b = step("fetch", fetch, "top")
            return a, b

        assert attempt() == ("fetched inner", "fetched top")
        assert attempt() == ("fetched inner", "fetched top")  # replayed: outer not called
        assert calls == ["inner", "top"]
        assert query(db, "SELECT key FROM journal_g ORDER BY rowid") == [
            ("outer/fetch",),
            ("outer",),
            ("fetch",),
        ]

    def test_a_parent_that_crashed_replays_its_finished_children(self, db: Path) -> None:
        calls: list[str] = []

        def child(x: str) -> str:
            calls.append(x)
            return x

        def parent(fail: bool) -> list[str]:
            got = [step("c", child, "one")]
            if fail:
                raise RuntimeError("parent died after its first child")
            got.append(step("c", child, "two"))
            return got

        with pytest.raises(RuntimeError), Journal("g", run="r", path=db) as j:
            j.step("p", parent, unchecked(True))
        with Journal("g", run="r", path=db) as j:
            assert j.step("p", parent, unchecked(False)) == ["one", "two"]
        assert calls == ["one", "two"]  # 'one' replayed under p/c

    def test_two_tasks_sharing_a_name_across_attempts_never_swap_results(self, db: Path) -> None:
        async def fetch(x: str) -> str:
            return f"value of {x}"

        async def attempt(first: str, crash_after_first: bool) -> list[Any]:
            out: list[Any] = []
            async with Journal("g", run="r", path=db) as j:

                async def task(x: str) -> None:
                    try:
                        out.append(await j.async_step("fetch", fetch, x))
                    except (StepMismatchError, ConcurrentStepError) as exc:
                        out.append(type(exc).__name__)

                await asyncio.create_task(task(first))
                if crash_after_first:
                    raise RuntimeError("attempt 1 died after A recorded 'fetch'")
                await asyncio.create_task(task("A" if first == "B" else "B"))
            return out

        with pytest.raises(RuntimeError):
            asyncio.run(attempt("A", crash_after_first=True))
        got = asyncio.run(attempt("B", crash_after_first=False))
        assert "value of A" not in got[:1]  # B never gets A's value
        assert got[0] == "StepMismatchError"  # refused at B's first call

    def test_changed_arguments_are_refused_naming_the_argument(self, db: Path) -> None:
        with Journal("g", run="r", path=db) as j:
            j.step("fetch", value_of, 1, page=1)
        with Journal("g", run="r", path=db) as j, pytest.raises(StepMismatchError) as info:
            j.step("fetch", value_of, 1, page=2)
        message = str(info.value)
        assert "keyword argument 'page' differs" in message
        assert "unchecked" in message and "lil fork" in message and "lil reset g" in message
        with Journal("g", run="r", path=db) as j:  # the refusal lost nothing
            assert j.step("fetch", value_of, 1, page=1) == {"for": 1}

    def test_an_unchecked_argument_may_change_and_the_result_replays(self, db: Path) -> None:
        calls: list[Any] = []

        def ask(now: float, question: str) -> str:
            calls.append(now)
            return f"answer to {question}"

        for _ in range(2):
            with Journal("g", run="r", path=db) as j:
                assert j.step("ask", ask, unchecked(time.time()), "q") == "answer to q"
        assert len(calls) == 1
        with Journal("g", run="r", path=db) as j, pytest.raises(StepMismatchError):
            j.step("ask", ask, unchecked(time.time()), "another question")

    def test_wrapping_the_changing_argument_after_a_refusal_lets_the_run_resume(
        self, db: Path
    ) -> None:
        with Journal("g", run="r", path=db) as j:
            j.step("ask", value_of, time.time())
        with Journal("g", run="r", path=db) as j, pytest.raises(StepMismatchError):
            j.step("ask", value_of, time.time())
        with Journal("g", run="r", path=db) as j:
            assert set(j.step("ask", value_of, unchecked(time.time()))) == {"for"}

    def test_a_loop_over_more_items_than_last_time_runs_only_the_new_ones(self, db: Path) -> None:
        calls: list[str] = []

        def get(url: str) -> str:
            calls.append(url)
            return url.upper()

        for urls in (["a", "b"], ["a", "b", "c"]):
            with Journal("g", run="r", path=db) as j:
                assert [j.step("fetch", get, u) for u in urls] == [u.upper() for u in urls]
        assert calls == ["a", "b", "c"]

    def test_identical_calls_replay_in_call_order(self, db: Path) -> None:
        n = iter(range(100))
        with Journal("g", run="r", path=db) as j:
            first = [j.step("tick", lambda: next(n)) for _ in range(3)]
        with Journal("g", run="r", path=db) as j:
            again = [j.step("tick", lambda: next(n)) for _ in range(3)]
        assert first == again == [0, 1, 2]


HOLD_VIA = """
    import sys, time
    from letitloop import Journal
    with Journal("g", run="r", path=sys.argv[1]) as j:
        j.step("a", lambda: 1)
        print("held", flush=True)
        time.sleep(60)
"""

MARKER_VIA = """
    import sys, time
    from letitloop import Journal
    with Journal("g", run=sys.argv[2], path=sys.argv[1]) as j:
        with j.atomic_marker("charge", scope="goal", timeout=0.3) as go:
            print("entered" if go else "done", flush=True)
            time.sleep(60)
"""


class TestOneJournalFileReachedByTwoPathsHasOneSetOfLocks:
    def test_a_run_held_through_the_real_path_is_held_through_a_symlink(
        self, tmp_path: Path
    ) -> None:
        real = tmp_path / "data" / "journal.db"
        real.parent.mkdir()
        link_dir = tmp_path / "elsewhere"
        link_dir.mkdir()
        link = link_dir / "journal.db"
        link.symlink_to(real)
        holder = spawn_forked(write_script(tmp_path, "hold.py", HOLD_VIA), str(real))
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            with pytest.raises(RunHeldError, match=f"process {holder.pid}"):
                Journal("g", run="r", path=link, timeout=0.3).open()
        finally:
            holder.kill()
            holder.communicate()
        assert not (link_dir / "journal.db-locks").exists()  # locks live beside the real file

    def test_a_goal_marker_held_through_the_real_path_is_held_through_a_symlink(
        self, tmp_path: Path
    ) -> None:
        real_dir = tmp_path / "data"
        real_dir.mkdir()
        (tmp_path / "alias").mkdir()
        (tmp_path / "alias" / "journal.db").symlink_to(real_dir / "journal.db")
        holder = spawn_forked(
            write_script(tmp_path, "marker.py", MARKER_VIA), str(real_dir / "journal.db"), "one"
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "entered"
            second = run_forked(
                write_script(tmp_path, "marker2.py", MARKER_VIA),
                str(tmp_path / "alias" / "journal.db"),
                "two",
            )
            assert "MarkerHeldError" in second.stderr, second.stdout + second.stderr
            assert "entered" not in second.stdout
        finally:
            holder.kill()
            holder.communicate()

    def test_a_run_held_through_one_mount_is_held_through_a_bind_mount_of_its_folder(
        self, tmp_path: Path
    ) -> None:
        if os.geteuid() != 0 or shutil.which("unshare") is None:
            pytest.skip("needs root and unshare(1) for a private mount namespace")
        probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
        if probe.returncode != 0:
            pytest.skip("unshare -m is not permitted here")
        real_dir, mount = tmp_path / "volume", tmp_path / "container"
        real_dir.mkdir()
        mount.mkdir()
        holder = spawn_forked(
            write_script(tmp_path, "hold.py", HOLD_VIA), str(real_dir / "journal.db")
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            opener = write_script(
                tmp_path,
                "open.py",
                """
                import sys
                from letitloop import Journal
                from letitloop.errors import RunHeldError
                try:
                    Journal("g", run="r", path=sys.argv[1], timeout=0.3).open()
                    print("opened")
                except RunHeldError as exc:
                    print("held:", exc)
                """,
            )
            done = subprocess.run(
                [
                    "unshare",
                    "-m",
                    "sh",
                    "-c",
                    f"mount --bind {real_dir} {mount} && "
                    f"{sys.executable} {opener} {mount / 'journal.db'}",
                ],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.stdout.startswith("held:"), done.stdout + done.stderr
        finally:
            holder.kill()
            holder.communicate()


class TestWhichRunAnOpenerGets:
    def test_an_unnamed_opener_never_takes_a_failed_named_run(self, db: Path) -> None:
        with pytest.raises(RuntimeError), Journal("g", run="user-1", path=db) as named:
            named.step("a", value_of, 1)
            raise RuntimeError("user 1 failed")
        with Journal("g", path=db) as j:
            assert j.run_id != named.run_id and j.attempt == 1

    def test_lil_reset_of_a_goal_never_picks_a_named_run(self, db: Path) -> None:
        with pytest.raises(RuntimeError), Journal("g", run="user-1", path=db):
            raise RuntimeError("user 1 failed")
        with pytest.raises(RuntimeError), Journal("g", path=db) as unnamed:
            raise RuntimeError("the unnamed run failed")
        store = open_journal_file(db, write=True)
        try:
            assert reset_run(store, "g").id == unnamed.run_id
        finally:
            store.close()
        assert query(db, "SELECT name FROM runs") == [("user-1",)]

    @pytest.mark.skipif(not HAS_PROC_FD, reason="the handshake reads /proc/self/fd")
    def test_an_unnamed_opener_that_waited_for_a_holder_that_completed_starts_a_new_run(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "journal.db"
        script = write_script(
            tmp_path,
            "cron.py",
            """
            import sys
            from letitloop import Journal
            with Journal("cron", path=sys.argv[1]) as j:
                j.step("work", print, j.run_id, flush=True)
                sys.stdin.readline()  # completes once the test's opener waits for it
            """,
        )
        holder = subprocess.Popen(
            [sys.executable, "-u", str(script), str(db)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert holder.stdin is not None and holder.stdout is not None
        held = holder.stdout.readline().strip()
        store = open_journal_file(db)
        lock = run_lock_path(store, held)
        store.close()

        def complete_once_waited_for() -> None:
            # Handshake: the opener below has opened the run's lock file (it polls it).
            wait_until(lambda: descriptors_on(lock) >= 1, "the opener waits for the run")
            assert holder.stdin is not None
            holder.stdin.write("done\n")
            holder.stdin.flush()

        releaser = threading.Thread(target=complete_once_waited_for)
        releaser.start()
        with Journal("cron", path=db, timeout=30) as j:  # waits for the holder to finish
            assert j.run_id != held
            assert not j.was_completed
        releaser.join()
        holder.communicate()
        assert query(db, "SELECT id, status FROM runs WHERE id = ?", (held,)) == [
            (held, "completed")
        ]
        assert query(db, "SELECT count(*), min(status) FROM runs") == [(2, "completed")]

    def test_a_named_opener_that_waited_while_a_fork_took_the_name_gets_the_fork(
        self, db: Path
    ) -> None:
        got: list[str] = []
        with Journal("g", run="n", path=db) as holder:
            holder.step("a", value_of, 1)

            def waiter() -> None:
                with Journal("g", run="n", path=db, timeout=30) as k:
                    got.append(k.run_id)

            t = threading.Thread(target=waiter)
            t.start()
            t.join(0.3)
            assert t.is_alive()  # waiting for the holder
            # What 'lil fork' does once it has the source's lock: the source is
            # renamed and the fork takes the name (done here by the holder, so the
            # waiter is certainly waiting meanwhile).
            conn = sqlite3.connect(db)
            with conn:
                conn.execute("UPDATE runs SET name = 'n@old' WHERE id = ?", (holder.run_id,))
                conn.execute(
                    "INSERT INTO runs (id, goal, name, status, attempts, started_at, updated_at) "
                    "VALUES ('01FORK', 'g', 'n', 'running', 0, 'now', 'now')"
                )
            conn.close()
        t.join(30)
        assert got == ["01FORK"]


class TestMarkersFreeFunctionStillWorks:
    def test_atomic_marker_inside_durable_uses_the_run(self, db: Path) -> None:
        @durable(goal_id="g", path=db)
        def work(uid: int) -> bool:
            with atomic_marker("email") as go:
                return bool(go)

        assert work(1) is True
        assert work(2) is True  # another run, another marker
