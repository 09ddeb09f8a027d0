"""OpenTelemetry spans (letitloop/run/otel.py, docs/observability.md), through the SDK's exporters.

In this process: the SDK's in-memory exporter behind a tracer provider set for
this file's tests only (and unset after them, so other files in the worker
run without one). Across a SIGKILL: child processes whose provider writes each
ended span to a file, as an exporter would send it, before the kill.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from opentelemetry.util._once import Once

import letitloop
from letitloop import Journal, RetryPolicy

EXPORTER = InMemorySpanExporter()


def set_provider(provider: trace.TracerProvider | None) -> None:
    """Set (or unset: None) the process's tracer provider, as OpenTelemetry's own tests do."""
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    if provider is not None:
        trace.set_tracer_provider(provider)


@pytest.fixture(scope="module", autouse=True)
def provider() -> Iterator[None]:
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(EXPORTER))
    set_provider(tp)
    yield
    set_provider(None)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    EXPORTER.clear()
    yield EXPORTER
    EXPORTER.clear()


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def one(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    found = named(exporter, name)
    assert len(found) == 1, [s.name for s in exporter.get_finished_spans()]
    return found[0]


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def paid(x: int) -> int:
    letitloop.usage(input_tokens=10 * x, output_tokens=x, cost=0.5, model="m-1")
    return x


class TestAnAttempt:
    def test_it_is_a_span_with_the_run_and_its_outcome(
        self, tmp_path: Path, spans: InMemorySpanExporter
    ) -> None:
        with Journal("sync", path=tmp_path / "j.db", run="nightly") as j:
            j.step("a", paid, 1)
        run = one(spans, "run sync")
        assert run.attributes is not None
        assert dict(run.attributes) == {
            "letitloop.goal": "sync",
            "letitloop.run.id": j.run_id,
            "letitloop.run.name": "nightly",
            "letitloop.attempt": 1,
            "letitloop.attempt.kind": "new",
            "letitloop.run.outcome": "completed",
        }
        assert parent_of(one(spans, "step a")) == run.context.span_id

    def test_it_is_a_child_of_the_callers_span(
        self, tmp_path: Path, spans: InMemorySpanExporter
    ) -> None:
        tracer = trace.get_tracer("app")
        with (
            tracer.start_as_current_span("POST /sync") as request,
            Journal("sync", path=tmp_path / "j.db") as j,
        ):
            j.step("a", paid, 1)
        run = one(spans, "run sync")
        assert run.context.trace_id == request.get_span_context().trace_id
        assert parent_of(run) == request.get_span_context().span_id

    def test_an_async_one_is_a_child_of_the_callers_span_too(
        self, tmp_path: Path, spans: InMemorySpanExporter
    ) -> None:
        async def main() -> int:
            with trace.get_tracer("app").start_as_current_span("job") as job:
                async with Journal("sync", path=tmp_path / "j.db") as j:  # opened in a thread
                    await j.async_step("a", paid, 1)
                return job.get_span_context().span_id

        job_id = asyncio.run(main())
        run = one(spans, "run sync")
        assert parent_of(run) == job_id
        assert parent_of(one(spans, "step a")) == run.context.span_id

    def test_one_that_failed_says_so_with_the_exception(
        self, tmp_path: Path, spans: InMemorySpanExporter
    ) -> None:
        with pytest.raises(KeyError), Journal("sync", path=tmp_path / "j.db"):
            raise KeyError("gone")
        run = one(spans, "run sync")
        assert run.attributes is not None and run.attributes["letitloop.run.outcome"] == "failed"
        assert run.status.status_code is StatusCode.ERROR
        assert [e.name for e in run.events] == ["exception"]

    def test_a_resumed_one_links_to_the_one_before_and_counts_its_replays_once(
        self, tmp_path: Path, spans: InMemorySpanExporter
    ) -> None:
        with pytest.raises(RuntimeError), Journal("sync", path=tmp_path / "j.db") as j:
            j.step("a", paid, 1)
            j.step("b", paid, 2)
            raise RuntimeError("down")
        first = one(spans, "run sync")
        spans.clear()
        with Journal("sync", path=tmp_path / "j.db") as j:
            assert j.step("a", paid, 1) == 1
            assert j.step("b", paid, 2) == 2
            j.step("c", paid, 3)
        run = one(spans, "run sync")
        assert run.attributes is not None
        assert run.attributes["letitloop.attempt"] == 2
        assert run.attributes["letitloop.attempt.kind"] == "resumed"
        assert [(lk.context.trace_id, lk.context.span_id) for lk in run.links] == [
            (first.context.trace_id, first.context.span_id)
        ]
        assert [s.name for s in spans.get_finished_spans()] == ["step c", "run sync"]
        (event,) = run.events
        assert event.name == "letitloop.replayed"
        assert dict(event.attributes or {}) == {
            "letitloop.replayed.steps": 2,
            "letitloop.replayed.input_tokens": 30,
            "letitloop.replayed.output_tokens": 3,
            "letitloop.replayed.cost": 1.0,
        }


class TestAStep:
    def test_it_carries_its_key_function_and_usage_as_genai_attributes(
        self, tmp_path: Path, spans: InMemorySpanExporter
    ) -> None:
        with Journal("sync", path=tmp_path / "j.db") as j:
            j.step("a", paid, 4)
            j.step("a", paid, 5)
        first, second = named(spans, "step a")
        assert dict(first.attributes or {}) == {
            "letitloop.step.key": "a",
            "letitloop.step.function": f"{__name__}.paid",
            "gen_ai.usage.input_tokens": 40,
            "gen_ai.usage.output_tokens": 4,
            "gen_ai.response.model": "m-1",
            "letitloop.usage.cost": 0.5,
        }
        assert second.attributes is not None and second.attributes["letitloop.step.key"] == "a#2"

    def test_one_called_inside_another_is_its_child(
        self, tmp_path: Path, spans: InMemorySpanExporter
    ) -> None:
        with Journal("sync", path=tmp_path / "j.db") as j:
            j.step("outer", lambda: j.step("inner", paid, 1) + j.step("inner2", paid, 2))
        outer = one(spans, "step outer")
        for name in ("step inner", "step inner2"):
            assert parent_of(one(spans, name)) == outer.context.span_id
        assert one(spans, "step inner").attributes["letitloop.step.key"] == "outer/inner"  # type: ignore[index]

    def test_gathered_async_ones_are_children_of_the_step_that_gathered_them(
        self, tmp_path: Path, spans: InMemorySpanExporter
    ) -> None:
        async def fetch(i: int) -> int:
            await asyncio.sleep(0.01 * (3 - i))  # finishing out of order
            return paid(i)

        async def main() -> None:
            async with Journal("sync", path=tmp_path / "j.db") as j:

                async def all_of() -> list[int]:
                    return await asyncio.gather(
                        *(j.async_step(f"fetch:{i}", fetch, i) for i in range(3))
                    )

                await j.async_step("gather", all_of)
                await asyncio.gather(*(j.async_step(f"top:{i}", fetch, i) for i in range(2)))

        asyncio.run(main())
        run = one(spans, "run sync")
        gather = one(spans, "step gather")
        assert parent_of(gather) == run.context.span_id
        for i in range(3):
            assert parent_of(one(spans, f"step fetch:{i}")) == gather.context.span_id
        for i in range(2):
            assert parent_of(one(spans, f"step top:{i}")) == run.context.span_id
        assert {s.context.trace_id for s in spans.get_finished_spans()} == {run.context.trace_id}

    def test_one_in_a_worker_thread_is_a_child_of_the_attempt(
        self, tmp_path: Path, spans: InMemorySpanExporter
    ) -> None:
        from concurrent.futures import ThreadPoolExecutor

        with Journal("sync", path=tmp_path / "j.db") as j, ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda i: j.step(f"t:{i}", paid, i), range(2)))
        run = one(spans, "run sync")
        for i in range(2):
            assert parent_of(one(spans, f"step t:{i}")) == run.context.span_id

    def test_its_failed_tries_are_events_and_their_usage_counts(
        self, tmp_path: Path, spans: InMemorySpanExporter
    ) -> None:
        calls = []

        def flaky() -> str:
            calls.append(1)
            letitloop.usage(input_tokens=100, output_tokens=1)
            if len(calls) < 3:
                raise TimeoutError(f"try {len(calls)}")
            return "ok"

        policy = RetryPolicy(max_attempts=3, initial_backoff=0.001, jitter=0.0)
        with Journal("sync", path=tmp_path / "j.db") as j:
            assert j.step("flaky", flaky, retry=policy) == "ok"
        step = one(spans, "step flaky")
        assert [(e.name, dict(e.attributes or {})) for e in step.events] == [
            (
                "letitloop.try_failed",
                {
                    "letitloop.try": n,
                    "exception.type": "TimeoutError",
                    "exception.message": f"try {n}",
                },
            )
            for n in (1, 2)
        ]
        assert step.status.status_code is StatusCode.UNSET
        assert step.attributes is not None
        assert step.attributes["gen_ai.usage.input_tokens"] == 300  # every paid try, once

    def test_one_that_fails_has_an_error_status_and_the_exception(
        self, tmp_path: Path, spans: InMemorySpanExporter
    ) -> None:
        def broken() -> None:
            raise ValueError("bad input")

        with pytest.raises(ValueError), Journal("sync", path=tmp_path / "j.db") as j:
            j.step("broken", broken)
        step = one(spans, "step broken")
        assert step.status.status_code is StatusCode.ERROR
        assert step.status.description == "ValueError: bad input"
        (event,) = step.events
        assert event.name == "exception"
        assert event.attributes is not None
        assert event.attributes["exception.type"] == "ValueError"
        assert event.attributes["exception.message"] == "bad input"

    def test_async_one_that_fails_has_an_error_status(
        self, tmp_path: Path, spans: InMemorySpanExporter
    ) -> None:
        async def broken() -> None:
            raise ValueError("bad input")

        async def main() -> None:
            async with Journal("sync", path=tmp_path / "j.db") as j:
                await j.async_step("broken", broken)

        with pytest.raises(ValueError):
            asyncio.run(main())
        assert one(spans, "step broken").status.status_code is StatusCode.ERROR


class TestSleepsWaitsAndMarkers:
    def test_each_that_runs_is_a_span_and_a_done_marker_is_not(
        self, tmp_path: Path, spans: InMemorySpanExporter
    ) -> None:
        path = tmp_path / "j.db"
        with Journal("sync", path=path, run="r") as j:
            j.sleep("nap", 0)
            with j.atomic_marker("mail") as go:
                assert go
                j.step("send", paid, 1)
        marker = one(spans, "marker mail")
        assert parent_of(one(spans, "step send")) == marker.context.span_id
        assert marker.attributes is not None
        assert marker.attributes["letitloop.marker.status"] == "done"
        assert one(spans, "sleep nap").attributes == {"letitloop.sleep.key": "nap"}
        spans.clear()
        with Journal("sync", path=path, run="r") as j:  # completed: everything replays
            j.sleep("nap", 0)
            with j.atomic_marker("mail") as go:
                assert not go
        assert [s.name for s in spans.get_finished_spans()] == ["run sync"]
        assert one(spans, "run sync").attributes["letitloop.attempt.kind"] == "replay"  # type: ignore[index]

    def test_a_wait_that_times_out_is_a_failed_span(
        self, tmp_path: Path, spans: InMemorySpanExporter
    ) -> None:
        with (
            pytest.raises(letitloop.WaitTimeoutError),
            Journal("sync", path=tmp_path / "j.db") as j,
        ):
            j.wait_for("approval", timeout=0.01)
        assert one(spans, "wait approval").status.status_code is StatusCode.ERROR

    def test_a_wait_that_stops_the_process_leaves_the_attempt_waiting_not_failed(
        self, tmp_path: Path, spans: InMemorySpanExporter
    ) -> None:
        with pytest.raises(letitloop.RunWaiting), Journal("sync", path=tmp_path / "j.db") as j:
            j.wait_for("approval", stop_after=0.01)
        wait, run = one(spans, "wait approval"), one(spans, "run sync")
        assert wait.attributes is not None and wait.attributes["letitloop.stopped"] == "RunWaiting"
        assert run.attributes is not None and run.attributes["letitloop.run.outcome"] == "waiting"
        for span in (wait, run):
            assert span.status.status_code is StatusCode.UNSET
            assert span.events == ()


class TestWhenTracingIsOff:
    def test_no_provider_means_no_spans(self, tmp_path: Path, spans: InMemorySpanExporter) -> None:
        set_provider(None)
        try:
            with Journal("sync", path=tmp_path / "j.db") as j:
                assert j._trace is None
                j.step("a", paid, 1)
        finally:
            tp = TracerProvider()
            tp.add_span_processor(SimpleSpanProcessor(EXPORTER))
            set_provider(tp)
        assert spans.get_finished_spans() == ()

    def test_the_switch_turns_them_off(
        self, tmp_path: Path, spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("LETITLOOP_OTEL", "off")
        with Journal("sync", path=tmp_path / "j.db") as j:
            assert j._trace is None
            j.step("a", paid, 1)
        assert spans.get_finished_spans() == ()

    def test_a_program_without_opentelemetry_never_imports_it(self, tmp_path: Path) -> None:
        code = (
            "import sys\nfrom letitloop import Journal\n"
            f"with Journal('g', path={str(tmp_path / 'j.db')!r}) as j:\n"
            "    j.step('a', int)\n"
            "print(sorted(m for m in sys.modules\n"
            "             if 'opentelemetry' in m or m == 'letitloop.run.otel'))\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
        )
        assert done.stdout.strip() == "[]"


# -- across a SIGKILL ---------------------------------------------------------------------

CHILD = textwrap.dedent(
    """
    import json, sys, time
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    out = open(sys.argv[2], "a")

    class ToFile(SpanExporter):
        # Each ended span as one JSON line, flushed: what a collector would have got.
        def export(self, spans):
            for s in spans:
                out.write(json.dumps({
                    "name": s.name,
                    "trace": s.context.trace_id,
                    "span": s.context.span_id,
                    "parent": s.parent.span_id if s.parent else None,
                    "attributes": dict(s.attributes),
                    "events": [[e.name, dict(e.attributes)] for e in s.events],
                    "links": [[lk.context.trace_id, lk.context.span_id] for lk in s.links],
                }) + "\\n")
            out.flush()
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ToFile()))
    trace.set_tracer_provider(provider)

    import letitloop
    from letitloop import Journal

    def paid(x):
        letitloop.usage(input_tokens=10 * x, output_tokens=x)
        return x

    def slow(ready):
        if j.attempt == 1:
            open(ready, "w").close()
            time.sleep(60)  # killed here
        return paid(3)

    with Journal("pipeline", path=sys.argv[1]) as j:
        j.step("a", paid, 1)
        j.step("b", lambda: j.step("inner", paid, 2))
        j.step("c", slow, sys.argv[3])
    """
)


def read_spans(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


class TestARunKilledAndResumed:
    def test_each_attempt_exports_its_own_work_once_and_the_second_links_the_first(
        self, tmp_path: Path
    ) -> None:
        script, db, out, ready = (
            tmp_path / "child.py",
            tmp_path / "j.db",
            tmp_path / "spans.jsonl",
            tmp_path / "ready",
        )
        script.write_text(CHILD)
        args = [sys.executable, str(script), str(db), str(out), str(ready)]
        child = subprocess.Popen(args)
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert child.poll() is None, "the child died before step c"
            assert time.monotonic() < deadline
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
        killed = read_spans(out)
        # The crashed attempt's ended spans were exported; its own span and c's never ended.
        assert [s["name"] for s in killed] == ["step a", "step inner", "step b"]
        out.unlink()
        subprocess.run(args, check=True, timeout=60)
        resumed = read_spans(out)
        assert [s["name"] for s in resumed] == ["step c", "run pipeline"]
        run = resumed[-1]
        assert run["attributes"]["letitloop.attempt"] == 2
        assert run["attributes"]["letitloop.attempt.kind"] == "resumed"
        assert run["attributes"]["letitloop.run.outcome"] == "completed"
        assert resumed[0]["parent"] == run["span"]
        # The link: the crashed attempt's span, which its steps had as their parent.
        crashed = {(s["trace"], s["parent"]) for s in killed if s["name"] != "step inner"}
        assert [tuple(lk) for lk in run["links"]] == list(crashed)
        assert run["events"] == [
            [
                "letitloop.replayed",
                {
                    # a and b, got back as lil show's "saved by replay" counts them: the
                    # replayed rows' own usage (b's child replays inside it, unasked).
                    "letitloop.replayed.steps": 2,
                    "letitloop.replayed.input_tokens": 10,
                    "letitloop.replayed.output_tokens": 1,
                },
            ]
        ]
        every = killed + resumed
        usage = {
            s["attributes"]["letitloop.step.key"]: s["attributes"]["gen_ai.usage.input_tokens"]
            for s in every
            if "gen_ai.usage.input_tokens" in s["attributes"]
        }
        assert usage == {"a": 10, "b/inner": 20, "c": 30}
        assert sum(s["attributes"].get("gen_ai.usage.input_tokens", 0) for s in every) == 60
