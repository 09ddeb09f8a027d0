"""The worked example of docs/testing.md (examples/replay_test/), run as a reader types it: the
doc's console lines, each in a shell, in the example's own folder of this checkout (not a copy),
the ``pytest`` and ``lil`` on PATH. Record a run, make a redacted fixture with ``lil fixture``,
test it with pytest (the plugin from the installed package's entry point, which the example's
own pytest settings leave on), change the pipeline, and see the test name the drifted step.

What the lines make in the folder (the recording, the fixture, pytest's cache) is removed
afterwards and ``triage.py`` is put back as it was, whatever happened.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "replay_test"
SECRET = "sk-live-0c5e1f00d"


def worked_example() -> list[tuple[str, str]]:
    """The console lines of docs/testing.md's "The worked example": (command, its comment)."""
    text = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
    part = text[text.index("## The worked example") :]
    block = part[part.index("```console\n") + len("```console\n") :]
    block = block[: block.index("```")]
    found = []
    for line in block.splitlines():
        if line.startswith("$ "):
            command, _, comment = line[2:].partition("#")
            found.append((command.strip(), comment.strip()))
    return found


@pytest.fixture
def in_place() -> Iterator[Path]:
    """The example's folder as the checkout has it, left as it was found afterwards."""
    source = EXAMPLE / "triage.py"
    pristine = source.read_text(encoding="utf-8")
    assert 'TONE = "friendly"' in pristine, (
        f"{source} was left changed (by an interrupted run of this test?): "
        f"git checkout {source.relative_to(ROOT)}"
    )
    before = {p for p in EXAMPLE.rglob("*") if "__pycache__" not in p.parts}
    assert not (EXAMPLE / "recordings.db").exists() and not (EXAMPLE / "tests/fixtures").exists()
    try:
        yield EXAMPLE
    finally:
        source.write_text(pristine, encoding="utf-8")
        made = {p for p in EXAMPLE.rglob("*") if "__pycache__" not in p.parts} - before
        for path in sorted(made, key=lambda p: len(p.parts)):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            elif path.exists():
                path.unlink()


def shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``command`` in a shell, as a reader with letitloop installed types it: this Python's
    ``python``, ``pytest`` and ``lil`` first on PATH, no LETITLOOP_ or MODEL_ variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LETITLOOP_", "MODEL_"))}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    return subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


class TestTheWorkedExample:
    def test_the_lines_as_printed_record_test_and_name_the_drifted_step(
        self, in_place: Path
    ) -> None:
        lines = worked_example()
        assert [c.split()[0] for c, _ in lines] == [
            "cd",
            "LETITLOOP_DB=recordings.db",
            "mkdir",
            "lil",
            "pytest",
            "sed",
            "pytest",
        ]
        assert lines[0][0] == "cd examples/replay_test"
        assert lines[4] == ("pytest tests/", "1 passed: no model call")
        assert lines[6] == ("pytest tests/", "1 failed: step 'draft' drifted from the recording")
        here = ROOT / lines[0][0].split()[1]
        assert here == in_place
        done = [shell(c.replace("sk-…", SECRET), here) for c, _ in lines[1:]]
        recorded, made, fixture, passed, changed, failed = done
        for step in (recorded, made, fixture, changed):
            assert step.returncode == 0, step.stdout + step.stderr
        assert recorded.stdout == "billing: Hello! Sorry about that; the billing team is on it.\n"
        assert fixture.stdout.startswith("copied run ")
        assert SECRET.encode() in (here / "recordings.db").read_bytes()
        assert SECRET.encode() not in (here / "tests" / "fixtures" / "triage.db").read_bytes()

        assert passed.returncode == 0, passed.stdout + passed.stderr
        assert f"rootdir: {here}" in passed.stdout  # the example's own settings, not ROOT's
        assert "1 passed" in passed.stdout

        assert 'TONE = "formal"' in (here / "triage.py").read_text(encoding="utf-8")
        assert failed.returncode == 1, failed.stdout + failed.stderr
        out = failed.stdout
        assert "1 failed" in out
        assert "step 'draft' drifted from the recording" in out
        assert "tone=formal" in out and "<- differs" in out
        assert "unchecked(…)" in out  # the key is not shown
        assert "'classify'" not in out.split("drifted")[0]  # the first step still replays
