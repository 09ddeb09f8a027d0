"""A replay reads recorded results a stretch at a time, and hands back each row's own text.

The SQLite store reads a stretch of a run's results as one row (rowids and
texts joined by SQLite, split by Python: ``SqliteStepRows.packed_results``);
row by row is its twin, taken whenever the joined form cannot answer exactly.
Real journal files, replayed by a fresh process.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from helpers import run_forked, write_script

from letitloop import Journal

ROOT = Path(__file__).resolve().parent.parent

#: Results that stress the joining: quotes, backslashes, control characters (the unit
#: separator among them, escaped in JSON), non-ASCII, empty values, None.
RESULTS: list[Any] = [
    {"q": 'say "hi"', "b": "back\\slash"},
    "unit\x1fseparator",
    "line\nbreak\ttab\x00nul",
    "é ü 漢字 🚀",
    "",
    [],
    {},
    None,
    0,
    -1.5,
    [1, [2, [3]]],
    "x" * 5000,
    ",",
    "\x1e\x1f,",
]

#: Writes (argv[2] == "write") or replays run "r1" of goal "g": 60 steps, a marker and a
#: failed step among them; prints each step's result as JSON, and which functions ran.
PROGRAM = """
import json, sys
from letitloop import Journal
from letitloop.errors import LetItLoopError

RESULTS = json.loads(sys.argv[3])
ran = []

def make(i):
    ran.append(i)
    return RESULTS[i % len(RESULTS)]

def fail():
    raise ValueError("no")

try:
    with Journal("g", path=sys.argv[1], run="r1") as j:
        got = []
        for i in range(60):
            got.append(j.step(f"s{i}", make, i))
            if i == 20:
                with j.atomic_marker("m") as go:
                    pass
            if i == 30 and sys.argv[2] == "write":
                try:
                    j.step("bad", fail)
                except ValueError:
                    pass
        print(json.dumps({"got": got, "ran": ran}))
except LetItLoopError as exc:
    print(json.dumps({"error": type(exc).__name__, "key": getattr(exc, "key", None), "ran": ran}))
"""


def run_program(db: Path, mode: str) -> dict[str, Any]:
    program = write_script(db.parent, "program.py", PROGRAM)
    out = run_forked(program, str(db), mode, json.dumps(RESULTS), cwd=ROOT)
    assert out.returncode == 0, out.stderr
    answer: dict[str, Any] = json.loads(out.stdout)
    return answer


def expected() -> list[Any]:
    return [RESULTS[i % len(RESULTS)] for i in range(60)]


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    db = tmp_path / "journal.db"
    first = run_program(db, "write")
    assert first["got"] == expected() and first["ran"] == list(range(60))
    return db


def edit(db: Path, sql: str, *params: object) -> None:
    conn = sqlite3.connect(db)
    with conn:
        assert conn.execute(sql, params).rowcount == 1
    conn.close()


def both_reads(db: Path) -> tuple[dict[int, str | None], dict[int, str | None], list[int]]:
    """The run's results as ``SqliteStepRows.results`` reads them, and row by row; its rowids."""
    with Journal("g", path=db, run="r1") as j:
        storage: Any = j._opened.storage
        assert j._opened.results is not None
        handles = j._opened.results.rowids
        fast = storage.results(handles)
        marks = ",".join("?" * len(handles))
        slow = dict(
            storage.store.query(
                f'SELECT rowid, result FROM "{storage.rows}" WHERE rowid IN ({marks})', handles
            )
        )
        return fast, slow, handles


class TestARecordedRunReplayedFromAFreshProcess:
    def test_every_step_gets_its_own_result_back_and_none_runs(self, recorded: Path) -> None:
        again = run_program(recorded, "replay")
        assert again == {"got": expected(), "ran": []}

    def test_a_result_damaged_mid_stretch_is_refused_and_the_ones_before_replay(
        self, recorded: Path
    ) -> None:
        edit(recorded, """UPDATE _journal_g SET result = '"unit-separator"' WHERE key = 's40'""")
        again = run_program(recorded, "replay")
        assert again == {"error": "DamagedRowError", "key": "s40", "ran": []}


class TestTheStretchReadAndItsRowByRowTwin:
    def test_they_read_the_same_texts(self, recorded: Path) -> None:
        fast, slow, handles = both_reads(recorded)
        assert len(handles) == 60
        assert {h: fast.get(h) for h in handles} == {h: slow[h] for h in handles}

    def test_the_stretch_is_read_as_one_row(self, recorded: Path) -> None:
        with Journal("g", path=recorded, run="r1") as j:
            storage: Any = j._opened.storage
            assert j._opened.results is not None
            handles = j._opened.results.rowids
            packed = storage.packed_results(handles[0], handles[-1], 1 << 20)
        assert packed is not None and set(handles) <= set(packed)

    def test_a_text_holding_the_separator_is_read_row_by_row(self, recorded: Path) -> None:
        # Edited outside letitloop, with no checksum: not JSON from the codec.
        edit(
            recorded,
            "UPDATE _journal_g SET result = 'a' || char(31) || 'b', checksum = NULL "
            "WHERE key = 's7'",
        )
        with Journal("g", path=recorded, run="r1") as j:
            storage: Any = j._opened.storage
            assert j._opened.results is not None
            handles = j._opened.results.rowids
            assert storage.packed_results(handles[0], handles[-1], 1 << 20) is None
        fast, slow, handles = both_reads(recorded)
        assert {h: fast.get(h) for h in handles} == {h: slow[h] for h in handles}
        assert "a\x1fb" in fast.values()


#: Values whose text takes each way through a replay's decode: plain JSON, a tag at the
#: top, a plain container ending in the mark, an escaped dict, huge ints, lone surrogates.
TYPED: list[Any] = [
    {"a": 1},
    [1, "x"],
    "text",
    7,
    2**80,
    -0.0,
    float("inf"),
    True,
    None,
    (1, 2),
    {1, 2},
    {"when": dt.datetime(2026, 12, 2, 9, 0, tzinfo=dt.timezone.utc)},
    [dt.date(2026, 12, 2)],
    {"!x": 1},
    {"!x": (1,)},
    {1: "int key"},
    "lone \ud800 surrogate",
    [],
    {},
    [[[]]],
    Decimal("1.10"),
]


#: The indexes ``give`` was called with.
GIVEN: list[int] = []


def give(i: int) -> Any:
    GIVEN.append(i)
    return TYPED[i]


class TestAReplayedResult:
    def test_it_comes_back_as_the_codec_decodes_its_text(self, tmp_path: Path) -> None:
        from letitloop import codec

        db = tmp_path / "journal.db"
        with Journal("g", path=db, run="r1") as j:
            for i in range(len(TYPED)):
                j.step(f"s{i}", give, i)
        assert list(range(len(TYPED))) == GIVEN
        GIVEN.clear()
        conn = sqlite3.connect(db)
        texts = dict(conn.execute("SELECT key, result FROM journal_g").fetchall())
        conn.close()
        with Journal("g", path=db, run="r1") as j:
            for i, value in enumerate(TYPED):
                got: Any = j.step(f"s{i}", give, i)
                decoded = codec.decode(texts[f"s{i}"])
                assert type(got) is type(decoded) is type(value), value
                assert repr(got) == repr(decoded) == repr(value)
        assert GIVEN == []  # every step replayed


#: Results around the read's bounds: small ones packed, ones over a packed row's share of
#: RESULT_BYTES (4 MiB over 256 rows: 16 KiB), one over RESULT_BYTES itself, in a mix.
SIZED = """
import json, sys
from letitloop import Journal
SIZES = [10, 40_000, 10, 10, 5_000_000, 10, 20_000, 17_000, 10] * 3 + [10] * 40
ran = []
def make(i):
    ran.append(i)
    return f"{i}:" + "x" * SIZES[i]
with Journal("g", path=sys.argv[1], run="r1") as j:
    ok = all(j.step(f"s{i}", make, i) == f"{i}:" + "x" * SIZES[i] for i in range(len(SIZES)))
print(json.dumps({"ok": ok, "ran": len(ran)}))
"""


class TestResultsLargerThanWhatAReadHolds:
    def test_each_step_gets_its_own_result_back_in_a_fresh_process(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"

        def run() -> dict[str, Any]:
            out = run_forked(write_script(tmp_path, "sized.py", SIZED), str(db), cwd=ROOT)
            assert out.returncode == 0, out.stderr
            answer: dict[str, Any] = json.loads(out.stdout)
            return answer

        assert run() == {"ok": True, "ran": 67}
        assert run() == {"ok": True, "ran": 0}  # every result replayed, none called
        # A read from any row on hands back that row and the rows after it, in order,
        # and stops once their texts reach RESULT_BYTES.
        from letitloop.stores.storage_steps import RESULT_BYTES

        with Journal("g", path=db, run="r1") as j:
            storage: Any = j._opened.storage
            assert j._opened.results is not None
            handles = j._opened.results.rowids
            for start in range(len(handles)):
                chunk = handles[start : start + 256]
                got = storage.results(chunk)
                assert list(got) == chunk[: len(got)] and got
                sizes = [len(t or "") for t in got.values()]
                assert sum(sizes[:-1]) < RESULT_BYTES  # the last may pass it: the first, alone
