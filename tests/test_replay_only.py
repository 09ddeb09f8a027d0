"""Replay-only runs: a recorded run replayed from its journal file, calling and writing nothing.

Each run is recorded by a child process and replayed by a fresh one
(``LETITLOOP_REPLAY=only`` or ``replay_only=True``); the step functions count
their calls in a side file, and the journal file, its -wal and -shm and its
lock folder are compared byte for byte before and after the replay.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import textwrap
from pathlib import Path

import pytest
from helpers import run_forked

from letitloop.errors import UnrecordedStepError

# The pipeline, in four shapes: DRIFT picks one ("" is the recorded one).
PIPELINE = textwrap.dedent(
    """
    import asyncio, json, os, sys
    from letitloop import Journal, async_step, durable, step
    from letitloop.errors import LetItLoopError

    CALLS = sys.argv[1]
    DRIFT = os.environ.get("DRIFT", "")
    MODE = sys.argv[2]

    def fetch(n):
        with open(CALLS, "a") as f:
            f.write(f"fetch {n}\\n")
        return {"n": n, "twice": n * 2}

    def other(n):
        with open(CALLS, "a") as f:
            f.write(f"other {n}\\n")
        return n

    async def afetch(n):
        return fetch(n)

    @durable("pipe", path="j.db")
    def pipe(n):
        a = step("fetch", fetch, n)
        b = step("fetch", other if DRIFT == "function" else fetch, 7 if DRIFT == "args" else n + 1)
        if DRIFT == "added":
            step("extra", fetch, 99)
        return [a, b]

    def journal_run(replay_only):
        with Journal("jgoal", run="r1", path="j.db", replay_only=replay_only) as j:
            return [j.step("one", fetch, 10), j.step("two", fetch, 11)]

    async def async_run(replay_only):
        with Journal("agoal", run="r1", path="j.db", replay_only=replay_only) as j:
            a = await async_step("one", afetch, 20)
            b = await j.async_step("two", afetch, 21 if DRIFT != "args" else 5)
            if DRIFT == "added":
                await async_step("extra", afetch, 99)
            return [a, b]

    try:
        if MODE == "durable":
            out = pipe(3)
        elif MODE == "journal":
            out = journal_run(None)
        elif MODE == "journal-replay":
            out = journal_run(True)
        else:
            out = asyncio.run(async_run(None))
    except LetItLoopError as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc),
                          "key": getattr(exc, "key", None),
                          "function": getattr(exc, "function", None)}))
    else:
        print(json.dumps({"result": out}))
    """
)


def run(tmp_path: Path, mode: str, *, replay: bool, drift: str = "") -> dict[str, object]:
    import json

    env = {k: v for k, v in os.environ.items() if not k.startswith("LETITLOOP_")}
    env["DRIFT"] = drift
    if replay:
        env["LETITLOOP_REPLAY"] = "only"
    done = run_forked(
        tmp_path / "pipeline.py", str(tmp_path / "calls"), mode, cwd=tmp_path, env=env
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def calls(tmp_path: Path) -> list[str]:
    path = tmp_path / "calls"
    return path.read_text().splitlines() if path.exists() else []


def snapshot(tmp_path: Path) -> dict[str, str]:
    """Every file of the journal (its -wal, -shm, lock folder) by name: its bytes' digest."""
    found = {}
    for p in sorted(tmp_path.rglob("j.db*")):
        rel = str(p.relative_to(tmp_path))
        found[rel] = "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
    return found


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    return tmp_path


class TestAReplayOnlyRunCallsNothingAndWritesNothing:
    @pytest.mark.parametrize("mode", ["durable", "journal", "async"])
    def test_a_recorded_run_replays_every_result_with_no_call_and_no_byte_written(
        self, recorded: Path, mode: str
    ) -> None:
        first = run(recorded, mode, replay=False)
        made = calls(recorded)
        assert len(made) == 2
        before = snapshot(recorded)

        again = run(recorded, mode, replay=True)

        assert again == first
        assert calls(recorded) == made  # not one call of a step function
        assert snapshot(recorded) == before  # file, -wal, -shm, lock folder unchanged

    def test_replay_only_true_works_without_the_environment_variable(self, recorded: Path) -> None:
        first = run(recorded, "journal", replay=False)
        before = snapshot(recorded)
        assert run(recorded, "journal-replay", replay=False) == first
        assert len(calls(recorded)) == 2
        assert snapshot(recorded) == before


class TestADriftedPipelineIsNamedAtItsStep:
    @pytest.mark.parametrize("mode", ["durable", "async"])
    def test_an_added_step_raises_unrecorded_step_error_without_calling_it(
        self, recorded: Path, mode: str
    ) -> None:
        run(recorded, mode, replay=False)
        made = calls(recorded)
        before = snapshot(recorded)

        found = run(recorded, mode, replay=True, drift="added")

        assert found["error"] == "UnrecordedStepError"
        assert found["key"] == "extra"
        assert str(found["function"]).endswith("fetch")
        assert "'extra'" in str(found["message"]) and "not called" in str(found["message"])
        assert calls(recorded) == made
        assert snapshot(recorded) == before

    @pytest.mark.parametrize("mode", ["durable", "async"])
    def test_changed_arguments_raise_the_mismatch_error_naming_the_step(
        self, recorded: Path, mode: str
    ) -> None:
        run(recorded, mode, replay=False)
        made = calls(recorded)
        before = snapshot(recorded)

        found = run(recorded, mode, replay=True, drift="args")

        assert found["error"] == "StepMismatchError"
        assert "fetch#2" in str(found["message"]) or "two" in str(found["message"])
        assert calls(recorded) == made
        assert snapshot(recorded) == before

    def test_a_changed_function_raises_the_mismatch_error_naming_both(self, recorded: Path) -> None:
        run(recorded, "durable", replay=False)
        before = snapshot(recorded)

        found = run(recorded, "durable", replay=True, drift="function")

        assert found["error"] == "StepMismatchError"
        assert "other" in str(found["message"]) and "fetch" in str(found["message"])
        assert len(calls(recorded)) == 2
        assert snapshot(recorded) == before


class TestNothingRecordedToReplay:
    def test_a_run_never_recorded_raises_unrecorded_step_error_and_calls_nothing(
        self, recorded: Path
    ) -> None:
        run(recorded, "durable", replay=False)  # another goal's run: the file exists
        before = snapshot(recorded)

        found = run(recorded, "journal-replay", replay=False)

        assert found["error"] == "UnrecordedStepError"
        assert "jgoal" in str(found["message"])
        assert len(calls(recorded)) == 2
        assert snapshot(recorded) == before


class TestUnrecordedStepErrorPickles:
    def test_it_pickles_with_its_key_and_function(self) -> None:
        exc = UnrecordedStepError("m", run_id="r", key="k", function="mod.fn")
        back = pickle.loads(pickle.dumps(exc))
        assert (str(back), back.run_id, back.key, back.function) == ("m", "r", "k", "mod.fn")


class TestSleepsAndWaitsReplayOrAreRefused:
    def test_a_recorded_sleep_and_wait_replay_and_an_unrecorded_sleep_is_refused_unslept(
        self, tmp_path: Path
    ) -> None:
        import time

        from letitloop import Journal

        path = tmp_path / "j.db"
        with Journal("g", run="r", path=path) as j:
            j.sleep("nap", 0.01)
        before = snapshot(tmp_path)
        with Journal("g", run="r", path=path, replay_only=True) as j:
            j.sleep("nap", 0.01)  # replayed
            began = time.monotonic()
            with pytest.raises(UnrecordedStepError) as caught:
                j.sleep("long", 3600)
            assert time.monotonic() - began < 5
            with pytest.raises(UnrecordedStepError):
                j.wait_for("never", timeout=3600)
        assert caught.value.key == "long"
        assert caught.value.function == "letitloop:sleep"
        # The recording journal's connection is still open here (kept idle), so the
        # file has a -wal, and a read-only reader marks its place in the -shm index.
        after = snapshot(tmp_path)
        before.pop("j.db-shm", None)
        after.pop("j.db-shm", None)
        assert after == before


class TestMarkersReplayOrAreRefused:
    def test_a_done_marker_is_skipped_and_a_marker_not_recorded_is_refused_unentered(
        self, tmp_path: Path
    ) -> None:
        from letitloop import Journal

        path = tmp_path / "j.db"
        entered = []
        with Journal("g", run="r", path=path) as j, j.atomic_marker("charge") as go:
            if go:
                entered.append("charge")
        with Journal("g", run="r", path=path, replay_only=True) as j:
            with j.atomic_marker("charge") as go:
                assert not go
            with pytest.raises(UnrecordedStepError) as caught, j.atomic_marker("refund"):
                entered.append("refund")
        assert entered == ["charge"]
        assert caught.value.key == "refund"
