"""A sealed run replays only what its seal covers (issue 50).

A step's result edited with plain sqlite3 (or psycopg), its public CRC-32
recomputed, used to be handed back by a resume holding ``LETITLOOP_SEAL_KEY``
without a call; ``lil verify`` caught it only afterwards. Now every replayed row
of a sealed run is checked against its seal before it is returned, and a forged
row stops the run with ForgedRowError naming the run and the step. Real files
and a real PostgreSQL server, edited from outside, replayed by fresh processes.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pg_server
import pytest
from seal_programs import keyless_env, run_program

from letitloop.checksums import step_sum

KEY = "k" * 16 + "-test-seal-key"

#: Run "r1" of goal "g": steps a, b, c, each printing "called X" when it runs and the
#: value it got; with argv[2] == "stop", the run fails after b (c never runs).
PROGRAM = """
import sys
from letitloop import Journal
from letitloop.errors import LetItLoopError

def made(name, value):
    def fn():
        print("called", name, flush=True)
        return value
    return fn

try:
    with Journal("g", path=sys.argv[1], run="r1") as j:
        print("got a", j.step("a", made("a", {"n": 1})), flush=True)
        print("got b", j.step("b", made("b", "paid 10")), flush=True)
        if len(sys.argv) > 2 and sys.argv[2] == "stop":
            raise SystemExit(3)
        print("got c", j.step("c", made("c", "sent")), flush=True)
except LetItLoopError as exc:
    print(type(exc).__name__, exc, flush=True)
    raise SystemExit(2)
"""


def run(location: str | Path, *args: str, key: str | None = KEY, **env: str) -> Any:
    extra = {} if key is None else {"LETITLOOP_SEAL_KEY": key}
    return run_program(PROGRAM, location, *args, env=keyless_env(**extra, **env))


def forge_sqlite(db: Path, key: str, result: str) -> None:
    """Step ``key``'s result set to ``result`` with plain sqlite3, its CRC-32 recomputed."""
    conn = sqlite3.connect(db)
    with conn:
        run_id, fn, fp = conn.execute(
            "SELECT run, fn, args_fp FROM journal_g WHERE key = ?", (key,)
        ).fetchone()
        checksum = step_sum(run_id, key, "done", fn, fp, result, None)
        assert conn.execute(
            "UPDATE _journal_g SET result = ?, checksum = ? WHERE key = ?",
            (result, checksum, key),
        ).rowcount
    conn.close()


def insert_sqlite(db: Path, key: str, like: str, result: str) -> None:
    """A done row for step ``key`` inserted (a copy of ``like``'s), with its CRC-32."""
    conn = sqlite3.connect(db)
    with conn:
        run_id, fn, fp = conn.execute(
            "SELECT run, fn, args_fp FROM journal_g WHERE key = ?", (like,)
        ).fetchone()
        checksum = step_sum(run_id, key, "done", fn, fp, result, None)
        conn.execute(
            "INSERT INTO _journal_g (run, key, kind, status, fn, result, started, duration, "
            "attempt, args_fp, checksum) SELECT run, ?, kind, status, fn, ?, started, duration, "
            "attempt, args_fp, ? FROM _journal_g WHERE key = ?",
            (key, result, checksum, like),
        )
    conn.close()


def assert_refused(out: Any, key: str) -> None:
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert f"ForgedRowError step {key!r} (run " in out.stdout, out.stdout
    assert "does not match the run's seal" in out.stdout
    assert "lil reset" in out.stdout and "lil verify" in out.stdout
    assert "forged" not in out.stdout.replace("ForgedRowError", "")  # never handed back
    assert f"called {key}" not in out.stdout


@pytest.fixture
def sealed(tmp_path: Path) -> Path:
    db = tmp_path / "journal.db"
    out = run(db)
    assert out.returncode == 0 and "called c" in out.stdout, out.stderr
    return db


class TestASealedRunOnAJournalFile:
    def test_an_untouched_run_replays_with_the_key(self, sealed: Path) -> None:
        out = run(sealed)
        assert out.returncode == 0, out.stderr
        assert "got b paid 10" in out.stdout and "called" not in out.stdout

    def test_an_edited_result_with_its_crc_recomputed_stops_the_run(self, sealed: Path) -> None:
        forge_sqlite(sealed, "b", '"forged: paid 0"')
        out = run(sealed)
        assert_refused(out, "b")
        assert "edited after it was sealed" in out.stdout
        assert "got a {'n': 1}" in out.stdout  # the rows before it replay as recorded

    def test_the_forged_row_is_still_handed_back_without_the_key(self, sealed: Path) -> None:
        forge_sqlite(sealed, "b", '"forged: paid 0"')
        out = run(sealed, key=None)  # the limit the docs state: no key, no check
        assert "got b forged: paid 0" in out.stdout, out.stdout

    def test_an_inserted_row_stops_the_run(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        assert run(db, "stop").returncode == 3  # the run failed after b: c never ran
        insert_sqlite(db, "c", "b", '"forged"')
        out = run(db)
        assert_refused(out, "c")
        assert "in no entry of the run's sealed chain" in out.stdout

    def test_an_edited_seal_entry_stops_the_run(self, sealed: Path) -> None:
        conn = sqlite3.connect(sealed)
        with conn:
            assert conn.execute("UPDATE seals SET digest = ? WHERE n = 1", ("0" * 64,)).rowcount
        conn.close()
        out = run(sealed)
        assert_refused(out, "a")
        assert "chain is broken at entry 1" in out.stdout

    def test_a_replay_only_run_refuses_it_too(self, sealed: Path) -> None:
        forge_sqlite(sealed, "b", '"forged: paid 0"')
        out = run(sealed, LETITLOOP_REPLAY="only")
        assert_refused(out, "b")


class TestASealedRunOnPostgres:
    def test_an_edited_result_with_its_crc_recomputed_stops_the_run(self) -> None:
        import psycopg

        location = pg_server.location()
        out = run(location)
        assert out.returncode == 0 and "called c" in out.stdout, out.stderr
        assert "called" not in run(location).stdout  # untouched: it replays
        with psycopg.connect(location, autocommit=True) as conn:
            found = conn.execute(
                "SELECT run, fn, args_fp FROM ll_journal WHERE key = 'b'"
            ).fetchone()
            assert found is not None
            run_id, fn, fp = found
            forged = '"forged: paid 0"'
            checksum = step_sum(run_id, "b", "done", fn, fp, forged, None)
            assert conn.execute(
                "UPDATE ll_journal SET result = %s, checksum = %s WHERE key = 'b'",
                (forged, checksum),
            ).rowcount
        out = run(location)
        assert_refused(out, "b")
        assert "edited after it was sealed" in out.stdout
