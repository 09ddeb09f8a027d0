"""The Inspector is the whole boundary: the public functions under ``lil runs/show/export/
reset/fork/gc/send/cancel`` reach a journal through its methods only, so a second store that
implements them gets every one of those commands.

Checked with an inspector that offers exactly the protocol's methods and nothing else of the
SQLite one it forwards to (no ``Store``, no connection): every function still works.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from letitloop import Journal, RunCancelledError
from letitloop.errors import NotWaitingError, RunHeldError, RunNotFoundError
from letitloop.inspection import (
    Inspector,
    export_records,
    export_run,
    find_run,
    get_run,
    is_run_held,
    list_runs,
    open_inspector,
    resumable_run,
    resumer,
    run_rows,
    show_run,
)
from letitloop.maintenance import fork_run, gc_runs, reset_run, reset_target
from letitloop.primitives.waits import RunWaiting
from letitloop.supervision.control import cancel_run, send_text, wait_until_stopped

#: The protocol's methods and properties: what a second store implements.
PROTOCOL = {
    name
    for klass in Inspector.__mro__
    if klass is not object and klass.__name__ != "Protocol" and klass.__name__ != "Generic"
    for name in vars(klass)
    if not name.startswith("_")
}


class OnlyTheProtocol:
    """An inspector with the protocol's names and no other: anything else is an error."""

    def __init__(self, inner: Inspector) -> None:
        self._inner = inner
        self.used: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        if name not in PROTOCOL:
            raise AssertionError(f"{name!r} is not a method of the Inspector protocol")
        self.used.add(name)
        return getattr(self._inner, name)


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Any]:
    db = tmp_path / "journal.db"
    old = time.time() - 90 * 86400
    with Journal("g", path=db, clock=lambda: old) as j:
        j.step("a", str, 1)
    with Journal("g", path=db, run="named") as j:
        j.step("a", str, 1)
        j.step("b", str, 2)
    with pytest.raises(RunWaiting), Journal("approvals", path=db) as j:
        j.wait_for("approval", stop_after=0)
    with pytest.raises(RuntimeError), Journal("h", path=db) as j:
        j.step("a", str, 1)
        raise RuntimeError("left to resume")
    inspector = OnlyTheProtocol(open_inspector(db, write=True))
    try:
        yield inspector
    finally:
        inspector.close()


class TestThePublicFunctionsThroughAnInspector:
    def test_reading_uses_only_the_protocol(self, journal: Any) -> None:
        runs = list_runs(journal)
        assert {r.goal for r in runs} == {"g", "approvals", "h"}
        assert [r.name for r in list_runs(journal, "g", status="completed")] == ["named", None]
        named = find_run(journal, "named")
        assert find_run(journal, named.id[:-2].lower()).id == named.id
        assert get_run(journal, named.id) == named
        assert [r.key for r in run_rows(journal, named)] == ["a", "b"]
        detail = show_run(journal, named)
        assert [r.key for r in detail.rows] == ["a", "b"] and detail.previous_steps == 1
        assert export_run(journal, named)["rows"][1]["result"] == "2"
        assert [r["record"] for r in export_records(journal, named)][:2] == ["run", "row"]
        assert resumer(journal, named) is None
        assert not is_run_held(journal, named.id)
        assert resumable_run(journal, "h") is not None
        with pytest.raises(RunNotFoundError, match="known goals: approvals, g, h"):
            list_runs(journal, "nope")

    def test_changing_uses_only_the_protocol(self, journal: Any) -> None:
        named = find_run(journal, "named")
        fork = fork_run(journal, named, "b")
        assert fork.copied == ["a"] and fork.source_renamed_to == f"named@{named.id}"
        assert reset_target(journal, "h").goal == "h"
        assert reset_run(journal, "h").goal == "h"
        sent = send_text(journal, "approvals", "approval", "true")
        assert sent.key == "approval" and not sent.live
        with pytest.raises(NotWaitingError, match="already received a value"):
            send_text(journal, "approvals", "approval", "false")
        cancelled = cancel_run(journal, fork.run.id, reason="test")
        assert cancelled.at_once and cancelled.run.state == "cancelled"
        result = gc_runs(journal, timedelta(days=30))
        assert len(result.removed) == 1 and result.bytes_after <= result.bytes_before
        assert {r.goal for r in list_runs(journal)} == {"g", "approvals"}

    def test_a_run_a_live_process_holds_is_refused_through_the_inspector(
        self, journal: Any, tmp_path: Path
    ) -> None:
        opened, release = threading.Event(), threading.Event()

        def hold() -> None:
            with (
                contextlib.suppress(RunCancelledError),
                Journal("h", path=tmp_path / "journal.db") as j,
            ):
                opened.set()
                release.wait(30)
                j.sleep("nap", 30)  # a pause reads the cancel: the holder stops here

        holder = threading.Thread(target=hold)
        holder.start()
        try:
            assert opened.wait(30)
            run = find_run(journal, "h")
            assert run.state == "running" and is_run_held(journal, run.id)
            with pytest.raises(RunHeldError, match="cannot reset it"):
                reset_run(journal, run.id)
            asked = cancel_run(journal, run.id)
            assert not asked.at_once
        finally:
            release.set()
            holder.join(30)
        assert wait_until_stopped(journal, run.id, 10).state == "cancelled"
        assert {"hold", "is_held", "request_cancel"} <= journal.used
