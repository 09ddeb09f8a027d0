"""``lil fixture`` and ``--redact``: one recorded run copied into a small journal file a test
replays, with named secrets gone from every byte of it (and of ``lil export``'s output).

Runs are recorded by a child process; ``lil`` runs as a subprocess; the fixture is
replayed by a fresh child in replay-only mode, whose step functions count their calls
in a side file.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest
from helpers import lil_forked, run_forked

from letitloop import Journal
from letitloop.errors import LetItLoopError, StepMismatchError
from letitloop.inspection import open_inspector
from letitloop.inspection.fixture import make_fixture
from letitloop.integrity.redaction import REDACTED, redact_text, redact_value

SECRET = "sk-live-5f3c9a0e1d"
OTHER_SECRET = "hunter2-password"

# The pipeline: two model calls whose results carry a secret (in a plain dict, a dict with
# non-text keys and a dataclass), a marker, a sleep; MODE picks record, or replay of a fixture.
PIPELINE = textwrap.dedent(
    """
    import dataclasses, json, os, sys
    from letitloop import Journal, codec

    CALLS, MODE, DB = sys.argv[1], sys.argv[2], sys.argv[3]
    SECRET = os.environ["SECRET"]

    @dataclasses.dataclass
    class Auth:
        password: str
        user: str

    codec.register(Auth)

    def ask(question):
        with open(CALLS, "a") as f:
            f.write(f"ask {question}\\n")
        return {"answer": f"about {question}", "headers": {"api_key": SECRET},
                "by_id": {1: {"api_key": SECRET}}, "auth": Auth(os.environ["OTHER"], "ann")}

    with Journal("agent", run="monday", path=DB, replay_only=MODE == "replay",
                 input={"question": "why?", "api_key": SECRET}) as j:
        first = j.step("ask", ask, "why?")
        second = j.step("ask", ask, "and then?")
        with j.atomic_marker("notify") as go:
            pass
        j.sleep("cool-down", 0)
        print(json.dumps([first["answer"], second["headers"]["api_key"], bool(go)]))
    """
)


def run_pipeline(
    folder: Path, mode: str, db: Path
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    script = folder / "pipeline.py"
    script.write_text(PIPELINE)
    calls = folder / f"calls-{mode}.txt"
    calls.write_text("")
    env = {**__import__("os").environ, "SECRET": SECRET, "OTHER": OTHER_SECRET}
    done = run_forked(script, str(calls), mode, str(db), cwd=folder, env=env)
    return done, calls.read_text().splitlines()


def lil(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return lil_forked("--db", str(db), *args)


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    """A journal with the run 'monday' recorded, and another run of another goal beside it."""
    db = tmp_path / "journal.db"
    done, calls = run_pipeline(tmp_path, "record", db)
    assert done.returncode == 0, done.stderr
    assert calls == ["ask why?", "ask and then?"]
    with Journal("unrelated", run="other", path=db) as j:
        j.step("note", lambda: "UNRELATED-RUN-VALUE")
    return db


def file_bytes(db: Path) -> bytes:
    """Everything of the journal on disk: the file, and its -wal if one was left."""
    wal = Path(f"{db}-wal")
    return db.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


class TestAFixtureReplaysWithoutCallingAnything:
    def test_the_copied_run_replays_every_step_marker_and_sleep_with_zero_calls(
        self, recorded: Path, tmp_path: Path
    ) -> None:
        fixture = tmp_path / "fixtures" / "agent.db"
        fixture.parent.mkdir()
        made = lil(recorded, "fixture", "monday", "--to", str(fixture))
        assert made.returncode == 0, made.stderr
        assert "copied run" in made.stdout and str(fixture) in made.stdout
        done, calls = run_pipeline(tmp_path, "replay", fixture)
        assert done.returncode == 0, done.stderr
        assert calls == []  # no step function was called
        assert json.loads(done.stdout) == ["about why?", SECRET, False]

    def test_it_holds_that_run_and_nothing_else(self, recorded: Path, tmp_path: Path) -> None:
        fixture = tmp_path / "agent.db"
        assert lil(recorded, "fixture", "monday", "--to", str(fixture)).returncode == 0
        assert b"UNRELATED-RUN-VALUE" in file_bytes(recorded)
        assert b"UNRELATED-RUN-VALUE" not in file_bytes(fixture)
        runs = json.loads(lil(fixture, "runs", "--json").stdout)
        assert [(r["goal"], r["name"]) for r in runs] == [("agent", "monday")]
        shown = json.loads(lil(fixture, "export", "monday").stdout)
        assert [r["key"] for r in shown["rows"]] == ["ask", "ask#2", "notify", "cool-down"]
        assert shown["attempts"] == []  # no process ids or host names of the recording
        assert all(r["result_error"] is None for r in shown["rows"])
        assert not any(r["damaged"] for r in shown["rows"])

    def test_an_existing_file_is_refused_untouched_unless_forced(
        self, recorded: Path, tmp_path: Path
    ) -> None:
        fixture = tmp_path / "agent.db"
        fixture.write_bytes(b"mine")
        refused = lil(recorded, "fixture", "monday", "--to", str(fixture))
        assert refused.returncode == 1
        assert "exists already" in refused.stderr and "--force" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
        assert fixture.read_bytes() == b"mine"
        forced = lil(recorded, "fixture", "monday", "--to", str(fixture), "--force")
        assert forced.returncode == 0, forced.stderr
        assert fixture.read_bytes().startswith(b"SQLite format 3")


class TestRedactionRemovesTheValues:
    def test_a_redacted_fixture_holds_no_byte_of_the_secrets_and_still_replays(
        self, recorded: Path, tmp_path: Path
    ) -> None:
        fixture = tmp_path / "agent.db"
        assert SECRET.encode() in file_bytes(recorded)
        made = lil(
            recorded,
            "fixture",
            "monday",
            "--to",
            str(fixture),
            "--redact",
            "api_key",
            "--redact",
            "password",
        )
        assert made.returncode == 0, made.stderr
        assert "redacted: api_key, password" in made.stdout
        data = file_bytes(fixture)
        assert SECRET.encode() not in data
        assert OTHER_SECRET.encode() not in data
        assert REDACTED.encode() in data
        done, calls = run_pipeline(tmp_path, "replay", fixture)
        assert done.returncode == 0, done.stderr
        assert calls == []
        assert json.loads(done.stdout) == ["about why?", REDACTED, False]
        assert SECRET.encode() in file_bytes(recorded)  # the source is not changed

    def test_export_redact_leaves_no_secret_in_json_or_jsonl(self, recorded: Path) -> None:
        plain = lil(recorded, "export", "monday")
        assert SECRET in plain.stdout and OTHER_SECRET in plain.stdout
        for fmt in ("json", "jsonl"):
            out = lil(
                recorded,
                "export",
                "monday",
                "--format",
                fmt,
                "--redact",
                "api_key",
                "--redact",
                "password",
            )
            assert out.returncode == 0, out.stderr
            assert SECRET not in out.stdout
            assert OTHER_SECRET not in out.stdout
            assert REDACTED in out.stdout
            assert "ann" in out.stdout  # a key not named is kept

    def test_export_redact_with_html_is_refused_in_one_line(self, recorded: Path) -> None:
        out = lil(recorded, "export", "monday", "--format", "html", "--redact", "api_key")
        assert out.returncode == 2
        assert "--redact works with --format json or jsonl" in out.stderr


class TestTheRedactionWalk:
    def test_it_replaces_a_key_at_any_depth_of_plain_and_tagged_dicts(self) -> None:
        value = {
            "api_key": "a",
            "list": [{"api_key": "b", "keep": 1}],
            "!dict": [["api_key", "c"], [1, {"api_key": "d"}]],
        }
        assert redact_value(value, ["api_key"]) == {
            "api_key": REDACTED,
            "list": [{"api_key": REDACTED, "keep": 1}],
            "!dict": [["api_key", REDACTED], [1, {"api_key": REDACTED}]],
        }

    def test_text_without_the_key_is_kept_byte_for_byte(self) -> None:
        text = '{"b": 1,   "a": [1.0]}'
        assert redact_text(text, ["api_key"]) == text

    def test_text_that_is_not_json_but_names_the_key_is_replaced_whole(self) -> None:
        assert redact_text('{"api_key": "x"', ["api_key"]) == json.dumps(REDACTED)


class TestStoresThatAreNotAFile:
    def test_a_memory_store_is_refused_in_one_line_and_nothing_is_made(
        self, tmp_path: Path
    ) -> None:
        with Journal("g", run="r", path="memory://fixture-test") as j:
            j.step("s", lambda: 1)
        inspector = open_inspector("memory://fixture-test")
        try:
            with pytest.raises(LetItLoopError, match="copies runs out of a journal file"):
                make_fixture(inspector, "r", tmp_path / "out.db")
        finally:
            inspector.close()
        assert not (tmp_path / "out.db").exists()


class TestARemovedStepIsNamed:
    def test_a_clean_replay_that_skips_a_recorded_step_raises_naming_it(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "j.db"
        with Journal("g", run="r", path=db) as j:
            j.step("one", lambda: 1)
            j.step("two", lambda: 2)
            j.step("three", lambda: 3)
        with (
            pytest.raises(StepMismatchError, match="'two'") as info,
            Journal("g", run="r", path=db, replay_only=True) as j,
        ):
            j.step("one", lambda: 1)
        assert info.value.key == "two"
        assert "and 1 more" in str(info.value)

    def test_children_of_a_replayed_parent_count_as_replayed(self, tmp_path: Path) -> None:
        db = tmp_path / "j.db"

        def parent() -> int:
            return int(j.step("child", lambda: 5)) + 1

        with Journal("g", run="r", path=db) as j:
            j.step("parent", parent)
        with Journal("g", run="r", path=db, replay_only=True) as j:
            assert j.step("parent", parent) == 6


class TestMarkersOfEveryScope:
    def test_goal_and_global_markers_the_run_holds_are_copied_and_replay_as_done(
        self, tmp_path: Path
    ) -> None:
        db, fixture = tmp_path / "j.db", tmp_path / "fixture.db"
        with Journal("mail", run="r1", path=db) as j:
            with j.atomic_marker("welcome", scope="goal"):
                pass
            with j.atomic_marker("charge-1", scope="global"):
                pass
        with Journal("other", run="r2", path=db) as j, j.atomic_marker("not-ours", scope="global"):
            pass
        assert lil(db, "fixture", "r1", "--to", str(fixture)).returncode == 0
        assert b"not-ours" not in file_bytes(fixture)
        with Journal("mail", run="r1", path=fixture, replay_only=True) as j:
            with j.atomic_marker("welcome", scope="goal") as goal_offer:
                pass
            with j.atomic_marker("charge-1", scope="global") as global_offer:
                pass
        assert not goal_offer and not global_offer  # done: their blocks are skipped
