"""Promises a mutation run found unguarded (issue 50): each test here fails when the code it
names is changed, where the rest of the suite passed.

Real journal files (and PostgreSQL where named), ``lil`` as a process, fresh
processes where the hash seed matters.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import lil_forked

from letitloop import Budget, Journal, RetryPolicy, usage
from letitloop.errors import BudgetExceededError
from letitloop.integrity.seals import row_digest

ROOT = Path(__file__).resolve().parent.parent


def lil(db: Path | str, *args: str) -> subprocess.CompletedProcess[str]:
    return lil_forked("--db", str(db), *args)


class TestACompletedRunWithAStaleCancelRequest:
    """A cancel asked while its holder was completing it (opening.decide, inspection.state)."""

    def test_it_replays_and_reads_completed(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        calls: list[int] = []
        with Journal("g", path=db, run="r") as j:
            j.step("a", calls.append, 1)
        with sqlite3.connect(db) as conn:  # the request lil cancel wrote, too late
            conn.execute(
                "UPDATE runs SET cancel_requested_at = '2026-12-07T00:00:00+00:00', "
                "cancel_reason = 'stale'"
            )
        with Journal("g", path=db, run="r") as j:  # not RunCancelledError
            assert j.was_completed
            j.step("a", calls.append, 1)
        assert calls == [1]
        with sqlite3.connect(db) as conn:
            assert conn.execute("SELECT status FROM runs").fetchall() == [("completed",)]
        shown = lil(db, "runs", "--json")
        assert shown.returncode == 0, shown.stderr
        assert "completed" in shown.stdout and "cancelled" not in shown.stdout


class TestStepsThatReturnedNone:
    """A replay of None is counted among the replays (replay.replay's two None cases)."""

    def test_their_replays_are_recorded_like_any_other(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        names = ("n1", "v", "n2", "edited")
        with Journal("g", path=db, run="r") as j:
            for name in names:
                j.step(name, give, name)
        with sqlite3.connect(db) as conn:  # a done row whose result is NULL (no checksum)
            conn.execute(
                "UPDATE _journal_g SET result = NULL, checksum = NULL WHERE key = 'edited'"
            )
        with Journal("g", path=db, run="r") as j:
            got = [j.step(name, give, name) for name in names]
        assert got == [None, 1, None, None]
        with sqlite3.connect(db) as conn:
            ((keys,),) = conn.execute("SELECT keys FROM step_replays").fetchall()
        assert json.loads(keys) == list(names)


def give(name: str) -> int | None:
    return 1 if name == "v" else None


#: Records a set as run r's result in one process; the other, under another hash seed
#: (another iteration order, so another text), sets the same set again.
SET_RESULT = """
import sys
from letitloop import Journal
with Journal("g", path=sys.argv[1], run="r") as j:
    j.set_result({"apple", "banana", "cherry", "date", "elder", "fig"})
print(sorted(j.recorded_result()) if j.was_completed else "recorded")
"""


class TestSetResultWithASet:
    def test_the_same_set_in_another_order_is_the_same_result(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        outs = []
        for seed in ("1", "2", "3"):
            done = subprocess.run(
                [sys.executable, "-c", SET_RESULT, str(db)],
                capture_output=True,
                text=True,
                timeout=60,
                env={**__import__("os").environ, "PYTHONHASHSEED": seed},
            )
            assert done.returncode == 0, done.stderr  # not MisuseError
            outs.append(done.stdout.strip())
        assert outs[0] == "recorded"
        assert (
            outs[1] == outs[2] == str(sorted({"apple", "banana", "cherry", "date", "elder", "fig"}))
        )


class TestMarkerLocks:
    """markerlocks.local_leave drops a marker's lock when its last user leaves; its lock
    file goes with its hold."""

    def test_they_are_freed_once_each_holder_left(self, tmp_path: Path) -> None:
        from letitloop.primitives import markerlocks

        db = tmp_path / "journal.db"
        with Journal("g", path=db, run="r") as j:
            for i in range(50):
                with j.atomic_marker(f"charge:{i}") as go:
                    assert go
            with pytest.raises(ValueError), j.atomic_marker("boom"):
                raise ValueError("inside")
            assert markerlocks._local == {}
            left = sorted(p.name for p in (tmp_path / "journal.db-locks").iterdir())
            assert len(left) == 1 and left[0].startswith("run-")  # the run's own

    def test_an_async_holder_frees_them_too(self, tmp_path: Path) -> None:
        import asyncio

        from letitloop.primitives import markerlocks

        async def main() -> None:
            async with Journal("g", path=tmp_path / "journal.db", run="r") as j:
                for i in range(20):
                    async with j.atomic_marker(f"m:{i}") as go:
                        assert go
                assert markerlocks._local == {}

        asyncio.run(main())


class TestAStepRetriedThenDoneOnPostgres:
    def test_its_row_keeps_no_wake_at(self) -> None:
        import pg_server
        import psycopg

        location = pg_server.location()
        tries: list[int] = []

        def flaky() -> str:
            tries.append(1)
            if len(tries) == 1:
                raise TimeoutError("slow")
            return "ok"

        with Journal("g", path=location, run="r") as j:
            assert j.step("k", flaky, retry=RetryPolicy(initial_backoff=0, jitter=0)) == "ok"
        with psycopg.connect(location, autocommit=True) as conn:
            rows = conn.execute("SELECT status, wake_at FROM ll_journal WHERE key = 'k'")
            assert rows.fetchall() == [("done", None)]
        shown = lil(location, "show", "g")
        assert shown.returncode == 0, shown.stderr
        assert "retrying" not in shown.stdout


class TestTheSealDigest:
    """seals.row_digest's bytes: what every sealed journal's chain was computed from."""

    ROW = ("01RUN", "fetch#2", "step", "done", "m.fetch", "ab12 k=~", '"é\\ud800"', None, "")

    def test_is_sha256_of_the_tagged_length_prefixed_utf8_fields(self) -> None:
        def field(v: str | None) -> bytes:
            data = b"\x00" if v is None else v.encode("utf-8", "surrogatepass")
            return len(data).to_bytes(8, "big") + data

        row = (*self.ROW[:6], "é\ud800", None, "")  # a lone surrogate kept as is
        expected = hashlib.sha256(b"letitloop-row-v1" + b"".join(map(field, row))).hexdigest()
        assert row_digest(*row) == expected

    def test_its_value_is_pinned(self) -> None:
        assert row_digest(*self.ROW) == GOLDEN_ROW_DIGEST
        # None and the text "None", an empty text and a NUL, differ.
        assert row_digest(*self.ROW[:7], "None", "") != row_digest(*self.ROW)
        assert row_digest(*self.ROW[:8], "") != row_digest(*self.ROW[:8], None)


#: row_digest(*TestTheSealDigest.ROW) as every release computed it.
GOLDEN_ROW_DIGEST = "8149daa2fb320fd1c12cef82607d6ac5d4136b3fedf1de0bef5bc754b7ab4115"


class TestLilShowOnAFailedRow:
    def test_the_row_shows_its_error_and_the_step_its_traceback(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"

        def broke() -> None:
            raise ValueError("bad input 42")

        with pytest.raises(ValueError), Journal("g", path=db, run="r") as j:
            j.step("a", lambda: 1)
            j.step("b", broke)
        shown = lil(db, "show", "g")
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.splitlines()
        (row,) = [line for line in lines if line.startswith("2  b ")]
        assert "failed" in row and row.rstrip().endswith("ValueError: bad input 42")
        (a_row,) = [line for line in lines if line.startswith("1  a ")]
        assert a_row.rstrip().endswith("1") and "failed" not in a_row
        at = lines.index("step 'b' failed in attempt 1: ValueError: bad input 42")
        assert lines[at + 1] == "  Traceback (most recent call last):"
        assert 'raise ValueError("bad input 42")' in "\n".join(lines[at:])


def paid(tokens: int, cost: float | None = None) -> str:
    usage(input_tokens=tokens, cost=cost)
    return "ok"


class TestBudgetEdges:
    @pytest.mark.parametrize(
        ("budget", "spent", "stops"),
        [
            (Budget(tokens=100), (100, None), True),  # reached exactly: stops
            (Budget(tokens=100), (99, None), False),
            (Budget(cost=1.0), (0, 1.0), True),
            (Budget(cost=1.0), (0, 0.99), False),
            (Budget(tokens=100, cost=1.0), (10, 1.0), True),  # either limit
            (Budget(tokens=100, cost=1.0), (100, 0.0), True),
        ],
    )
    def test_the_next_step_stops_once_a_limit_is_reached_not_before(
        self, tmp_path: Path, budget: Budget, spent: tuple[int, float | None], stops: bool
    ) -> None:
        calls: list[int] = []
        with Journal("g", path=tmp_path / "journal.db", run="r", budget=budget) as j:
            j.step("paid", paid, *spent)
            if stops:
                with pytest.raises(BudgetExceededError):
                    j.step("next", calls.append, 1)
            else:
                j.step("next", calls.append, 1)
        assert calls == ([] if stops else [1])

    def test_a_budget_of_zero_stops_the_first_step(self, tmp_path: Path) -> None:
        with (
            pytest.raises(BudgetExceededError),
            Journal("g", path=tmp_path / "journal.db", budget=Budget(tokens=0)) as j,
        ):
            j.step("a", lambda: 1)

    def test_a_resumed_run_counts_what_earlier_attempts_spent(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        with (
            pytest.raises(SystemExit),
            Journal("g", path=db, run="r", budget=Budget(tokens=100)) as j,
        ):
            j.step("paid", paid, 60)
            raise SystemExit(3)  # the run is left failed: the next open resumes it
        with Journal("g", path=db, run="r", budget=Budget(tokens=100)) as j:
            j.step("paid", paid, 60)  # replayed: counted once, not twice
            j.step("more", paid, 40)  # 100: reached
            with pytest.raises(BudgetExceededError):
                j.step("last", lambda: 1)

    @pytest.mark.parametrize("bad", [-1, 1.5, True, "10"])
    def test_a_limit_that_is_no_whole_number_of_tokens_is_refused(self, bad: Any) -> None:
        from letitloop.errors import LetItLoopError

        with pytest.raises(LetItLoopError, match="tokens must be a whole number >= 0"):
            Budget(tokens=bad)

    @pytest.mark.parametrize("bad", [-0.01, float("nan"), float("inf"), False])
    def test_a_cost_that_is_no_finite_amount_is_refused(self, bad: Any) -> None:
        from letitloop.errors import LetItLoopError

        with pytest.raises(LetItLoopError, match="cost must be a finite number >= 0"):
            Budget(cost=bad)
