"""A resumed run's recorded steps are read in one packed scan, and say what the rows say.

The SQLite store reads a run's done steps, sleeps and waits, and its markers'
keys, as two JSON arrays SQLite builds in one scan of the run's rows
(``SqliteStepRows.recorded_steps``); row by row is its twin
(``recorded_steps_by_row``), taken whenever the packed form cannot answer
exactly. Real journal files; the resume itself is checked from a fresh process.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from letitloop import Journal
from letitloop.errors import LetItLoopError
from letitloop.stores.schemes import open_storage
from letitloop.stores.sqlite.reads import RECORDED_PACKED

#: Step names that stress the packing: quotes, backslashes, JSON's own characters,
#: non-ASCII, a '#' that is no repeat number. (Control characters are refused in names;
#: rows holding them, written by other programs, are added with SQL below.)
NAMES = [
    'say "hi"',
    "back\\slash",
    "\\u0041 not an escape",
    "é ü 漢字 🚀",
    "hash#x",
    "hash#",
    "9",
    "[1, 2]",
]


def _work(*args: Any) -> str:
    return "ok"


def _boom() -> None:
    raise ValueError("no")


def _write(path: Path) -> None:
    """Run 'r1' of goal 'g': named steps called twice (repeat numbers out of key order),
    a step without arguments, a sleep, a marker and a failed step; left failed."""
    with pytest.raises(ValueError), Journal("g", path=str(path), run="r1") as j:
        for round_ in range(12):  # 's', 's#2' ... 's#12': key order is not journal order
            j.step("s", _work, round_)
        for i, name in enumerate(NAMES):
            j.step(name, _work, i, name)
            j.step(name, _work, i, name)
        j.step("no_args", _work)
        j.sleep("nap", 0)
        with j.atomic_marker("sent") as first:
            assert first
        with j.atomic_marker("sent again") as first:
            assert first
        with pytest.raises(ValueError):
            j.step("fails", _boom)
        j.step("inner_parent", lambda: j.step("child", _work, 1))
        raise ValueError("leave the run failed, to be resumed")


def _both(path: Path) -> tuple[Any, Any]:
    """The packed read and the row-by-row read of run 'r1', on one storage."""
    storage = open_storage(str(path), "process")
    try:
        run_id, started = storage.find_or_start_run(
            "g", "r1", None, None, time.time(), lambda rid: None
        )
        assert not started
        packed = storage.recorded_steps(run_id)
        by_row = storage.recorded_steps_by_row(storage.key_of_run(run_id))  # type: ignore[attr-defined]
        return packed, by_row
    finally:
        storage.close()


class TestARunsRecordedSteps:
    def test_the_packed_read_gives_what_the_row_by_row_read_gives(self, tmp_path: Path) -> None:
        path = tmp_path / "j.db"
        _write(path)
        (rows, markers), (rows_by_row, markers_by_row) = _both(path)
        assert rows == [tuple(r) for r in rows_by_row]
        assert markers == markers_by_row == {"sent", "sent again"}
        assert all(type(r) is tuple for r in rows)

    def test_the_packed_form_itself_holds_every_row(self, tmp_path: Path) -> None:
        # Not a fallback to the row-by-row read: SQLite's two JSON arrays hold the answer.
        path = tmp_path / "j.db"
        _write(path)
        (rows, markers), _ = _both(path)
        conn = sqlite3.connect(path)
        ((steps, marker_keys, left_usage),) = conn.execute(
            RECORDED_PACKED.format(table="_journal_g"),
            conn.execute("SELECT num FROM runs WHERE name = 'r1'").fetchone(),
        ).fetchall()
        conn.close()
        assert sorted(map(tuple, json.loads(steps)), key=lambda r: r[3]) == rows
        assert set(json.loads(marker_keys)) == markers
        assert left_usage == 0

    def test_keys_holding_control_characters_come_back_exactly(self, tmp_path: Path) -> None:
        path = tmp_path / "j.db"
        _write(path)
        odd = ["unit\x1fsep", "record\x1esep", "nul\x00byte", "line\nbreak", "s#13"]
        conn = sqlite3.connect(path)
        with conn:  # copies of a recorded row under keys no name may hold, and a marker
            for key in odd:
                conn.execute(
                    'INSERT INTO "_journal_g" (run, key, kind, status, fn, result, started, '
                    "duration, attempt, args_fp, checksum) SELECT run, ?, kind, status, fn, "
                    'result, started, duration, attempt, args_fp || ?, NULL FROM "_journal_g" '
                    "WHERE key = 's'",
                    (key, key),
                )
            conn.execute(
                'INSERT INTO "_journal_g" (run, key, kind, status, attempt) '
                "SELECT run, ?, 'marker', 'done', 1 FROM \"_journal_g\" WHERE key = 's'",
                ("mark\x1f\x00",),
            )
        conn.close()
        (rows, markers), (rows_by_row, markers_by_row) = _both(path)
        assert rows == [tuple(r) for r in rows_by_row]
        assert markers == markers_by_row
        assert [(r[0], r[2], r[4]) for r in rows[-5:]] == [
            (key, rows[0][2] + key, None) for key in odd
        ]
        assert "mark\x1f\x00" in markers

    def test_they_come_in_journal_order_whatever_their_keys_order(self, tmp_path: Path) -> None:
        path = tmp_path / "j.db"
        _write(path)
        (rows, _), _ = _both(path)
        handles = [r[3] for r in rows]
        assert handles == sorted(handles)
        keys = [r[0] for r in rows]
        assert keys[:12] == ["s"] + [f"s#{n}" for n in range(2, 13)]
        assert keys != sorted(keys)
        assert "fails" not in keys  # a failed step is not recorded as done
        assert "nap" in keys  # a sleep is

    def test_a_row_whose_function_is_no_name_is_read_row_by_row(self, tmp_path: Path) -> None:
        path = tmp_path / "j.db"
        _write(path)
        conn = sqlite3.connect(path)
        with conn:  # a function id that names no function: coalesce() hands back the id
            conn.execute("UPDATE \"_journal_g\" SET fn = 987654 WHERE key = 's#3'")
        conn.close()
        (rows, markers), (rows_by_row, markers_by_row) = _both(path)
        assert rows == rows_by_row
        assert markers == markers_by_row
        assert [r[1] for r in rows if r[0] == "s#3"] == [987654]

    def test_text_that_is_not_utf8_meets_the_row_by_row_reads_error(self, tmp_path: Path) -> None:
        path = tmp_path / "j.db"
        _write(path)
        conn = sqlite3.connect(path)
        with conn:
            conn.execute(
                "UPDATE \"_journal_g\" SET args_fp = CAST(x'ff00fe' AS TEXT) WHERE key = 's#2'"
            )
        conn.close()
        storage = open_storage(str(path), "process")
        try:
            run_id, _ = storage.find_or_start_run(
                "g", "r1", None, None, time.time(), lambda r: None
            )
            with pytest.raises(LetItLoopError):
                storage.recorded_steps(run_id)
        finally:
            storage.close()


#: Records 200 steps of run "r1" under names with quotes, a backslash and non-ASCII, repeated
#: (numbered keys), then SIGKILLs itself
#: inside the last one (argv[2] == "kill"); or resumes it and prints which steps ran.
PROGRAM = """
import os, signal, sys
from letitloop import Journal

ran = []

def work(i):
    ran.append(i)
    if i == 199 and sys.argv[2] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    return {"i": i}

with Journal("g", path=sys.argv[1], run="r1") as j:
    total = sum(j.step(f's "{i % 7}" \\\\ é', work, i)["i"] for i in range(200))
print(total, ran)
"""


class TestAResumeAfterSigkill:
    def test_only_the_step_in_flight_runs_again(self, tmp_path: Path) -> None:
        db = str(tmp_path / "j.db")
        env = {k: v for k, v in os.environ.items() if k != "LETITLOOP_DB"}
        killed = subprocess.run(
            [sys.executable, "-c", PROGRAM, db, "kill"], env=env, capture_output=True, text=True
        )
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        resumed = subprocess.run(
            [sys.executable, "-c", PROGRAM, db, "resume"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        assert resumed.stdout.split(maxsplit=1) == [str(sum(range(200))), "[199]\n"]


def _claim(path: Path) -> tuple[Any, str]:
    """A storage of run 'r1', claimed as a new attempt (the opener's order: find, claim)."""
    storage = open_storage(str(path), "process")
    run_id, _ = storage.find_or_start_run("g", "r1", None, None, time.time(), lambda r: None)
    claim, _ = storage.claim_run(run_id, time.time(), lambda found: "resume")
    assert claim == "resume"
    return storage, run_id


class TestAClaimThatReadsTheRun:
    def test_the_opener_gets_the_rows_the_claim_read_once(self, tmp_path: Path) -> None:
        path = tmp_path / "j.db"
        _write(path)
        storage, run_id = _claim(path)
        try:
            kept = storage.claimed_read
            assert kept is not None and kept[0] == run_id
            fresh = storage.recorded_steps_by_row(storage.key_of_run(run_id))
            assert storage.recorded_steps(run_id) == kept[1] == fresh
            assert storage.claimed_read is None
            assert storage.recorded_steps(run_id) == fresh  # read afresh
        finally:
            storage.close()

    @pytest.mark.parametrize(
        ("status", "usage", "kept"),
        [
            ("running", "input_tokens = 7", True),
            ("failed", "cost = 0.5", True),
            ("failed", "output_tokens = 3", True),
            ("done", "input_tokens = 7", False),
            ("running", "model = 'm'", False),
        ],
    )
    def test_usage_left_on_a_row_is_kept_as_a_try_once(
        self, tmp_path: Path, status: str, usage: str, kept: bool
    ) -> None:
        path = tmp_path / "j.db"
        _write(path)
        conn = sqlite3.connect(path)
        with conn:
            conn.execute(
                f"UPDATE \"_journal_g\" SET status = ?, {usage} WHERE key = 's#4'", (status,)
            )
        conn.close()
        storage, _ = _claim(path)
        storage.close()
        conn = sqlite3.connect(path)
        # (step 'fails' raised when it was written: its call is a try of its own)
        tries = conn.execute("SELECT key, ended FROM step_tries WHERE key = 's#4'").fetchall()
        left = conn.execute(
            "SELECT input_tokens, output_tokens, cost FROM \"_journal_g\" WHERE key = 's#4'"
        ).fetchone()
        conn.close()
        ended = "crashed" if status == "running" else "failed"
        assert tries == ([("s#4", ended)] if kept else [])
        assert (left == (None, None, None)) == (kept or usage.startswith("model"))
