"""A wait that says what it takes (``wait_for(name, expect=...)``) refuses anything else when
it is sent: ``lil send`` exits 1 with one line, ``letitloop.send`` raises NotWaitingError, and
nothing is written; the run still waits, and the right value is taken afterwards."""

from __future__ import annotations

import sqlite3
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from helpers import lil_forked

import letitloop
from letitloop import Journal, RunWaiting
from letitloop.errors import MisuseError, NotWaitingError
from letitloop.primitives.expects import Expect, problem

#: Approval of one tool call, as the adapters ask for it: {"call-1": true|false}.
APPROVAL = Expect(
    {
        "type": "object",
        "propertyNames": {"enum": ["call-1"]},
        "required": ["call-1"],
        "additionalProperties": {"type": "boolean"},
    },
    "approval of refund(amount=30), call 'call-1'",
    {"call-1": True},
)


def lil(db: str, *args: str) -> subprocess.CompletedProcess[str]:
    return lil_forked("--db", db, *args)


def wait_status(db: str) -> list[tuple[str, str, str | None]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(
            "SELECT key, status, result FROM journal_g WHERE kind = 'wait' ORDER BY rowid"
        ).fetchall()
    finally:
        conn.close()


@pytest.fixture(params=["sqlite", "memory"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return f"memory://expects-{uuid.uuid4().hex}"
    return str(tmp_path / "journal.db")


def stop_to_wait(path: str, capsys: pytest.CaptureFixture[str]) -> str:
    """Run 'r' of goal 'g' stopped to wait for an approval; the line it printed."""
    with pytest.raises(RunWaiting), Journal("g", run="r", path=path) as j:
        j.wait_for("approval", stop_after=0, expect=APPROVAL)
    return capsys.readouterr().err


class TestAWaitThatSaysWhatItTakes:
    def test_the_stop_line_says_what_it_waits_for_and_the_exact_command(
        self, where: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        (line,) = stop_to_wait(where, capsys).splitlines()
        assert "stopped to wait for 'approval' (approval of refund(amount=30), call 'call-1')" in (
            line
        )
        assert "lil send " in line and """ approval '{"call-1": true}'""" in line

    @pytest.mark.parametrize(
        ("value", "says"),
        [
            ({"call-2": True}, '$ key: expected one of "call-1", got "call-2"'),
            ({}, '$: missing "call-1"'),
            (True, "$: expected object, got true"),
            ({"call-1": "yes"}, '$["call-1"]: expected boolean, got "yes"'),
        ],
    )
    def test_another_value_is_refused_when_sent_and_the_run_still_waits(
        self, where: str, capsys: pytest.CaptureFixture[str], value: Any, says: str
    ) -> None:
        stop_to_wait(where, capsys)
        with pytest.raises(NotWaitingError, match="nothing was written") as refused:
            letitloop.send("g", "approval", value, path=where)
        assert says in str(refused.value)
        assert refused.value.key == "approval"
        letitloop.send("r", "approval", {"call-1": True}, path=where)
        with Journal("g", run="r", path=where) as j:
            assert j.wait_for("approval", expect=APPROVAL) == {"call-1": True}

    def test_lil_send_refuses_it_in_one_line_and_writes_nothing(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        db = str(tmp_path / "journal.db")
        stop_to_wait(db, capsys)
        refused = lil(db, "send", "g", "approval", '{"call-2": true}')
        assert refused.returncode == 1 and "Traceback" not in refused.stderr
        (line,) = refused.stderr.strip().splitlines()
        assert line.startswith("Error: run ") and 'got "call-2"' in line
        assert """send e.g. '{"call-1": true}'""" in line
        assert wait_status(db) == [("approval", "waiting", None)]
        taken = lil(db, "send", "g", "approval", '{"call-1": false}')
        assert taken.returncode == 0, taken.stderr
        assert wait_status(db) == [("approval", "done", '{"call-1":false}')]

    def test_what_it_takes_is_a_step_row_anyone_can_read(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        db = str(tmp_path / "journal.db")
        stop_to_wait(db, capsys)
        rows = {r["key"]: r for r in lil_show_rows(db)}
        assert rows["expects:approval"]["result"]["about"] == APPROVAL.about
        assert rows["expects:approval"]["result"]["example"] == {"call-1": True}

    def test_repeated_waits_each_take_their_own_expectation(self, where: str) -> None:
        second = Expect({"type": "boolean"}, "second", True)
        with pytest.raises(RunWaiting), Journal("g", run="r", path=where) as j:
            j.wait_for("approval", stop_after=0, expect=APPROVAL)
        letitloop.send("r", "approval", {"call-1": True}, path=where)
        with pytest.raises(RunWaiting), Journal("g", run="r", path=where) as j:
            j.wait_for("approval", stop_after=0, expect=APPROVAL)
            j.wait_for("approval", stop_after=0, expect=second)
        with pytest.raises(NotWaitingError, match="approval#2"):
            letitloop.send("r", "approval", {"call-1": True}, path=where)
        letitloop.send("r", "approval", False, path=where)

    def test_a_wait_without_expect_takes_any_value(self, where: str) -> None:
        with pytest.raises(RunWaiting), Journal("g", run="r", path=where) as j:
            j.wait_for("approval", stop_after=0)
        letitloop.send("r", "approval", ["anything", 1], path=where)

    def test_an_async_wait_records_and_checks_the_same(self, where: str) -> None:
        import asyncio

        async def main() -> None:
            async with Journal("g", run="r", path=where) as j:
                await j.async_wait_for("approval", stop_after=0, expect=APPROVAL)

        with pytest.raises(RunWaiting):
            asyncio.run(main())
        with pytest.raises(NotWaitingError):
            letitloop.send("r", "approval", {"call-2": True}, path=where)


def lil_show_rows(db: str) -> list[dict[str, Any]]:
    import json

    shown = lil(db, "show", "g", "--json")
    assert shown.returncode == 0, shown.stderr
    rows: list[dict[str, Any]] = json.loads(shown.stdout)["rows"]
    return rows


class TestTheSchemaCheck:
    def test_an_unknown_keyword_is_refused_when_the_wait_starts_not_ignored(
        self, tmp_path: Path
    ) -> None:
        bad = Expect({"type": "object", "minProperties": 1}, "x", {})
        with Journal("g", path=tmp_path / "j.db") as j, pytest.raises(MisuseError):
            j.wait_for("approval", stop_after=0, expect=bad)

    def test_any_of_takes_a_value_either_branch_takes(self) -> None:
        schema = {"anyOf": [{"type": "boolean"}, {"type": "object", "required": ["approve"]}]}
        assert problem(schema, True) is None
        assert problem(schema, {"approve": False}) is None
        assert problem(schema, 1) is not None
        assert problem({"type": "integer"}, True) is not None  # a bool is not a number here
