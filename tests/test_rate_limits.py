"""A rate-limited call (an HTTP 429) suspends its queued run until the reset and frees its
queue slot (letitloop/queueing/rate_limits.py, queue_worker.py): recognised from
letitloop's RateLimited and from the real clients' errors, and suspended by a real worker."""

from __future__ import annotations

import pickle
import time
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest

from letitloop import Queue, RateLimited, step
from letitloop.errors import MisuseError
from letitloop.inspection import find_run, open_inspector
from letitloop.queueing.rate_limits import DEFAULT_SECONDS, retry_after


@pytest.fixture(params=["file", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "postgres":
        import pg_server

        return pg_server.location()
    return tmp_path / "journal.db"


def response(status: int, headers: dict[str, str]) -> Any:
    httpx = pytest.importorskip("httpx")
    return httpx.Response(
        status, headers=headers, request=httpx.Request("POST", "https://api.example.com/v1/x")
    )


class TestARateLimitIsRecognised:
    def test_from_letitloops_own_error_with_its_wait(self) -> None:
        assert retry_after(RateLimited(retry_after=30)) == 30.0
        assert retry_after(RateLimited(retry_after=timedelta(minutes=2))) == 120.0
        again = pickle.loads(pickle.dumps(RateLimited("slow down", retry_after=7)))
        assert (str(again), again.retry_after) == ("slow down", 7.0)

    def test_a_bad_wait_is_refused_with_what_is_expected(self) -> None:
        with pytest.raises(MisuseError, match="retry_after must be the seconds"):
            RateLimited(retry_after="soon")
        with pytest.raises(MisuseError, match="got -1"):
            RateLimited(retry_after=-1)

    def test_from_openais_rate_limit_error_by_its_retry_after_ms(self) -> None:
        openai = pytest.importorskip("openai")
        r = response(429, {"retry-after-ms": "1500", "retry-after": "2"})
        assert retry_after(openai.RateLimitError("slow down", response=r, body=None)) == 1.5

    def test_from_httpxs_status_error_by_its_retry_after_date(self) -> None:
        import httpx

        now = time.time()
        date = format_datetime(datetime.fromtimestamp(now + 90, timezone.utc), usegmt=True)
        with pytest.raises(httpx.HTTPStatusError) as raised:
            response(429, {"Retry-After": date}).raise_for_status()
        got = retry_after(raised.value, now)
        assert got is not None and 89 <= got <= 90  # the date is to the second

    def test_from_requests_and_aiohttp_errors_and_through_a_wrapping_error(self) -> None:
        requests = pytest.importorskip("requests")
        aiohttp = pytest.importorskip("aiohttp")
        r = requests.Response()
        r.status_code, r.headers["Retry-After"] = 429, "12"
        assert retry_after(requests.HTTPError(response=r)) == 12.0
        ae = aiohttp.ClientResponseError(None, (), status=429, headers={"Retry-After": "3"})
        assert retry_after(ae) == 3.0
        bare = requests.Response()
        bare.status_code = 429  # no header: the default wait
        try:
            try:
                raise requests.HTTPError(response=bare)
            except requests.HTTPError as exc:
                raise RuntimeError("the adapter's own error") from exc
        except RuntimeError as wrapped:
            assert retry_after(wrapped) == DEFAULT_SECONDS

    def test_not_from_other_statuses_or_errors(self) -> None:
        import httpx

        with pytest.raises(httpx.HTTPStatusError) as raised:
            response(503, {"Retry-After": "5"}).raise_for_status()
        assert retry_after(raised.value) is None
        assert retry_after(ValueError("429")) is None


class TestARateLimitedQueuedRun:
    def test_is_suspended_until_the_reset_its_slot_taken_by_another_its_steps_not_repaid(
        self, db: Any
    ) -> None:
        q = Queue("q", concurrency=1, path=db)
        calls: list[str] = []
        seen: dict[str, Any] = {}

        def note(what: str) -> str:
            calls.append(what)
            return what

        def call_api() -> str:
            calls.append("call")
            if calls.count("call") == 1:
                raise RateLimited(retry_after=0.3)
            return "answer"

        @q.task
        def limited() -> str:
            return step("before", note, "before") + step("call", call_api)

        @q.task
        def other() -> str:
            seen["limited"] = (a.status(), q.store.state(a.id))
            seen["reason"] = a.reason()
            return step("other", note, "other")

        a = q.enqueue(limited)
        b = q.enqueue(other)
        worker = q.worker(threads=1).start()
        try:
            assert a.result(timeout=20) == "beforeanswer" and b.result(timeout=20) == "other"
        finally:
            worker.stop(timeout=20)
        # The one slot and the one thread went to the other run while it waited.
        assert calls == ["before", "call", "other", "call"]
        status, state = seen["limited"]  # told apart from a queued run: not due yet
        assert status == "delayed" and state.attempt == 1
        assert state.error == "RateLimited: rate limited: retry after 0.3 s"
        assert seen["reason"] == state.error and a.reason() is None  # said while it waited
        assert worker.counts == {"suspended": 1, "completed": 2}
        run = find_run(open_inspector(db), a.run_id or "")
        assert run.status == "completed"

    def test_an_async_task_is_suspended_by_an_openai_rate_limit_error(self, tmp_path: Path) -> None:
        openai = pytest.importorskip("openai")
        from letitloop import async_step

        q = Queue("q", path=tmp_path / "journal.db")
        calls: list[str] = []

        async def ask() -> str:
            calls.append("ask")
            if len(calls) == 1:
                r = response(429, {"retry-after-ms": "200"})
                raise openai.RateLimitError("Rate limit reached", response=r, body=None)
            return "answer"

        @q.task
        async def agent() -> str:
            return str(await async_step("ask", ask))

        h = q.enqueue(agent)
        worker = q.worker().start()
        try:
            assert h.result(timeout=20) == "answer"
        finally:
            worker.stop(timeout=20)
        assert calls == ["ask", "ask"] and worker.counts == {"suspended": 1, "completed": 1}
        state = q.store.state(h.id)
        assert state is not None and state.attempt == 2
