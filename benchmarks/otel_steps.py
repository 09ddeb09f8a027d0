"""What OpenTelemetry spans add to a fresh step: spans on (a no-op exporter) against off.

    python -m benchmarks.otel_steps [--steps 2000] [--repeats 7]

Measured in alternating blocks in one process, as bench_steps.py measures its
floor (each order in turn): a block of fresh steps with spans off (``LETITLOOP_OTEL=off``, with the
SDK loaded and a provider set: the step pays its one check), then a block with
spans on (the SDK's ``TracerProvider``, a ``SimpleSpanProcessor`` and an
exporter that drops every span: the SDK's own cost, not an exporter's); the
added cost of each repeat is taken within its pair of blocks, and the
headline is the median. That difference is small against a step's commit,
whose time moves with the machine's load: so beside it, without SQLite, the
SDK's own span (started and ended, nothing else) and letitloop's span wrapper
around a plain call (``otel.AttemptSpans.step``), each the minimum over the
repeats; their difference is what letitloop itself adds to the SDK's cost.
Run by benchmarks/bench_steps.py (two rows), or alone.
Without ``opentelemetry-sdk`` installed (``pip install -e '.[test]'``) it
reports nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import environment, us
from benchmarks.overhead import SMALL, fresh_steps
from letitloop import Journal


def traced_step_cost(n: int, repeats: int) -> tuple[float, float, float, float] | None:
    """Seconds per fresh step: with spans off and added by spans on (medians); the SDK's own
    span (started and ended with a step's two attributes, outside any journal) and
    letitloop's own part (its span wrapper around a plain call, less the SDK's span), both
    from the repeats' minimums;
    None when the SDK is not installed. Sets this process's tracer provider (once: the API
    allows one)."""
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            SimpleSpanProcessor,
            SpanExporter,
            SpanExportResult,
        )
    except ImportError:
        return None

    class Dropped(SpanExporter):
        """Exports nothing: what the spans cost letitloop and the SDK, not a backend."""

        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Dropped()))
    trace.set_tracer_provider(provider)
    tracer = provider.get_tracer("bench")

    # Without SQLite a call is cheap: more of them per block, for a steadier figure.
    calls = n * 5

    def bare_spans() -> float:
        t0 = time.perf_counter()
        for i in range(calls):
            attributes = {"letitloop.step.key": f"s{i}", "letitloop.step.function": "m.f"}
            tracer.start_span("step s", attributes=attributes).end()
        return (time.perf_counter() - t0) / calls

    def wrapped_calls() -> float:
        # A step's span as letitloop makes it (otel.AttemptSpans.step) around a plain call,
        # without the step's journal work: the SDK's span plus letitloop's own part.
        with tempfile.TemporaryDirectory() as d, Journal("bench", path=Path(d) / "j.db") as j:
            spans, store = j._trace, j.store
            assert spans is not None and store is not None
            t0 = time.perf_counter()
            for i in range(calls):
                spans.step(j, store, "s", f"s{i}", "m.f", "", None, int, (), {})
            return (time.perf_counter() - t0) / calls

    offs, added, sdk, wrapped = [], [], [], []

    def spans_off() -> float:
        os.environ["LETITLOOP_OTEL"] = "off"
        try:
            return fresh_steps(SMALL, n, "process")
        finally:
            del os.environ["LETITLOOP_OTEL"]

    for i in range(repeats):
        # Each order in turn: a block that always ran second would carry any drift.
        if i % 2:
            on, off = fresh_steps(SMALL, n, "process"), spans_off()
        else:
            off, on = spans_off(), fresh_steps(SMALL, n, "process")
        offs.append(off)
        added.append(on - off)
        sdk.append(bare_spans())
        wrapped.append(wrapped_calls())
    # The two pure-Python figures as minimums: on a shared machine the quietest block is
    # the closest to what the code costs (other work only ever adds time).
    return (
        statistics.median(offs),
        statistics.median(added),
        min(sdk),
        min(wrapped) - min(sdk),
    )


def otel_rows(found: tuple[float, float, float, float] | None) -> list[list[str]]:
    """bench_steps.py's rows for :func:`traced_step_cost`'s figures."""
    if found is None:
        return [["OpenTelemetry spans on a fresh step", "SDK not installed", ""]]
    off, added, sdk, own = found
    return [
        ["fresh step, OpenTelemetry loaded, spans off", us(off), "one check per step"],
        [
            "added by spans on (SDK, no-op exporter)",
            us(added),
            f"SDK's span {us(sdk)}, letitloop's {us(own)}",
        ],
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    found = traced_step_cost(args.steps, args.repeats)
    print(environment())
    if found is None:
        print("opentelemetry-sdk is not installed: nothing measured")
        return
    off, added, sdk, own = found
    print(f"fresh step, spans off (SDK loaded, LETITLOOP_OTEL=off): {us(off)}")
    print(f"added by spans on, no-op exporter:                     {us(added)}")
    print(f"  the SDK's own span (start + end):                    {us(sdk)}")
    print(f"  letitloop's part (its wrapper less the SDK's span):  {us(own)}")


if __name__ == "__main__":
    main()
