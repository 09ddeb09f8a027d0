"""``lil ui`` in a real browser: headless Chromium (the system's, driven by Playwright) on
pages the real ``lil ui`` serves from a real journal, one a SIGKILLed child left.

Skipped (one line) when there is no Chromium here; never in CI (``CI`` or
``LETITLOOP_BROWSER_TESTS`` set), where a missing browser fails the test. Each page is
saved as a screenshot under ``$LETITLOOP_SCREENSHOTS`` (``.ci/run`` sets it and prints it),
else under the test's temporary folder. ``lil ui`` and the pipelines that make the journals
run in children forked from an interpreter that imported letitloop and the web view once
(tests/preloaded.py; tests/test_web_hosts.py starts ``lil ui`` fresh).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import LIL_ENTRY, wait_until
from preloaded import Preloaded
from web_journals import BIG, SCRIPT, WEB_MODULES, Pipeline, crashed_and_resumed, hostile

from letitloop import Journal

#: Where Debian's chromium package puts the browser (``apt-get install chromium``).
CHROMIUM = os.environ.get("LETITLOOP_CHROMIUM", "/usr/bin/chromium")

#: In CI the browser tests must run: a missing browser or Playwright fails them.
REQUIRED = bool(os.environ.get("CI") or os.environ.get("LETITLOOP_BROWSER_TESTS"))


def _needed() -> Any:
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        if REQUIRED:
            pytest.fail(f"no Chromium at {CHROMIUM}: apt-get install -y chromium chromium-driver")
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium) for the browser tests")
    if REQUIRED:
        import playwright.sync_api as api
    else:
        api = pytest.importorskip("playwright.sync_api")
    return api


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    api = _needed()
    with api.sync_playwright() as p:
        # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.on(
        "console",
        lambda m: errors.append(m.text) if m.type == "error" else None,
    )
    tab.errors = errors
    try:
        yield tab
    finally:
        context.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("LETITLOOP_SCREENSHOTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def forker() -> Iterator[Preloaded]:
    """Forks ``lil ui`` from an interpreter that imported letitloop, ``lil``
    and the web view once."""
    with Preloaded("letitloop", *WEB_MODULES, with_letitloop=True) as preloaded:
        yield preloaded


class Server:
    """``lil ui --port 0`` on a journal, in a child process; its address from its first line."""

    def __init__(self, db: Path, forker: Preloaded) -> None:
        self.proc = forker.start(LIL_ENTRY, "--db", str(db), "ui", "--port", "0")
        wait_until(lambda: "\n" in self.proc.printed() or not self.proc.running(), "lil ui")
        line = self.proc.printed()
        found = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert found is not None, (line, self.proc.running() or self.proc.wait().stderr)
        self.url = found.group(0)

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):  # it ended already
            os.kill(self.proc.pid, signal.SIGTERM)
        self.proc.wait()


@pytest.fixture
def serve(forker: Preloaded) -> Iterator[Any]:
    started: list[Server] = []

    def start(db: Path) -> Server:
        started.append(Server(db, forker))
        return started[-1]

    yield start
    for s in started:
        s.stop()


class TestAJournalWithAKilledAndResumedRun:
    def test_the_crashed_attempt_and_the_replayed_steps_are_shown_as_such(
        self, tmp_path: Path, page: Any, serve: Any, shots: Path, forker: Preloaded
    ) -> None:
        p = crashed_and_resumed(tmp_path)
        server = serve(p.db)
        page.goto(server.url)
        crashed = page.locator("tr.state-crashed")
        assert crashed.locator(".badge").inner_text() == "crashed"
        assert "died in step 'slow_left'" in crashed.inner_text()
        assert page.locator("tr.state-completed .badge").inner_text() == "completed"
        page.screenshot(path=str(shots / "runs.png"), full_page=True)
        page.locator("tr.state-completed a.run-link").click()
        page.wait_for_selector("#run")
        first = page.locator('li.attempt[data-attempt="1"]')
        assert first.locator(".badge.outcome").inner_text() == "crashed, then resumed"
        assert "a kill leaves no record of its own" in first.inner_text()
        fetch = page.locator("tr.row", has=page.locator("td.key", has_text="fetch"))
        assert fetch.locator(".badge.replayed").is_visible()
        slow = page.locator("tr.row", has=page.locator("td.key", has_text="slow"))
        assert slow.locator(".badge.replayed").count() == 0
        page.screenshot(path=str(shots / "run-resumed.png"), full_page=True)
        page.goto(server.url + "runs/crashed")
        assert page.locator("tr.row.killed td.key").inner_text() == "slow_left"
        page.screenshot(path=str(shots / "run-crashed.png"), full_page=True)
        assert page.errors == []


class TestALiveRunsPage:
    def test_it_shows_each_step_as_it_lands_without_a_reload(
        self, tmp_path: Path, page: Any, serve: Any, shots: Path, forker: Preloaded
    ) -> None:
        p = Pipeline(tmp_path)
        child = p.spawn("live", "first,slow1,slow2")
        try:
            p.wait_in_flight("live", "slow1", child)
            server = serve(p.db)
            page.goto(server.url + "runs/live")
            assert page.locator("#progress").inner_text() == "1 step done"
            page.evaluate("window.sameDocument = true")
            p.open("slow1")
            landed = time.monotonic()
            expect = _needed().expect
            expect(page.locator("#progress")).to_have_text("2 steps done", timeout=10_000)
            took = time.monotonic() - landed
            assert page.evaluate("window.sameDocument") is True  # no reload
            assert page.locator("tr.row.in-flight td.key").inner_text() == "slow2"
            page.screenshot(path=str(shots / "run-live.png"), full_page=True)
            print(f"the page showed the step {took:.2f} s after its gate opened")
            p.open("slow2")
            expect(page.locator("#state")).to_have_text("completed", timeout=10_000)
            assert page.evaluate("window.sameDocument") is True
        finally:
            p.open("slow2")
            child.communicate(timeout=30)
        assert page.errors == []


class TestHostileText:
    def test_it_is_shown_as_text_and_the_page_stays_usable(
        self, tmp_path: Path, page: Any, serve: Any, shots: Path
    ) -> None:
        db = tmp_path / "journal.db"
        run_id = hostile(db)
        server = serve(db)
        page.goto(server.url)
        assert SCRIPT in page.locator("table.runs").inner_text()  # the name, as text
        page.goto(server.url + f"runs/{run_id}")
        assert page.evaluate("window.pwned") is None
        keys = page.locator("td.key").all_inner_texts()
        assert keys[0] == SCRIPT and keys[2:] == ["surrogate", "big", "after"]
        text = page.locator("#run").inner_text()
        assert "\\u001b[31mred" in text and "\\ud800" in text
        # the 5 MB result: cut on this page, the rest one click away, the page still answers
        big = page.locator("tr.row", has=page.locator("td.key", has_text="big"))
        big.locator("summary").click()
        assert "more characters" in big.inner_text()
        page.locator("tr.row", has=page.locator("td.key", has_text="after")).locator(
            "summary"
        ).click()
        assert page.get_by_text('"still here"').first.is_visible()
        page.screenshot(path=str(shots / "run-hostile.png"), full_page=True)
        big.get_by_role("link", name="the whole value").click()
        page.wait_for_selector("#row")
        assert len(page.locator("pre.value").inner_text()) >= BIG
        page.screenshot(path=str(shots / "row-5mb.png"))
        assert page.evaluate("window.pwned") is None
        assert page.errors == []


class TestTheRunsListFromTheKeyboard:
    def test_arrows_move_between_runs_and_enter_opens_one(
        self, db: Path, page: Any, serve: Any, shots: Path
    ) -> None:
        for name in ("one", "two", "three"):
            with Journal("keys", path=db, run=name) as j:
                j.step("s", lambda: 1)
        server = serve(db)
        page.goto(server.url)

        def focused() -> str:
            return str(page.evaluate("document.activeElement.closest('tr').innerText"))

        page.keyboard.press("j")
        assert "three" in focused()  # newest first
        page.keyboard.press("ArrowDown")
        page.keyboard.press("j")
        assert "one" in focused()
        page.keyboard.press("k")
        assert "two" in focused()
        page.keyboard.press("Home")
        assert "three" in focused()
        page.keyboard.press("End")
        assert "one" in focused()
        page.screenshot(path=str(shots / "runs-keyboard.png"))
        page.keyboard.press("Enter")
        page.wait_for_selector("#run")
        assert page.locator("h1 .name").inner_text() == "one"
        page.go_back()
        page.keyboard.press("/")
        assert page.evaluate("document.activeElement.name") == "goal"
        page.keyboard.type("keys")
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r"goal=keys"))
        assert page.locator("a.run-link").count() == 3
        assert page.errors == []
