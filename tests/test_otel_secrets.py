"""The spans of an encrypted run carry no error text (issue 50, item 11): what the
journal keeps encrypted, an exporter never gets in clear.

A real program, run as a process, sends its spans as JSON to a file with the
OpenTelemetry SDK's console exporter; before, the message of every exception (a
step's, a failed try's, a marker block's, the run's) was in them word for word.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

#: What the program's errors say: in no span of an encrypted run.
SECRET = "card 4111-1111-1111-1111"

KEY = "0123456789abcdef0123456789abcdef"

PROGRAM = f"""
import sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

out = open(sys.argv[2], "w")
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=out)))
trace.set_tracer_provider(provider)

from letitloop import Journal, RetryPolicy

tries = []

def flaky():
    tries.append(1)
    if len(tries) == 1:
        raise ConnectionError("{SECRET} (try)")
    return "ok"

def charge():
    raise ValueError("{SECRET} (step)")

try:
    with Journal("pay", run="r", path=sys.argv[1]) as j:
        policy = RetryPolicy(max_attempts=2, initial_backoff=0.001, jitter=0.0)
        j.step("flaky", flaky, retry=policy)
        try:
            with j.atomic_marker("notify") as first:
                raise KeyError("{SECRET} (marker)")
        except KeyError:
            pass
        j.step("charge", charge)
except ValueError:
    pass
provider.shutdown()
out.close()
"""


def spans_of(tmp_path: Path, key: str | None) -> tuple[str, list[dict[str, Any]]]:
    program = tmp_path / "program.py"
    program.write_text(PROGRAM)
    out = tmp_path / "spans.json"
    env = {k: v for k, v in os.environ.items() if k != "LETITLOOP_ENCRYPTION_KEY"}
    if key is not None:
        env["LETITLOOP_ENCRYPTION_KEY"] = key
    done = subprocess.run(
        [sys.executable, str(program), str(tmp_path / "journal.db"), str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    decoder, found, at = json.JSONDecoder(), [], 0
    while at < len(text):
        if text[at].isspace():
            at += 1
            continue
        span, at = decoder.raw_decode(text, at)
        found.append(span)
    return text, found


def exception_types(spans: list[dict[str, Any]]) -> set[str]:
    return {
        str(e["attributes"].get("exception.type"))
        for s in spans
        for e in s["events"]
        if "exception.type" in e["attributes"]
    }


class TestTheSpansOfAnEncryptedRun:
    def test_carry_no_error_text_only_the_exceptions_types(self, tmp_path: Path) -> None:
        text, spans = spans_of(tmp_path, KEY)
        # Before: the secret was in the step's, the try's, the marker's and the run's spans.
        assert "4111" not in text
        assert {"ConnectionError", "ValueError", "KeyError"} <= exception_types(spans)
        failed = [s for s in spans if s["status"]["status_code"] == "ERROR"]
        assert {s["name"] for s in failed} >= {"step charge", "marker notify", "run pay"}
        assert all(s["status"].get("description") in ("ValueError", "KeyError") for s in failed)
        shown = subprocess.run(
            [sys.executable, "-m", "letitloop", "--db", str(tmp_path / "journal.db"), "show", "r"],
            capture_output=True,
            text=True,
            timeout=60,
            env={k: v for k, v in os.environ.items() if k != "LETITLOOP_ENCRYPTION_KEY"},
        )
        assert "4111" not in shown.stdout + shown.stderr  # as lil show without the key

    def test_of_a_run_that_is_not_encrypted_keep_the_messages(self, tmp_path: Path) -> None:
        text, _ = spans_of(tmp_path, None)
        assert f"{SECRET} (step)" in text and f"{SECRET} (try)" in text
        assert f"{SECRET} (marker)" in text


@pytest.fixture(autouse=True)
def _otel_installed() -> None:
    pytest.importorskip("opentelemetry.sdk")
