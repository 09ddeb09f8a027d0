"""Time that skips: with ``letitloop.testing.SkippingClock`` a journal's pauses (a durable sleep,
a wait's timeout, a retry's backoff) end at once, and the journal records them as if the time
had passed.

Each case runs in a child process with a timeout far below the pause it takes: a pause that
really waited would be killed and the case would fail.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from helpers import run_forked

from letitloop import Journal
from letitloop.testing import SkippingClock, default_clock, using_clock

#: A child that takes longer than this really waited (every pause below is >= an hour).
CHILD_TIMEOUT = 60


def run_child(tmp_path: Path, source: str) -> dict[str, object]:
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(source))
    done = run_forked(script, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


class TestAnHourLongSleep:
    def test_it_ends_at_once_and_is_recorded_as_an_hour(self, tmp_path: Path) -> None:
        out = run_child(
            tmp_path,
            """
            import json, time
            from letitloop import Journal
            from letitloop.inspection import open_inspector, find_run, show_run
            from letitloop.testing import SkippingClock

            clock = SkippingClock()
            began = time.monotonic()
            with Journal("nightly", run="r", path="j.db", clock=clock) as j:
                j.sleep("an-hour", 3600)
                j.step("after", lambda: "done")
            took = time.monotonic() - began
            journal = open_inspector("j.db")
            rows = {r.key: r for r in show_run(journal, find_run(journal, "r")).rows}
            print(json.dumps({"took": took, "skipped": clock.skipped,
                              "status": rows["an-hour"].status,
                              "started": rows["an-hour"].started_at,
                              "wake": rows["an-hour"].wake_at,
                              "after": rows["after"].status}))
            """,
        )
        from letitloop.inspection import parse_utc

        assert out["status"] == "done" and out["after"] == "done"
        woke = parse_utc(str(out["wake"])) - parse_utc(str(out["started"]))
        assert woke.total_seconds() == pytest.approx(3600, abs=1)
        assert float(str(out["skipped"])) > 3590
        assert float(str(out["took"])) < CHILD_TIMEOUT  # measured: about 0.01 s

    def test_an_async_sleep_skips_too(self, tmp_path: Path) -> None:
        out = run_child(
            tmp_path,
            """
            import asyncio, json
            from letitloop import Journal
            from letitloop.testing import SkippingClock

            clock = SkippingClock()

            async def main():
                with Journal("nightly", path="j.db", clock=clock) as j:
                    await j.async_sleep("an-hour", 3600)

            asyncio.run(main())
            print(json.dumps({"skipped": clock.skipped}))
            """,
        )
        assert float(str(out["skipped"])) > 3590


class TestTimeoutsAndBackoffs:
    def test_a_wait_for_times_out_at_once_on_the_clocks_deadline(self, tmp_path: Path) -> None:
        out = run_child(
            tmp_path,
            """
            import json
            from letitloop import Journal
            from letitloop.errors import WaitTimeoutError
            from letitloop.testing import SkippingClock

            clock = SkippingClock()
            try:
                with Journal("approval", path="j.db", clock=clock) as j:
                    j.wait_for("ok", timeout=2 * 3600)
            except WaitTimeoutError as exc:
                print(json.dumps({"error": type(exc).__name__, "skipped": clock.skipped}))
            """,
        )
        assert out["error"] == "WaitTimeoutError"
        assert float(str(out["skipped"])) > 7190

    def test_a_retry_backoff_of_an_hour_is_skipped(self, tmp_path: Path) -> None:
        out = run_child(
            tmp_path,
            """
            import json
            from letitloop import Journal, RetryPolicy
            from letitloop.testing import SkippingClock

            clock = SkippingClock()
            tries = []

            def flaky():
                tries.append(1)
                if len(tries) < 3:
                    raise ConnectionError("later")
                return "ok"

            policy = RetryPolicy(
                max_attempts=3, initial_backoff=3600, max_backoff=3600, multiplier=1, jitter=0
            )
            with Journal("sync", path="j.db", clock=clock) as j:
                got = j.step("call", flaky, retry=policy)
            print(json.dumps({"got": got, "tries": len(tries), "skipped": clock.skipped}))
            """,
        )
        assert out["got"] == "ok" and out["tries"] == 3
        assert float(str(out["skipped"])) > 2 * 3600 - 10


class TestTheDefaultClock:
    def test_a_journal_opened_without_a_clock_uses_the_one_made_default(
        self, tmp_path: Path
    ) -> None:
        clock = SkippingClock()
        assert default_clock() is not clock
        with using_clock(clock), Journal("g", path=tmp_path / "j.db") as j:
            assert j.clock is clock
            j.sleep("a-day", 86400)
        assert clock.skipped > 86390
        with Journal("g", path=tmp_path / "j.db") as j:
            assert j.clock is not clock  # restored after the block

    def test_a_clock_that_does_not_skip_is_napped_on(self, tmp_path: Path) -> None:
        now = [1_000_000.0]

        def fake() -> float:  # moves only when the test moves it
            now[0] += 0.01
            return now[0]

        with Journal("g", path=tmp_path / "j.db", clock=fake) as j:
            j.sleep("short", 0.05)  # five looks at the fake clock, real naps between
        assert now[0] >= 1_000_000.05

    def test_advance_refuses_going_back(self) -> None:
        with pytest.raises(ValueError, match=">= 0"):
            SkippingClock().advance(-1)
