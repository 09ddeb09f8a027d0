"""The CLI reference is generated and complete; the browsing queries of the docs really run."""

from __future__ import annotations

import importlib.util
import re
import shlex
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import click
import pytest

from letitloop import Journal, unchecked
from letitloop.cli import cli
from letitloop.primitives.clock import utc_iso
from letitloop.stores.sqlite.store import Store

DOCS = Path(__file__).resolve().parent.parent / "docs"


def gen_cli() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_cli", DOCS / "gen_cli.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class TestTheCliReference:
    def test_it_is_what_gen_cli_generates_today(self) -> None:
        page = (DOCS / "cli.md").read_text(encoding="utf-8")
        assert page == gen_cli().render(), "docs/cli.md is stale: run python docs/gen_cli.py"

    def test_every_command_has_a_section(self) -> None:
        page = (DOCS / "cli.md").read_text(encoding="utf-8")
        for name in cli.commands:
            assert f"\n## lil {name}\n" in page, name

    def test_every_commands_help_has_an_example(self) -> None:
        root = click.Context(cli, info_name="lil")
        for name, command in cli.commands.items():
            text = command.get_help(click.Context(command, info_name=name, parent=root))
            assert re.search(r"Examples?:\n +lil ", text), name


def blocks(kind: str) -> list[str]:
    page = (DOCS / "inspecting.md").read_text(encoding="utf-8")
    return re.findall(rf"```{kind}\n(.*?)```", page, flags=re.S)


def record(key: str, calls: list[str]) -> dict[str, Any]:
    calls.append(key)
    return {"user_id": 123, "key": key}


def explode(key: str, calls: list[str]) -> None:
    calls.append(key)
    raise RuntimeError(f"{key} broke")


@pytest.fixture
def journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """journal.db with a completed run, a run resumed after a failure, and a watcher's event."""
    db = tmp_path / "journal.db"
    calls: list[str] = []
    with Journal("customer_sync", path=db) as j:
        j.step("fetch_user", record, "fetch_user", unchecked(calls))
        j.step("summarize", record, "summarize", unchecked(calls))
    monkeypatch.setenv("LETITLOOP_WATCH_ID", "watch-1")
    with pytest.raises(RuntimeError), Journal("customer_sync", path=db) as j:
        j.step("fetch_user", record, "fetch_user", unchecked(calls))
        j.step("summarize", explode, "summarize", unchecked(calls))
    with pytest.raises(RuntimeError), Journal("billing", path=db, input={"user_id": 7}) as j:
        j.step("charge", explode, "charge", unchecked(calls))
    with Journal("customer_sync", path=db) as j:  # attempt 2 of the failed run
        j.step("fetch_user", record, "fetch_user", unchecked(calls))
        j.step("summarize", record, "summarize", unchecked(calls))
    store = Store(db)
    try:
        store.write1(
            "INSERT INTO supervisor_events (watch_id, at, event, target, attempt, watcher_pid, "
            "host, child_pid, exit_code) VALUES ('watch-1', ?, 'exit', 'sync.py', 1, 1, 'h', 2, 1)",
            (utc_iso(time.time()),),
        )
    finally:
        store.close()
    return db


class TestTheBrowsingQueries:
    def test_every_sql_block_runs_against_a_real_journal_and_finds_rows(
        self, journal: Path
    ) -> None:
        sql = blocks("sql")
        assert len(sql) >= 6
        conn = sqlite3.connect(f"{journal.as_uri()}?mode=ro", uri=True)
        try:
            for query in sql:
                rows = conn.execute(query).fetchall()
                assert rows, query
        finally:
            conn.close()

    def test_the_views_agree_with_the_tables(self, journal: Path) -> None:
        conn = sqlite3.connect(journal)
        # In the order the runs were made: ids made in one millisecond sort in any order.
        summary = conn.execute(
            "SELECT s.goal, s.status, s.attempts, s.steps_done, s.steps_failed "
            "FROM run_summary s JOIN runs r ON r.id = s.run ORDER BY r.rowid"
        ).fetchall()
        assert summary == [
            ("customer_sync", "completed", 1, 2, 0),
            ("customer_sync", "completed", 2, 2, 0),
            ("billing", "failed", 1, 0, 1),
        ]
        assert conn.execute("SELECT goal, key FROM failed_steps").fetchall() == [
            ("billing", "charge")
        ]
        (seqs,) = conn.execute(
            "SELECT group_concat(key) FROM (SELECT key FROM journal_rows "
            "WHERE goal = 'customer_sync' ORDER BY run, seq)"
        ).fetchone()
        assert seqs == "fetch_user,summarize,fetch_user,summarize"
        events = conn.execute("SELECT run, event FROM run_supervisor_events").fetchall()
        # Both runs opened under LETITLOOP_WATCH_ID=watch-1 show that watcher's event.
        watched = conn.execute("SELECT id FROM runs WHERE rowid > (SELECT min(rowid) FROM runs)")
        assert sorted(events) == sorted((run, "exit") for (run,) in watched)
        conn.close()

    def test_every_sqlite_utils_command_runs(self, journal: Path) -> None:
        exe = Path(sys.executable).parent / "sqlite-utils"
        commands = [
            ln[2:]
            for b in blocks("console")
            for ln in b.splitlines()
            if ln.startswith("$ sqlite-utils")
        ]
        assert len(commands) >= 3
        for command in commands:
            args = shlex.split(command)
            r = subprocess.run(
                [str(exe), *args[1:]],
                capture_output=True,
                text=True,
                cwd=journal.parent,
                timeout=60,
            )
            assert r.returncode == 0, (command, r.stderr)
            assert "customer_sync" in r.stdout or "journal_customer_sync" in r.stdout, command
