"""Shared fixtures: real journal files in temporary folders, real child interpreters."""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.hookimpl(optionalhook=True)  # xdist's hook: absent where xdist is (CrewAI's env)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Spread the tests over pyproject's two xdist workers one by one, except those that share.

    A test in a class goes with its class, and every test of a file that
    defines a module-scoped fixture (a chain of killed processes, a served
    app) or says ``# xdist: one worker`` (its tests share module state) goes
    with its file, so such a fixture runs once; any other test is
    handed to whichever worker is free, so one long file no longer keeps a
    worker busy while the other idles. (xdist's own ``loadgroup`` marks do not
    reach its scheduler under pytest 9, which names nodes from ``_id``.)
    """
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    root = config.rootpath

    class Scheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            if _keeps_its_tests_together(root / module):
                return module
            name = nodeid.split("[", 1)[0]  # a parameter may hold "::"
            return name.rsplit("::", 1)[0] if name.count("::") > 1 else nodeid

    return Scheduling(config, log)


@functools.cache
def _keeps_its_tests_together(path: Path) -> bool:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return False
    return 'scope="module"' in text or "# xdist: one worker" in text


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A journal path in a fresh temporary folder (the file does not exist yet)."""
    return tmp_path / "journal.db"


@pytest.fixture(autouse=True)
def _no_ambient_journal(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    # Never touch a developer's .letitloop/ or $LETITLOOP_DB by accident.
    monkeypatch.delenv("LETITLOOP_DB", raising=False)
    monkeypatch.delenv("LETITLOOP_WATCH_ID", raising=False)
    # Nor a journal above the test's folder (a /tmp/.letitloop/ a script left, say): the
    # search for the nearest .letitloop/journal.db stops there (letitloop/discovery.py).
    monkeypatch.setenv("LETITLOOP_CEILING_DIRECTORIES", str(tmp_path.parent))
    monkeypatch.chdir(tmp_path)
    yield


def _child_pids() -> list[int]:
    """Live child processes of this process (Linux /proc; empty elsewhere)."""
    me, found = os.getpid(), []
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = entry.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me and fields[0] != "Z":
            found.append(int(entry.parent.name))
    return found


@pytest.fixture(scope="session", autouse=True)
def _nothing_left_behind() -> Iterator[None]:
    """Fail the session if a test left a thread or a child process running.

    A leftover non-daemon thread keeps the interpreter alive after "passed"
    (a forgotten 60 s timer once did); a leftover child holds locks and files.
    """
    yield
    deadline = time.monotonic() + 5  # threads that are just finishing get a moment
    while True:
        threads = [t for t in threading.enumerate() if t is not threading.main_thread()]
        children = _child_pids()
        if (not threads and not children) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not threads, f"tests left threads running: {threads}"
    assert not children, f"tests left child processes running: {children}"
