"""``lil`` for people and for pipes, with commands that agree with each other.

The tests run the real ``lil`` (``python -m letitloop``) in a child
process, piped or on a pseudo-terminal, against journals written by real
runs: whole values in pipes, previews cut on a terminal, a run's input,
result and lineage, filters and paging, reset and gc asking alike, ``--db``
anywhere, pasteable suggestions, completion from the journal, and the
attempts ``lil watch`` started. Only how ``lil`` reads its arguments (``--db``
before or after the command, shell completion) is asked in this process
(``helpers.lil_in_process``): a child interpreter would prove nothing more.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shlex
import sqlite3
import subprocess
import sys
import textwrap
import time
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    LIL_ENTRY,
    left_on_terminal,
    lil_forked,
    lil_in_process,
    run_forked,
    spawn_forked,
)

from letitloop import Journal, durable, step

LONG_GOAL = "agent pipeline for the quarterly customer report of every region"
KEY_1 = "fetch:https://example.com/articles/2026/11/30/the-first-article-of-the-day"
KEY_2 = "fetch:https://example.com/articles/2026/11/30/the-second-article-of-the-day"
LONG_ERROR = "EncodeError: " + "a long explanation of what went wrong " * 8 + "THE END"


def lil(
    db: Path | None, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m letitloop`` in a forked child (helpers.lil_forked), piped; ``--db``
    after the command when a journal is given."""
    where = ["--db", str(db)] if db else []
    return lil_forked(*args, *where, cwd=cwd, env={**os.environ, **(env or {})})


def ok(db: Path | None, *args: str, **kw: Any) -> str:
    r = lil(db, *args, **kw)
    assert r.returncode == 0, r.stderr
    return r.stdout


def error_line(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    (line,) = [ln for ln in r.stderr.splitlines() if ln.startswith("Error")]
    return line


def terminal(
    argv: list[str], *, columns: int = 80, answer: str | None = None, cwd: Path | None = None
) -> tuple[int, str]:
    """Run ``lil ARGV`` with stdin, stdout and stderr on a pseudo-terminal of ``columns``.

    ``answer`` is typed once the command asks (its prompt ends in ``[y/N]: ``).
    Returns its exit status and its output, colour codes removed, ``\\r\\n`` as ``\\n``.
    """
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "letitloop", *argv],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env={**os.environ, "COLUMNS": str(columns)},
        cwd=cwd,
    )
    os.close(follower)
    chunks: list[bytes] = []
    typed = answer is None
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # EIO: every writer closed the terminal
                    break
                if not chunk:
                    break
                chunks.append(chunk)
                if not typed and b"[y/N]: " in b"".join(chunks):
                    os.write(leader, (answer or "").encode() + b"\n")
                    typed = True
            elif proc.poll() is not None:
                chunks += left_on_terminal(leader)
                break
    finally:
        os.close(leader)
        proc.wait(timeout=60)
    text = b"".join(chunks).decode("utf-8").replace("\r\n", "\n")
    return proc.returncode, re.sub(r"\x1b\[\d+m", "", text)


def slow_call(x: Any) -> Any:
    return x


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A journal with a long goal, long keys, a long result and a long error: (db, ok, failed)."""
    db = tmp_path_factory.mktemp("wide") / "journal.db"
    with Journal(LONG_GOAL, path=db, run="user-7") as j:
        j.step(KEY_1, slow_call, "x" * 300)
        j.step(KEY_2, slow_call, "y" * 300)
        done = j.run_id
    with pytest.raises(RuntimeError), Journal(LONG_GOAL, path=db) as j:
        failed = j.run_id
        j.step("boom", _raise, LONG_ERROR)
    return db, done, failed


def _raise(text: str) -> None:
    raise RuntimeError(text)


class TestPipedOutputIsNeverCut:
    def test_goal_names_keys_and_errors_come_whole(self, wide: tuple[Path, str, str]) -> None:
        db, done, failed = wide
        runs = ok(db, "runs")
        assert sum(LONG_GOAL in ln for ln in runs.splitlines()) == 2  # lil runs | grep -c
        assert f"RuntimeError: {LONG_ERROR}" in runs
        assert "…" not in runs
        shown = ok(db, "show", done)
        assert KEY_1 in shown and KEY_2 in shown and "y" * 300 in shown
        assert f"goal      {LONG_GOAL}" in shown and "(name user-7)" in shown
        assert f"RuntimeError: {LONG_ERROR}" in ok(db, "show", failed)
        assert ok(db, "runs", LONG_GOAL).count(LONG_GOAL) == 2

    def test_columns_has_no_say_in_a_pipe(self, wide: tuple[Path, str, str]) -> None:
        db, done, _ = wide
        narrow = lil(db, "show", done, env={"COLUMNS": "40"}).stdout
        assert narrow == ok(db, "show", done)


class TestOnATerminal:
    def test_previews_are_cut_to_its_width_and_identifiers_never(
        self, wide: tuple[Path, str, str]
    ) -> None:
        db, done, failed = wide
        status, out = terminal(["show", done, "--db", str(db)], columns=100)
        assert status == 0
        assert KEY_1 in out and KEY_2 in out and done in out and LONG_GOAL in out
        assert "x" * 300 not in out and "xxx…" in out  # the result preview is cut
        rows = [ln for ln in out.splitlines() if ln.startswith(("1 ", "2 "))]
        assert all(ln.endswith("…") for ln in rows)
        status, runs = terminal(["runs", "--db", str(db)], columns=100)
        assert runs.count(LONG_GOAL) == 2 and done in runs and failed in runs
        note = next(ln for ln in runs.splitlines() if "└" in ln)
        assert note.endswith("…") and len(note) <= 100

    def test_columns_sets_the_width(self, wide: tuple[Path, str, str]) -> None:
        db, done, _ = wide
        _, narrow = terminal(["show", done, "--db", str(db)], columns=60)
        _, broad = terminal(["show", done, "--db", str(db)], columns=200)
        n = next(ln for ln in narrow.splitlines() if ln.startswith("1 "))
        b = next(ln for ln in broad.splitlines() if ln.startswith("1 "))
        assert KEY_1 in n and KEY_1 in b
        assert len(b) == 200 and b.count("x") > n.count("x")


@durable(goal_id="welcome")
def welcome(uid: int, when: date, tags: list[str]) -> str:
    step("send", slow_call, f"hello {uid}")
    return f"emailed user-{uid}"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Runs of @durable welcome() for three users, and a named run of another goal."""
    folder = tmp_path_factory.mktemp("inputs")
    old = os.environ.get("LETITLOOP_DB")
    os.environ["LETITLOOP_DB"] = str(folder / "journal.db")
    try:
        for uid in (1, 2, 3):
            welcome(uid, date(2026, 11, 29 + uid % 2), ["a", f"u{uid}"])
    finally:
        if old is None:
            del os.environ["LETITLOOP_DB"]
        else:
            os.environ["LETITLOOP_DB"] = old
    with Journal("daily", path=folder / "journal.db", run="2026-11-30") as j:
        j.step("x", slow_call, 1)
    return folder / "journal.db"


class TestARunsInputAndResult:
    def test_show_prints_both(self, inputs: Path) -> None:
        (run,) = json.loads(ok(inputs, "runs", "welcome", "--input", "uid=2", "--json"))
        shown = ok(inputs, "show", run["id"])
        assert 'input     {"uid": 2, "when": "2026-11-29", "tags": ["a", "u2"]}' in shown
        assert 'result    "emailed user-2"' in shown
        full = ok(inputs, "show", run["id"], "--full")
        assert '  "uid": 2,' in full and 'result    "emailed user-2"' in full

    def test_json_gives_decoded_values_not_json_strings(self, inputs: Path) -> None:
        data = json.loads(ok(inputs, "show", "welcome", "--json"))
        assert data["run"]["input"] == {"uid": 3, "when": "2026-11-30", "tags": ["a", "u3"]}
        assert data["run"]["result"] == "emailed user-3"
        (row,) = data["rows"]
        assert row["result"] == "hello 3" and row["result_json"] == '"hello 3"'
        exported = json.loads(ok(inputs, "export", "welcome"))
        assert exported["run"]["input"] == data["run"]["input"]
        records = [json.loads(ln) for ln in ok(inputs, "show", "welcome", "--jsonl").splitlines()]
        assert [r["record"] for r in records][:2] == ["run", "row"]


class TestListingRuns:
    def test_names_are_shown_and_filtered_by_glob(self, inputs: Path) -> None:
        out = ok(inputs, "runs")
        line = next(ln for ln in out.splitlines() if ln.split()[1:2] == ["daily"])
        assert line.split()[2] == "2026-11-30"
        assert [
            r["name"] for r in json.loads(ok(inputs, "runs", "--name", "2026-*", "--json"))
        ] == ["2026-11-30"]
        assert json.loads(ok(inputs, "runs", "--name", "2025-*", "--json")) == []

    def test_input_filters_match_plain_and_tagged_values(self, inputs: Path) -> None:
        def uids(*filters: str) -> list[int]:
            args = [a for f in filters for a in ("--input", f)]
            return [r["input"]["uid"] for r in json.loads(ok(inputs, "runs", *args, "--json"))]

        assert uids("uid=2") == [2]
        assert uids("when=2026-11-30") == [3, 1]  # a date argument, recorded tagged
        assert uids("when=2026-11-30", "uid=1") == [1]
        assert uids('tags=["a", "u3"]') == [3]
        assert uids("uid=9") == []
        assert "expected KEY=VALUE" in error_line(lil(inputs, "runs", "--input", "uid"))

    def test_until_offset_and_limit_page_through_them(self, inputs: Path) -> None:
        every = [r["id"] for r in json.loads(ok(inputs, "runs", "--json", "--limit", "0"))]
        assert len(every) == 4
        page1 = lil(inputs, "runs", "--json", "--limit", "3")
        assert [r["id"] for r in json.loads(page1.stdout)] == every[:3]
        assert "more runs match" in page1.stderr and "--offset 3" in page1.stderr
        page2 = lil(inputs, "runs", "--json", "--limit", "3", "--offset", "3")
        assert [r["id"] for r in json.loads(page2.stdout)] == every[3:] and page2.stderr == ""
        assert "--offset 2 for the next page" in ok(inputs, "runs", "--limit", "2")
        assert json.loads(ok(inputs, "runs", "--until", "1d", "--json")) == []
        assert len(json.loads(ok(inputs, "runs", "--until", "2999-01-01", "--json"))) == 4

    def test_jsonl_is_one_run_per_line(self, inputs: Path) -> None:
        lines = ok(inputs, "runs", "--jsonl").splitlines()
        assert [json.loads(ln)["id"] for ln in lines] == [
            r["id"] for r in json.loads(ok(inputs, "runs", "--json"))
        ]


class TestAFork:
    def test_it_records_where_it_came_from_and_keeps_the_input(self, tmp_path: Path) -> None:
        db, log = tmp_path / "journal.db", tmp_path / "log"
        script = tmp_path / "job.py"
        script.write_text(
            textwrap.dedent(
                f"""
                import sys
                from letitloop import durable, step

                def counted(log, key):
                    with open(log, "a", encoding="utf-8") as f:
                        f.write(key + "\\n")
                    return key

                @durable(goal_id="job")
                def job(uid):
                    step("a", counted, {str(log)!r}, "a")
                    return step("b", counted, {str(log)!r}, "b")

                print(job(int(sys.argv[1])))
                """
            ),
            encoding="utf-8",
        )
        env = {**os.environ, "LETITLOOP_DB": str(db)}
        assert run_forked(script, "7", env=env).returncode == 0
        (source,) = json.loads(ok(db, "runs", "--json"))
        fork = json.loads(ok(db, "fork", source["id"], "--from-step", "b", "--json"))["run"]
        assert fork["forked_from"] == source["id"] and fork["forked_at"] == "b"
        assert fork["input"] == {"uid": 7}
        shown = ok(db, "show", fork["id"])
        assert f"forked    from run {source['id']} at step 'b'" in shown
        assert "no process has opened it yet; forked from" in ok(db, "runs")
        # the same call resumes the fork: 'a' replays from its copy, 'b' runs again
        log.write_text("")
        assert run_forked(script, "7", env=env).returncode == 0
        assert log.read_text().split() == ["b"]
        assert json.loads(ok(db, "show", fork["id"], "--json"))["run"]["state"] == "completed"


@pytest.fixture
def three(tmp_path: Path) -> tuple[Path, list[str]]:
    """Goal 'job': two failed runs and a completed one, oldest first.

    The second is opened without an input, so it is the run ``Journal("job")``
    resumes (and ``lil reset job`` means); the others are opened for inputs 0
    and 2 (three runs: one per input).
    """
    db = tmp_path / "journal.db"
    ids = []
    for i, fail in enumerate((True, True, False)):
        try:
            journal = Journal("job", path=db) if i == 1 else Journal("job", path=db, input=i)
            with journal as j:
                ids.append(j.run_id)
                j.step("a", slow_call, 1)
                if fail:
                    raise ValueError("on purpose")
        except ValueError:
            pass
    return db, ids


def run_ids(db: Path) -> list[str]:
    conn = sqlite3.connect(db)
    try:
        # Creation order: ids made in one millisecond sort in no particular order.
        return [r[0] for r in conn.execute("SELECT id FROM runs ORDER BY rowid")]
    finally:
        conn.close()


class TestResetAndGcAskAlike:
    def test_reset_takes_a_run_id_or_a_prefix_of_one(self, three: tuple[Path, list[str]]) -> None:
        db, ids = three
        assert f"forgot run {ids[0]}" in ok(db, "reset", ids[0], "--yes")
        assert f"forgot run {ids[2]}" in ok(db, "reset", ids[2][:12], "--yes")
        assert run_ids(db) == [ids[1]]

    def test_run_takes_a_prefix_and_a_goal_means_its_resumable_run(
        self, three: tuple[Path, list[str]]
    ) -> None:
        db, ids = three
        assert f"forgot run {ids[0]}" in ok(db, "reset", "job", "--run", ids[0][:10], "--yes")
        # The run Journal("job") resumes: ids[1], opened without an input.
        assert f"forgot run {ids[1]}" in ok(db, "reset", "job", "--yes")
        line = error_line(lil(db, "reset", ids[2], "--run", "x", "--yes"))
        assert "is a run id; pass --run only with a goal" in line

    def test_dry_run_and_no_terminal_change_nothing(self, three: tuple[Path, list[str]]) -> None:
        db, ids = three
        assert f"would forget run {ids[1]} of goal 'job'" in ok(db, "reset", "job", "--dry-run")
        line = error_line(lil(db, "reset", "job"))
        assert "pass --yes to confirm when not at a terminal" in line
        line = error_line(lil(db, "gc", "--older-than", "0s"))
        assert "gc would remove 3 runs" in line and "pass --yes" in line
        assert run_ids(db) == ids
        assert (
            len(json.loads(ok(db, "gc", "--older-than", "0s", "--dry-run", "--json"))["removed"])
            == 3
        )
        assert run_ids(db) == ids

    def test_on_a_terminal_both_ask_and_no_keeps_everything(
        self, three: tuple[Path, list[str]]
    ) -> None:
        db, ids = three
        status, out = terminal(["reset", "job", "--db", str(db)], answer="n")
        assert status == 1 and f"Forget run {ids[1]} of goal 'job'" in out and "Aborted" in out
        status, out = terminal(["gc", "--older-than", "0s", "--db", str(db)], answer="n")
        assert status == 1 and "Remove 3 runs" in out
        assert run_ids(db) == ids
        status, out = terminal(["reset", "job", "--db", str(db)], answer="y")
        assert status == 0 and f"forgot run {ids[1]}" in out
        status, out = terminal(["gc", "--older-than", "0s", "--db", str(db)], answer="y")
        assert status == 0 and "removed 2 runs" in out
        assert run_ids(db) == []


class TestGcRemovesGoalsLeftEmpty:
    def test_the_goal_and_its_table_go_and_the_view_still_reads(
        self, three: tuple[Path, list[str]]
    ) -> None:
        db, _ = three
        with Journal("kept", path=db) as j:
            j.step("a", slow_call, 1)
        with Journal("guarded", path=db) as j, j.atomic_marker("charge:1", scope="goal") as first:
            assert first
        ok(db, "reset", "guarded", "--run", j.run_id, "--yes")  # no run left, one goal marker
        dry = json.loads(
            ok(db, "gc", "--older-than", "0s", "--status", "failed", "--dry-run", "--json")
        )
        assert dry["goals_removed"] == []  # 'job' keeps its completed run
        out = ok(db, "gc", "--older-than", "0s", "--status", "completed", "--dry-run")
        assert "would remove goal 'kept'" in out
        data = json.loads(ok(db, "gc", "--older-than", "0s", "--yes", "--json"))
        assert data["goals_removed"] == ["job", "kept"]
        conn = sqlite3.connect(db)
        try:
            assert [g for (g,) in conn.execute("SELECT goal FROM goals")] == ["guarded"]
            tables = {t for (t,) in conn.execute("SELECT name FROM sqlite_master")}
            assert "journal_job" not in tables and "journal_kept" not in tables
            assert conn.execute("SELECT goal, key FROM journal_rows").fetchall() == [
                ("guarded", "charge:1")
            ]
        finally:
            conn.close()
        assert "removed 0 runs" in ok(db, "gc", "--older-than", "0s", "--yes")


class TestTheDbOption:
    def test_every_command_takes_it_before_or_after_its_name(
        self, three: tuple[Path, list[str]]
    ) -> None:
        # How lil reads its arguments, in this process: a fresh interpreter proves nothing more.
        db, ids = three
        for args in (
            ("runs",),
            ("show", "job"),
            ("export", "job"),
            ("fork", ids[2], "--from-step", "a"),
            ("gc", "--older-than", "100d"),
            ("reset", "job", "--dry-run"),
        ):
            after = lil_in_process(*args, "--db", str(db))
            assert after.returncode == 0, (args, after.stderr)
            before = lil_in_process("--db", str(db), *args)
            assert before.returncode == 0, (args, before.stderr)
        assert "--db" in lil_in_process("watch", "--help").stdout


class TestSuggestedCommandsPasteAsPrinted:
    def test_a_goal_with_a_space_and_a_key_with_a_quote(self, tmp_path: Path) -> None:
        from letitloop.errors import StepMismatchError

        db = tmp_path / "journal.db"
        with Journal("my goal", path=db, run="r") as j:
            j.step("it's", slow_call, 1)
        with pytest.raises(StepMismatchError) as err, Journal("my goal", path=db, run="r") as j:
            j.step("it's", str, 1)
        text = str(err.value)
        reset = re.search(r"reset it with: (lil reset [^;]*);", text)
        fork = re.search(r"fork it with: (lil fork .*)$", text)
        assert reset and fork, text
        assert reset.group(1) == f"lil reset 'my goal' --run {j.run_id}"
        argv = shlex.split(fork.group(1))
        assert argv[-1] == "it's"
        assert f"forked run {j.run_id}" in ok(db, *argv[1:])
        assert "would forget run" in ok(db, *shlex.split(reset.group(1))[1:], "--dry-run")


class TestShellCompletion:
    def complete(self, db: Path, words: str) -> list[str]:
        argv = shlex.split(words)
        env = {
            "_LIL_COMPLETE": "bash_complete",
            "COMP_WORDS": words,
            "COMP_CWORD": str(len(argv) - (0 if words.endswith(" ") else 1)),
        }
        # Click's completion protocol, answered in this process (helpers.lil_in_process).
        r = lil_in_process(env=env)
        assert r.returncode == 0, r.stderr
        return [ln.split(",", 1)[1] for ln in r.stdout.splitlines() if ln]

    def test_goals_run_ids_names_and_step_keys_come_from_the_journal(self, inputs: Path) -> None:
        db = str(inputs)
        ids = [r["id"] for r in json.loads(ok(inputs, "runs", "--json"))]
        assert self.complete(inputs, f"lil --db {db} show we") == ["welcome"]
        assert self.complete(inputs, f"lil show --db {db} da") == ["daily"]
        assert self.complete(inputs, f"lil --db {db} runs ") == ["daily", "welcome"]
        got = self.complete(inputs, f"lil --db {db} export {ids[0][:4]}")
        assert got[0] == ids[0]
        assert self.complete(inputs, f"lil --db {db} reset 2026") == ["2026-11-30"]
        assert self.complete(inputs, f"lil --db {db} show welcome --step ") == ["send"]
        assert self.complete(inputs, f"lil --db {db} fork {ids[1]} --from-step s") == ["send"]
        assert self.complete(inputs, "lil --db /nonexistent/j.db show ") == []


class TestAttemptsStartedByLilWatch:
    def test_show_names_the_watch_and_its_attempt(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        script = tmp_path / "job.py"
        script.write_text(
            textwrap.dedent(
                """
                import os, sys
                from letitloop import Journal
                with Journal("job", path=sys.argv[1]) as j:
                    j.step("a", int, "1")
                    if not os.path.exists(sys.argv[2]):
                        open(sys.argv[2], "w").close()
                        os._exit(3)  # dies once, outside any step
                    j.step("b", int, "2")
                """
            ),
            encoding="utf-8",
        )
        flag = tmp_path / "flag"
        r = lil_forked("watch", "--db", str(db), "--backoff", "0", str(script), str(db), str(flag))
        assert r.returncode == 0, r.stderr
        data = json.loads(ok(db, "show", "job", "--json"))
        (watch,) = {a["watch_id"] for a in data["attempts"]}
        assert [a["watch_attempt"] for a in data["attempts"]] == [1, 2]
        shown = ok(db, "show", "job")
        assert f"(attempt 1 of lil watch {watch})  — ended without closing the run" in shown
        assert "(a kill leaves no record of its own); lil watch saw exit 3" in shown
        assert f"(attempt 2 of lil watch {watch})  — completed; lil watch saw exit 0" in shown

    def test_follow_waits_for_the_watch_that_will_restart_a_crashed_run(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "journal.db"
        script = tmp_path / "job.py"
        flag, gate = tmp_path / "flag", tmp_path / "gate"
        script.write_text(
            textwrap.dedent(
                """
                import os, signal, sys, time
                from letitloop import Journal
                db, flag, gate = sys.argv[1:4]
                def first_dies():
                    if not os.path.exists(flag):
                        open(flag, "w").close()
                        os.kill(os.getpid(), signal.SIGKILL)
                    while not os.path.exists(gate):
                        time.sleep(0.02)
                    return 1
                with Journal("job", path=db) as j:
                    j.step("a", int, "1")
                    j.step("b", first_dies)
                """
            ),
            encoding="utf-8",
        )
        watch = spawn_forked(
            LIL_ENTRY,
            "watch",
            "--db",
            str(db),
            "--backoff",
            "4",
            *map(str, (script, db, flag, gate)),
        )
        try:
            deadline = time.monotonic() + 30
            while not (flag.exists() and b"restart" in _events(db)):
                assert time.monotonic() < deadline and watch.poll() is None
                time.sleep(0.05)
            follow = spawn_forked(
                LIL_ENTRY, "show", "job", "--follow", "--interval", "0.1", "--db", str(db)
            )
            assert follow.stdout is not None
            first = follow.stdout.readline()
            assert "crashed" in first
            waiting = follow.stdout.readline()
            assert "waiting for lil watch " in waiting and f"(pid {watch.pid} on " in waiting
        finally:
            gate.touch()
        out, err = follow.communicate(timeout=60)
        assert follow.returncode == 0, err
        assert "completed" in out.strip().splitlines()[-1]
        assert watch.wait(timeout=60) == 0


def _events(db: Path) -> bytes:
    if not db.exists():
        return b""
    conn = sqlite3.connect(db)
    try:
        return " ".join(e for (e,) in conn.execute("SELECT event FROM supervisor_events")).encode()
    except sqlite3.Error:
        return b""
    finally:
        conn.close()


class TestTemporaryFoldersGo:
    def test_lil_demo_says_it_deletes_its_journal_and_does(self, tmp_path: Path) -> None:
        tmp = tmp_path / "tmp"
        tmp.mkdir()
        out = ok(None, "demo", env={"TMPDIR": str(tmp)})
        assert "deleted when the demo ends; lil demo --keep keeps it" in out
        assert list(tmp.iterdir()) == []
        kept = ok(None, "demo", "--keep", env={"TMPDIR": str(tmp)})
        (folder,) = list(tmp.iterdir())
        assert f"rm -r {folder}" in kept and f"lil --db {folder / 'journal.db'} show demo" in kept
        assert "demo-run" in ok(folder / "journal.db", "show", "demo")

    def test_the_langgraph_example_leaves_nothing_behind(self, tmp_path: Path) -> None:
        pytest.importorskip("langgraph")
        tmp = tmp_path / "tmp"
        tmp.mkdir()
        example = Path(__file__).resolve().parent.parent / "examples" / "langgraph_resume.py"
        r = subprocess.run(
            [sys.executable, str(example)],
            capture_output=True,
            text=True,
            timeout=180,
            env={**os.environ, "TMPDIR": str(tmp)},
        )
        assert r.returncode == 0, r.stdout + r.stderr
        assert "removed at the end" in r.stdout
        assert list(tmp.iterdir()) == []
