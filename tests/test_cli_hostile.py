"""Hostile recorded text through the real ``lil``: nothing reaches a terminal raw.

Errors, tracebacks, names, step keys and results come from the user's code
and from third parties (an HTTP body inside an exception), and a journal may
be hand-edited or foreign. Here one journal is recorded by real steps, then
given every control character and the terminal escape sequences that matter
(window title, clipboard write, clear screen, the one-byte C1 CSI) in every
text column a command prints, planted with plain sqlite3 where the library
would refuse them (names). Every command's output is read as bytes, decoded
as UTF-8 (so a C1 control is one code point) and must hold no C0 control
but newline and tab, no DEL and no C1 control, piped and on a pseudo-terminal.
"""

from __future__ import annotations

import json
import math
import os
import pty
import re
import select
import shutil
import sqlite3
import subprocess
import sys
import time
import tty
from pathlib import Path
from typing import Any

import pytest
from helpers import left_on_terminal, lil_forked
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from letitloop import Journal
from letitloop.primitives.clock import utc_iso
from letitloop.runtext.render import colour, json_text, safe

#: Every C0 control, DEL and every C1 control.
CONTROLS = "".join(map(chr, [*range(0x00, 0x20), *range(0x7F, 0xA0)]))
#: Sequences a terminal acts on: window title (OSC 0), clipboard write (OSC 52),
#: clear screen and cursor home, C1 CSI (U+009B), a device control string,
#: colour, and the text-reordering and line-separating characters.
SEQUENCES = (
    "\x1b]0;pwned title\x07"
    "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07"
    "\x1b[2J\x1b[H"
    "\x9b31m"
    "\x1bP+q544e\x1b\\"
    "\x1b[31mred"
    "\u202eevil\u202c\u2028\u2029"
)
HOSTILE = "before " + SEQUENCES + CONTROLS + " after"

#: What must never be in lil's output: C0 but newline and tab, DEL, C1.
FORBIDDEN = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: What render.safe never lets out: FORBIDDEN, lone surrogates, line separators, bidi controls.
UNSAFE_OUT = (
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029\u061c\u200e\u200f"
    "\u202a-\u202e\u2066-\u2069]"
)
#: lil's own colours on a terminal (click.style's codes), the only escapes allowed there.
OWN_STYLE = re.compile(r"\x1b\[(?:\d+)m")

BIG = 10**5000

RECORD = """
import json
import sys
from letitloop import Journal

db, values = sys.argv[1], sys.argv[3] == "all"
with open(sys.argv[2], encoding="utf-8") as f:
    hostile = json.load(f)  # a file, as argv cannot hold a NUL

def boom():
    raise RuntimeError(hostile)

try:
    with Journal("hostile", path=db) as j:
        j.step("text", lambda: hostile)
        j.step("tree", lambda: {hostile: [hostile, 1.5]})
        if values:  # the values JSON has no text for, and a row to damage
            j.step("big", lambda: 10**5000)
            j.step("floats", lambda: [float("nan"), float("inf"), float("-inf")])
            j.step("corrupt", lambda: "fine until edited")
        j.step("boom", boom)
except RuntimeError:
    pass
"""


def lil(
    db: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """``python -m letitloop`` in a forked child (helpers.lil_forked), its output piped and
    given back as the bytes it wrote (the child writes UTF-8, strictly on stdout, with
    backslash escapes on stderr, as an interpreter does off a terminal)."""
    done = lil_forked("--db", str(db), *args, env={**os.environ, **(env or {})})
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.encode("utf-8"), done.stderr.encode("utf-8")
    )


def assert_clean(raw: bytes, what: str) -> str:
    """``raw`` decoded as UTF-8, asserting it holds no forbidden control character."""
    text = raw.decode("utf-8")
    bad = FORBIDDEN.search(text)
    if bad is not None:
        near = text[max(0, bad.start() - 60) : bad.start() + 20]
        pytest.fail(f"{what}: {bad.group()!r} at {bad.start()}: {near!r}")
    return text


def strict_json(text: str | bytes) -> Any:
    """``text`` parsed by a JSON reader that refuses NaN and Infinity."""

    def refuse(name: str) -> Any:
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def table_of(db: Path, goal: str) -> str:
    conn = sqlite3.connect(db)
    try:
        return str(
            conn.execute("SELECT journal_table FROM goals WHERE goal = ?", (goal,)).fetchone()[0]
        )
    finally:
        conn.close()


def record(folder: Path, *, values: bool = True) -> tuple[Path, str]:
    """A journal recorded by real steps in a child, then made hostile by hand; (path, run id).

    With ``values``, it also holds an int too long for decimal text, nan and
    infinities, and a damaged result row; without, only hostile text.
    """
    db = folder / "journal.db"
    script = folder / "record.py"
    script.write_text(RECORD, encoding="utf-8")
    text = folder / "hostile.json"
    text.write_text(json.dumps(HOSTILE), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script), str(db), str(text), "all" if values else "text"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    table = table_of(db, "hostile")
    conn = sqlite3.connect(db)  # foreign keys off, as in any hand edit
    try:
        (run_id,) = conn.execute("SELECT id FROM runs").fetchone()
        conn.execute("UPDATE goals SET goal = ?", ("hostile" + HOSTILE,))
        conn.execute(
            "UPDATE runs SET goal = ?, name = ?, holder_host = ?, result = ?, finished_at = ?",
            (
                "hostile" + HOSTILE,
                HOSTILE,
                HOSTILE,
                json.dumps(HOSTILE, ensure_ascii=False),
                "not a time " + HOSTILE,
            ),
        )
        conn.execute(f'UPDATE "{table}" SET fn = ?', (HOSTILE,))
        conn.execute(
            f'UPDATE "{table}" SET key = ?, started_at = ? WHERE key = ?',
            ("tree" + HOSTILE, HOSTILE, "tree"),
        )
        conn.execute(
            f'UPDATE "{table}" SET result = ? WHERE key = ?', ("{not json " + HOSTILE, "corrupt")
        )
        conn.execute("UPDATE attempts SET host = ?, watch_id = ?", (HOSTILE, "w" + HOSTILE))
        conn.execute(
            "INSERT INTO supervisor_events (watch_id, at, event, target, attempt, watcher_pid, "
            "host, exit_code, signal, message) VALUES (?, ?, ?, ?, 1, 1, ?, 1, ?, ?)",
            ("w" + HOSTILE, utc_iso(time.time()), HOSTILE, HOSTILE, HOSTILE, HOSTILE, HOSTILE),
        )
        conn.commit()
    finally:
        conn.close()
    return db, run_id


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Hostile text everywhere, with the values JSON cannot hold and a damaged row."""
    return record(tmp_path_factory.mktemp("hostile"))


@pytest.fixture(scope="module")
def hostile_text(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Hostile text everywhere, and nothing else out of the ordinary."""
    return record(tmp_path_factory.mktemp("hostile_text"), values=False)


def one_value(folder: Path, value: Any, *, damage: bool = False) -> tuple[Path, str]:
    """A journal whose run recorded ``value`` in step 'value', then step 'after'.

    With ``damage``, the 'value' row's stored text is then made invalid JSON by hand.
    """
    db = folder / "journal.db"
    with Journal("case", path=db) as j:
        j.step("value", lambda: value)
        j.step("after", lambda: "after")
        run_id = j.run_id
    if damage:
        conn = sqlite3.connect(db)
        try:
            table = conn.execute("SELECT journal_table FROM goals").fetchone()[0]
            conn.execute(f"UPDATE \"{table}\" SET result = '{{not json' WHERE key = 'value'")
            conn.commit()
        finally:
            conn.close()
    return db, run_id


def commands(run_id: str) -> list[tuple[str, ...]]:
    """Every command that prints recorded text, and errors that quote it."""
    return [
        ("runs",),
        ("runs", "--json"),
        ("show", run_id),
        ("show", run_id, "--full"),
        ("show", run_id, "--step", "boom"),
        ("show", run_id, "--step", "text"),
        ("show", run_id, "--step", "corrupt"),
        ("show", run_id, "--step", "big"),
        ("show", run_id, "--json"),
        ("show", run_id, "--step", "text", "--json"),
        ("show", run_id, "--follow"),
        ("show", run_id, "--follow", "--json"),
        ("export", run_id),
        ("export", run_id, "--format", "ndjson"),
        ("gc", "--older-than", "0s", "--dry-run"),
        ("gc", "--older-than", "0s", "--dry-run", "--json"),
        # errors that quote recorded keys and goals, and the user's own hostile argument
        ("show", run_id, "--step", "nope"),
        ("fork", run_id, "--from-step", "nope"),
        ("reset", "nope", "--yes"),
        ("show", "\x1b]0;typed\x07\x1b[2J"),
    ]


class TestRecordedTextThroughAPipe:
    def test_no_command_prints_a_raw_control_character(self, hostile: tuple[Path, str]) -> None:
        db, run_id = hostile
        for args in commands(run_id):
            r = lil(db, *args)
            out = assert_clean(r.stdout, f"stdout of lil {args[:3]}")
            err = assert_clean(r.stderr, f"stderr of lil {args[:3]}")
            assert "Traceback" not in err, (args, err)  # lil's own: recorded ones are stdout
            assert r.returncode in (0, 1), (args, r.returncode, err)
            assert out or err.startswith("Error: "), args

    def test_the_text_is_shown_as_visible_escapes_not_dropped(
        self, hostile: tuple[Path, str]
    ) -> None:
        db, run_id = hostile
        for args in (("show", run_id), ("runs",)):  # previews, cut to the width
            out = lil(db, *args).stdout.decode("utf-8")
            assert r"RuntimeError: before \x1b]0;pwned title\x07\x1b]52;c;" in out, args
        shown = lil(db, "show", run_id).stdout.decode("utf-8")
        assert r"finished  not a time before \x1b]0;pwned title\x07" in shown
        assert shown.count("(took -)") == 1  # no duration from a timestamp that is not one
        step = lil(db, "show", run_id, "--step", "boom").stdout.decode("utf-8")
        assert (
            r"error     RuntimeError: before \x1b]0;pwned title\x07"
            "\\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\\x07\\x1b[2J\\x1b[H\\u009b31m\\x1bP+q544e\\x1b\\"
            r"\x1b[31mred\u202eevil\u202c\u2028\u2029\x00\x01"
        ) in step
        assert r"\x1d\x1e\x1f\u007f\u0080\u0081" in step and r"\u009e\u009f after" in step
        assert "Traceback (most recent call last)" in step  # the recorded one, as a block

    def test_errors_that_quote_recorded_names_stay_one_line(
        self, hostile: tuple[Path, str]
    ) -> None:
        db, run_id = hostile
        r = lil(db, "show", run_id, "--step", "nope")
        (line,) = r.stderr.decode("utf-8").splitlines()
        assert line.startswith("Error: run ") and r"tree" in line and r"\x1b]0;" in line
        r = lil(db, "reset", "nope", "--yes")
        (line,) = r.stderr.decode("utf-8").splitlines()
        assert "known goals: hostile" in line and r"\x1b]52;" in line


class TestRecordedTextOnATerminal:
    def test_only_lils_own_colours_are_escape_codes(self, hostile: tuple[Path, str]) -> None:
        db, run_id = hostile
        for args in (("show", run_id), ("show", run_id, "--step", "boom"), ("runs",)):
            raw = on_a_terminal(db, *args)
            text = raw.decode("utf-8")
            assert OWN_STYLE.search(text), "a terminal gets colour"
            assert_clean(OWN_STYLE.sub("", text).encode("utf-8"), f"lil {args[:3]} on a pty")
            assert r"\x1b]0;pwned title\x07\x1b]52;c;" in text
        # a recorded colour code is shown, neither obeyed nor stripped
        assert r"\x1b[31mred" in on_a_terminal(db, "show", run_id, "--step", "boom").decode()


def on_a_terminal(db: Path, *args: str) -> bytes:
    """The output of ``lil ARGS`` with stdout and stderr on a pseudo-terminal."""
    leader, follower = pty.openpty()
    tty.setraw(follower)  # no newline translation: the bytes lil wrote, as it wrote them
    proc = subprocess.Popen(
        [sys.executable, "-m", "letitloop", "--db", str(db), *args],
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        env={**os.environ, "COLUMNS": "120"},
    )
    os.close(follower)
    chunks = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # EIO: every writer closed the terminal
                    break
                if not chunk:
                    break
                chunks.append(chunk)
            elif proc.poll() is not None:
                chunks += left_on_terminal(leader)
                break
    finally:
        os.close(leader)
        proc.wait(timeout=60)
    assert proc.returncode == 0
    return b"".join(chunks)


class TestJsonOutputStaysStrictJson:
    def test_export_gives_back_the_recorded_text_exactly(
        self, hostile_text: tuple[Path, str]
    ) -> None:
        db, run_id = hostile_text
        data = strict_json(assert_clean(lil(db, "export", run_id).stdout, "export"))
        rows = {r["key"]: r for r in data["rows"]}
        assert rows["text"]["result"] == HOSTILE
        assert rows["boom"]["error"] == f"RuntimeError: {HOSTILE}"
        assert rows["tree" + HOSTILE]["result"] == {HOSTILE: [HOSTILE, 1.5]}
        assert data["run"]["name"] == HOSTILE and data["run"]["result"] == HOSTILE
        assert data["supervisor_events"][0]["message"] == HOSTILE

    def test_c1_line_separators_and_bidi_controls_are_json_escapes(
        self, hostile_text: tuple[Path, str]
    ) -> None:
        db, run_id = hostile_text
        for args in (("export", run_id), ("export", run_id, "--format", "ndjson")):
            text = lil(db, *args).stdout.decode("utf-8")
            assert not re.search("[\u0080-\u009f\u2028\u2029\u202e]", text)
            assert r"\u009b" in text and r"\u2028" in text and r"\u202e" in text
        lines = lil(db, "export", run_id, "--format", "ndjson").stdout.decode("utf-8")
        assert all(strict_json(ln) for ln in lines.splitlines())

    def test_nan_and_infinity_are_tagged_as_in_the_journal(self, tmp_path: Path) -> None:
        db, run_id = one_value(tmp_path, [math.nan, math.inf, -math.inf])
        tagged = [{"!float": "nan"}, {"!float": "inf"}, {"!float": "-inf"}]
        for args in (("export", run_id), ("export", run_id, "--format", "ndjson")):
            lines = lil(db, *args).stdout.decode("utf-8")
            records = (
                [strict_json(lines)]
                if args[-1] == run_id
                else [strict_json(ln) for ln in lines.splitlines()]
            )
            rows = [r for rec in records for r in rec.get("rows", [rec])]
            assert [r["result"] for r in rows if r.get("key") == "value"] == [tagged]
        step = lil(db, "show", run_id, "--step", "value", "--json").stdout.decode("utf-8")
        assert strict_json(step)["result"] == tagged
        full = lil(db, "show", run_id, "--full").stdout.decode("utf-8")
        assert '"!float": "nan"' in full and "NaN" not in full

    @pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")
    def test_jq_reads_every_export(self, tmp_path: Path, hostile: tuple[Path, str]) -> None:
        for db, run_id in (hostile, one_value(tmp_path, [math.nan, -math.inf, 10**5000])):
            for fmt in ("json", "ndjson"):
                out = lil(db, "export", run_id, "--format", fmt)
                assert out.returncode == 0, out.stderr
                r = subprocess.run(["jq", "-c", "."], input=out.stdout, capture_output=True)
                assert r.returncode == 0 and r.stdout.count(b"\n") >= 1, r.stderr


class TestAnIntTooLongForDecimalText:
    def test_show_and_export_give_it_as_tagged_hex(self, tmp_path: Path) -> None:
        db, run_id = one_value(tmp_path, {"n": BIG, "small": 7})
        data = strict_json(lil(db, "export", run_id).stdout.decode("utf-8"))
        (big,) = [r["result"] for r in data["rows"] if r["key"] == "value"]
        assert int(big["n"]["!int"], 16) == BIG and big["small"] == 7
        step = lil(db, "show", run_id, "--step", "value", "--json")
        assert int(strict_json(step.stdout.decode("utf-8"))["result"]["n"]["!int"], 16) == BIG
        for args in (("show", run_id, "--full"), ("show", run_id, "--step", "value")):
            r = lil(db, *args)
            assert r.returncode == 0, r.stderr
            assert f'"!int": "{hex(BIG)}"' in r.stdout.decode("utf-8")


class TestADamagedResultRow:
    def test_show_says_so_and_goes_on_with_the_rest(self, tmp_path: Path) -> None:
        db, run_id = one_value(tmp_path, "fine", damage=True)
        r = lil(db, "show", run_id, "--full")
        assert r.returncode == 0, r.stderr
        out = r.stdout.decode("utf-8")
        damaged = out.index("damaged: the stored result is not valid JSON")
        assert out.index("stored text: {not json") > damaged
        assert out.index('── after ──\n"after"') > damaged  # and it went on with the next row
        step = lil(db, "show", run_id, "--step", "value")
        assert step.returncode == 0, step.stderr
        assert "damaged: the stored result is not valid JSON" in step.stdout.decode("utf-8")
        assert strict_json(lil(db, "show", run_id, "--step", "value", "--json").stdout)[
            "result_error"
        ].startswith("the stored result is not valid JSON")

    def test_export_marks_the_row_and_keeps_its_text(self, tmp_path: Path) -> None:
        db, run_id = one_value(tmp_path, "fine", damage=True)
        data = strict_json(lil(db, "export", run_id).stdout.decode("utf-8"))
        rows = {r["key"]: r for r in data["rows"]}
        assert rows["value"]["result"] is None and rows["value"]["result_json"] == "{not json"
        assert rows["value"]["result_error"].startswith("the stored result is not valid JSON")
        assert rows["after"]["result"] == "after" and rows["after"]["result_error"] is None

    def test_hostile_damaged_text_is_shown_escaped(self, hostile: tuple[Path, str]) -> None:
        db, run_id = hostile
        out = lil(db, "show", run_id, "--full").stdout.decode("utf-8")
        assert r"stored text: {not json before \x1b]0;pwned title\x07" in out
        data = strict_json(lil(db, "export", run_id).stdout.decode("utf-8"))
        (row,) = [r for r in data["rows"] if r["key"] == "corrupt"]
        assert row["result_json"] == "{not json " + HOSTILE


class TestTheOneGate:
    """render.safe, the one function every printed line and JSON document passes."""

    @settings(max_examples=300, deadline=None)
    @given(st.text())
    def test_nothing_unsafe_passes_and_a_second_pass_changes_nothing(self, text: str) -> None:
        line, block = safe(text), safe(text, block=True)
        assert not re.search(UNSAFE_OUT, line) and "\n" not in line and "\t" not in line
        assert not re.search(UNSAFE_OUT, block)
        assert safe(line) == line and safe(block, block=True) == block

    @settings(max_examples=300, deadline=None)
    @given(st.text(), st.dictionaries(st.text(), st.text(), max_size=3))
    def test_json_made_safe_is_still_the_same_json(self, text: str, tree: dict[str, str]) -> None:
        doc = {"text": text, "tree": tree}
        assert json.loads(safe(json.dumps(doc, ensure_ascii=False), block=True)) == doc
        assert strict_json(json_text(doc)) == doc
        assert not re.search(UNSAFE_OUT, json_text(doc))

    def test_json_text_tags_what_strict_json_cannot_hold(self) -> None:
        doc = {"f": [math.nan, -math.inf], "n": 10**5000, "s": "\u2028"}
        assert strict_json(json_text(doc)) == {
            "f": [{"!float": "nan"}, {"!float": "-inf"}],
            "n": {"!int": hex(10**5000)},
            "s": "\u2028",
        }

    def test_a_line_keeps_its_colour_marks_and_loses_recorded_escapes(self) -> None:
        marked = colour("failed", "failed") + " \x1b[32mfake green\x9b"
        assert safe(marked) == marked.replace("\x1b", "\\x1b").replace("\x9b", "\\u009b")


class TestRandomRecordedText:
    @settings(
        max_examples=6,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        texts=st.lists(
            st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=40),
            min_size=3,
            max_size=3,
        )
    )
    def test_it_never_reaches_the_output_raw(
        self, hostile: tuple[Path, str], texts: list[str]
    ) -> None:
        db, run_id = hostile
        table = table_of(db, "hostile" + HOSTILE)
        error, result, key = texts
        conn = sqlite3.connect(db)
        try:
            conn.execute(
                f'UPDATE "{table}" SET error = ?, traceback = ? WHERE key = ?',
                (error, error, "boom"),
            )
            conn.execute(
                f'UPDATE "{table}" SET result = ? WHERE key = ?',
                (json.dumps(result, ensure_ascii=False), "text"),
            )
            conn.execute(f'UPDATE "{table}" SET key = ? WHERE key = ?', ("k" + key, "floats"))
            conn.commit()
            show = lil(db, "show", run_id, "--full")
            assert_clean(show.stdout, "show --full")
            assert show.returncode == 0, show.stderr
            export = lil(db, "export", run_id)
            data = strict_json(assert_clean(export.stdout, "export"))
            rows = {r["key"]: r for r in data["rows"]}
            assert rows["text"]["result"] == result and rows["boom"]["error"] == error
            assert "k" + key in rows
        finally:
            conn.execute(f'UPDATE "{table}" SET key = ? WHERE key = ?', ("floats", "k" + key))
            conn.commit()
            conn.close()


def test_the_hostile_text_holds_every_control_character() -> None:
    assert all(chr(c) in HOSTILE for c in [*range(0x20), *range(0x7F, 0xA0)])
