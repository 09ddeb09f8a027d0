"""``benchmarks/row_options.py`` runs and builds every candidate row (never its timings)."""

from __future__ import annotations

from helpers import run_benchmark


class TestTheRowOptionsBenchmark:
    def test_it_reports_every_candidate_with_the_versions(self) -> None:
        out = run_benchmark(
            "row_options.py", "--rows", "20", "--repeats", "1", "--size-rows", "500"
        )
        cells = [
            [c.strip() for c in line.split("|")[1:-1]]
            for line in out.splitlines()
            if line.startswith("| ")
        ]
        rows = {r[0]: r[1:] for r in cells if r[0] != "row"}
        assert len(rows) == 12, out
        today = rows["today's row (24 columns, text run id, ISO times)"]
        compact = rows["all four compact columns + WITHOUT ROWID"]
        # Sizes do not depend on the machine: the compact row is smaller.
        assert int(compact[1].replace(",", "")) < int(today[1].replace(",", "")), out
