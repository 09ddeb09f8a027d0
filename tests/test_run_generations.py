"""A named run's generations: a completed answer is handed back within its reuse window,
a fresh one is asked for explicitly, an unfinished run is always resumed, and two openers
of one name at once pay once.

Over every store a program reaches: a SQLite file and PostgreSQL from separate processes
(killed with SIGKILL where the test says so), the in-memory store from this process (a
dead holder there is ``abandon``). Sync and async openers. The calls are counted in a side
file the program's step functions write (tests/generations_program.py), never in the
journal's rows.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import subprocess
import threading
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pg_server
import pytest
from generations_program import paid
from generations_program import run as run_here
from helpers import first_line, forker, lil_forked, run_forked

from letitloop import Journal, durable, unchecked
from letitloop.errors import JournalFileError, MisuseError
from letitloop.stores.memory.storage import abandon

PROGRAM = Path(__file__).with_name("generations_program.py")
CHECKOUT = Path(__file__).resolve().parent.parent

#: A day, in seconds: "the same question tomorrow".
DAY = 86400.0


@dataclass
class Program:
    """The user's program over one store, run as its mode runs it; its side file's counts."""

    store: str
    kind: str
    location: str
    side: Path
    children: list[subprocess.Popen[str]] = field(default_factory=list)

    @property
    def processes(self) -> bool:
        return self.store != "memory"

    def args(self, name: str, kw: dict[str, Any]) -> list[str]:
        """The program's arguments (after its path) for ``name`` and the options ``kw``."""
        out = [self.location, name, str(self.side)]
        if self.kind == "async":
            out.append("--async")
        for key, value in kw.items():
            flag = "--" + key.replace("_", "-")
            if value is True:
                out.append(flag)
            elif value is not None and value is not False:
                out += [flag, str(value)]
        return out

    def run(self, name: str = "report", **kw: Any) -> dict[str, Any]:
        """Run the program to its end (a fresh process, or a fresh Journal here)."""
        if not self.processes:
            return run_here(
                self.location, name, str(self.side), is_async=self.kind == "async", **kw
            )
        done = run_forked(PROGRAM, *self.args(name, kw), cwd=CHECKOUT)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]

    def killed(self, name: str = "report", *, at: int, **kw: Any) -> None:
        """Run it until step ``at`` starts, where it dies (SIGKILL; here: ``abandon``)."""
        if self.processes:
            done = run_forked(PROGRAM, *self.args(name, {**kw, "kill_at": at}), cwd=CHECKOUT)
            assert done.returncode == -9, done.stderr
            return
        j = Journal("generations", run=name, path=self.location, **kw)
        j.open()
        for i in range(at):  # what the program's steps record, its functions' side lines
            j.step(f"s{i}", paid, unchecked(str(self.side)), i, unchecked(None), unchecked(0.0))
        with open(self.side, "a") as f:
            f.write(f"start {at}\n")
        abandon(j.store)
        with contextlib.suppress(JournalFileError):  # what it tries after its death is refused
            j.close()

    def at_once(self, name: str = "report", **kw: Any) -> list[dict[str, Any]]:
        """Two copies of the program started together (processes; here: threads)."""
        if not self.processes:
            got: list[dict[str, Any]] = []
            threads = [threading.Thread(target=lambda: got.append(self.run(name, **kw)))]
            threads.append(threading.Thread(target=lambda: got.append(self.run(name, **kw))))
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert len(got) == 2
            return got
        go = self.side.with_name("go")
        with forker() as children:  # each a process of its own, forked
            procs = [
                children.start(PROGRAM, *self.args(name, {**kw, "go": go}), cwd=CHECKOUT)
                for _ in range(2)
            ]
            for p in procs:  # each has started and waits for the go: none opens alone
                assert first_line(p) == "ready", p.wait()
            go.touch()
            done = [p.wait() for p in procs]
        assert [d.returncode for d in done] == [0, 0], done
        return [json.loads(d.stdout.splitlines()[-1]) for d in done]

    def starts(self) -> list[str]:
        """The step calls begun, in order (``start i`` lines)."""
        if not self.side.exists():
            return []
        return [ln for ln in self.side.read_text().splitlines() if ln.startswith("start")]

    def forget(self) -> None:
        self.side.unlink(missing_ok=True)


MODES = [(s, k) for s in ("sqlite", "memory", "postgres") for k in ("sync", "async")]


@pytest.fixture(params=MODES, ids=[f"{s}-{k}" for s, k in MODES])
def program(request: pytest.FixtureRequest, tmp_path: Path) -> Program:
    store, kind = request.param
    if store == "sqlite":
        location = str(tmp_path / "journal.db")
    elif store == "memory":
        location = f"memory://generations-{uuid.uuid4().hex}"
    else:
        location = pg_server.location()
    return Program(store, kind, location, tmp_path / "side.txt")


ANSWER = ["answer 0", "answer 1", "answer 2"]


class TestACompletedRunWithinItsReuseWindow:
    def test_it_is_handed_back_with_no_call_from_a_fresh_process(self, program: Program) -> None:
        first = program.run(reuse=3600)
        assert first == {"generation": "report", "was_completed": False, "answer": ANSWER}
        program.forget()
        again = program.run(reuse=3600, shift=1800)
        assert again == {"generation": "report", "was_completed": True, "answer": ANSWER}
        assert program.starts() == []

    def test_without_a_window_it_is_handed_back_a_day_later_as_before(
        self, program: Program
    ) -> None:
        program.run()
        program.forget()
        assert program.run(shift=DAY)["was_completed"] is True
        assert program.starts() == []


class TestACompletedRunOlderThanItsReuseWindow:
    def test_the_name_starts_its_next_generation_which_calls_every_step(
        self, program: Program
    ) -> None:
        program.run(reuse=3600)
        program.forget()
        later = program.run(reuse=3600, shift=DAY)
        assert later == {"generation": "report~2", "was_completed": False, "answer": ANSWER}
        assert program.starts() == ["start 0", "start 1", "start 2"]

    def test_the_new_generation_is_then_what_the_name_means(self, program: Program) -> None:
        program.run(reuse=3600)
        program.run(reuse=3600, shift=DAY)
        program.forget()
        assert program.run(shift=DAY)["generation"] == "report~2"
        assert program.run(reuse=3600, shift=DAY + 60)["generation"] == "report~2"
        assert program.starts() == []
        assert program.run(reuse=3600, shift=3 * DAY)["generation"] == "report~3"


class TestAFreshAnswer:
    def test_fresh_starts_a_new_generation_of_a_completed_run(self, program: Program) -> None:
        program.run()
        program.forget()
        got = program.run(fresh=True)
        assert got == {"generation": "report~2", "was_completed": False, "answer": ANSWER}
        assert len(program.starts()) == 3

    def test_fresh_resumes_a_run_killed_mid_way_without_calling_its_finished_steps(
        self, program: Program
    ) -> None:
        program.run()  # generation 1, completed
        program.killed(at=2, fresh=True)  # generation 2 dies in its third step
        program.forget()
        got = program.run(fresh=True)
        assert got == {"generation": "report~2", "was_completed": False, "answer": ANSWER}
        assert program.starts() == ["start 2"]

    def test_fresh_on_a_new_name_runs_its_first_generation(self, program: Program) -> None:
        assert program.run("new", fresh=True)["generation"] == "new"


class TestTwoOpenersOfOneNameAtOnce:
    def test_they_pay_once_and_both_get_the_answer(self, program: Program) -> None:
        got = program.at_once(pause=0.3, timeout=math.inf)
        assert [g["answer"] for g in got] == [ANSWER, ANSWER]
        assert sorted(g["was_completed"] for g in got) == [False, True]
        assert program.starts() == ["start 0", "start 1", "start 2"]

    def test_two_fresh_openers_of_a_completed_run_start_one_new_generation(
        self, program: Program
    ) -> None:
        program.run()
        program.forget()
        got = program.at_once(fresh=True, pause=0.3)
        assert [g["generation"] for g in got] == ["report~2", "report~2"]
        assert program.starts() == ["start 0", "start 1", "start 2"]


class TestAWaitWithNoEnd:
    def test_timeout_inf_opens_a_free_run(self, program: Program) -> None:
        assert program.run(timeout=math.inf)["answer"] == ANSWER


class TestLil:
    def test_show_of_the_name_shows_its_current_generation(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        program = Program("sqlite", "sync", str(db), tmp_path / "side.txt")
        program.run()
        program.run(fresh=True)
        shown = lil_forked("--db", str(db), "show", "report", cwd=CHECKOUT)
        assert shown.returncode == 0, shown.stderr
        assert "(name report~2)" in shown.stdout.splitlines()[0]
        first = lil_forked("--db", str(db), "show", "report", cwd=CHECKOUT)
        assert first.returncode == 0


class TestAFileFromBeforeGenerations:
    """tests/golden/named_runs_before_generations.db: written by letitloop 0.1.0."""

    @pytest.fixture
    def old(self, tmp_path: Path) -> Program:
        db = tmp_path / "old.db"
        shutil.copy(CHECKOUT / "tests/golden/named_runs_before_generations.db", db)
        return Program("sqlite", "sync", str(db), tmp_path / "side.txt")

    def test_its_completed_named_run_replays_with_no_call(self, old: Program) -> None:
        got = old.run("done")
        assert got == {"generation": "done", "was_completed": True, "answer": ANSWER}
        assert old.starts() == []

    def test_its_killed_named_run_resumes_at_the_step_in_flight(self, old: Program) -> None:
        got = old.run("kill", fresh=True)
        assert got == {"generation": "kill", "was_completed": False, "answer": ANSWER}
        assert old.starts() == ["start 2"]

    def test_a_fresh_answer_to_its_completed_run_is_the_names_second_generation(
        self, old: Program
    ) -> None:
        assert old.run("done", fresh=True)["generation"] == "done~2"
        assert len(old.starts()) == 3


class TestBadArguments:
    def test_reuse_without_a_run_name_is_refused(self, tmp_path: Path) -> None:
        with pytest.raises(MisuseError, match="without run="):
            Journal("g", reuse=60, path=tmp_path / "j.db")

    def test_a_negative_or_unknown_window_is_refused(self, tmp_path: Path) -> None:
        with pytest.raises(MisuseError, match="zero or more"):
            Journal("g", run="r", reuse=-1, path=tmp_path / "j.db")
        with pytest.raises(MisuseError, match="timedelta"):
            Journal("g", run="r", reuse="1h", path=tmp_path / "j.db")  # type: ignore[arg-type]
        with pytest.raises(MisuseError, match="both"):
            Journal("g", run="r", reuse=1, fresh=True, path=tmp_path / "j.db")

    def test_a_generation_name_with_a_window_is_refused(self, tmp_path: Path) -> None:
        with pytest.raises(MisuseError, match="one generation"):
            Journal("g", run="r~2", fresh=True, path=tmp_path / "j.db")

    def test_a_decorator_with_reuse_and_no_run_is_refused_at_decoration(self) -> None:
        with pytest.raises(MisuseError, match="without run="):
            durable(goal_id="g", reuse=timedelta(hours=1))


class TestTheDecorator:
    def test_a_named_call_within_reuse_replays_and_a_fresh_one_runs_again(
        self, tmp_path: Path
    ) -> None:
        calls: list[int] = []
        now = [1000.0]

        def make(**kw: Any) -> Any:
            @durable(goal_id="orders", run=lambda n: f"order-{n}", path=tmp_path / "j.db", **kw)
            def order(n: int) -> int:
                calls.append(n)
                return n * 2

            return order

        from letitloop.testing import using_clock

        with using_clock(lambda: now[0]):
            assert make(reuse=60)(3) == 6
            now[0] += 30
            assert make(reuse=60)(3) == 6
            assert calls == [3]
            now[0] += 100
            assert make(reuse=60)(3) == 6
            assert calls == [3, 3]
            assert make(fresh=True)(3) == 6
            assert calls == [3, 3, 3]


class TestNamesThatOnlyLookLikeGenerations:
    @pytest.mark.parametrize("store", ["sqlite", "memory"])
    def test_other_names_starting_like_the_run_are_not_its_generations(
        self, store: str, tmp_path: Path
    ) -> None:
        path = str(tmp_path / "j.db") if store == "sqlite" else f"memory://{uuid.uuid4().hex}"
        for name in ("r", "r1", "r~draft", "r~02", "r~1", "r-b", "r~2x"):
            with Journal("g", run=name, path=path) as j:
                j.step("a", str, 1)
        with Journal("g", run="r", path=path, fresh=True) as j:
            assert j.generation == "r~2"
        with Journal("g", run="r", path=path) as j:
            assert j.generation == "r~2" and j.was_completed
        with Journal("g", run="r~draft", path=path, fresh=True) as j:
            assert j.generation == "r~draft~2"
