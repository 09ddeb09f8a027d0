"""``lil mcp`` echoes a value it was given as a short preview, never whole (issue 50,
item 10): a 20 MB argument made a 20 MB error line.

Over stdio, with the real ``lil mcp`` as a client's configuration starts it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import StdioServerParameters
from test_mcp_server import ask, error_line

from letitloop.runtext.previews import PREVIEW_CHARS, preview

#: An argument of 2 MB (the report used 20 MB: the same echo, ten times slower to pass).
HUGE = "x" * (2 << 20)


def lil_mcp(db: Path) -> StdioServerParameters:
    """The real ``lil mcp --db DB`` in this process's environment (the MCP SDK's default
    environment leaves PYTHONPATH out: the letitloop under test)."""
    return StdioServerParameters(
        command=sys.executable, args=["-m", "letitloop", "mcp", "--db", str(db)], env={**os.environ}
    )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "journal.db"
    made = (
        "import sys\nfrom letitloop import Journal\n"
        "with Journal('g', run='r', path=sys.argv[1]) as j:\n    j.step('a', str, 1)\n"
    )
    subprocess.run([sys.executable, "-c", made, str(path)], check=True, timeout=60)
    return path


class TestAHugeArgument:
    def test_each_tool_echoes_it_as_a_short_preview(self, db: Path) -> None:
        big = "y" * (256 << 10)
        results = ask(
            lil_mcp(db),
            ("show_run", {"run": HUGE}),
            ("export_run", {"run": big}),
            ("reset_run", {"run": big}),
            ("fork_run", {"run": big, "from_step": "a"}),
            ("cancel_run", {"run": big}),
            ("send_value", {"run": big, "name": "n", "value": 1}),
            ("send_value", {"run": "r", "name": big, "value": 1}),
            ("show_run", {"run": "r", "step": big}),
            ("list_runs", {"states": [big]}),
        )
        for result in results:
            line = error_line(result)
            # Before: the whole argument came back (20,971,664 characters for 20 MB).
            assert len(line) < 1000, len(line)
        assert "characters)" in error_line(results[0])
        assert f"{len(repr(HUGE)):,}" in error_line(results[0])


class TestPreview:
    def test_a_short_value_is_shown_whole(self) -> None:
        assert preview("run-1") == "'run-1'"

    def test_a_long_value_is_cut_and_says_its_length(self) -> None:
        shown = preview("z" * 10_000)
        assert shown.startswith("'zzz") and shown.endswith("(10,002 characters)")
        assert len(shown) < PREVIEW_CHARS + 30
