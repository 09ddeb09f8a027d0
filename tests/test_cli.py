"""The inspection commands, run as the real ``lil`` (``python -m letitloop``) in a subprocess
(values out of range, refused before anything is read, are asked in this process).

Every journal here is made by real runs of a small pipeline in child
interpreters: one that completed, one that failed, one SIGKILLed inside a
step. What each step really did is counted in a side log outside the
journal, so replay and re-execution are checked by their side effects.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    LIL_ENTRY,
    ForkedProcess,
    lil_forked,
    lil_in_process,
    run_forked,
    spawn_forked,
    write_script,
)

from letitloop import Journal, unchecked
from letitloop.errors import StepMismatchError

PIPELINE = """
import os, sys, time
from letitloop import Journal

goal, db, log, steps = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(",")
fail_at = os.environ.get("FAIL_AT")
hang_at = os.environ.get("HANG_AT")
gate_at = os.environ.get("GATE_AT")  # that step waits until the file GATE exists
delay = float(os.environ.get("STEP_DELAY", "0"))

def note(what, key):
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"{os.getpid()} {what} {key}\\n")

def work(key):
    note("start", key)
    if key == hang_at:
        time.sleep(600)
    if key == gate_at:
        deadline = time.monotonic() + 60
        while not os.path.exists(os.environ["GATE"]) and time.monotonic() < deadline:
            time.sleep(0.01)
    time.sleep(delay)
    if key == fail_at:
        raise RuntimeError(f"{key} failed on purpose")
    note("done", key)
    return {"key": key, "text": "result of " + key}

with Journal(goal, path=db, run=os.environ.get("RUN_NAME") or None) as j:
    for key in steps:
        j.step(key, work, key)
print("pipeline finished")
"""

STEPS = "fetch,enrich,price,summarize,notify"


class Lab:
    """A journal file, the pipeline script and its side log in one folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.db = folder / "journal.db"
        self.log = folder / "side.log"
        self.script = folder / "pipeline.py"
        self.script.write_text(textwrap.dedent(PIPELINE), encoding="utf-8")

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("LETITLOOP_DB", "FAIL_AT")}
        return {**env, **extra}

    def run(self, goal: str, steps: str = STEPS, **env: str) -> subprocess.CompletedProcess[str]:
        return run_forked(
            self.script, goal, str(self.db), str(self.log), steps, env=self.env(**env)
        )

    def spawn(self, goal: str, steps: str = STEPS, **env: str) -> ForkedProcess:
        return spawn_forked(
            self.script, goal, str(self.db), str(self.log), steps, env=self.env(**env)
        )

    def events(self) -> list[tuple[int, str, str]]:
        if not self.log.exists():
            return []
        out = []
        for line in self.log.read_text(encoding="utf-8").splitlines():
            pid, what, key = line.split(" ", 2)
            out.append((int(pid), what, key))
        return out

    def executed(self, pid: int | None = None) -> list[str]:
        """Keys whose function started (in process ``pid``, or any), in order."""
        return [k for p, w, k in self.events() if w == "start" and (pid is None or p == pid)]

    def wait_for(self, what: str, key: str, proc: ForkedProcess) -> None:
        deadline = time.monotonic() + 30
        while (proc.pid, what, key) not in self.events():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, f"the child never logged {what} {key}"
            time.sleep(0.02)

    def kill_in(self, goal: str, key: str, steps: str = STEPS) -> int:
        """Run the pipeline, SIGKILL it inside step ``key``; return the dead child's pid."""
        proc = self.spawn(goal, steps, HANG_AT=key)
        self.wait_for("start", key, proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
        return proc.pid

    def lil(self, *args: str, db: bool = True) -> subprocess.CompletedProcess[str]:
        pre = ["--db", str(self.db)] if db else []
        return lil_forked(*pre, *args, env=self.env())

    def ok(self, *args: str) -> str:
        r = self.lil(*args)
        assert r.returncode == 0, r.stderr
        assert "Traceback" not in r.stderr
        return r.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--json"))

    def sql(self, query: str, params: tuple[Any, ...] = ()) -> list[Any]:
        """A read from a separate plain sqlite3 connection: what is really in the file."""
        conn = sqlite3.connect(self.db)
        try:
            return conn.execute(query, params).fetchall()
        finally:
            conn.close()

    def run_ids(self, goal: str) -> list[str]:
        rows = self.sql("SELECT id FROM runs WHERE goal = ? ORDER BY rowid", (goal,))
        return [r[0] for r in rows]

    def keys(self, run_id: str, goal: str) -> list[tuple[str, str, int]]:
        (table,) = self.sql("SELECT journal_table FROM goals WHERE goal = ?", (goal,))[0]
        return self.sql(
            f'SELECT key, status, attempt FROM "{table}" WHERE run = ? ORDER BY rowid', (run_id,)
        )


def one_error_line(r: subprocess.CompletedProcess[str]) -> str:
    """The single 'Error: …' line of a failed command (and no traceback)."""
    assert r.returncode != 0
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("Error")]
    assert len(errors) == 1, r.stderr
    return errors[0]


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    """A journal with a completed run, a failed run and a run SIGKILLed mid-step."""
    lab = Lab(tmp_path_factory.mktemp("history"))
    assert lab.run("sync").returncode == 0
    failed = lab.run("flaky", FAIL_AT="price")
    assert failed.returncode == 1 and "price failed on purpose" in failed.stderr
    lab.kill_in("slow", "summarize")
    return lab


class TestListingRuns:
    def test_it_shows_each_run_with_its_state_and_steps_done(self, history: Lab) -> None:
        out = history.ok("runs")
        lines = {ln.split()[1]: ln.split() for ln in out.splitlines()[1:] if ln[:1].isalnum()}
        assert lines["sync"][2:6] == ["-", "completed", "5", "1"]  # no name, state, steps, att
        assert lines["flaky"][2:6] == ["-", "failed", "2", "1"]
        assert lines["slow"][2:6] == ["-", "crashed", "3", "1"]

    def test_a_failed_run_shows_its_error_under_it(self, history: Lab) -> None:
        out = history.ok("runs", "flaky")
        assert "RuntimeError: price failed on purpose" in out

    def test_off_a_terminal_there_is_no_colour(self, history: Lab) -> None:
        for args in (("runs",), ("show", "flaky"), ("show", "sync", "--full")):
            assert "\x1b[" not in history.ok(*args)

    def test_json_lists_the_same_runs_as_the_file_newest_first(self, history: Lab) -> None:
        listed = history.json("runs")
        in_file = history.sql("SELECT id, goal, status, attempts FROM runs ORDER BY rowid DESC")
        assert [(r["id"], r["goal"], r["status"], r["attempts"]) for r in listed] == [
            tuple(row) for row in in_file
        ]
        by_goal = {r["goal"]: r for r in listed}
        assert by_goal["sync"]["steps_done"] == len(history.keys(by_goal["sync"]["id"], "sync"))
        assert by_goal["slow"]["state"] == "crashed"
        assert by_goal["sync"]["started_at"].endswith("+00:00")  # UTC in --json

    def test_filters_narrow_the_list(self, history: Lab) -> None:
        assert [r["goal"] for r in history.json("runs", "--status", "failed")] == ["flaky"]
        assert [r["goal"] for r in history.json("runs", "--status", "crashed")] == ["slow"]
        assert len(history.json("runs", "--limit", "2")) == 2
        assert len(history.json("runs", "--since", "1h")) == 3
        assert history.json("runs", "--since", "2999-01-01") == []
        assert [r["goal"] for r in history.json("runs", "sync")] == ["sync"]


class TestShowingARun:
    def test_a_goal_shows_its_newest_run_with_steps_in_order(self, history: Lab) -> None:
        out = history.ok("show", "sync")
        assert "completed" in out
        rows = [ln.split() for ln in out.splitlines() if ln[:1].isdigit()]
        assert [r[1] for r in rows] == STEPS.split(",")
        assert all(r[3] == "done" for r in rows)

    def test_a_failed_run_shows_the_failed_step_with_its_traceback(self, history: Lab) -> None:
        out = history.ok("show", "flaky")
        assert "step 'price' failed in attempt 1: RuntimeError: price failed on purpose" in out
        assert "Traceback (most recent call last)" in out
        assert "supervisor restarts\n  none" in out

    def test_a_killed_run_shows_as_crashed_with_the_steps_it_finished(self, history: Lab) -> None:
        data = history.json("show", "slow")
        assert data["run"]["state"] == "crashed"
        assert [r["key"] for r in data["rows"]] == ["fetch", "enrich", "price"]

    def test_a_run_id_a_prefix_and_step_give_the_same_run(self, history: Lab) -> None:
        (run_id,) = history.run_ids("sync")
        assert history.json("show", run_id)["run"]["id"] == run_id
        assert history.json("show", run_id[:-3])["run"]["id"] == run_id
        out = history.ok("show", run_id, "--step", "price")
        assert '"text": "result of price"' in out
        assert "__main__.work" in out

    def test_full_prints_each_decoded_result(self, history: Lab) -> None:
        out = history.ok("show", "sync", "--full")
        assert out.count('"text": "result of ') == 5

    def test_json_rows_match_the_journal_table_in_rowid_order(self, history: Lab) -> None:
        data = history.json("show", "flaky")
        assert [(r["key"], r["status"], r["attempt"]) for r in data["rows"]] == history.keys(
            data["run"]["id"], "flaky"
        )


class TestTimes:
    def test_people_get_the_local_zone_and_json_keeps_utc(self, history: Lab) -> None:
        from datetime import datetime, timedelta

        started = history.json("show", "sync")["run"]["started_at"]
        assert started.endswith("+00:00")
        # A POSIX TZ string needs no tz database: XYZ is nine hours ahead of UTC.
        r = subprocess.run(
            [sys.executable, "-m", "letitloop", "--db", str(history.db), "show", "sync"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "TZ": "XYZ-09:00"},
        )
        local = datetime.fromisoformat(started) + timedelta(hours=9)
        assert f"started   {local:%Y-%m-%d %H:%M:%S} XYZ" in r.stdout


class TestExportingARun:
    def test_json_has_the_run_and_decoded_results(self, history: Lab) -> None:
        data = json.loads(history.ok("export", "sync"))
        assert data["run"]["goal"] == "sync"
        assert [r["result"]["key"] for r in data["rows"]] == STEPS.split(",")
        assert data["rows"][0]["result_json"] == json.dumps(
            {"key": "fetch", "text": "result of fetch"}, separators=(",", ":")
        )

    def test_ndjson_is_one_record_per_line_run_first(self, history: Lab) -> None:
        lines = [
            json.loads(ln)
            for ln in history.ok("export", "flaky", "--format", "ndjson").splitlines()
        ]
        assert lines[0]["record"] == "run" and lines[0]["status"] == "failed"
        rows = [r for r in lines if r["record"] == "row"]
        assert [r["key"] for r in rows] == ["fetch", "enrich", "price"]
        assert rows[-1]["error"] == "RuntimeError: price failed on purpose"
        assert [r["record"] for r in lines].count("attempt") == 1


class TestFollowingARun:
    def test_it_reports_progress_against_the_previous_run_and_stops_when_done(
        self, tmp_path: Path
    ) -> None:
        lab = Lab(tmp_path)
        assert lab.run("live").returncode == 0
        gate = tmp_path / "gate"
        child = lab.spawn("live", STEP_DELAY="0.4", GATE_AT="enrich", GATE=str(gate))
        lab.wait_for("start", "fetch", child)
        follow = spawn_forked(
            LIL_ENTRY, "--db", str(lab.db), "show", "live", "--follow", "--interval", "0.1"
        )
        # The run waits at enrich until lil has printed its first line, however long
        # lil takes to start on a busy machine; then its last three steps take 1.2 s.
        assert follow.stdout is not None
        first = follow.stdout.readline()
        gate.touch()
        rest, err = follow.communicate(timeout=60)
        assert child.wait(timeout=60) == 0
        assert follow.returncode == 0, err
        lines = [first.rstrip("\n"), *rest.splitlines()]
        assert "running" in lines[0]
        assert lines[-1].split()[2:4] == ["completed", "5/5"]
        assert len(lines) >= 3  # it saw the run progress, not just its end


class TestResettingARun:
    def test_a_rerun_after_reset_starts_fresh(self, tmp_path: Path) -> None:
        lab = Lab(tmp_path)
        assert lab.run("job", FAIL_AT="price").returncode == 1
        (old,) = lab.run_ids("job")
        out = lab.ok("reset", "job", "--yes")
        assert old in out and "starts a new run" in out
        assert lab.run_ids("job") == []
        assert lab.sql("SELECT count(*) FROM journal_job")[0][0] == 0
        rerun = lab.run("job")
        assert rerun.returncode == 0
        after = Counter(lab.executed())
        # fetch and enrich ran once before the reset and once again after it.
        assert after == {"fetch": 2, "enrich": 2, "price": 2, "summarize": 1, "notify": 1}

    def test_without_yes_off_a_terminal_it_asks_for_yes_and_changes_nothing(
        self, tmp_path: Path
    ) -> None:
        lab = Lab(tmp_path)
        assert lab.run("job", FAIL_AT="price").returncode == 1
        line = one_error_line(lab.lil("reset", "job"))
        assert "--yes" in line
        assert len(lab.run_ids("job")) == 1

    def test_it_refuses_a_run_held_by_a_live_process(self, tmp_path: Path) -> None:
        lab = Lab(tmp_path)
        child = lab.spawn("job", HANG_AT="enrich")
        try:
            lab.wait_for("start", "enrich", child)
            assert lab.json("runs")[0]["state"] == "running"
            line = one_error_line(lab.lil("reset", "job", "--yes"))
            assert "held by a live process" in line and str(child.pid) in line
            assert len(lab.run_ids("job")) == 1
        finally:
            child.kill()
            child.communicate()
        assert lab.json("runs")[0]["state"] == "crashed"
        assert "forgot run" in lab.ok("reset", "job", "--yes")

    def test_a_named_run_can_be_reset_by_its_name(self, tmp_path: Path) -> None:
        lab = Lab(tmp_path)
        assert lab.run("job", RUN_NAME="2026-11-30").returncode == 0
        out = lab.ok("reset", "job", "--run", "2026-11-30", "--yes")
        assert "with run='2026-11-30' starts a new run" in out
        assert lab.run("job", RUN_NAME="2026-11-30").returncode == 0
        assert Counter(lab.executed())["notify"] == 2

    def test_reset_of_a_goal_names_the_run_journal_of_that_goal_resumes(
        self, tmp_path: Path
    ) -> None:
        # A failed Journal("g") run, then a newer failed @durable call wf(7):
        # Journal("g") resumes the first (wf(7)'s run belongs to its arguments),
        # so 'lil reset g' must name the first, not the newer one.
        db = tmp_path / "journal.db"
        program = textwrap.dedent(
            """
            import sys
            from letitloop import Journal, durable
            db = sys.argv[1]

            @durable(goal_id="g", path=db)
            def wf(n):
                raise RuntimeError("wf failed")

            if sys.argv[2] == "plain":
                with Journal("g", path=db) as j:
                    print(j.run_id, flush=True)
                    raise RuntimeError("plain failed")
            wf(7)
            """
        )
        script = tmp_path / "wf.py"
        script.write_text(program, encoding="utf-8")
        plain = run_forked(script, str(db), "plain")
        assert plain.returncode == 1 and "plain failed" in plain.stderr
        first = plain.stdout.split()[0]
        durable_call = run_forked(script, str(db), "durable")
        assert durable_call.returncode == 1 and "wf failed" in durable_call.stderr

        def lil(*args: str) -> str:
            done = lil_forked("--db", str(db), *args)
            assert done.returncode == 0, done.stderr
            return done.stdout

        assert f"would forget run {first} " in lil("reset", "g", "--dry-run")
        with Journal("g", path=db) as j:
            assert j.run_id == first
        # Now that the first is completed, Journal("g") starts a new run: reset
        # has no run to name, whatever wf(7)'s run is.
        done = lil_forked("--db", str(db), "reset", "g", "--dry-run")
        assert done.returncode == 1
        conn = sqlite3.connect(db)
        try:
            (wf_run,) = conn.execute("SELECT id FROM runs WHERE input_fp IS NOT NULL").fetchone()
        finally:
            conn.close()
        assert "opened for arguments" in done.stderr
        assert f"lil reset {wf_run}" in done.stderr and '(input {"n":7})' in done.stderr


class TestForkingARun:
    def test_a_durable_calls_fork_says_the_same_call_resumes_it(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        script = tmp_path / "wf.py"
        script.write_text(
            textwrap.dedent(
                """
                import sys
                from letitloop import durable, step

                @durable(goal_id="g", path=sys.argv[1])
                def wf(n):
                    step("a", int, n)
                    raise RuntimeError("wf failed")

                wf(7)
                """
            ),
            encoding="utf-8",
        )
        failed = run_forked(script, str(db))
        assert failed.returncode == 1
        conn = sqlite3.connect(db)
        try:
            (run,) = conn.execute("SELECT id FROM runs").fetchone()
        finally:
            conn.close()
        done = lil_forked("--db", str(db), "fork", run, "--from-step", "a")
        assert done.returncode == 0, done.stderr
        assert "the call with the same arguments" in done.stdout
        assert "Journal('g') resumes" not in done.stdout
        assert "that call would resume it" in done.stdout

    def test_a_rerun_executes_exactly_the_steps_from_the_key_on(self, tmp_path: Path) -> None:
        lab = Lab(tmp_path)
        assert lab.run("job").returncode == 0
        (source,) = lab.run_ids("job")
        data = lab.json("fork", source, "--from-step", "price")
        assert data["copied"] == ["fetch", "enrich"]
        new = data["run"]["id"]
        assert data["run"]["state"] == "pending"
        rerun = lab.spawn("job")
        rerun.communicate(timeout=60)
        assert rerun.returncode == 0
        assert lab.executed(rerun.pid) == ["price", "summarize", "notify"]
        assert lab.keys(new, "job") == [
            ("fetch", "done", 0),
            ("enrich", "done", 0),
            ("price", "done", 1),
            ("summarize", "done", 1),
            ("notify", "done", 1),
        ]
        assert lab.keys(source, "job") == [(k, "done", 1) for k in STEPS.split(",")]

    def test_a_failed_run_forked_at_its_failed_step_keeps_what_it_had(self, tmp_path: Path) -> None:
        lab = Lab(tmp_path)
        assert lab.run("job", FAIL_AT="price").returncode == 1
        (source,) = lab.run_ids("job")
        out = lab.ok("fork", source, "--from-step", "price")
        assert "keeps 2 recorded results (fetch, enrich)" in out
        rerun = lab.spawn("job")
        rerun.communicate(timeout=60)
        assert lab.executed(rerun.pid) == ["price", "summarize", "notify"]

    def test_a_named_runs_fork_takes_over_the_name(self, tmp_path: Path) -> None:
        lab = Lab(tmp_path)
        assert lab.run("job", RUN_NAME="nightly").returncode == 0
        (source,) = lab.run_ids("job")
        data = lab.json("fork", "nightly", "--from-step", "summarize")
        assert data["run"]["name"] == "nightly"
        assert data["source_renamed_to"] == f"nightly@{source}"
        rerun = lab.spawn("job", RUN_NAME="nightly")
        rerun.communicate(timeout=60)
        assert lab.executed(rerun.pid) == ["summarize", "notify"]

    def test_an_unknown_key_is_one_line_naming_the_keys(self, tmp_path: Path) -> None:
        lab = Lab(tmp_path)
        assert lab.run("job").returncode == 0
        line = one_error_line(lab.lil("fork", "job", "--from-step", "nope"))
        assert "no step 'nope'" in line and "fetch, enrich" in line
        assert len(lab.run_ids("job")) == 1

    def test_the_mismatch_errors_way_out_works_as_printed(self, tmp_path: Path) -> None:
        lab = Lab(tmp_path)
        calls: list[str] = []
        with Journal("job", path=lab.db, run="fixed") as j:
            j.step("a", record, "a", unchecked(calls))
            j.step("b", record, "b", unchecked(calls))
        (run_id,) = lab.run_ids("job")
        with (
            pytest.raises(StepMismatchError) as err,
            Journal("job", path=lab.db, run="fixed") as j,
        ):
            j.step("a", record, "a", unchecked(calls))
            j.step("b", record_v2, "b", unchecked(calls))  # the code changed under the run
        assert f"lil fork {run_id} --from-step b" in str(err.value)
        assert f"lil reset job --run {run_id}" in str(err.value)
        lab.ok("fork", run_id, "--from-step", "b")
        calls.clear()
        with Journal("job", path=lab.db, run="fixed") as j:
            assert j.step("a", record, "a", unchecked(calls)) == "a"
            assert j.step("b", record_v2, "b", unchecked(calls)) == "b v2"
        assert calls == ["b v2"]  # 'a' was replayed from the fork's copy


def record(key: str, calls: list[str]) -> str:
    calls.append(key)
    return key


def record_v2(key: str, calls: list[str]) -> str:
    calls.append(key + " v2")
    return key + " v2"


class TestCollectingOldRuns:
    def _journal(self, lab: Lab) -> dict[str, str]:
        old = time.time() - 40 * 86400
        ids = {}
        with Journal("job", path=lab.db, run="old-done", clock=lambda: old) as j:
            j.step("a", str, 1)
            ids["old-done"] = j.run_id
        with (
            pytest.raises(ValueError),
            Journal("job", path=lab.db, run="old-failed", clock=lambda: old) as j,
        ):
            ids["old-failed"] = j.run_id
            j.step("a", str, 1)
            j.step("b", int, "x")
        with Journal("job", path=lab.db, run="new-done") as j:
            j.step("a", str, 1)
            ids["new-done"] = j.run_id
        with Journal("other", path=lab.db, run="new-other") as j:
            j.step("a", str, 1)
            ids["new-other"] = j.run_id
        return ids

    def test_it_removes_exactly_the_old_runs_and_their_rows(self, tmp_path: Path) -> None:
        lab = Lab(tmp_path)
        ids = self._journal(lab)
        out = lab.ok("gc", "--older-than", "30d", "--yes")
        assert "removed 2 runs (3 steps and markers)" in out
        assert ids["old-done"] in out and ids["old-failed"] in out
        left = {r[0] for r in lab.sql("SELECT id FROM runs")}
        assert left == {ids["new-done"], ids["new-other"]}
        assert lab.sql("SELECT DISTINCT run FROM journal_job") == [(ids["new-done"],)]
        assert {r[0] for r in lab.sql("SELECT run FROM attempts")} == left
        data = lab.json("show", ids["new-done"])
        assert [r["key"] for r in data["rows"]] == ["a"]
        assert lab.sql("PRAGMA integrity_check") == [("ok",)]

    def test_dry_run_lists_them_and_changes_nothing(self, tmp_path: Path) -> None:
        lab = Lab(tmp_path)
        ids = self._journal(lab)
        data = lab.json("gc", "--older-than", "30d", "--dry-run")
        assert {r["id"] for r in data["removed"]} == {ids["old-done"], ids["old-failed"]}
        assert len(lab.sql("SELECT id FROM runs")) == 4

    def test_status_narrows_what_goes(self, tmp_path: Path) -> None:
        lab = Lab(tmp_path)
        ids = self._journal(lab)
        lab.ok("gc", "--older-than", "30d", "--status", "completed", "--yes")
        left = {r[0] for r in lab.sql("SELECT id FROM runs")}
        assert left == {ids["old-failed"], ids["new-done"], ids["new-other"]}

    def test_a_younger_cutoff_removes_nothing(self, tmp_path: Path) -> None:
        lab = Lab(tmp_path)
        self._journal(lab)
        assert "removed 0 runs" in lab.ok("gc", "--older-than", "60d")  # nothing to ask about
        assert len(lab.sql("SELECT id FROM runs")) == 4


class TestSupervisorEvents:
    def test_the_watchers_events_show_with_the_runs_it_started(self, tmp_path: Path) -> None:
        from letitloop.primitives.clock import utc_iso
        from letitloop.stores.sqlite.store import Store

        lab = Lab(tmp_path)
        assert lab.run("job", LETITLOOP_WATCH_ID="w-1", FAIL_AT="price").returncode == 1
        store = Store(lab.db)  # as the watcher would record its restart decision
        try:
            store.write1(
                "INSERT INTO supervisor_events (watch_id, at, event, target, attempt, "
                "watcher_pid, host, child_pid, exit_code, delay_s, message) "
                "VALUES ('w-1', ?, 'restart', 'pipeline.py', 1, 1, 'h', 2, 1, 1.0, ?)",
                (utc_iso(time.time()), "child exited with status 1; restarting in 1.0 s"),
            )
        finally:
            store.close()
        out = lab.ok("show", "job")
        assert "(lil watch w-1)" in out
        assert "restart  attempt 1  exit 1  child exited with" in out
        exported = json.loads(lab.ok("export", "job"))
        assert [e["event"] for e in exported["supervisor_events"]] == ["restart"]


class TestBadArguments:
    def test_an_unknown_run_is_one_line(self, history: Lab) -> None:
        for args in (("show", "nope"), ("fork", "01ZZZZZZZZ", "--from-step", "a")):
            assert "no run or goal" in one_error_line(history.lil(*args))
        line = one_error_line(history.lil("reset", "nope", "--yes"))
        assert "no goal, run id, run id prefix or run name 'nope'" in line
        assert "known goals: flaky, slow, sync" in line

    def test_a_malformed_duration_is_one_line(self, history: Lab) -> None:
        r = history.lil("gc", "--older-than", "thirty days")
        assert r.returncode == 2
        assert "expected a duration such as 30d" in one_error_line(r)
        assert "expected a duration ago" in one_error_line(history.lil("runs", "--since", "soon"))

    def test_a_file_that_is_not_a_journal_is_one_line_and_left_untouched(
        self, tmp_path: Path
    ) -> None:
        text = tmp_path / "notes.txt"
        text.write_text("not a database\n" * 100, encoding="utf-8")
        other = tmp_path / "other.db"
        conn = sqlite3.connect(other)
        conn.execute("CREATE TABLE t (a)")
        conn.commit()
        conn.close()
        before = other.read_bytes()
        for path, expected in ((text, "SQLite cannot read"), (other, "without letitloop's")):
            r = lil_forked("--db", str(path), "runs")
            assert expected in one_error_line(r)
        assert other.read_bytes() == before
        missing = lil_forked("--db", str(tmp_path / "none.db"), "runs")
        assert "no journal file here" in one_error_line(missing)
        assert not (tmp_path / "none.db").exists()

    def test_the_default_journal_comes_from_letitloop_db(self, history: Lab) -> None:
        r = lil_forked("runs", "--json", env={**os.environ, "LETITLOOP_DB": str(history.db)})
        assert r.returncode == 0, r.stderr
        assert len(json.loads(r.stdout)) == 3

    def test_lil_alone_prints_its_help_as_lines(self, history: Lab) -> None:
        r = history.lil(db=False)
        assert r.returncode in (0, 2) and "Traceback" not in r.stderr
        out = r.stdout + r.stderr
        assert "Usage: lil [OPTIONS] COMMAND" in out and "\\n" not in out
        assert len(out.splitlines()) > 10

    def test_a_duration_or_date_out_of_range_is_one_line_saying_the_range(
        self, history: Lab
    ) -> None:
        for args, expected in (
            (("gc", "--older-than", "99999999999d"), "at most 36500d (100 years)"),
            (("runs", "--since", "99999999999d"), "at most 36500d (100 years)"),
            (("runs", "--since", "9" * 400 + "w"), "at most 36500d (100 years)"),
            (("runs", "--since", "9999-12-31T23:59:59-05:00"), "between 0001-01-02 and 9999-12-30"),
            (("runs", "--since", "0001-01-01"), "between 0001-01-02 and 9999-12-30"),
        ):
            # How lil reads a value, in this process: a fresh interpreter proves nothing more.
            r = lil_in_process("--db", str(history.db), *args)
            assert r.returncode == 2
            assert expected in one_error_line(r), args
        assert len(history.json("runs", "--since", "36500d")) == 3  # the edge is accepted


def _crashed_run_with_an_unopenable_lock(lab: Lab) -> Path:
    """A run recorded as running whose lock file is a symlink to itself: reading its state fails."""
    from letitloop.stores.sqlite.holding import run_lock_path
    from letitloop.stores.sqlite.store import Store

    assert lab.run("job").returncode == 0
    conn = sqlite3.connect(lab.db)
    conn.execute("UPDATE runs SET status = 'running'")  # as a killed process leaves it
    conn.commit()
    (run_id,) = conn.execute("SELECT id FROM runs").fetchone()
    conn.close()
    store = Store(lab.db)
    try:
        lock = run_lock_path(store, run_id)
    finally:
        store.close()
    lock.unlink(missing_ok=True)
    lock.parent.mkdir(exist_ok=True)
    lock.symlink_to(lock.name)  # ELOOP: lock files are opened without following links
    return lock


BUGGY_LIL = """
import sys
import letitloop.inspection

def show_run(store, run):  # stands in for a bug anywhere below the command
    raise ZeroDivisionError("division by zero in \\x1b]0;a bug\\x07")

letitloop.inspection.show_run = show_run
from letitloop.cli import main
sys.argv[0] = "lil"
main()
"""


class TestNothingEndsInATraceback:
    def test_an_unusable_lock_file_is_one_line_naming_the_path(self, tmp_path: Path) -> None:
        lab = Lab(tmp_path)
        lock = _crashed_run_with_an_unopenable_lock(lab)
        line = one_error_line(lab.lil("runs"))
        assert f"Error: {lock}: cannot use the lock file beside the journal" in line

    def test_an_unexpected_error_is_one_line_saying_how_to_see_its_traceback(
        self, tmp_path: Path
    ) -> None:
        lab = Lab(tmp_path)
        assert lab.run("job").returncode == 0
        buggy = write_script(tmp_path, "buggy_lil.py", BUGGY_LIL)
        r = run_forked(buggy, "--db", str(lab.db), "show", "job", env=lab.env())
        assert r.returncode == 70
        line = one_error_line(r)
        assert line.startswith(
            r"Error: internal error: ZeroDivisionError: division by zero in \x1b]0;a bug\x07"
        )
        assert "run again with LETITLOOP_TRACEBACK=1 to see the traceback" in line

    def test_the_traceback_variable_gives_the_traceback(self, tmp_path: Path) -> None:
        lab = Lab(tmp_path)
        assert lab.run("job").returncode == 0
        buggy = write_script(tmp_path, "buggy_lil.py", BUGGY_LIL)
        env = {**lab.env(), "LETITLOOP_TRACEBACK": "1"}
        r = run_forked(buggy, "--db", str(lab.db), "show", "job", env=env)
        assert r.returncode == 1
        assert "Traceback (most recent call last)" in r.stderr
        assert r.stderr.rstrip().splitlines()[-1].startswith("ZeroDivisionError")
        (tmp_path / "os").mkdir()
        _crashed_run_with_an_unopenable_lock(Lab(tmp_path / "os"))
        r = lil_forked("--db", str(tmp_path / "os" / "journal.db"), "runs", env=env)
        assert "Traceback (most recent call last)" in r.stderr and "JournalFileError" in r.stderr

    def test_a_user_mistake_stays_one_line_with_the_traceback_variable(self, history: Lab) -> None:
        r = lil_forked(
            "--db",
            str(history.db),
            "gc",
            "--older-than",
            "x",
            env={**history.env(), "LETITLOOP_TRACEBACK": "1"},
        )
        assert "expected a duration" in one_error_line(r)
