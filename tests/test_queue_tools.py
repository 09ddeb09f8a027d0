"""A work queue's entries seen and managed by every tool (issue 52): ``lil runs``, ``lil
show``, ``lil queues``, ``lil gc``, ``lil reset``, ``lil copy`` through the real ``lil``
entry point as a subprocess, the MCP server's tools and ``lil ui``, on a journal file and
on PostgreSQL.

One journal holds an entry in each state: completed and failed (a worker ran them),
queued (priority 5), delayed, cancelled before it started, running (a worker of this
process holds it, its step blocked), and crashed (its worker process was SIGKILLed in its
second step: the entry is claimed, its run crashed, no worker of that queue runs).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from helpers import lil_forked, run_forked, wait_until, write_script

from letitloop import Queue, step
from letitloop.inspection import open_inspector
from letitloop.inspection.queue_listing import queue_entries

#: The program whose worker dies inside its run's second step (SIGKILL of itself).
DOOMED = """
import os, signal, sys, time
from letitloop import Queue, step

q = Queue("doomed", path=sys.argv[1])


@q.task
def die():
    step("first", lambda: 1)
    step("boom", lambda: os.kill(os.getpid(), signal.SIGKILL))


q.enqueue(die, priority=2)
q.worker().start()
time.sleep(120)
"""


@pytest.fixture(params=["file", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        import pg_server

        return pg_server.location()
    return str(tmp_path / "journal.db")


class Scenario:
    """The journal's entries by what they are, and the worker holding the running one."""

    def __init__(self, db: str, folder: Path) -> None:
        self.db = db
        emails = Queue("emails", path=db)
        emails.task(lambda x: step("double", lambda: x * 2), name="double")

        @emails.task
        def boom() -> None:
            step("fail", _refuse)

        self.completed = emails.enqueue("double", 21, priority=1)
        self.failed = emails.enqueue(boom)
        worker = emails.worker().start()
        try:
            assert self.completed.result(timeout=30) == 42
            wait_until(lambda: self.failed.status() == "failed", "the failed entry")
        finally:
            worker.stop(timeout=30)
        self.queued = emails.enqueue("double", 1, priority=5)
        self.delayed = emails.enqueue("double", 2, delay=3600)
        self.cancelled = emails.enqueue("double", 3)
        assert self.cancelled.cancel() == "cancelled"

        done = run_forked(write_script(folder, "doomed.py", DOOMED), db)
        assert done.returncode == -9, done.stderr
        doomed = Queue("doomed", path=db)
        inspector = open_inspector(db)
        # PostgreSQL frees a killed client's locks when its server process sees the socket
        # close, a moment after the kill: until then the entry is still held (running).
        wait_until(
            lambda: queue_entries(inspector, "doomed")[0].state == "crashed",
            "the killed worker's entry is crashed",
        )
        (self.crashed_entry,) = queue_entries(inspector, "doomed")
        assert self.crashed_entry.state == "crashed" and self.crashed_entry.run_id

        self.release = threading.Event()
        slow = Queue("slow", path=db)
        slow.task(lambda: step("wait", self.release.wait, 60), name="hold")
        self.running = slow.enqueue("hold")
        self.worker = slow.worker().start()
        wait_until(lambda: self.running.run_id is not None, "the running entry's run")
        self.queues = (emails, doomed, slow)

    def stop(self) -> None:
        self.release.set()
        self.worker.stop(timeout=30)


def _refuse() -> None:
    raise ValueError("no such user")


@pytest.fixture
def scenario(db: str, tmp_path: Path) -> Iterator[Scenario]:
    s = Scenario(db, tmp_path)
    try:
        yield s
    finally:
        s.stop()


def lil(db: str, *args: str) -> Any:
    """``lil --db DB ARGS``: its exit status and output (JSON parsed when it is)."""
    done = lil_forked("--db", db, *args)
    try:
        return done.returncode, json.loads(done.stdout), done.stderr
    except ValueError:
        return done.returncode, done.stdout, done.stderr


class TestSeeingAQueue:
    def test_lil_runs_show_and_queues_show_every_entry_and_its_state(
        self, scenario: Scenario
    ) -> None:
        s, db = scenario, scenario.db
        code, listed, err = lil(db, "runs", "--json", "--limit", "0")
        assert code == 0, err
        by_entry = {r["queue"]["entry"]: r for r in listed if r["queue"]}
        assert {k: (by_entry[k]["state"], by_entry[k]["queue"]["queue"]) for k in by_entry} == {
            s.completed.id: ("completed", "emails"),
            s.failed.id: ("failed", "emails"),
            s.queued.id: ("queued", "emails"),
            s.delayed.id: ("delayed", "emails"),
            s.cancelled.id: ("cancelled", "emails"),
            s.crashed_entry.id: ("crashed", "doomed"),
            s.running.id: ("running", "slow"),
        }
        assert by_entry[s.queued.id]["queue"]["priority"] == 5
        # a started entry is listed as its run; a waiting one under its entry id
        assert by_entry[s.completed.id]["id"] == s.completed.run_id
        assert by_entry[s.queued.id]["id"] == s.queued.id
        assert by_entry[s.queued.id]["goal"] == "double"
        assert by_entry[s.crashed_entry.id]["queue"]["state"] == "crashed"

        code, text, err = lil(db, "runs", "--queue", "emails", "--status", "queued")
        assert code == 0, err
        assert s.queued.id in text and "priority 5" in text and "no worker took it yet" in text
        for other in (s.delayed, s.completed, s.running):
            assert other.id not in text

        code, text, err = lil(db, "show", s.delayed.id)
        assert code == 0, err
        assert f"queue entry {s.delayed.id} on queue emails: delayed" in text

        code, stats, err = lil(db, "queues", "--json")
        assert code == 0, err
        counts = {q["queue"]: q for q in stats}
        assert [counts["emails"][k] for k in ("queued", "delayed", "completed", "failed")] == [
            1,
            1,
            1,
            1,
        ]
        assert counts["emails"]["cancelled"] == 1 and counts["emails"]["oldest_waiting"]
        assert counts["doomed"]["crashed"] == 1 and counts["doomed"]["workers"] == []
        assert counts["slow"]["running"] == 1
        assert counts["slow"]["workers"] == [f"{__import__('os').getpid()}@{_host()}"]


def _host() -> str:
    from letitloop.identity.ids import HOST

    return HOST


class TestManagingAQueue:
    def test_reset_requeues_gc_keeps_active_entries_and_copy_carries_them(
        self, scenario: Scenario, tmp_path: Path
    ) -> None:
        s, db = scenario, scenario.db
        # reset of a waiting entry: nothing to forget, said so, nothing changed
        code, _, err = lil(db, "reset", s.queued.id, "--yes")
        assert code == 1 and "no worker started its run yet" in err, err
        assert f"lil cancel {s.queued.id}" in err
        assert s.queued.status() == "queued"
        # reset of the failed run: the run forgotten, its entry queued again, its error gone
        failed_run = s.failed.run_id
        code, text, err = lil(db, "reset", failed_run or "", "--yes")
        assert code == 0 and "back in queue 'emails'" in text, err
        fresh = open_inspector(db)  # read from another connection than the writer's
        (entry,) = queue_entries(fresh, ids=[s.failed.id])
        assert (entry.status, entry.run_id, entry.error) == ("queued", None, None)
        assert not fresh.has_run(failed_run or "")
        fresh.close()

        # lil cancel of a waiting entry: cancelled at once, it never starts
        code, text, err = lil(db, "cancel", s.delayed.id)
        assert code == 0 and f"entry {s.delayed.id}: it never starts" in text, err
        assert s.delayed.status() == "cancelled"

        completed_run = s.completed.run_id
        code, gone, err = lil(db, "gc", "--older-than", "0s", "--yes", "--json")
        assert code == 0, err
        assert [r["id"] for r in gone["removed"]] == [completed_run]
        assert sorted(gone["queue_entries_removed"]) == sorted(
            [s.completed.id, s.cancelled.id, s.delayed.id]
        )
        assert [r["id"] for r in gone["skipped_queued"]] == [s.crashed_entry.run_id]
        fresh = open_inspector(db)
        left = {e.id: e.state for e in queue_entries(fresh)}
        assert left == {
            s.failed.id: "queued",
            s.queued.id: "queued",
            s.crashed_entry.id: "crashed",
            s.running.id: "running",
        }
        assert fresh.has_run(s.crashed_entry.run_id or "") and fresh.has_run(s.running.run_id or "")
        fresh.close()

        s.stop()  # the running run completes: copy refuses a run a live process holds
        assert s.running.result(timeout=30) is True
        target = str(tmp_path / "copy.db")
        code, copied, err = lil(db, "copy", db, target, "--json")
        assert code == 0 and copied["queue_entries"] == 4, err
        there = open_inspector(target)
        moved = {e.id: (e.status, e.run_id) for e in queue_entries(there)}
        source = {e.id: (e.status, e.run_id) for e in queue_entries(open_inspector(db))}
        assert moved == source
        there.close()


class TestTheMcpToolsAndTheWebView:
    @pytest.mark.parametrize("db", ["file"], indirect=True)
    def test_they_show_waiting_entries_and_each_queue(self, scenario: Scenario) -> None:
        from mcp import Client
        from starlette.testclient import TestClient

        from letitloop.mcp.server import build_server
        from letitloop.web import create_app

        s = scenario

        async def main() -> list[Any]:
            async with Client(build_server(Path(s.db))) as client:
                return [
                    await client.call_tool("list_runs", {"queue": "emails", "states": ["queued"]}),
                    await client.call_tool("list_queues", {}),
                    await client.call_tool("show_run", {"run": s.delayed.id}),
                ]

        listed, queues, shown = (r.structured_content for r in asyncio.run(main()))
        assert [r["queue"]["entry"] for r in listed["runs"]] == [s.queued.id]
        assert {q["queue"]: q["crashed"] for q in queues["queues"]} == {
            "doomed": 1,
            "emails": 0,
            "slow": 0,
        }
        assert shown["queue_entry"]["state"] == "delayed"

        page = TestClient(create_app(Path(s.db)), base_url="http://127.0.0.1")
        html = page.get("/", params={"queue": "emails"}).text
        assert f'<span class="entry">{s.queued.id}</span>' in html
        assert "queue emails (priority 1)" in html  # the completed run's
        assert s.running.id not in html


class TestPagingRunsAndEntries:
    def test_pages_hold_every_run_and_waiting_entry_once_newest_first(self, tmp_path: Path) -> None:
        from letitloop import Journal
        from letitloop.inspection.queue_listing import list_runs_and_entries

        db = str(tmp_path / "journal.db")
        q = Queue("emails", path=db)
        q.task(lambda x: x, name="echo")
        made = []
        for i in range(7):  # runs and entries made in turn: the merge interleaves them
            if i % 3 == 0:
                with Journal("plain", run=f"r{i}", path=db) as j:
                    made.append(j.run_id)
            else:
                made.append(q.enqueue("echo", i, delay=3600 * (i % 2)).id)
        journal = open_inspector(db)
        pages = [
            [r.id for r in list_runs_and_entries(journal, limit=3, offset=at)] for at in (0, 3, 6)
        ]
        assert [i for page in pages for i in page] == made[::-1]
        waiting = list_runs_and_entries(journal, status=["delayed"], limit=1)
        assert [r.id for r in waiting] == [made[5]] and waiting[0].state == "delayed"
        journal.close()

    def test_entries_of_one_millisecond_come_by_when_they_were_enqueued_on_every_page(
        self, db: str
    ) -> None:
        # Ids of one millisecond sort in no particular order (their random part): four
        # entries whose ids sort the other way round from when they were enqueued, as
        # `lil copy` adds them. A page used to take the entries with the highest ids, so
        # the first page held the oldest, and a later page one already shown.
        from letitloop.identity.ids import new_run_id
        from letitloop.inspection.queue_listing import list_runs_and_entries
        from letitloop.primitives.clock import utc_iso

        q = Queue("emails", path=db)
        q.task(lambda x: x, name="echo")
        first = q.enqueue("echo", 0)
        journal = open_inspector(db, write=True)
        try:
            (row,) = journal.queue_rows(ids=[first.id])
            # Two milliseconds after the first entry's: its id's time, then their enqueue times.
            ms = int(datetime.fromisoformat(str(row["enqueued_at"])).timestamp() * 1000) + 2
            prefix = new_run_id((ms + 0.5) / 1000)[:10]
            made = [
                {**row, "id": prefix + "ZYXW"[n] * 16, "run_name": f"same-ms-{n}",
                 "enqueued_at": utc_iso(ms / 1000 + (100 + n) / 1e6)}
                for n in range(4)
            ]  # fmt: skip
            assert journal.add_queue_rows(made) == 4
            whole = [r.id for r in list_runs_and_entries(journal)]
            pages = [
                [r.id for r in list_runs_and_entries(journal, limit=2, offset=at)]
                for at in (0, 2, 4)
            ]
        finally:
            journal.close()
        newest_first = [m["id"] for m in made[::-1]]
        assert whole[:4] == newest_first and whole[4:] == [first.id]
        assert [i for page in pages for i in page] == whole

    def test_a_run_given_back_to_its_queue_says_so(self, tmp_path: Path) -> None:
        import time

        from letitloop import Journal
        from letitloop.inspection.queue_listing import list_runs_and_entries
        from letitloop.queueing.queue_records import Claimed
        from letitloop.runtext.runs import run_note

        db = str(tmp_path / "journal.db")
        q = Queue("emails", path=db)
        q.task(lambda x: x, name="echo")
        h = q.enqueue("echo", 1)
        claimed = q.store.claim("emails", q.limits, time.time())
        assert isinstance(claimed, Claimed)
        try:
            with Journal("echo", run=claimed.run_name, path=db) as j:
                run_id = j.run_id
        finally:
            assert q.store.started(claimed, run_id, time.time()) == (True, False)
            assert q.store.release(claimed)  # as a draining worker gives it back
        (shown,) = list_runs_and_entries(open_inspector(db))
        assert shown.id == run_id and shown.queue is not None and shown.queue.entry == h.id
        assert "back in queue emails" in (run_note(shown) or "")

    def test_a_suspended_run_is_delayed_with_its_reason_in_every_view(self, db: str) -> None:
        from letitloop import RateLimited
        from letitloop.inspection.queue_listing import list_runs_and_entries, queue_stats
        from letitloop.runtext.runs import run_note

        q = Queue("limited", path=db)

        @q.task
        def call() -> None:
            step("before", lambda: 1)
            raise RateLimited(retry_after=3600)

        h = q.enqueue(call)
        worker = q.worker().start()
        try:
            wait_until(lambda: h.status() == "delayed", "the run suspended")
        finally:
            worker.stop(timeout=20)
        reason = "RateLimited: rate limited: retry after 3600 s"
        assert h.reason() == reason
        journal = open_inspector(db)
        # Not "crashed": nobody holds it, by design; --status delayed finds it.
        (shown,) = list_runs_and_entries(journal, status=["delayed"], queue=None)
        assert shown.id == h.run_id and shown.state == "delayed"
        assert reason in (run_note(shown) or "")
        assert not list_runs_and_entries(journal, status=["crashed"])
        (stats,) = [s for s in queue_stats(journal) if s.queue == "limited"]
        assert stats.counts["delayed"] == 1 and stats.counts["crashed"] == 0
        code, shown_text, _ = lil(db, "show", h.run_id or "")  # the real entry point
        assert code == 0 and "state     delayed — back in its queue" in shown_text
        assert reason in shown_text


class TestTheListingsQueries:
    def test_an_older_file_gains_the_link_and_indexes_and_the_listings_use_them(
        self, tmp_path: Path
    ) -> None:
        import shutil
        import sqlite3

        from letitloop import Journal
        from letitloop.inspection.queue_listing import queue_stats

        db = tmp_path / "journal.db"
        shutil.copy(Path(__file__).parent / "golden" / "streams.db", db)  # schema 22
        with sqlite3.connect(db) as c:  # an entry of that version, its columns as they were
            c.execute(
                "INSERT INTO queue_entries (id, queue, task, run_name, args, status, "
                "not_before, enqueued_at) VALUES ('01OLD', 'q', 't', 'old', '[[], {}]', "
                "'queued', '2000-01-01T00:00:00.000000+00:00', "
                "'2000-01-01T00:00:00.000000+00:00')"
            )
        with Journal("opener", path=db):  # a writer upgrades it
            pass
        with sqlite3.connect(db) as c:
            columns = {r[1] for r in c.execute("PRAGMA table_info(queue_entries)")}
            assert "parent_run" in columns
            assert c.execute("SELECT parent_run FROM queue_entries").fetchall() == [(None,)]

            def plan(sql: str, *args: Any) -> str:
                return " ".join(str(r[-1]) for r in c.execute(f"EXPLAIN QUERY PLAN {sql}", args))

            # lil runs: a page's runs looked up by run id, not a scan of every entry.
            tag = plan("SELECT id FROM queue_entries WHERE run_id IN (?, ?)", "a", "b")
            assert "USING INDEX queue_entries_run" in tag, tag
            # lil queues: counted from the index alone, never reading the rows.
            counts = plan(
                "SELECT queue, status, status = 'queued' AND not_before > ? AS delayed, "
                "count(*), min(not_before) FROM queue_entries GROUP BY queue, status, delayed",
                "2000",
            )
            assert "COVERING INDEX queue_entries_ready" in counts, counts
        (stats,) = queue_stats(open_inspector(db))
        assert (
            stats.counts["queued"] == 1
            and stats.oldest_waiting == "2000-01-01T00:00:00.000000+00:00"
        )
