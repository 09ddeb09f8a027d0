"""A smoke run of the codec benchmark (the figures come from benchmarks/bench_codec.py).

It checks what the report says, not only that the script exits 0: every
payload reported once, with its round trip checked, and a timing for each
contender under it.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from helpers import run_benchmark

ROOT = Path(__file__).resolve().parent.parent

PAYLOADS = (
    "typical agent payload (typed: datetime, UUID)",
    "JSON-native document: records, many small values",
    "JSON-native document: agent transcript, long strings",
)
CONTENDERS = ("letitloop codec", "raw msgspec.json", "json (stdlib)", "pickle")
ROW = re.compile(r"^  (?P<name>.+?) +(?P<us>\d+\.\d) us +(?P<ratio>\d+\.\d\d)x raw msgspec$")


def sections(report: str) -> dict[str, list[str]]:
    """The report's lines under each payload heading, by heading (without its size)."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in report.splitlines():
        heading = next((p for p in PAYLOADS if line.startswith(p + ", ")), None)
        if heading is not None:
            assert heading not in out, f"{heading!r} reported twice"
            current = out[heading] = []
        elif current is not None and line.strip():
            current.append(line)
    return out


class TestTheCodecBenchmarkSmokeRun:
    def test_it_reports_each_payload_its_round_trip_and_a_time_for_each_contender(self) -> None:
        report = run_benchmark("bench_codec.py", "--repeats", "3", header_words=("msgspec",))
        found = sections(report)
        assert list(found) == list(PAYLOADS), report
        for payload, lines in found.items():
            assert re.search(
                r", [\d,]+ bytes as stored$",
                next(line for line in report.splitlines() if line.startswith(payload)),
            )
            assert lines[0] == "  round trip: equal, same types (re-encodes to the same text)"
            rows = [ROW.match(line) for line in lines[1:]]
            assert all(rows), lines
            by_name = {m["name"]: m for m in rows if m}
            assert list(by_name) == list(CONTENDERS), lines
            assert all(float(m["us"]) > 0 for m in by_name.values()), lines
            assert by_name["raw msgspec.json"]["ratio"] == "1.00", lines

    def test_its_round_trip_check_fails_on_a_payload_that_does_not_come_back_equal(self) -> None:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        try:
            import bench_codec  # type: ignore[import-not-found]  # a script, not a package
        finally:
            sys.path.remove(str(ROOT / "benchmarks"))
        assert bench_codec.check_round_trip((1, [2])).startswith("round trip: equal")
        with pytest.raises(AssertionError, match="must round-trip"):
            bench_codec.check_round_trip([float("nan")])  # a fresh nan is not equal to it
