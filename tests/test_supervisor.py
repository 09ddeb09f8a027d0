"""``lil watch`` and ``@supervise`` with real child processes, real signals, nothing mocked.

Each test runs ``lil watch`` (forked from an interpreter that imported letitloop,
helpers.lil_forked; the installed ``lil`` in a fresh process where said) or a script
using @supervise as a process of its own, whose children are the fresh interpreters
the watcher starts, and reads the outcome from outside: the exit status, the stderr
lines, the journal file through a separate sqlite3 connection, and side files
the children append to.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import LIL_ENTRY, lil_forked, start_forked

LIL = str(Path(sys.executable).with_name("lil"))
#: Keeps process tests fast: restarts wait 50 ms instead of a second.
FAST = ["--backoff", "0.05"]
#: A generous bound for anything that should take a fraction of a second on
#: an idle machine (the test machine is shared and loaded).
SLOW_MACHINE_S = 30.0


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    # Never touch a developer's .letitloop/ nor inherit a watcher's settings.
    for name in ("LETITLOOP_DB", "LETITLOOP_WATCH_ID", "LETITLOOP_SUPERVISED", "LETITLOOP_ATTEMPT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    yield


def write(folder: Path, name: str, source: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


def run(
    argv: list[str], cwd: Path, timeout: float = 60, fresh: bool = False
) -> subprocess.CompletedProcess[str]:
    """``argv`` run from ``cwd`` to its end. ``lil ...`` (``LIL`` first) runs forked from an
    interpreter that imported letitloop (helpers.lil_forked: a watcher of its own, whose
    children are the fresh interpreters it starts), unless ``fresh``: then the installed
    ``lil`` itself, as anything else, in a fresh process."""
    if argv[0] == LIL and not fresh:
        return lil_forked(*argv[1:], cwd=cwd)
    return subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=dict(os.environ)
    )


def events(db: Path) -> list[dict[str, object]]:
    """The supervisor_events rows, read through a connection of our own."""
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute("SELECT * FROM supervisor_events ORDER BY id")]
    finally:
        conn.close()


def kinds(db: Path) -> list[str]:
    return [str(e["event"]) for e in events(db)]


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def alive(pid: int) -> bool:
    """True if ``pid`` runs and is not a zombie (a container's init may never reap one)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return not sys.platform.startswith("linux")
    return stat[stat.rfind(")") + 2] not in "ZX"


def wait_for(path: Path, count: int = 1, timeout: float = SLOW_MACHINE_S) -> list[str]:
    """The lines of ``path`` once it has ``count`` of them."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = lines(path)
        if len(got) >= count:
            return got
        time.sleep(0.02)
    raise AssertionError(f"{path} never got {count} lines: {lines(path)}")


# A durable pipeline of three steps that SIGKILLs itself after step 1 on its
# first attempt and after step 2 on its second; each step's function appends
# its name to a side file, so the file shows what really ran.
PIPELINE = """
    import os, signal, sys
    from letitloop import durable, step{extra_import}

    SIDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "side.txt")
    ENV = os.path.join(os.path.dirname(os.path.abspath(__file__)), "env.txt")

    def work(name):
        with open(SIDE, "a") as f:
            f.write(name + "\\n")
        return name.upper()

    {decorator}
    @durable(goal_id="pipeline")
    def pipeline():
        attempt = int(os.environ["LETITLOOP_ATTEMPT"])
        with open(ENV, "a") as f:
            f.write(" ".join([os.environ["LETITLOOP_ATTEMPT"], os.environ["LETITLOOP_SUPERVISED"],
                              os.environ["LETITLOOP_WATCH_ID"], repr(sys.argv[1:])]) + "\\n")
        for n in (1, 2, 3):
            step(f"s{{n}}", work, f"s{{n}}")
            if attempt == n < 3:
                os.kill(os.getpid(), signal.SIGKILL)
        return "done"

    if __name__ == "__main__":
        pipeline()
        print("pipeline finished")
"""


def check_three_attempts(folder: Path, db: Path, args: list[str]) -> None:
    """What a run that was killed twice and then completed must have left behind."""
    assert lines(folder / "side.txt") == ["s1", "s2", "s3"]  # each step ran exactly once
    env = [line.split(" ", 3) for line in lines(folder / "env.txt")]
    assert [e[0] for e in env] == ["1", "2", "3"]
    assert {e[1] for e in env} == {"1"}
    assert {e[3] for e in env} == {repr(args)}
    rows = events(db)
    assert [r["event"] for r in rows] == [
        *["start", "exit", "restart"] * 2,
        *["start", "exit", "stop"],
    ]
    assert [r["attempt"] for r in rows if r["event"] == "start"] == [1, 2, 3]
    assert [r["signal"] for r in rows if r["event"] == "exit"] == ["SIGKILL", "SIGKILL", None]
    assert [r["exit_code"] for r in rows if r["event"] == "exit"] == [137, 137, 0]
    watch_ids = {r["watch_id"] for r in rows}
    assert watch_ids == {e[2] for e in env}
    assert len(watch_ids) == 1
    # Journal tags each attempt of the run with the watcher session that started it.
    conn = sqlite3.connect(db)
    try:
        tagged = conn.execute(
            "SELECT attempt, watch_id, watch_attempt FROM attempts ORDER BY attempt"
        ).fetchall()
        status = conn.execute("SELECT status FROM runs").fetchall()
    finally:
        conn.close()
    # ... and with the supervisor's own attempt number (LETITLOOP_ATTEMPT) that started it.
    assert tagged == [(1, *watch_ids, 1), (2, *watch_ids, 2), (3, *watch_ids, 3)]
    assert status == [("completed",)]


class TestAScriptThatKillsItselfTwiceUnderLilWatch:
    def test_it_completes_on_the_third_attempt_with_each_step_run_once(
        self, tmp_path: Path
    ) -> None:
        write(tmp_path, "pipe.py", PIPELINE.format(extra_import="", decorator=""))
        db = tmp_path / "j.db"
        # The installed lil, in a fresh process (the other tests fork it: helpers.lil_forked).
        result = run(
            [LIL, "watch", "--db", str(db), *FAST, "pipe.py", "a", "--date", "x"],
            tmp_path,
            fresh=True,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.count("pipeline finished") == 1
        check_three_attempts(tmp_path, db, ["a", "--date", "x"])

    def test_it_prints_one_line_per_start_and_per_death(self, tmp_path: Path) -> None:
        write(tmp_path, "pipe.py", PIPELINE.format(extra_import="", decorator=""))
        result = run([LIL, "watch", *FAST, "pipe.py"], tmp_path)
        said = [line for line in result.stderr.splitlines() if line.startswith("lil: ")]
        assert len(said) == 6, result.stderr
        assert said[1].startswith("lil: pipe.py killed by SIGKILL after ")
        assert said[1].endswith("; restart 1/10 in 0.05 s")
        assert said[3].endswith("; restart 2/10 in 0.10 s")
        assert said[5].startswith("lil: pipe.py exited with code 0 after ")
        # Without --db the records go to the default journal, which the child used too.
        assert kinds(tmp_path / ".letitloop" / "journal.db").count("start") == 3

    def test_a_module_run_with_dash_m_gets_its_arguments_after_the_separator(
        self, tmp_path: Path
    ) -> None:
        write(tmp_path, "pkg/__init__.py", "")
        write(tmp_path, "pkg/pipe.py", PIPELINE.format(extra_import="", decorator=""))
        db = tmp_path / "j.db"
        result = run(
            [LIL, "watch", "--db", str(db), *FAST, "-m", "pkg.pipe", "--", "--date", "2026"],
            tmp_path,
        )
        assert result.returncode == 0, result.stderr
        check_three_attempts(tmp_path / "pkg", db, ["--date", "2026"])


class TestAScriptThatKillsItselfTwiceUnderSupervise:
    SOURCE = PIPELINE.format(
        extra_import=", supervise",
        decorator="@supervise(backoff=0.05, db=os.path.join(os.path.dirname(SIDE), 'j.db'))",
    )

    def test_python_script_py_completes_on_the_third_attempt(self, tmp_path: Path) -> None:
        write(tmp_path, "pipe.py", self.SOURCE)
        result = run([sys.executable, "pipe.py", "x", "y"], tmp_path)
        assert result.returncode == 0, result.stderr
        assert result.stdout.count("pipeline finished") == 1
        assert "Traceback" not in result.stderr
        check_three_attempts(tmp_path, tmp_path / "j.db", ["x", "y"])

    def test_python_dash_m_completes_on_the_third_attempt(self, tmp_path: Path) -> None:
        write(tmp_path, "pkg/__init__.py", "")
        write(tmp_path, "pkg/pipe.py", self.SOURCE)
        result = run([sys.executable, "-u", "-m", "pkg.pipe", "--date", "2026"], tmp_path)
        assert result.returncode == 0, result.stderr
        assert "lil: pkg.pipe killed by SIGKILL" in result.stderr
        check_three_attempts(tmp_path / "pkg", tmp_path / "pkg" / "j.db", ["--date", "2026"])

    def test_the_watcher_exits_with_the_status_of_the_last_child(self, tmp_path: Path) -> None:
        write(
            tmp_path,
            "fail.py",
            """
            import sys
            from letitloop import supervise

            @supervise(max_restarts=1, backoff=0.01)
            def main():
                sys.exit(7)

            if __name__ == "__main__":
                main()
            """,
        )
        result = run([sys.executable, "fail.py"], tmp_path)
        assert result.returncode == 7
        assert "giving up: restart budget used up (1 restarts); exit 7" in result.stderr
        assert kinds(tmp_path / ".letitloop" / "journal.db").count("start") == 2


class TestSuperviseWhereNothingCanBeRerun:
    CODE = "from letitloop import supervise\n@supervise\ndef main():\n    print('ran')\n\nmain()\n"

    def test_a_dash_c_command_is_refused_with_the_way_out(self, tmp_path: Path) -> None:
        result = run([sys.executable, "-c", self.CODE], tmp_path)
        assert result.returncode == 1
        assert "SupervisorError: @supervise cannot re-run a 'python -c' command" in result.stderr
        assert "ran" not in result.stdout

    def test_a_program_read_from_stdin_is_refused(self, tmp_path: Path) -> None:
        result = subprocess.run(
            [sys.executable, "-"], input=self.CODE, capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 1
        assert "@supervise cannot re-run a program read from stdin" in result.stderr

    def test_an_interactive_session_is_refused(self, tmp_path: Path) -> None:
        result = subprocess.run(
            [sys.executable, "-i", "-q"],
            input=self.CODE,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "@supervise cannot restart an interactive session" in result.stderr
        assert "ran" not in result.stdout


class TestTheRestartBudgetAndTheBreaker:
    def test_max_restarts_exhausted_exits_with_the_last_exit_code(self, tmp_path: Path) -> None:
        write(tmp_path, "fail.py", "import sys\nsys.exit(3)\n")
        result = run([LIL, "watch", "--max-restarts", "2", *FAST, "fail.py"], tmp_path)
        assert result.returncode == 3
        assert "giving up: restart budget used up (2 restarts); exit 3" in result.stderr
        assert kinds(tmp_path / ".letitloop" / "journal.db")[-1] == "give_up"
        assert kinds(tmp_path / ".letitloop" / "journal.db").count("start") == 3

    def test_max_restarts_exhausted_by_signal_deaths_exits_128_plus_the_signal(
        self, tmp_path: Path
    ) -> None:
        write(tmp_path, "kill.py", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
        result = run([LIL, "watch", "--max-restarts", "1", *FAST, "kill.py"], tmp_path)
        assert result.returncode == 137
        assert result.stderr.count("killed by SIGKILL") == 2

    def test_the_breaker_stops_a_crash_loop_before_the_budget(self, tmp_path: Path) -> None:
        write(tmp_path, "fail.py", "import sys\nsys.exit(1)\n")
        argv = [LIL, "watch", "--burst", "2", "--window", "60", "--max-restarts", "unlimited"]
        result = run([*argv, "--backoff", "0.01", "fail.py"], tmp_path)
        assert result.returncode == 1
        assert "giving up: 3 deaths within 60.0 s (more than the burst limit of 2)" in (
            result.stderr
        )
        rows = events(tmp_path / ".letitloop" / "journal.db")
        assert [r["event"] for r in rows].count("start") == 3
        assert rows[-1]["event"] == "give_up"
        assert str(rows[-1]["message"]).startswith("lil: fail.py exited with code 1 after ")

    def test_the_backoff_delays_are_recorded_as_the_policy_computed_them(
        self, tmp_path: Path
    ) -> None:
        write(tmp_path, "fail.py", "import sys\nsys.exit(1)\n")
        argv = [LIL, "watch", "--backoff", "0.1", "--backoff-factor", "3", "--backoff-max", "0.5"]
        result = run([*argv, "--max-restarts", "3", "fail.py"], tmp_path)
        assert result.returncode == 1
        rows = events(tmp_path / ".letitloop" / "journal.db")
        delays = [float(str(r["delay_s"])) for r in rows if r["event"] == "restart"]
        assert delays == pytest.approx([0.1, 0.3, 0.5])
        # Each start really waited at least its delay after the death before it.
        from datetime import datetime

        def at(row: dict[str, object]) -> float:
            return datetime.fromisoformat(str(row["at"])).timestamp()

        exits = [r for r in rows if r["event"] == "exit"]
        starts = [r for r in rows if r["event"] == "start"]
        for death, after, delay in zip(exits[:-1], starts[1:], delays, strict=True):
            assert at(after) - at(death) >= delay - 0.01


class TestAChildThatStayedUpLongEnough:
    def test_its_death_starts_the_budget_and_the_backoff_afresh(self, tmp_path: Path) -> None:
        write(
            tmp_path,
            "flaky.py",
            """
            import os, sys, time
            attempt = int(os.environ["LETITLOOP_ATTEMPT"])
            if attempt == 2:
                time.sleep(0.5)  # a healthy stretch, longer than --stable-after
            sys.exit(0 if attempt == 3 else 1)
            """,
        )
        argv = [LIL, "watch", "--max-restarts", "1", "--stable-after", "0.4", *FAST, "flaky.py"]
        result = run(argv, tmp_path)
        assert result.returncode == 0, result.stderr
        assert "exited with code 1 after" in result.stderr
        assert "; restart 1/1 in 0.05 s; stayed up long enough, backoff reset" in result.stderr
        delays = [
            r["delay_s"]
            for r in events(tmp_path / ".letitloop" / "journal.db")
            if r["event"] == "restart"
        ]
        assert delays == [0.05, 0.05]


class TestExitsThatDoNotRestart:
    def test_a_code_listed_in_no_restart_on_ends_the_loop_with_that_code(
        self, tmp_path: Path
    ) -> None:
        write(tmp_path, "config.py", "import sys\nsys.exit(2)\n")
        result = run([LIL, "watch", "--no-restart-on", "2", *FAST, "config.py"], tmp_path)
        assert result.returncode == 2
        assert "not restarting: exit status 2 is in no-restart-on; exit 2" in result.stderr
        assert kinds(tmp_path / ".letitloop" / "journal.db") == ["start", "exit", "stop"]

    def test_a_signal_name_in_no_restart_on_matches_that_death(self, tmp_path: Path) -> None:
        write(tmp_path, "kill.py", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
        argv = [LIL, "watch", "--no-restart-on", "3", "--no-restart-on", "SIGKILL", *FAST]
        result = run([*argv, "kill.py"], tmp_path)
        assert result.returncode == 137
        assert kinds(tmp_path / ".letitloop" / "journal.db").count("start") == 1

    def test_on_crash_does_not_restart_a_plain_failure(self, tmp_path: Path) -> None:
        write(tmp_path, "fail.py", "import sys\nsys.exit(4)\n")
        result = run([LIL, "watch", "--restart", "on-crash", *FAST, "fail.py"], tmp_path)
        assert result.returncode == 4
        assert kinds(tmp_path / ".letitloop" / "journal.db").count("start") == 1

    def test_always_restarts_a_clean_exit_until_the_budget(self, tmp_path: Path) -> None:
        write(tmp_path, "ok.py", "print('hello')\n")
        argv = [LIL, "watch", "--restart", "always", "--max-restarts", "2", *FAST, "ok.py"]
        result = run(argv, tmp_path)
        assert result.returncode == 0
        assert result.stdout.count("hello") == 3


class TestBadInvocations:
    @pytest.mark.parametrize(
        ("argv", "message"),
        [
            (["watch", "missing.py"], "found no file 'missing.py'"),
            (["watch", "-m", "no_such_module_xyz"], "found no module 'no_such_module_xyz'"),
            (["watch"], "expected a SCRIPT or -m MODULE"),
            (["watch", "--max-restarts", "lots", "x.py"], "'unlimited', got 'lots'"),
            (["watch", "--no-restart-on", "SIGNOPE", "x.py"], "signal name such as SIGKILL"),
        ],
    )
    def test_each_is_one_clear_line_without_a_traceback(
        self, tmp_path: Path, argv: list[str], message: str
    ) -> None:
        result = run([LIL, *argv], tmp_path)
        assert result.returncode in (1, 2)
        assert message in result.stderr
        assert "Traceback" not in result.stderr

    def test_help_shows_an_example_and_every_option_is_documented(self) -> None:
        result = run([LIL, "watch", "--help"], Path.cwd())
        assert "lil watch agent_pipeline.py" in result.stdout
        docs = (Path(__file__).parent.parent / "docs" / "supervision.md").read_text()
        from letitloop.cli import watch

        options = [o for p in watch.params for o in p.opts if o.startswith("-")]
        assert len(options) >= 13
        for option in options:
            assert f"`{option}" in docs, option
            assert option in result.stdout


# A child that writes its pid (and that of a grandchild deaf to SIGINT and SIGTERM,
# if asked) then sleeps; Ctrl+C makes it exit 1 quietly.
SLEEPER = """
    import os, signal, subprocess, sys, time
    here = os.path.dirname(os.path.abspath(__file__))
    if "--ignore-term" in sys.argv:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    pids = [str(os.getpid())]
    if "--grandchild" in sys.argv:
        code = "import signal as s, time; s.signal(s.SIGTERM, s.SIG_IGN); "
        code += "s.signal(s.SIGINT, s.SIG_IGN); time.sleep(60)"
        pids.append(str(subprocess.Popen([sys.executable, "-c", code]).pid))
    try:  # Ctrl+C may come as soon as the pids are written
        with open(os.path.join(here, "pids.txt"), "a") as f:
            f.write(" ".join(pids) + "\\n")
        time.sleep(60)
    except KeyboardInterrupt:
        sys.exit(1)
"""


class ForkedWatcher:
    """``lil watch`` forked from an interpreter that imported letitloop (helpers.start_forked),
    with what the tests use of a ``Popen``: its pid, signals, and its end."""

    def __init__(self, folder: Path, *args: str) -> None:
        self.child = start_forked(LIL_ENTRY, "watch", *args, cwd=folder)
        self.pid = self.child.pid
        self.returncode: int | None = None
        self.ended: subprocess.CompletedProcess[str] | None = None

    def send_signal(self, sig: int) -> None:
        os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def poll(self) -> int | None:
        return None if self.child.running() else self.wait()

    def wait(self, timeout: float | None = None) -> int:
        if self.ended is None:
            self.ended = self.child.wait()  # (pytest-timeout bounds a watcher that hangs)
            self.returncode = self.ended.returncode
        return self.ended.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        self.wait()
        assert self.ended is not None
        return self.ended.stdout, self.ended.stderr


def spawn_watch(folder: Path, *args: str) -> Any:
    """``lil watch ARGS`` started from ``folder`` (:class:`ForkedWatcher`)."""
    return ForkedWatcher(folder, *args)


def spawn_fresh_watch(folder: Path, *args: str) -> subprocess.Popen[str]:
    """The installed ``lil watch ARGS`` started from ``folder`` in a fresh process, its
    stdout and stderr pipes read as it writes."""
    return subprocess.Popen(
        [LIL, "watch", *args],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )


class TestStoppingTheWatcher:
    def test_ctrl_c_stops_the_child_and_exits_130_without_a_restart_or_traceback(
        self, tmp_path: Path
    ) -> None:
        write(tmp_path, "sleeper.py", SLEEPER)
        watcher = spawn_watch(tmp_path, *FAST, "sleeper.py")
        (child,) = map(int, wait_for(tmp_path / "pids.txt")[0].split())
        watcher.send_signal(signal.SIGINT)
        _, err = watcher.communicate(timeout=SLOW_MACHINE_S)
        assert watcher.returncode == 130
        assert "Traceback" not in err
        assert "got SIGINT; stopping sleeper.py" in err
        assert not alive(child)
        assert len(lines(tmp_path / "pids.txt")) == 1  # no restart
        assert kinds(tmp_path / ".letitloop" / "journal.db") == ["start", "exit", "stop"]

    def test_sigterm_stops_the_child_and_exits_143(self, tmp_path: Path) -> None:
        write(tmp_path, "sleeper.py", SLEEPER)
        watcher = spawn_watch(tmp_path, *FAST, "sleeper.py")
        (child,) = map(int, wait_for(tmp_path / "pids.txt")[0].split())
        watcher.send_signal(signal.SIGTERM)
        _, err = watcher.communicate(timeout=SLOW_MACHINE_S)
        assert watcher.returncode == 143
        assert "sleeper.py killed by SIGTERM" in err
        assert not alive(child)
        rows = events(tmp_path / ".letitloop" / "journal.db")
        assert (rows[-1]["event"], rows[-1]["signal"]) == ("stop", "SIGTERM")

    def test_a_child_that_ignores_sigterm_is_sigkilled_after_the_grace(
        self, tmp_path: Path
    ) -> None:
        write(tmp_path, "sleeper.py", SLEEPER)
        watcher = spawn_watch(tmp_path, "--grace", "0.5", *FAST, "sleeper.py", "--ignore-term")
        (child,) = map(int, wait_for(tmp_path / "pids.txt")[0].split())
        t0 = time.monotonic()
        watcher.send_signal(signal.SIGTERM)
        _, err = watcher.communicate(timeout=SLOW_MACHINE_S)
        assert time.monotonic() - t0 >= 0.5
        assert watcher.returncode == 143
        assert "sleeper.py killed by SIGKILL" in err
        assert "sent SIGKILL after the 0.50 s grace" in err
        assert not alive(child)

    def test_a_second_ctrl_c_during_the_grace_kills_at_once(self, tmp_path: Path) -> None:
        write(
            tmp_path,
            "deaf.py",
            """
            import os, signal, time
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            with open("pids.txt", "a") as f:
                f.write(f"{os.getpid()}\\n")
            time.sleep(60)
            """,
        )
        watcher = spawn_fresh_watch(tmp_path, "--grace", "50", *FAST, "deaf.py")
        (child,) = map(int, wait_for(tmp_path / "pids.txt"))
        t0 = time.monotonic()
        watcher.send_signal(signal.SIGINT)
        assert watcher.stderr is not None
        said = ""
        while "got SIGINT; stopping" not in said:  # the watcher took the first press
            line = watcher.stderr.readline()
            assert line, said
            said += line
        watcher.send_signal(signal.SIGINT)
        _, err = watcher.communicate(timeout=SLOW_MACHINE_S)
        err = said + err
        assert watcher.returncode == 130
        assert time.monotonic() - t0 < 50  # not the whole grace
        assert "deaf.py killed by SIGKILL" in err
        assert not alive(child)

    def test_no_grandchild_survives_a_stopped_watcher(self, tmp_path: Path) -> None:
        write(tmp_path, "sleeper.py", SLEEPER)
        watcher = spawn_watch(tmp_path, "--grace", "0.5", *FAST, "sleeper.py", "--grandchild")
        child, grandchild = map(int, wait_for(tmp_path / "pids.txt")[0].split())
        assert alive(grandchild)
        watcher.send_signal(signal.SIGINT)
        watcher.communicate(timeout=SLOW_MACHINE_S)
        assert watcher.returncode == 130
        assert not alive(child)
        assert not alive(grandchild)

    def test_no_grandchild_of_a_crashed_child_survives_into_the_next_attempt(
        self, tmp_path: Path
    ) -> None:
        write(
            tmp_path,
            "crash.py",
            """
            import os, signal, subprocess, sys
            here = os.path.dirname(os.path.abspath(__file__))
            if os.environ["LETITLOOP_ATTEMPT"] == "1":
                code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                code += "time.sleep(60)"
                pid = subprocess.Popen([sys.executable, "-c", code]).pid
                with open(os.path.join(here, "pids.txt"), "a") as f:
                    f.write(f"{pid}\\n")
                os.kill(os.getpid(), signal.SIGKILL)
            """,
        )
        result = run([LIL, "watch", "--grace", "0.3", *FAST, "crash.py"], tmp_path)
        assert result.returncode == 0, result.stderr
        (grandchild,) = map(int, lines(tmp_path / "pids.txt"))
        assert not alive(grandchild)
        assert "stopping what crash.py left running in its process group" in result.stderr

    def test_a_signal_during_the_backoff_ends_the_loop_without_another_start(
        self, tmp_path: Path
    ) -> None:
        write(
            tmp_path,
            "crash.py",
            """
            import os
            with open("pids.txt", "a") as f:
                f.write(f"{os.getpid()}\\n")
            raise SystemExit(1)
            """,
        )
        watcher = spawn_watch(tmp_path, "--backoff", "30", "crash.py")
        wait_for(tmp_path / "pids.txt")
        deadline = time.monotonic() + SLOW_MACHINE_S
        db = tmp_path / ".letitloop" / "journal.db"
        while "restart" not in (kinds(db) if db.exists() else []):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        watcher.send_signal(signal.SIGINT)
        _, err = watcher.communicate(timeout=SLOW_MACHINE_S)
        assert watcher.returncode == 130
        assert "got SIGINT while waiting to restart" in err
        assert len(lines(tmp_path / "pids.txt")) == 1


class TestInATerminal:
    @pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses a Linux pty")
    def test_the_child_reads_the_terminal_and_ctrl_c_reaches_it_through_the_watcher(
        self, tmp_path: Path
    ) -> None:
        import pty
        import select

        write(
            tmp_path,
            "reader.py",
            """
            import sys, time
            try:
                print("child got:", sys.stdin.readline().strip(), flush=True)
                time.sleep(60)
            except KeyboardInterrupt:
                print("child interrupted", flush=True)
                sys.exit(1)
            """,
        )
        pid, fd = pty.fork()
        if pid == 0:  # the watcher, as a shell would start it in a terminal
            try:
                os.chdir(tmp_path)
                os.execv(LIL, [LIL, "watch", *FAST, "reader.py"])
            finally:
                os._exit(127)
        seen = b""

        def read_until(text: bytes) -> None:
            nonlocal seen
            deadline = time.monotonic() + SLOW_MACHINE_S
            while text not in seen and time.monotonic() < deadline:
                if select.select([fd], [], [], 0.1)[0]:
                    try:
                        seen += os.read(fd, 4096)
                    except OSError:
                        return
            assert text in seen, seen

        try:
            read_until(b"started (attempt 1")
            os.write(fd, b"hello\n")
            read_until(b"child got: hello")
            os.write(fd, b"\x03")  # Ctrl+C: the terminal sends SIGINT to the watcher
            read_until(b"not restarting; exit 130")
        finally:
            _, status = os.waitpid(pid, 0)
            os.close(fd)
        assert os.waitstatus_to_exitcode(status) == 130
        assert b"child interrupted" in seen
        assert b"Traceback" not in seen
        assert seen.count(b"started (attempt") == 1


# -- Linux: the child dies with its watcher; what leaves the group is adopted ------------

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"),
    reason="parent-death signal and subreaper are Linux features",
)


def stat_fields(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name: state, ppid, pgid, session, …"""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rfind(")") + 2 :].split()


def gone(pid: int, timeout: float = SLOW_MACHINE_S) -> bool:
    """Poll until ``pid`` is dead (a zombie counts); False if it still runs at ``timeout``."""
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


Started = Callable[[subprocess.Popen[Any]], subprocess.Popen[Any]]


@contextlib.contextmanager
def leaves_nothing(folder: Path, *pid_files: str) -> Iterator[Started]:
    """SIGKILL, when the test ends, the watchers it started and every process in ``pid_files``.

    A test that fails half-way must not leave a process behind. Yields a
    function that registers a started watcher (and returns it). Only listed
    processes whose working folder is the test's own are killed, in case a pid
    was reused.
    """
    watchers: list[subprocess.Popen[Any]] = []

    def started(watcher: subprocess.Popen[Any]) -> subprocess.Popen[Any]:
        watchers.append(watcher)
        return watcher

    try:
        yield started
    finally:
        for watcher in watchers:
            if watcher.poll() is None:
                watcher.kill()
                watcher.communicate()
        for name in pid_files:
            for pid in (int(p) for line in lines(folder / name) for p in line.split()):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/cwd") == str(folder):
                        os.kill(pid, signal.SIGKILL)


# A two-step journal whose second step sleeps on its first call: a first watcher
# is SIGKILLed while its child sleeps in there. timeout=0: a later open that found
# the run still held by a live process would fail at once instead of waiting.
LONG_STEP = """
    import os, time
    from letitloop import Journal

    here = os.path.dirname(os.path.abspath(__file__))

    def log(name):
        with open(os.path.join(here, "side.txt"), "a") as f:
            f.write(name + "\\n")

    def slow():
        first = not os.path.exists(os.path.join(here, "pids.txt"))
        log("slow")
        with open(os.path.join(here, "pids.txt"), "a") as f:
            f.write(f"{os.getpid()}\\n")
        if first:
            time.sleep(90)
        return "slow done"

    with Journal("long", timeout=0) as j:
        j.step("quick", log, "quick")
        j.step("slow", slow)
    print("finished")
"""


@linux_only
class TestAWatcherThatIsKilled:
    def test_its_child_dies_with_it_and_a_new_watch_resumes_the_run_at_once(
        self, tmp_path: Path
    ) -> None:
        write(tmp_path, "long.py", LONG_STEP)
        db = tmp_path / "j.db"
        with leaves_nothing(tmp_path, "pids.txt") as started:
            watcher = started(spawn_watch(tmp_path, "--db", str(db), "long.py"))
            (child,) = map(int, wait_for(tmp_path / "pids.txt"))  # inside the slow step
            assert stat_fields(child)[1] == str(watcher.pid)
            watcher.kill()
            assert watcher.wait(timeout=SLOW_MACHINE_S) == -signal.SIGKILL
            # Polled, not slept: the step would sleep 90 s more without the death signal.
            assert gone(child)
            watcher.communicate(timeout=SLOW_MACHINE_S)  # the child held its pipes too
            again = [LIL, "watch", "--db", str(db), "--max-restarts", "0", "long.py"]
            result = run(again, tmp_path)
        assert result.returncode == 0, result.stderr
        assert "finished" in result.stdout
        # The quick step was replayed; only the step the child died in ran again.
        assert lines(tmp_path / "side.txt") == ["quick", "slow", "slow"]
        conn = sqlite3.connect(db)
        try:
            runs = conn.execute("SELECT status, attempts FROM runs").fetchall()
        finally:
            conn.close()
        assert runs == [("completed", 2)]

    def test_the_child_of_supervise_dies_with_the_program_that_watched_it(
        self, tmp_path: Path
    ) -> None:
        write(
            tmp_path,
            "sup.py",
            """
            import os, time
            from letitloop import supervise

            @supervise(backoff=0.05)
            def main():
                with open("pids.txt", "a") as f:
                    f.write(f"{os.getpid()}\\n")
                time.sleep(90)

            if __name__ == "__main__":
                main()
            """,
        )
        with leaves_nothing(tmp_path, "pids.txt") as started:
            argv = [sys.executable, "sup.py"]
            watcher = started(subprocess.Popen(argv, cwd=tmp_path, stderr=subprocess.DEVNULL))
            (child,) = map(int, wait_for(tmp_path / "pids.txt"))
            assert stat_fields(child)[1] == str(watcher.pid)
            watcher.kill()
            assert watcher.wait(timeout=SLOW_MACHINE_S) == -signal.SIGKILL
            assert gone(child)

    def test_a_child_whose_watcher_died_before_it_could_arm_the_signal_never_runs(
        self, tmp_path: Path
    ) -> None:
        from letitloop.supervision._exec_shim import shim_argv

        # The shim is told its watcher is our parent; its real parent is us, as
        # after a watcher that died between fork and prctl and left it adopted.
        command = [sys.executable, "-c", "open('ran.txt', 'w').close()"]
        result = subprocess.run(shim_argv(os.getppid(), command), cwd=tmp_path, timeout=60)
        assert result.returncode == -signal.SIGKILL
        assert not (tmp_path / "ran.txt").exists()

    def test_the_fast_and_the_portable_prctl_arm_the_same_signal(self, tmp_path: Path) -> None:
        code = textwrap.dedent(
            """
            import ctypes, errno, signal
            from letitloop.supervision._exec_shim import (
                PR_GET_PDEATHSIG, PR_SET_PDEATHSIG, _ctypes_prctl, _raw_prctl,
            )
            raw, portable = _raw_prctl(), _ctypes_prctl()
            got = ctypes.c_int()
            pairs = ((raw, portable, signal.SIGUSR1), (portable, raw, signal.SIGUSR2))
            for arm, read, sig in pairs:
                assert arm(PR_SET_PDEATHSIG, sig) == (0, 0)
                assert read(PR_GET_PDEATHSIG, ctypes.addressof(got)) == (0, 0)
                print(got.value)
            # Both report a refusal the same way: -1 and the errno.
            assert raw(PR_SET_PDEATHSIG, 1000) == portable(PR_SET_PDEATHSIG, 1000) == (
                -1, errno.EINVAL,
            )
            """
        )
        result = run([sys.executable, "-c", code], tmp_path)
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == [str(signal.SIGUSR1.value), str(signal.SIGUSR2.value)]


# A child whose grandchild double-forks: the grandchild starts its own session
# (leaving the child's process group) and forks the daemon, then exits, so the
# daemon is orphaned. The daemon ignores SIGTERM and SIGINT, writes its pid and
# sleeps (or, with --quick-daemon, waits to be orphaned, writes its pid and its
# new parent's, and exits). With --exit the child then exits 0; else it sleeps.
DAEMONIZER = """
    import os, signal, sys, time

    here = os.path.dirname(os.path.abspath(__file__))

    def note(name, *more):
        with open(os.path.join(here, name), "a") as f:
            f.write(" ".join(map(str, [os.getpid(), *more])) + "\\n")

    if os.fork() == 0:
        os.setsid()
        parent = os.getpid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            if "--quick-daemon" in sys.argv:
                while os.getppid() == parent:
                    time.sleep(0.01)
                note("daemon.txt", os.getppid())
                os._exit(0)
            note("daemon.txt")
            time.sleep(90)
        os._exit(0)
    os.wait()
    note("child.txt")
    if "--exit" in sys.argv:
        sys.exit(0)
    time.sleep(90)
"""


def adopted_by(pid: int, parent: int) -> bool:
    """Poll until ``pid``'s parent is ``parent`` (its own parent exits just after forking it)."""
    deadline = time.monotonic() + SLOW_MACHINE_S
    while stat_fields(pid)[1] != str(parent):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@linux_only
class TestADescendantThatLeftTheProcessGroup:
    def test_a_double_forked_daemon_deaf_to_sigterm_is_gone_once_lil_watch_stops(
        self, tmp_path: Path
    ) -> None:
        write(tmp_path, "daemonizer.py", DAEMONIZER)
        with leaves_nothing(tmp_path, "daemon.txt", "child.txt") as started:
            watcher = started(spawn_watch(tmp_path, "--grace", "0.5", *FAST, "daemonizer.py"))
            (child,) = map(int, wait_for(tmp_path / "child.txt"))
            (daemon,) = map(int, wait_for(tmp_path / "daemon.txt"))
            # It really escaped: another session and process group, adopted by the watcher.
            assert stat_fields(daemon)[2:4] != stat_fields(child)[2:4]
            assert adopted_by(daemon, watcher.pid)
            watcher.send_signal(signal.SIGTERM)
            _, err = watcher.communicate(timeout=SLOW_MACHINE_S)
            assert watcher.returncode == 143, err
            assert not alive(daemon)
            assert not alive(child)

    def test_a_daemon_left_by_a_child_that_finished_is_stopped_before_lil_watch_exits(
        self, tmp_path: Path
    ) -> None:
        write(tmp_path, "daemonizer.py", DAEMONIZER)
        with leaves_nothing(tmp_path, "daemon.txt"):
            result = run(
                [LIL, "watch", "--grace", "0.3", *FAST, "daemonizer.py", "--exit"], tmp_path
            )
            (daemon,) = map(int, lines(tmp_path / "daemon.txt"))
            assert result.returncode == 0, result.stderr
            assert (
                f"stopping what daemonizer.py left running outside its process group "
                f"(pid {daemon})" in result.stderr
            )
            assert not alive(daemon)

    def test_an_adopted_orphan_that_exits_is_reaped_while_the_child_runs(
        self, tmp_path: Path
    ) -> None:
        write(tmp_path, "daemonizer.py", DAEMONIZER)
        with leaves_nothing(tmp_path, "child.txt") as started:
            watcher = started(spawn_watch(tmp_path, *FAST, "daemonizer.py", "--quick-daemon"))
            wait_for(tmp_path / "child.txt")
            daemon, parent = map(int, wait_for(tmp_path / "daemon.txt")[0].split())
            assert parent == watcher.pid  # adopted: reaping it is the watcher's job
            # A zombie nobody reaps keeps its /proc entry; a reaped one has none.
            deadline = time.monotonic() + SLOW_MACHINE_S
            while Path(f"/proc/{daemon}").exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            assert not Path(f"/proc/{daemon}").exists()
            assert watcher.poll() is None  # reaped by the watcher, not by its exit
            watcher.send_signal(signal.SIGTERM)
            watcher.communicate(timeout=SLOW_MACHINE_S)
            assert watcher.returncode == 143

    def test_supervise_leaves_the_orphans_of_its_child_to_the_system(self, tmp_path: Path) -> None:
        # The documented choice: @supervise runs in the user's own program, which
        # must not start adopting (and reaping) every orphan below it.
        write(tmp_path, "daemonizer.py", DAEMONIZER)
        write(
            tmp_path,
            "sup.py",
            """
            import runpy
            from letitloop import supervise

            @supervise(backoff=0.05)
            def main():
                runpy.run_path("daemonizer.py", run_name="__main__")

            if __name__ == "__main__":
                main()
            """,
        )
        with leaves_nothing(tmp_path, "daemon.txt", "child.txt") as started:
            # No pipe: the daemon, left running, would hold it open.
            watcher = started(subprocess.Popen([sys.executable, "sup.py"], cwd=tmp_path))
            wait_for(tmp_path / "child.txt")
            (daemon,) = map(int, wait_for(tmp_path / "daemon.txt"))
            # Its parent leads the daemon's session: once that one is dead, the
            # daemon has been handed to whoever adopts it.
            assert gone(int(stat_fields(daemon)[3]))
            assert stat_fields(daemon)[1] != str(watcher.pid)
            watcher.send_signal(signal.SIGTERM)
            watcher.wait(timeout=SLOW_MACHINE_S)
            assert watcher.returncode == 143
