"""Damage is detected, not replayed: every step row's checksum, checked when it replays.

Real journal files, damaged with sqlite3 or by flipping bytes, replayed by a
fresh process (letitloop/integrity/checksums.py, replay.py).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from helpers import lil_forked, program_file, run_forked
from hypothesis import given
from hypothesis import strategies as st

from letitloop import Journal
from letitloop.errors import DamagedRowError
from letitloop.integrity.checksums import done_sum, step_sum
from letitloop.stores.memory.database import existing

ROOT = Path(__file__).resolve().parent.parent

#: Writes (first process) or replays (later ones) run "r1" of goal "g": two steps.
PROGRAM = """
import sys
from letitloop import Journal
from letitloop.errors import LetItLoopError

def fetch(n):
    print("called", n, flush=True)
    return {"n": n * 10}

try:
    with Journal("g", path=sys.argv[1], run="r1") as j:
        print("got", j.step("a", fetch, 1)["n"], j.step("b", fetch, 2)["n"], j.run_id)
except LetItLoopError as exc:
    print(type(exc).__name__, getattr(exc, "run_id", None), getattr(exc, "key", None))
    print(exc)
"""


def run_program(db: Path) -> list[str]:
    out = run_forked(program_file(PROGRAM), str(db), cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


@pytest.fixture(scope="module")
def recorded_once(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A journal file holding run r1 (steps a and b) as a first process wrote it; its run id:
    written once for the module (:func:`recorded` copies it)."""
    db = tmp_path_factory.mktemp("recorded") / "journal.db"
    first = run_program(db)
    assert first[:2] == ["called 1", "called 2"]
    return db, first[2].split()[-1]


@pytest.fixture
def recorded(tmp_path: Path, recorded_once: tuple[Path, str]) -> tuple[Path, str]:
    """A copy of :func:`recorded_once`'s file (its writer ended) for one test to damage."""
    once, run_id = recorded_once
    db = tmp_path / "journal.db"
    for suffix in ("", "-wal"):
        if Path(f"{once}{suffix}").exists():
            shutil.copyfile(f"{once}{suffix}", f"{db}{suffix}")
    return db, run_id


def edit(db: Path, sql: str, *params: object) -> None:
    conn = sqlite3.connect(db)
    with conn:
        assert conn.execute(sql, params).rowcount == 1
    conn.close()


class TestAStepRowDamagedInTheFile:
    def test_a_changed_result_is_refused_naming_the_run_and_key(
        self, recorded: tuple[Path, str]
    ) -> None:
        db, run_id = recorded
        edit(db, """UPDATE _journal_g SET result = '{"n":11}' WHERE key = 'a'""")
        out = run_program(db)
        assert out[0] == f"DamagedRowError {run_id} a", out
        assert "fails its checksum" in out[1] and f"run {run_id}" in out[1]
        assert not any(line.startswith(("called", "got")) for line in out)  # nothing handed back

    def test_a_changed_fingerprint_is_damage_not_other_arguments(
        self, recorded: tuple[Path, str]
    ) -> None:
        db, run_id = recorded
        edit(db, "UPDATE _journal_g SET args_fp = 'x' || substr(args_fp, 2) WHERE key = 'b'")
        assert run_program(db)[0] == f"DamagedRowError {run_id} b"

    def test_a_changed_function_name_is_damage_not_changed_code(
        self, recorded: tuple[Path, str]
    ) -> None:
        db, run_id = recorded
        edit(db, "UPDATE functions SET name = '__main__.fetcx' WHERE name = '__main__.fetch'")
        assert run_program(db)[0] == f"DamagedRowError {run_id} a"

    def test_the_checksum_is_the_one_written_in_the_row(self, recorded: tuple[Path, str]) -> None:
        db, run_id = recorded
        conn = sqlite3.connect(db)
        rows = conn.execute(
            "SELECT key, status, fn, args_fp, result, error, checksum FROM journal_g ORDER BY key"
        ).fetchall()
        conn.close()
        assert [r[6] for r in rows] == [step_sum(run_id, *r[:6]) for r in rows]


#: Runs the block of marker "notify" (scope from argv) once, in run "r1" of goal "g".
MARKER_PROGRAM = """
import sys
from letitloop import Journal
from letitloop.errors import LetItLoopError

try:
    with Journal("g", path=sys.argv[1], run="r1") as j:
        with j.atomic_marker("notify", scope=sys.argv[2]) as should_execute:
            print("sent" if should_execute else "skipped")
except LetItLoopError as exc:
    print(type(exc).__name__, exc.key)
"""


def run_marker(db: Path, scope: str) -> str:
    out = run_forked(program_file(MARKER_PROGRAM), str(db), scope, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


class TestAMarkerRowDamagedInTheFile:
    @pytest.mark.parametrize(
        ("scope", "table"), [("run", "_journal_g"), ("goal", "_journal_g"), ("global", "markers")]
    )
    def test_its_block_is_not_run_again(self, tmp_path: Path, scope: str, table: str) -> None:
        db = tmp_path / "journal.db"
        assert run_marker(db, scope) == "sent"
        assert run_marker(db, scope) == "skipped"
        # A damaged status would offer the block again ('failed' is retried).
        edit(db, f"UPDATE \"{table}\" SET status = 'failed' WHERE key = 'notify'")
        assert run_marker(db, scope) == "DamagedRowError notify"


#: Run "r1": a sleep and a wait (argv[2] "send": answered with letitloop.send first).
PAUSES = """
import sys
from letitloop import Journal, send
from letitloop.errors import LetItLoopError
from letitloop.primitives.waits import RunWaiting

if sys.argv[2] == "send":
    send("r1", "answer", {"yes": 1}, path=sys.argv[1])
try:
    with Journal("g", path=sys.argv[1], run="r1") as j:
        j.sleep("nap", 0)
        print("got", j.wait_for("answer", stop_after=0))
except RunWaiting:
    print("waiting")
except LetItLoopError as exc:
    print(type(exc).__name__, getattr(exc, "key", None))
"""


def run_pauses(db: Path, how: str = "") -> list[str]:
    out = run_forked(program_file(PAUSES), str(db), how, cwd=ROOT)
    return out.stdout.splitlines()


class TestASleepOrWaitRowDamagedInTheFile:
    @pytest.fixture
    def answered(self, tmp_path: Path) -> Path:
        db = tmp_path / "journal.db"
        assert run_pauses(db) == ["waiting"]
        assert run_pauses(db, "send") == ["got {'yes': 1}"]
        assert run_pauses(db) == ["got {'yes': 1}"]  # replayed
        return db

    def test_a_changed_value_sent_to_a_wait_is_refused(self, answered: Path) -> None:
        edit(answered, """UPDATE _journal_g SET result = '{"yes":2}' WHERE key = 'answer'""")
        assert run_pauses(answered) == ["DamagedRowError answer"]

    def test_a_changed_timeout_is_refused(self, answered: Path) -> None:
        edit(answered, "UPDATE _journal_g SET error = 'x', result = NULL WHERE key = 'answer'")
        assert run_pauses(answered) == ["DamagedRowError answer"]

    def test_a_done_sleep_carries_its_checksum_and_lil_show_marks_it_damaged(
        self, answered: Path
    ) -> None:
        edit(answered, "UPDATE _journal_g SET checksum = checksum + 1 WHERE key = 'nap'")
        assert run_pauses(answered) == ["DamagedRowError nap"]
        show = lil_forked("show", "--db", str(answered), "r1", cwd=ROOT).stdout
        table = [line.split() for line in show.splitlines()]
        assert [row[3] for row in table if row[1:3] == ["nap", "sleep"]] == ["damaged"]


class TestARowCopiedByAFork:
    def test_it_carries_its_checksum_and_a_damaged_copy_is_refused(
        self, recorded: tuple[Path, str]
    ) -> None:
        db, _ = recorded
        fork = lil_forked("fork", "--db", str(db), "r1", "--from-step", "b", cwd=ROOT)
        assert fork.returncode == 0, fork.stderr
        conn = sqlite3.connect(db)
        ((new_id, checksum),) = conn.execute(
            "SELECT run, checksum FROM journal_g WHERE key = 'a' AND attempt = 0"
        ).fetchall()
        conn.close()
        assert checksum is not None
        edit(
            db,
            """UPDATE _journal_g SET result = '{"n":11}' WHERE key = 'a' """
            "AND run = (SELECT num FROM runs WHERE id = ?)",
            new_id,
        )
        out = run_program(db)  # the fork now holds the name r1
        assert out[0] == f"DamagedRowError {new_id} a", out


class TestLilShow:
    def lil(self, db: Path, *args: str) -> str:
        out = lil_forked("show", "--db", str(db), *args, cwd=ROOT)
        assert out.returncode == 0, out.stderr
        return out.stdout

    def test_it_marks_a_damaged_row_and_only_that_one(self, recorded: tuple[Path, str]) -> None:
        db, run_id = recorded
        assert "damaged" not in self.lil(db, run_id)
        edit(db, """UPDATE _journal_g SET result = '{"n":11}' WHERE key = 'a'""")
        table = [line.split() for line in self.lil(db, run_id).splitlines()]
        assert [row[3] for row in table if row[1:3] == ["a", "step"]] == ["damaged"]
        assert [row[3] for row in table if row[1:3] == ["b", "step"]] == ["done"]
        assert "DAMAGED: the row fails its checksum" in self.lil(db, run_id, "--step", "a")


class TestTheMemoryStore:
    def test_its_rows_carry_the_checksum_and_a_damaged_one_is_refused(self) -> None:
        def fetch(n: int) -> int:
            return n * 10

        url = "memory://checksums-damaged"
        with Journal("g", path=url, run="r1") as j:
            assert j.step("a", fetch, 1) == 10
            run_id = j.run_id
        db = existing(url)
        assert db is not None
        (row,) = db.rows("g")
        assert row["checksum"] == step_sum(
            run_id, "a", "done", row["fn"], row["args_fp"], row["result"], None
        )
        row["result"] = "11"
        with (
            pytest.raises(DamagedRowError, match="fails its checksum") as caught,
            Journal("g", path=url, run="r1") as j,
        ):
            j.step("a", fetch, 1)
        assert (caught.value.run_id, caught.value.key) == (run_id, "a")


class TestTheChecksum:
    def test_the_pauses_function_names_are_the_sleeps_and_waits(self) -> None:
        from letitloop.identity.step_names import HISTORY
        from letitloop.integrity.checksums import PAUSE_FNS
        from letitloop.primitives.sleeps import SLEEP_FN
        from letitloop.primitives.waits import WAIT_FN

        assert (SLEEP_FN, WAIT_FN, *HISTORY[SLEEP_FN], *HISTORY[WAIT_FN]) == PAUSE_FNS

    def test_text_with_a_lone_surrogate_has_one(self) -> None:
        # An error message may hold one; it is hashed as is, and differs from another.
        one = step_sum("r", "k", "failed", "m.f", "", None, "ValueError: \ud800")
        assert one != step_sum("r", "k", "failed", "m.f", "", None, "ValueError: \ud801")


class TestAReturnedStepsChecksum:
    @given(st.text(), st.text(), st.text(), st.none() | st.text(), st.none() | st.text())
    def test_done_sum_is_step_sum_of_a_done_row(
        self, run_id: str, key: str, fn: str, fp: str | None, result: str | None
    ) -> None:
        # The fresh step's shortcut writes the number every reader computes, and a
        # replay checks with it (lone surrogates included; a row recorded without a
        # fingerprint, or a step that returned None, has None there).
        expected = step_sum(run_id, key, "done", fn, fp, result, None)
        assert done_sum(run_id, key, fn, fp, result) == expected


class TestARowWrittenBeforeChecksums:
    def test_it_replays_unchecked_as_before(self, recorded: tuple[Path, str]) -> None:
        db, run_id = recorded
        edit(db, "UPDATE _journal_g SET checksum = NULL WHERE key = 'a'")
        assert run_program(db) == [f"got 10 20 {run_id}"]  # replayed, nothing called


class TestRandomByteFlipsInJournalFiles:
    @pytest.mark.parametrize("sealed", [False, True], ids=["plain", "sealed"])
    def test_no_flipped_byte_is_replayed_as_a_wrong_value(self, sealed: bool) -> None:
        # Half the flips land in a recorded result's bytes (each one a wrong value
        # before checksums), half anywhere in the file.
        seal = ["--seal"] if sealed else []
        script = ROOT / "benchmarks" / "fault_injection.py"
        out = run_forked(script, "--files", "40", "--seed", "7", *seal, cwd=ROOT)
        assert out.returncode == 0, out.stderr
        counts = json.loads(out.stdout)
        assert counts["wrong"] == 0, counts
        assert counts["other"] == 0, counts  # damage is a LetItLoopError, never a traceback
        assert counts["refused"] >= 20, counts  # every flip in a result was caught
