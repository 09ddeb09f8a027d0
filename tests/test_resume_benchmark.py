"""A smoke run of the resume benchmark (the figures come from benchmarks/resume.py).

It checks what the resumed process did, never how long it took: a run
really SIGKILLed in its last step resumes to the right result, with every
recorded step replayed and only the last one run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import run_benchmark

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import resume  # noqa: E402

STEPS = 40


class TestARunKilledInItsLastStep:
    def test_it_resumes_to_the_right_result_running_only_the_last_step(
        self, tmp_path: Path
    ) -> None:
        crashed = resume.crash(tmp_path, ROOT, STEPS)
        # resume_once also checks the journal afterwards: every step done, the
        # recorded ones by the first attempt, the last one by the second.
        got = resume.resume_once(tmp_path, ROOT, crashed, "smoke")
        assert got.out == [str(resume.expected_total(STEPS)), "1"]
        assert 0 < got.to_result <= got.to_exit

    def test_each_round_gets_the_crash_state_afresh(self, tmp_path: Path) -> None:
        crashed = resume.crash(tmp_path, ROOT, STEPS)
        for label in ("a", "a", "b"):
            assert resume.resume_once(tmp_path, ROOT, crashed, label).out[1] == "1"

    def test_the_floor_reads_every_recorded_result(self, tmp_path: Path) -> None:
        crashed = resume.crash(tmp_path, ROOT, STEPS)
        got = resume.floor_once(tmp_path, ROOT, crashed)
        assert got.out == [str(resume.expected_total(STEPS - 1)), str(STEPS - 1)]

    def test_the_floors_imports_row_reads_nothing_and_prints_its_clock(
        self, tmp_path: Path
    ) -> None:
        got = resume.imports_once(tmp_path, ROOT)
        assert got.out == []  # the one field printed is the clock, taken off as the result
        assert 0 < got.to_result <= got.to_exit

    def test_a_resume_that_ran_recorded_steps_again_is_refused(self, tmp_path: Path) -> None:
        crashed = resume.crash(tmp_path, ROOT, STEPS)
        for name in ("j.db", "j.db-wal", "j.db-shm"):  # the journal lost: every step runs
            (crashed.folder / name).unlink(missing_ok=True)
        with pytest.raises(SystemExit, match=f"with {STEPS} step calls, expected 1"):
            resume.resume_once(tmp_path, ROOT, crashed, "lost")


class TestTheResumeBenchmarkSmokeRun:
    def test_it_prints_the_versions_and_a_row_per_process(self) -> None:
        report = run_benchmark("resume.py", "--rounds", "1", "--steps", str(STEPS))
        rows = [line for line in report.splitlines() if line.startswith("| ")]
        assert [r.split("|")[1].strip() for r in rows[1:]] == [
            resume.BARE,
            resume.SQLITE_IMPORTS,
            resume.SQLITE_FLOOR,
            f"letitloop resume ({ROOT})",
        ]
