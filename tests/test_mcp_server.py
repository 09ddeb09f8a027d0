"""``lil mcp``: the journal served over MCP, tested with the SDK's own client.

In process (``mcp.Client(build_server(db))``) and over stdio (the client
starts the real ``lil mcp`` as a child process: fresh, or forked from an
interpreter that imported it, tests/stdio_servers.py), on real journal files:
annotations a client can act on, answers an agent can use, a read side
that never writes, the actions, and refusals that are one line and leave
the server serving.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import lil_forked, spawn_python, wait_until, write_script
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult
from preloaded import JOURNAL_MODULES
from stdio_servers import StdioServers
from test_readers import older_migrations

import letitloop
from letitloop import Journal
from letitloop.mcp.server import build_server
from letitloop.stores.sqlite.pool import close_idle_stores
from letitloop.stores.sqlite.store import Store

__all__ = ["older_migrations"]  # the fixture, used by name

READ_TOOLS = {"list_runs", "show_run", "export_run", "list_queues"}
ACTION_TOOLS = {"reset_run", "fork_run", "cancel_run", "send_value"}


def ask(server: Any, *calls: tuple[str, dict[str, Any]]) -> list[CallToolResult]:
    """Open one client session to ``server`` and make ``calls`` in order."""

    async def main() -> list[CallToolResult]:
        async with Client(server) as client:
            return [await client.call_tool(name, args) for name, args in calls]

    return asyncio.run(main())


def lil_mcp(db: Path, servers: StdioServers | None = None) -> StdioServerParameters:
    """The real ``lil mcp --db DB``, as a client's configuration starts it (``servers``:
    forked from their interpreter, which imported it; else a fresh interpreter)."""
    argv = ["-m", "letitloop", "mcp", "--db", str(db)]
    command, *args = [sys.executable, *argv] if servers is None else servers.command(*argv)
    return StdioServerParameters(command=command, args=args)


@pytest.fixture(scope="module")
def lil_mcps() -> Iterator[StdioServers]:
    """Forks ``lil mcp`` processes from an interpreter that imported letitloop, ``lil`` and
    the MCP SDK's server once (a fresh one spends about 1 s of CPU on them)."""
    with StdioServers(
        "letitloop", "letitloop.cli", "letitloop.mcp.server", *JOURNAL_MODULES,
        "mcp.server.stdio", "anyio._backends._asyncio",
    ) as servers:  # fmt: skip
        yield servers


def data(result: CallToolResult) -> Any:
    assert not result.is_error, result.content
    return result.structured_content


def error_line(result: CallToolResult) -> str:
    assert result.is_error
    (item,) = result.content
    text: str = getattr(item, "text", "")
    assert text and "\n" not in text, text
    return text


#: Every call of :func:`ask_model`, in this process.
ASKED: list[str] = []


def ask_model() -> str:
    ASKED.append("summarize")
    letitloop.usage(input_tokens=1200, output_tokens=300, cost=0.25)
    return "a summary"


def publish() -> None:
    raise ConnectionError("the CMS refused the upload (HTTP 503)")


def paid_then_failed(db: Path) -> str:
    """A run whose first step reported usage and whose second step raised."""
    try:
        with Journal("nightly", path=db) as j:
            j.step("summarize", ask_model)
            j.step("publish", publish)
    except ConnectionError:
        pass
    return j.run_id


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (the lock folder included) with the digest of its bytes."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        if p.is_file()
        else "folder"
        for p in sorted(folder.rglob("*"))
    }


class TestTheToolsAnnotations:
    def test_a_client_tells_from_them_which_tools_change_the_journal(self, db: Path) -> None:
        async def main() -> Any:
            async with Client(build_server(db)) as client:
                return (await client.list_tools()).tools

        tools = {t.name: t for t in asyncio.run(main())}
        assert set(tools) == READ_TOOLS | ACTION_TOOLS
        hints = {name: t.annotations for name, t in tools.items()}
        for name in READ_TOOLS:
            assert hints[name] is not None and hints[name].read_only_hint is True
        for name in ACTION_TOOLS:
            a = hints[name]
            assert a is not None and a.read_only_hint is False and a.idempotent_hint is False
        assert hints["reset_run"].destructive_hint is True
        assert hints["cancel_run"].destructive_hint is True
        assert hints["fork_run"].destructive_hint is False
        assert hints["send_value"].destructive_hint is False
        for name, tool in tools.items():
            assert tool.annotations is not None and tool.annotations.open_world_hint is False
            assert tool.output_schema is not None, f"{name} has no structured output"
            assert tool.description and tool.description[0].isupper()


class TestAnAgentAskingWhyARunFailedAndWhatItCost:
    def test_list_runs_finds_the_failed_run_and_show_run_says_why_and_what_it_cost(
        self, db: Path
    ) -> None:
        run_id = paid_then_failed(db)
        listed, shown = ask(
            build_server(db),
            ("list_runs", {"goal": "nightly", "states": ["failed"]}),
            ("show_run", {"run": "nightly"}),
        )
        runs = data(listed)["runs"]
        assert [r["id"] for r in runs] == [run_id]
        assert runs[0]["cost"] == 0.25
        doc = data(shown)
        assert doc["run"]["state"] == "failed"
        assert "ConnectionError: the CMS refused the upload (HTTP 503)" in doc["run"]["error"]
        assert doc["usage"]["cost"] == 0.25 and doc["usage"]["tokens"] == 1500
        rows = {r["key"]: r for r in doc["rows"]}
        assert rows["summarize"]["status"] == "done" and rows["summarize"]["result"] == "a summary"
        assert rows["publish"]["status"] == "failed"

    def test_show_run_names_the_step_a_killed_run_died_in(self, db: Path, tmp_path: Path) -> None:
        script = write_script(
            tmp_path,
            "stuck.py",
            f"""
            import time
            from letitloop import Journal
            with Journal("stuck", path={str(db)!r}) as j:
                j.step("fetch", lambda: 1)
                print("in step", flush=True)
                j.step("train", time.sleep, 600)
            """,
        )
        child = spawn_python(script)
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "in step"

            def in_flight() -> bool:
                (shown,) = ask(build_server(db), ("show_run", {"run": "stuck"}))
                return any(f["key"] == "train" for f in data(shown)["run"]["in_flight"])

            wait_until(in_flight, "the step in flight shows", timeout=60)
        finally:
            child.send_signal(signal.SIGKILL)
            child.communicate()
        (shown,) = ask(build_server(db), ("show_run", {"run": "stuck"}))
        run = data(shown)["run"]
        assert run["state"] == "crashed"
        assert run["died_in"] == "train"

    def test_export_run_gives_the_document_lil_export_prints(self, db: Path) -> None:
        run_id = paid_then_failed(db)
        (exported,) = ask(build_server(db), ("export_run", {"run": run_id}))
        printed = lil_forked("--db", str(db), "export", run_id)
        assert printed.returncode == 0, printed.stderr
        assert data(exported) == json.loads(printed.stdout)

    def test_show_run_gives_one_step_whole_with_its_traceback(self, db: Path) -> None:
        paid_then_failed(db)
        (shown,) = ask(build_server(db), ("show_run", {"run": "nightly", "step": "publish"}))
        step = data(shown)["step"]
        assert step["key"] == "publish"
        assert "Traceback" in step["traceback"] and "HTTP 503" in step["traceback"]


class TestTheReadToolsNeverWrite:
    def test_the_folder_is_unchanged_byte_for_byte_after_every_read(
        self, db: Path, tmp_path: Path
    ) -> None:
        paid_then_failed(db)
        close_idle_stores()  # as after the writer's process exit: no -wal left
        before = snapshot(tmp_path)
        results = ask(
            build_server(db),
            ("list_runs", {}),
            ("show_run", {"run": "nightly"}),
            ("export_run", {"run": "nightly"}),
            ("list_runs", {"goal": "nightly", "since": "1d", "name": "*", "limit": 0}),
        )
        assert all(not r.is_error for r in results)
        assert snapshot(tmp_path) == before

    def test_a_journal_from_an_older_letitloop_is_refused_not_migrated(
        self, tmp_path: Path, older_migrations: Path, lil_mcps: StdioServers
    ) -> None:
        db = tmp_path / "old" / "journal.db"
        db.parent.mkdir()
        Store(db).close()  # the schema an older letitloop leaves (see test_readers.py)
        before = snapshot(db.parent)
        listed, shown = ask(lil_mcp(db, lil_mcps), ("list_runs", {}), ("show_run", {"run": "g"}))
        assert "lil upgrade" in error_line(listed)
        assert "lil upgrade" in error_line(shown)
        assert snapshot(db.parent) == before


class TestTheActionTools:
    def test_reset_run_forgets_the_run_and_says_what_the_next_open_resumes(self, db: Path) -> None:
        run_id = paid_then_failed(db)
        dry, done, listed = ask(
            build_server(db),
            ("reset_run", {"run": "nightly", "dry_run": True}),
            ("reset_run", {"run": "nightly"}),
            ("list_runs", {}),
        )
        assert data(dry)["would_delete"]["id"] == run_id
        assert data(done)["deleted"]["id"] == run_id
        assert data(done)["next_open_resumes"] is None
        assert data(listed)["runs"] == []

    def test_fork_run_makes_a_run_that_replays_the_steps_before_the_one_named(
        self, db: Path
    ) -> None:
        run_id = paid_then_failed(db)
        (forked,) = ask(build_server(db), ("fork_run", {"run": run_id, "from_step": "publish"}))
        made = data(forked)
        assert made["source"]["id"] == run_id and made["copied"] == ["summarize"]
        ASKED.clear()
        with Journal("nightly", path=db) as j:
            assert j.run_id == made["run"]["id"]
            assert j.step("summarize", ask_model) == "a summary"
        assert ASKED == []

    def test_cancel_run_cancels_a_run_no_process_holds(self, db: Path) -> None:
        run_id = paid_then_failed(db)
        (done,) = ask(build_server(db), ("cancel_run", {"run": run_id, "reason": "wrong input"}))
        assert data(done)["at_once"] is True
        assert data(done)["run"]["state"] == "cancelled"
        with Journal("nightly", path=db) as j:
            assert j.run_id != run_id  # no opener resumes a cancelled run

    def test_send_value_answers_a_run_that_stopped_to_wait(self, db: Path) -> None:
        from letitloop.primitives.waits import RunWaiting

        try:
            with Journal("deploy", path=db) as j:
                j.wait_for("approval", stop_after=0)
        except RunWaiting:
            pass
        (sent,) = ask(
            build_server(db),
            ("send_value", {"run": "deploy", "name": "approval", "value": {"ok": True}}),
        )
        assert data(sent)["key"] == "approval"
        with Journal("deploy", path=db) as j:
            assert j.wait_for("approval") == {"ok": True}


class TestARefusal:
    def test_bad_arguments_are_one_line_and_the_server_goes_on_serving(self, db: Path) -> None:
        paid_then_failed(db)
        missing, wrong, state, listed = ask(
            build_server(db),
            ("show_run", {}),
            ("list_runs", {"limit": "ten"}),
            ("list_runs", {"states": ["broken"]}),
            ("list_runs", {}),
        )
        assert "bad arguments for show_run: run:" in error_line(missing)
        assert "bad arguments for list_runs: limit:" in error_line(wrong)
        assert "unknown state 'broken'" in error_line(state)
        assert len(data(listed)["runs"]) == 1

    def test_an_unknown_run_is_one_line_naming_it(self, db: Path) -> None:
        paid_then_failed(db)
        (shown,) = ask(build_server(db), ("show_run", {"run": "no-such-run"}))
        assert "no-such-run" in error_line(shown)

    def test_a_journal_that_does_not_exist_is_one_line_and_stays_absent(
        self, tmp_path: Path
    ) -> None:
        missing = tmp_path / "nowhere" / "journal.db"
        listed, reset = ask(
            build_server(missing), ("list_runs", {}), ("reset_run", {"run": "nightly"})
        )
        assert "no journal file here" in error_line(listed)
        assert "no journal file here" in error_line(reset)
        assert not missing.parent.exists()


class TestLilMcpOverStdio:
    def test_the_sdk_client_starts_it_and_every_refusal_leaves_it_serving(self, db: Path) -> None:
        run_id = paid_then_failed(db)
        bad, unknown, listed, shown = ask(
            lil_mcp(db),
            ("show_run", {"run": 42}),
            ("show_run", {"run": "no-such-run"}),
            ("list_runs", {"states": ["failed"]}),
            ("show_run", {"run": run_id}),
        )
        assert "bad arguments for show_run" in error_line(bad)
        assert "no-such-run" in error_line(unknown)
        assert [r["id"] for r in data(listed)["runs"]] == [run_id]
        assert data(shown)["usage"]["cost"] == 0.25

    def test_a_journal_that_does_not_exist_is_a_tool_error_not_a_dead_server(
        self, tmp_path: Path, lil_mcps: StdioServers
    ) -> None:
        missing = tmp_path / "journal.db"
        first, second = ask(
            lil_mcp(missing, lil_mcps), ("list_runs", {}), ("export_run", {"run": "x"})
        )
        assert "no journal file here" in error_line(first)
        assert "no journal file here" in error_line(second)
        assert not missing.exists()


class TestTheSdkIsLoadedOnlyWhenUsed:
    def test_import_letitloop_and_lil_help_do_not_load_it(self) -> None:
        code = (
            "import sys, letitloop\n"
            "from letitloop.cli import cli\n"
            "try:\n"
            "    cli(['--help'], standalone_mode=False)\n"
            "    cli(['mcp', '--help'], standalone_mode=False)\n"
            "finally:\n"
            "    print([m for m in sys.modules if m.split('.')[0] == 'mcp' "
            "or m.startswith('letitloop.mcp')], file=sys.stderr)\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env={**os.environ, "COLUMNS": "80"},
        )
        assert done.returncode == 0, done.stderr
        assert done.stderr.strip() == "[]"

    def test_lil_mcp_without_it_says_how_to_install_it_in_one_line(self, tmp_path: Path) -> None:
        code = (
            "import sys\n"
            "sys.modules['mcp'] = None  # as if the SDK were not installed\n"
            "from letitloop.cli import main\n"
            "sys.argv = ['lil', 'mcp', '--db', 'journal.db']\n"
            "main()\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path
        )
        assert done.returncode == 1
        line = done.stderr.strip()
        assert "\n" not in line and "pip install -e '.[mcp]'" in line, line
