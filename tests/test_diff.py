"""``lil diff RUN_A RUN_B``: two runs compared row by row by key, each kind of difference named,
as lines and as ``--json``; exit status 0 when they are the same, 1 when they differ.

The runs are recorded by a child process (one pipeline, changed by DRIFT between runs) and
compared by the real ``lil``.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest
from helpers import lil_forked, run_forked

PIPELINE = textwrap.dedent(
    """
    import os, sys
    from letitloop import Journal

    DRIFT = os.environ.get("DRIFT", "")

    def fetch(n):
        return {"user": {"name": "ann", "plan": "pro" if DRIFT == "result" else "free"},
                "items": [1, 2, 3]}

    def fetch_v2(n):
        return fetch(n)

    def summarize(items):
        return f"{len(items)} items"

    def late():
        if DRIFT == "status":
            raise RuntimeError("service down")
        return "fine"

    with Journal("sync", run=sys.argv[1], path="j.db") as j:
        data = j.step("fetch", fetch_v2 if DRIFT == "function" else fetch,
                      8 if DRIFT == "arguments" else 7)
        if DRIFT != "removed":
            j.step("summarize", summarize, data["items"])
        if DRIFT == "added":
            j.step("notify", summarize, data["items"])
        with j.atomic_marker("email") as go:
            pass
        try:
            j.step("late", late)
        except RuntimeError:
            pass
    """
)


def record(folder: Path, run: str, drift: str = "") -> None:
    (folder / "pipeline.py").write_text(PIPELINE)
    done = run_forked(folder / "pipeline.py", run, cwd=folder, env={**os.environ, "DRIFT": drift})
    assert done.returncode == 0, done.stderr


def lil_diff(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return lil_forked("--db", "j.db", "diff", *args, cwd=folder)


def differences(folder: Path, drift: str) -> list[dict[str, Any]]:
    record(folder, "base")
    record(folder, drift, drift)
    done = lil_diff(folder, "base", drift, "--json")
    assert done.returncode == 1, done.stderr
    found: list[dict[str, Any]] = json.loads(done.stdout)["differences"]
    return found


class TestRunsThatMadeTheSameSteps:
    def test_they_have_no_difference_and_exit_0(self, tmp_path: Path) -> None:
        record(tmp_path, "monday")
        record(tmp_path, "tuesday")
        done = lil_diff(tmp_path, "monday", "tuesday")
        assert done.returncode == 0, done.stderr
        assert "0 differences, 4 rows the same" in done.stdout


class TestEachKindOfDifference:
    def test_a_key_only_the_second_run_has_is_added(self, tmp_path: Path) -> None:
        found = differences(tmp_path, "added")
        assert [(d["key"], d["change"], d["b"]) for d in found] == [
            ("notify", "added", "__main__.summarize")
        ]

    def test_a_key_only_the_first_run_has_is_removed(self, tmp_path: Path) -> None:
        found = differences(tmp_path, "removed")
        assert [(d["key"], d["change"], d["a"]) for d in found] == [
            ("summarize", "removed", "__main__.summarize")
        ]

    def test_another_function_is_named_with_both(self, tmp_path: Path) -> None:
        found = differences(tmp_path, "function")
        assert [(d["key"], d["change"], d["a"], d["b"]) for d in found] == [
            ("fetch", "function", "__main__.fetch", "__main__.fetch_v2")
        ]

    def test_other_arguments_are_named_by_their_fingerprint(self, tmp_path: Path) -> None:
        found = differences(tmp_path, "arguments")
        assert [(d["key"], d["change"], d["detail"]) for d in found] == [
            ("fetch", "arguments", "positional argument 0 differs")
        ]
        assert found[0]["a"] != found[0]["b"]  # the two fingerprints

    def test_another_result_has_a_short_value_diff(self, tmp_path: Path) -> None:
        found = differences(tmp_path, "result")
        assert [(d["key"], d["change"], d["detail"]) for d in found] == [
            ("fetch", "result", "$.user.plan: 'free' -> 'pro'")
        ]

    def test_another_status_is_named(self, tmp_path: Path) -> None:
        record(tmp_path, "base")
        record(tmp_path, "status", "status")
        done = lil_diff(tmp_path, "base", "status", "--json")
        assert done.returncode == 1
        found = json.loads(done.stdout)["differences"]
        assert next((d["key"], d["change"], d["a"], d["b"]) for d in found) == (
            "late",
            "status",
            "done",
            "failed",
        )
        assert "RuntimeError: service down" in found[0]["detail"]


class TestTheLines:
    def test_each_difference_is_one_line_with_its_sign_key_and_change(self, tmp_path: Path) -> None:
        record(tmp_path, "base")
        record(tmp_path, "result", "result")
        done = lil_diff(tmp_path, "base", "result")
        assert done.returncode == 1
        lines = done.stdout.splitlines()
        assert "1 difference, 3 rows the same" in lines[0]
        assert lines[1] == "  ~ fetch  result: $.user.plan: 'free' -> 'pro'"

    def test_a_run_that_does_not_exist_is_one_line_and_status_1(self, tmp_path: Path) -> None:
        record(tmp_path, "base")
        done = lil_diff(tmp_path, "base", "nosuchrun")
        assert done.returncode == 1
        assert len(done.stderr.strip().splitlines()) == 1
        assert "nosuchrun" in done.stderr


class TestTheValueDiff:
    @pytest.mark.parametrize(
        ("a", "b", "said"),
        [
            ({"x": 1}, {"x": 2}, "$.x: 1 -> 2"),
            ({"x": 1}, {"x": 1, "y": 2}, "$.y: added (2)"),
            ([1, 2], [1, 2, 3], "$: 2 items -> 3"),
            ({"k": [1, {"z": "a"}]}, {"k": [1, {"z": "b"}]}, "$.k[1].z: 'a' -> 'b'"),
        ],
    )
    def test_it_names_the_paths_that_differ(self, a: Any, b: Any, said: str) -> None:
        from letitloop import codec
        from letitloop.inspection.diff import value_diff

        assert value_diff(codec.encode(a), codec.encode(b)) == said

    def test_it_names_at_most_five_paths_and_counts_the_rest(self) -> None:
        from letitloop import codec
        from letitloop.inspection.diff import value_diff

        said = value_diff(codec.encode(list(range(8))), codec.encode(list(range(1, 9))))
        assert said.count("->") == 5 and said.endswith("; and 3 more")
