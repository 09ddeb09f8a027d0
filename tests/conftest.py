"""Shared fixtures: real journal files in temporary folders, real child interpreters."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A journal path in a fresh temporary folder (the file does not exist yet)."""
    return tmp_path / "journal.db"


@pytest.fixture(autouse=True)
def _no_ambient_journal(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    # Never touch a developer's .letitloop/ or $LETITLOOP_DB by accident.
    monkeypatch.delenv("LETITLOOP_DB", raising=False)
    monkeypatch.delenv("LETITLOOP_WATCH_ID", raising=False)
    monkeypatch.chdir(tmp_path)
    yield
