"""``lil ui`` through its HTTP interface (Starlette's TestClient over the real app) and
``lil export --format html`` through the real ``lil``: what the pages say, that they escape
every recorded text, that they only read, and that a live run's page gets its changes."""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import lil_forked, run_forked

pytest.importorskip("starlette")
pytest.importorskip("jinja2")
from starlette.testclient import TestClient
from web_journals import (
    BIG,
    ESCAPES,
    IMG,
    SCRIPT,
    SURROGATE,
    Pipeline,
    crashed_and_resumed,
    hostile,
)

from letitloop import Journal
from letitloop.primitives.waits import RunWaiting
from letitloop.web import create_app, views
from letitloop.web.values import PREVIEW_CHARS
from letitloop.web.views import RUNS_PER_PAGE

LOCAL = "http://127.0.0.1"


def client(db: Path) -> TestClient:
    return TestClient(create_app(db), base_url=LOCAL)


def run_ids(html: str) -> list[str]:
    return re.findall(r'class="run-link" href="/runs/([0-9A-Z]+)"', html)


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> Pipeline:
    return crashed_and_resumed(tmp_path_factory.mktemp("killed"))


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    db = tmp_path_factory.mktemp("hostile") / "journal.db"
    yield db, hostile(db)


class TestTheRunsPage:
    def test_a_crashed_run_is_told_apart_from_a_completed_one(self, killed: Pipeline) -> None:
        page = client(killed.db).get("/")
        assert page.status_code == 200
        rows = dict(
            re.findall(
                r'<tr class="state-(\w+)">\s*<td><a[^>]*>[0-9A-Z]+</a></td>\s*<td>(\w+)', page.text
            )
        )
        assert rows == {"crashed": "crashed", "completed": "resumed"}
        assert "attempt 1 died in step &#39;slow_left&#39; after at least" in page.text

    def test_it_filters_by_state_as_lil_runs_does(self, killed: Pipeline) -> None:
        page = client(killed.db).get("/", params={"status": "crashed"})
        assert len(run_ids(page.text)) == 1 and "state-crashed" in page.text
        assert "state-completed" not in page.text

    def test_a_filter_it_cannot_read_is_a_clear_400(self, killed: Pipeline) -> None:
        page = client(killed.db).get("/", params={"since": "yesterday-ish"})
        assert page.status_code == 400 and 'role="alert"' in page.text
        unknown = client(killed.db).get("/", params={"goal": "nope"})
        assert unknown.status_code == 400 and "no goal &#39;nope&#39;" in unknown.text

    def test_many_runs_come_in_pages_newest_first(self, db: Path) -> None:
        for i in range(RUNS_PER_PAGE + 3):
            with Journal("many", path=db, run=f"r{i:03}") as j:
                j.step("s", lambda: 1)
        first = client(db).get("/")
        assert len(run_ids(first.text)) == RUNS_PER_PAGE
        older = re.search(r'href="([^"]+)" rel="next"', first.text)
        assert older is not None
        second = client(db).get(older.group(1).replace("&amp;", "&"))
        assert len(run_ids(second.text)) == 3
        assert set(run_ids(first.text)).isdisjoint(run_ids(second.text))
        assert ">r000<" in second.text  # the oldest on the last page


class TestARunsPage:
    def test_the_crashed_attempt_and_the_replayed_step_are_shown_as_such(
        self, killed: Pipeline
    ) -> None:
        page = client(killed.db).get("/runs/resumed")  # a goal names its newest run
        assert page.status_code == 200
        html = page.text
        first = html[html.index('data-attempt="1"') : html.index('data-attempt="2"')]
        assert "crashed, then resumed" in first
        assert "ended without closing the run, which the next attempt resumed" in first
        fetch = re.search(r'<tr class="row ran" id="row-\d+">.*?</tr>', html, re.DOTALL)
        assert fetch is not None and ">fetch</a>" in fetch.group(0)
        assert 'class="badge replayed"' in fetch.group(0)
        slow = re.search(r"<tr[^>]*>(?:(?!</tr>).)*>slow</a>.*?</tr>", html, re.DOTALL)
        assert slow is not None and "replayed" not in slow.group(0)  # ran in attempt 2

    def test_an_attempt_that_stopped_to_wait_says_what_it_waited_for(self, db: Path) -> None:
        import letitloop

        def attempt() -> None:
            with Journal("approve", path=db, run="r") as j:
                j.wait_for("approval", stop_after=0)

        with pytest.raises(RunWaiting):
            attempt()
        letitloop.send("approve", "approval", True, path=db)
        attempt()
        html = client(db).get("/runs/r").text
        first = html[html.index('data-attempt="1"') : html.index('data-attempt="2"')]
        assert "stopped to wait for &#39;approval&#39;" in first, first

    def test_each_attempt_says_which_steps_it_got_back_by_replay(self, killed: Pipeline) -> None:
        html = client(killed.db).get("/runs/resumed").text
        first = html[html.index('data-attempt="1"') : html.index('data-attempt="2"')]
        second = html[html.index('data-attempt="2"') :].split("</li>\n</ol>", 1)[0]
        assert 'class="mark replayed"' not in first  # attempt 1 ran fetch
        assert re.search(r'<li class="mark replayed" title="fetch: replayed">', second), (
            second
        )  # attempt 2 got fetch back
        assert '<span class="badge replayed">replayed 1</span>' in second

    def test_it_says_step_arguments_are_kept_only_as_fingerprints(self, killed: Pipeline) -> None:
        c = client(killed.db)
        html = c.get("/runs/resumed").text
        assert "the journal records only their fingerprint" in html
        seq = re.search(r'id="row-(\d+)"', html)
        assert seq is not None
        row = c.get(f"/runs/resumed/rows/{seq.group(1)}").text
        assert "<dt>arguments</dt><dd>not kept: only their fingerprint" in row

    def test_a_run_left_crashed_says_where_its_process_died(self, killed: Pipeline) -> None:
        html = client(killed.db).get("/runs/crashed").text
        assert "its last process (pid" in html and "died in step &#39;slow_left&#39;" in html
        assert '<tr class="row killed"' in html  # the step it died in

    def test_an_unknown_run_is_a_404_page(self, killed: Pipeline) -> None:
        page = client(killed.db).get("/runs/01ZZZZZZZZZZ")
        assert page.status_code == 404 and "no run" in page.text


class TestARunOfManySteps:
    def test_its_page_links_a_bounded_window_of_pages(
        self, db: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(views, "STEPS_PER_PAGE", 2)  # 41 steps: 21 pages of 2
        with Journal("long", path=db) as j:
            for i in range(41):
                j.step(f"step-{i}", lambda i=i: i)
            run_id = j.run_id
        html = client(db).get(f"/runs/{run_id}", params={"page": 11}).text
        nav = re.search(r'<nav class="pages">(.*?)</nav>', html, re.DOTALL)
        assert nav is not None
        linked = [int(p) for p in re.findall(r"\?page=(\d+)", nav.group(1))]
        assert linked == [1, 8, 9, 10, 12, 13, 14, 21]  # the first, 3 either side, the last
        assert "<strong>11</strong>" in nav.group(1) and nav.group(1).count("…") == 2
        assert re.findall(r">(step-\d+)</a>", html) == ["step-20", "step-21"]


class TestARunsMarkers:
    def test_show_their_holder_and_how_many_holders_died_in_them(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        script = tmp_path / "marker.py"
        script.write_text(
            "import os, signal, sys\n"
            "from letitloop import Journal\n"
            "with Journal('mail', path=sys.argv[1], run='r') as j:\n"
            "    with j.atomic_marker('send') as go:\n"
            "        if go and len(sys.argv) > 2:\n"
            "            os.kill(os.getpid(), signal.SIGKILL)\n",
            encoding="utf-8",
        )
        died = run_forked(script, str(db), "die")
        assert died.returncode == -9, died.stderr
        done = run_forked(script, str(db))
        assert done.returncode == 0, done.stderr
        c = client(db)
        html = c.get("/runs/r").text
        marker = re.search(r"<tr[^>]*>(?:(?!</tr>).)*>send</a>.*?</tr>", html, re.DOTALL)
        assert marker is not None
        holder = re.search(r'<span class="holder">(.*?)</span>', marker.group(0))
        assert holder is not None, marker.group(0)
        text = holder.group(1)
        assert re.fullmatch(
            r"last held by pid \d+ on [^ ]+ \(run [0-9A-Z]+\) · offered 2 times · "
            r"1 holder died in it",
            text,
        ), text
        seq = re.search(r'id="row-(\d+)"', marker.group(0))
        assert seq is not None
        assert "<dt>holder</dt><dd>last held by pid" in c.get(f"/runs/r/rows/{seq.group(1)}").text


class TestRecordedTextIsShownAsText:
    def test_markup_in_names_keys_and_results_is_escaped(
        self, hostile_db: tuple[Path, str]
    ) -> None:
        db, run_id = hostile_db
        for path in ("/", f"/runs/{run_id}"):
            html = client(db).get(path).text
            assert "<script>window" not in html and "<img src=x" not in html
            assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in html
        assert "&lt;img src=x onerror=" in client(db).get(f"/runs/{run_id}").text

    def test_terminal_escapes_and_a_lone_surrogate_become_visible_escapes(
        self, hostile_db: tuple[Path, str]
    ) -> None:
        db, run_id = hostile_db
        page = client(db).get(f"/runs/{run_id}")
        assert page.status_code == 200
        html = page.content.decode("utf-8")  # strict: a lone surrogate could not be sent
        assert "\x1b" not in html and "\x07" not in html
        assert "\\u001b[31mred" in html and "\\ud800" in html
        assert ESCAPES not in html and SURROGATE not in html
        failed = client(db).get("/runs/hostile-error")  # an error and a traceback: not JSON
        assert failed.status_code == 200
        html = failed.content.decode("utf-8")
        assert "\x1b" not in html and "\x07" not in html and "<script>window" not in html
        assert html.count("&lt;script&gt;window.pwned = 1&lt;/script&gt;\\x1b[31mred") >= 2
        assert "\\ud800 a pair" in html

    def test_a_5_mb_result_is_cut_on_the_run_page_and_whole_on_its_own(
        self, hostile_db: tuple[Path, str]
    ) -> None:
        db, run_id = hostile_db
        page = client(db).get(f"/runs/{run_id}").text
        assert len(page) < 100_000
        more = re.search(rf'{BIG + 2 - PREVIEW_CHARS:,} more characters: <a href="([^"]+)"', page)
        assert more is not None
        whole = client(db).get(more.group(1)).text
        assert whole.count("x") >= BIG and "still here" not in whole

    def test_every_answer_forbids_inline_script(self, hostile_db: tuple[Path, str]) -> None:
        db, run_id = hostile_db
        for path in ("/", f"/runs/{run_id}", f"/runs/{run_id}/rows/1", "/static/ui.js"):
            csp = client(db).get(path).headers["content-security-policy"]
            assert "script-src 'self'" in csp and "unsafe-inline" not in csp
            assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp

    def test_no_page_holds_a_script_but_the_package_s_own(
        self, hostile_db: tuple[Path, str]
    ) -> None:
        db, run_id = hostile_db
        html = client(db).get(f"/runs/{run_id}").text
        assert re.findall(r"<script[^>]*>", html) == ['<script src="/static/ui.js" defer>']
        assert " on" + "error=" not in html.replace("&#34;", '"').split("&lt;img")[0]


class TestTheViewOnlyReads:
    def test_serving_pages_changes_no_byte_and_makes_no_file(self, killed: Pipeline) -> None:
        folder = killed.db.parent
        before = {
            p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in folder.iterdir()
            if p.is_file()
        }
        c = client(killed.db)
        for path in ("/", "/runs/resumed", "/runs/crashed", "/runs/crashed/live?page=1&stamp=x"):
            assert c.get(path).status_code == 200
        after = {
            p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in folder.iterdir()
            if p.is_file()
        }
        assert after == before

    def test_it_answers_no_request_that_could_change_something(self, killed: Pipeline) -> None:
        c = client(killed.db)
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            assert c.request(method, "/runs/crashed").status_code == 405

    def test_it_answers_only_to_the_loopback_names(self, killed: Pipeline) -> None:
        """A page of another site that rebinds its name to 127.0.0.1 gets nothing."""
        c = client(killed.db)
        assert c.get("/", headers={"host": "attacker.example:8765"}).status_code == 400
        assert c.get("/", headers={"host": "localhost:8765"}).status_code == 200


class TestALiveRunsPage:
    def test_it_gets_nothing_until_the_run_changes_then_the_new_part(self, tmp_path: Path) -> None:
        p = Pipeline(tmp_path)
        child = p.spawn("live", "first,slow1,slow2")
        try:
            p.wait_in_flight("live", "slow1", child)
            c = client(p.db)
            page = c.get("/runs/live").text
            stamp = re.search(r'data-stamp="(\w+)"', page)
            assert stamp is not None and "1 step done" in page
            same = c.get("/runs/live/live", params={"page": "1", "stamp": stamp.group(1)})
            assert same.status_code == 204
            p.open("slow1")
            p.wait_in_flight("live", "slow2", child)
            changed = c.get("/runs/live/live", params={"page": "1", "stamp": stamp.group(1)})
            assert changed.status_code == 200 and "2 steps done" in changed.text
            assert "<main" not in changed.text  # the part a page swaps in, not a page
            assert changed.headers["x-lil-stamp"] != stamp.group(1)
        finally:
            p.open("slow2")
            child.communicate(timeout=30)


class TestARunThatStreams:
    def test_its_page_shows_each_stream_s_text_and_follows_it_while_it_grows(
        self, tmp_path: Path
    ) -> None:
        import threading

        from letitloop.errors import LetItLoopError
        from letitloop.streams import read, stream

        db = tmp_path / "journal.db"
        gate = threading.Event()

        def tell() -> Iterator[str]:
            yield from ["Once ", "<b>upon</b> ", "a "]
            gate.wait(30)  # the stream stalls: the page shows what was journaled
            yield from ["time", "."]

        def program() -> None:
            with Journal("tales", run="tale", path=db) as j:
                assert stream("story", tell, journal=j).result.text == "Once <b>upon</b> a time."

        def journaled(n: int) -> bool:
            try:
                return len(read("tale", path=db)) >= n
            except LetItLoopError:  # no file, or no run, yet
                return False

        writer = threading.Thread(target=program)
        writer.start()
        try:
            while not journaled(3):  # the stalled stream's first batch
                time.sleep(0.02)
            c = client(db)
            page = c.get("/runs/tale").text
            stamp = re.search(r'data-stamp="(\w+)"', page)
            assert stamp is not None and stamp.group(1).endswith("_2")  # its last chunk: 2
            assert "<h2>streams</h2>" in page and "3 chunks, not ended" in page
            assert "Once &lt;b&gt;upon&lt;/b&gt; a </pre>" in page  # escaped, as journaled
            same = c.get("/runs/tale/live", params={"page": "1", "stamp": stamp.group(1)})
            assert same.status_code == 204
        finally:
            gate.set()
            writer.join(30)
        changed = c.get("/runs/tale/live", params={"page": "1", "stamp": stamp.group(1)})
        assert changed.status_code == 200 and "6 chunks, ended" in changed.text
        assert "Once &lt;b&gt;upon&lt;/b&gt; a time.</pre>" in changed.text
        assert changed.headers["x-lil-stamp"].endswith("_5")
        again = c.get(
            "/runs/tale/live", params={"page": "1", "stamp": changed.headers["x-lil-stamp"]}
        )
        assert again.status_code == 204


class TestExportingARunAsOnePage:
    def test_it_is_one_file_with_no_script_and_every_value_whole(
        self, hostile_db: tuple[Path, str]
    ) -> None:
        db, run_id = hostile_db
        done = lil_forked("--db", str(db), "export", run_id, "--format", "html")
        assert done.returncode == 0, done.stderr
        html = done.stdout
        assert (
            "<script" not in html
            and "<link" not in html
            and "src=" not in html.split("<body>")[1].split("&lt;")[0]
        )
        assert re.search(r"default-src &#39;none&#39;; style-src &#39;sha256-[^;]+&#39;", html)
        assert html.count("x" * 1000) >= BIG // 1000 - 1  # the 5 MB result, whole
        assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in html
        assert "\\ud800" in html and "\x1b" not in html
        assert SCRIPT not in html and IMG not in html


class TestARunWaitingForOutsideInput:
    def test_its_page_shows_the_lil_send_command_that_answers_it(self, db: Path) -> None:
        with pytest.raises(SystemExit), Journal("deploy", path=db) as j:  # RunWaiting
            j.step("plan", lambda: "the plan")
            j.wait_for("approval", stop_after=0)
        html = client(db).get("/runs/deploy").text
        assert '<span class="badge waiting" id="state">waiting</span>' in html
        command = re.search(r'<code class="send">([^<]+)</code>', html)
        assert command is not None
        argv = command.group(1).split()
        assert argv[:2] == ["lil", "send"] and argv[3:] == ["approval", "VALUE"]
        sent = lil_forked("--db", str(db), *argv[1:-1], "true")
        assert sent.returncode == 0, sent.stderr


WATCHED = """
import os, signal, sys
from letitloop import Journal

with Journal("watched", path=sys.argv[1]) as j:
    j.step("first", lambda: 1)
    if os.environ.get("LETITLOOP_ATTEMPT") == "1":
        os.kill(os.getpid(), signal.SIGKILL)  # the first process dies here
    j.step("second", lambda: 2)
"""


class TestARunRestartedByLilWatch:
    def test_its_page_shows_the_restarts_and_their_exit_causes(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        script = tmp_path / "watched.py"
        script.write_text(WATCHED, encoding="utf-8")
        done = lil_forked(
            "--db", str(db), "watch", "--backoff", "0", "--jitter", "0", str(script), str(db)
        )
        assert done.returncode == 0, done.stderr
        html = client(db).get("/runs/watched").text
        events = html[html.index("<h2>supervisor restarts</h2>") :]
        cells = re.findall(r"<tr>(.*?)</tr>", events, re.DOTALL)
        exits = [c for c in cells if "<td>exit</td>" in c]
        assert len(exits) == 2, events
        assert "exit 137" in exits[0] and "SIGKILL" in exits[0]
        assert "exit 0" in exits[1]
        first = html[html.index('data-attempt="1"') : html.index('data-attempt="2"')]
        assert "lil watch saw exit 137 (SIGKILL)" in first


class TestARowThatFailsItsChecksum:
    def test_the_run_page_and_the_row_page_mark_it_damaged(self, tmp_path: Path) -> None:
        import sqlite3

        db = tmp_path / "journal.db"
        with Journal("g", path=db, run="r1") as j:
            j.step("a", lambda: {"n": 1})
            j.step("b", lambda: {"n": 2})
            run_id = j.run_id
        conn = sqlite3.connect(db)
        with conn:
            conn.execute("""UPDATE _journal_g SET result = '{"n":3}' WHERE key = 'a'""")
        conn.close()
        c = client(db)
        page = c.get(f"/runs/{run_id}").text
        assert page.count('<span class="badge damaged">damaged</span>') == 1, page
        assert page.count('<span class="badge ran">ran</span>') == 1, page  # b is intact
        row = c.get(f"/runs/{run_id}/rows/1").text
        assert '<span class="badge damaged">damaged</span>' in row, row


class TestAPortThatCannotBeListenedOn:
    def test_a_taken_port_is_named_with_the_option_that_picks_another(self, db: Path) -> None:
        import socket

        with Journal("g", path=db):
            pass
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            done = lil_forked("--db", str(db), "ui", "--port", str(port))
        assert done.returncode == 1 and done.stdout == ""
        (line,) = done.stderr.splitlines()
        assert line.startswith(f"Error: port {port} is taken on 127.0.0.1"), line
        assert "pick another with --port" in line and "--port 0 for any free port" in line
        assert "disk" not in line and "Traceback" not in done.stderr

    def test_an_address_not_of_this_machine_says_so(self, db: Path) -> None:
        with Journal("g", path=db):
            pass
        done = lil_forked("--db", str(db), "ui", "--host", "192.0.2.1", "--allow-remote")
        assert done.returncode == 1
        (line,) = done.stderr.splitlines()
        assert "192.0.2.1 is not an address of this machine" in line, line
        assert "--host 127.0.0.1" in line
