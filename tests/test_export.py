"""``lil export``: one record model, whole, as one document or as a record per line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import lil_forked

from letitloop import Journal, RetryPolicy, usage


def lil(db: Path, *args: str) -> str:
    r = lil_forked("--db", str(db), *args)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture
def journal(tmp_path: Path) -> tuple[Path, str]:
    """A run whose step failed twice before it returned, reporting usage on each try."""
    db = tmp_path / "journal.db"
    tries: list[int] = []

    def ask(prompt: str) -> str:
        tries.append(1)
        usage(input_tokens=100, output_tokens=20, cost=0.01, model="m")
        if len(tries) < 3:
            raise ConnectionError(f"try {len(tries)} failed")
        return f"answer to {prompt}"

    with Journal("g", path=db) as j:
        j.step("plan", str, 1)
        j.step("ask", ask, "q", retry=RetryPolicy(max_attempts=3, initial_backoff=0.001))
    return db, j.run_id


class TestJsonlAndNdjson:
    @pytest.mark.parametrize("fmt", ["jsonl", "ndjson"])
    def test_they_hold_everything_the_json_document_holds(
        self, journal: tuple[Path, str], fmt: str
    ) -> None:
        db, run_id = journal
        document: dict[str, Any] = json.loads(lil(db, "export", run_id, "--format", "json"))
        records = [json.loads(ln) for ln in lil(db, "export", run_id, "--format", fmt).splitlines()]
        assert records[0]["record"] == "run"
        by_kind: dict[str, list[dict[str, Any]]] = {}
        for r in records:
            by_kind.setdefault(r.pop("record"), []).append(r)
        (run,) = by_kind.pop("run")
        assert {k: run[k] for k in document["run"]} == document["run"]
        names = {"rows": "row", "tries": "try", "attempts": "attempt"}
        for name, value in document.items():
            if name == "run":
                continue
            if isinstance(value, list):
                assert by_kind.pop(names.get(name, name.rstrip("s")), []) == value, name
            elif isinstance(value, dict):
                assert by_kind.pop(name) == [value], name
            else:
                assert run[name] == value, name
        assert not by_kind, by_kind  # nothing in the lines that the document lacks

    def test_the_failed_tries_and_usage_totals_are_there(self, journal: tuple[Path, str]) -> None:
        db, run_id = journal
        records = [json.loads(ln) for ln in lil(db, "export", run_id, "--jsonl").splitlines()]
        tries = [r for r in records if r["record"] == "try"]
        assert [t["error"] for t in tries] == [
            "ConnectionError: try 1 failed",
            "ConnectionError: try 2 failed",
        ]
        (totals,) = [r for r in records if r["record"] == "usage"]
        assert totals["input_tokens"] >= 100
