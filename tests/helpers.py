"""Helpers for tests: scripts in child interpreters."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path


def write_script(folder: Path, name: str, source: str) -> Path:
    """Write a dedented Python script into ``folder`` and return its path."""
    path = folder / name
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


def run_python(
    script: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a fresh interpreter to completion, capturing its output."""
    return subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def spawn_python(
    script: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """Start ``script`` in a fresh interpreter with a line-buffered stdout pipe."""
    return subprocess.Popen(
        [sys.executable, "-u", str(script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
