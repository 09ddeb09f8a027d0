"""``benchmarks/disk.py`` runs, and reports what it says it measures (never its timings)."""

from __future__ import annotations

from helpers import run_benchmark


class TestTheDiskBenchmark:
    def test_it_reports_every_setting_and_size_with_the_versions(self) -> None:
        out = run_benchmark("disk.py", "--repeats", "1", "--runs", "3")
        rows = {line.split("|")[1].strip(): line for line in out.splitlines() if "|" in line}
        default = "above 512 KiB after 256 rows (default)"
        for label in ("never (before)", "always", default):
            assert label in rows, out
        # The default setting leaves nothing in the -wal after a closed 1,000-step run.
        assert rows[default].split("|")[4].strip() == "0 KiB", out
        assert rows["never (before)"].split("|")[4].strip() != "0 KiB", out
        for label in ("1,000 steps of small results", "10,000 steps of 1 KB results"):
            assert label in rows, out
