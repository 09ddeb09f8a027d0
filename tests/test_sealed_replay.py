"""A sealed run replays only what its seal covers (issue 50).

A step's result edited with plain sqlite3 (or psycopg), its public CRC-32
recomputed, used to be handed back by a resume holding ``LETITLOOP_SEAL_KEY``
without a call; ``lil verify`` caught it only afterwards. Now every replayed row
of a sealed run is checked against its seal before it is returned, and a forged
row stops the run with ForgedRowError naming the run and the step. The same for a
run's other rows: a marker recorded done (a forged one skipped its side effect),
a sleep, and a wait's value (a forged one was handed to the program, and sealed as
found at the next open). Real files and a real PostgreSQL server, edited from
outside, replayed by fresh processes.
"""

from __future__ import annotations

import os
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pg_server
import pytest
from seal_programs import keyless_env, run_program

from letitloop.integrity.checksums import marker_sum, pause_sum, step_sum

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


#: Run "r2" of goal "g": a nap, a wait for "v" (the process stops to wait when no value
#: was sent), then the marker "charge", whose block prints "charged"; with argv[2] ==
#: "decline", the block raises (the marker is recorded failed), with "stay" the process
#: waits for the value (up to 60 s) and stops after it, before the marker; with "cool" it
#: sleeps "cool" for an hour after the marker.
PAUSES = """
import sys
from letitloop import Journal
from letitloop.errors import LetItLoopError

arg = sys.argv[2] if len(sys.argv) > 2 else ""
try:
    with Journal("g", path=sys.argv[1], run="r2") as j:
        j.sleep("nap", 0)
        print("waiting", flush=True)
        print("got v", j.wait_for("v", stop_after=60 if arg == "stay" else 0), flush=True)
        if arg == "stay":
            raise SystemExit(3)
        with j.atomic_marker("charge") as go:
            if go:
                print("charged", flush=True)
                if arg == "decline":
                    raise RuntimeError("card declined")
        if arg == "cool":
            j.sleep("cool", 3600)
        print("end", flush=True)
except LetItLoopError as exc:
    print(type(exc).__name__, exc, flush=True)
    raise SystemExit(2)
"""


def run_pauses(location: str | Path, *args: str, key: str | None = KEY) -> Any:
    extra = {} if key is None else {"LETITLOOP_SEAL_KEY": key}
    return run_program(PAUSES, location, *args, env=keyless_env(**extra))


def send_v(location: str | Path, value: str) -> None:
    """The wait "v" answered as ``lil send`` answers it: without the key."""
    from letitloop import send

    send("r2", "v", value, path=str(location))


def forge_pause(db: Path, key: str, sets: str, values: tuple[Any, ...], checksum: int) -> None:
    """Row ``key`` of run r2 changed with plain sqlite3 (``sets``), its CRC-32 recomputed."""
    conn = sqlite3.connect(db)
    with conn:
        assert conn.execute(
            f"UPDATE _journal_g SET {sets}, checksum = ? WHERE key = ?",
            (*values, checksum, key),
        ).rowcount
    conn.close()


def run_id_of(db: Path) -> str:
    conn = sqlite3.connect(db)
    (run_id,) = conn.execute("SELECT id FROM runs WHERE name = 'r2'").fetchone()
    conn.close()
    return str(run_id)


def waits_for_v(db: Path) -> bool:
    conn = sqlite3.connect(db)
    try:
        found = conn.execute("SELECT status FROM _journal_g WHERE key = 'v'").fetchone()
    finally:
        conn.close()
    return found is not None and found[0] == "waiting"


def assert_pause_refused(out: Any, kind: str, key: str) -> None:
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert f"ForgedRowError {kind} {key!r} (run " in out.stdout, out.stdout
    assert "does not match the run's seal" in out.stdout and "lil verify" in out.stdout


class TestASealedRunsMarkersAndWaits:
    def test_a_failed_marker_forged_done_stops_the_run_instead_of_skipping_it(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "journal.db"
        assert run_pauses(db).returncode == 75  # stopped to wait for v
        send_v(db, "yes")
        out = run_pauses(db, "decline")
        assert "charged" in out.stdout and out.returncode == 1, out.stderr  # recorded failed
        forge_pause(
            db,
            "charge",
            "status = 'done', error = NULL, traceback = NULL",
            (),
            marker_sum(run_id_of(db), "charge", "done"),
        )
        assert run_pauses(db, key=None).stdout.splitlines()[-1] == "end"  # no key: skipped
        out = run_pauses(db)
        assert_pause_refused(out, "marker", "charge")
        assert "edited after it was sealed" in out.stdout
        assert "It is not taken as done" in out.stdout
        assert "charged" not in out.stdout and "\nend" not in out.stdout

    def test_an_edited_wait_value_stops_the_run_and_is_not_sealed_again(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "journal.db"
        assert run_pauses(db).returncode == 75
        send_v(db, "yes")
        out = run_pauses(db)  # the value sent without the key is sealed at this open
        assert out.returncode == 0 and "got v yes" in out.stdout, out.stderr
        assert "got v yes" in run_pauses(db).stdout  # untouched: it replays
        forge_pause(
            db, "v", "result = ?", ('"no"',), pause_sum(run_id_of(db), "v", "wait", '"no"', None)
        )
        assert "got v no" in run_pauses(db, key=None).stdout  # the limit: no key, no check
        for _ in range(2):  # the open does not seal the edited value: refused each time
            out = run_pauses(db)
            assert_pause_refused(out, "wait", "v")
            assert "edited after it was sealed" in out.stdout
            assert "got v" not in out.stdout and "charged" not in out.stdout

    def test_a_value_received_while_waiting_is_sealed_as_received(self, tmp_path: Path) -> None:
        from helpers import program_file, start_forked, wait_until
        from seal_programs import ROOT

        db = tmp_path / "journal.db"
        env = keyless_env(LETITLOOP_SEAL_KEY=KEY)
        waiting = start_forked(program_file(PAUSES), str(db), "stay", cwd=ROOT, env=env)
        try:
            wait_until(lambda: waiting.printed() == "waiting\n", "it waits")
            # Its row written: lil send finds it.
            wait_until(lambda: waits_for_v(db), "the wait's row is written")
            send_v(db, "yes")
        except BaseException:
            os.kill(waiting.pid, signal.SIGKILL)
            raise
        finally:
            out = waiting.wait()
        assert out.returncode == 3 and "got v yes" in out.stdout, out
        forge_pause(
            db, "v", "result = ?", ('"no"',), pause_sum(run_id_of(db), "v", "wait", '"no"', None)
        )
        out = run_pauses(db)
        assert_pause_refused(out, "wait", "v")

    def test_a_sleep_inserted_done_stops_the_run_instead_of_skipping_it(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "journal.db"
        assert run_pauses(db).returncode == 75
        send_v(db, "yes")
        assert run_pauses(db).returncode == 0
        conn = sqlite3.connect(db)
        with conn:  # the hour's sleep recorded done (a copy of the nap's row), its CRC-32
            conn.execute(
                "INSERT INTO _journal_g (run, key, kind, status, fn, started, duration, "
                "attempt, wake_at, checksum) SELECT run, 'cool', kind, status, fn, started, "
                "duration, attempt, wake_at, ? FROM _journal_g WHERE key = 'nap'",
                (pause_sum(run_id_of(db), "cool", "sleep", None, None),),
            )
        conn.close()
        out = run_pauses(db, "cool")
        assert_pause_refused(out, "sleep", "cool")
        assert "in no entry of the run's sealed chain" in out.stdout
        assert "It is not taken as slept" in out.stdout

    def test_an_untouched_run_replays_them_all_with_the_key(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        assert run_pauses(db).returncode == 75
        send_v(db, "yes")
        assert run_pauses(db).stdout.splitlines()[-1] == "end"
        out = run_pauses(db)
        assert out.returncode == 0 and out.stdout.splitlines() == ["waiting", "got v yes", "end"]


class TestASealedRunsMarkersAndWaitsOnPostgres:
    def test_a_forged_marker_and_wait_value_stop_the_run(self) -> None:
        import psycopg

        location = pg_server.location()
        assert run_pauses(location).returncode == 75
        send_v(location, "yes")
        out = run_pauses(location, "decline")
        assert "charged" in out.stdout and out.returncode == 1, out.stderr
        with psycopg.connect(location, autocommit=True) as conn:
            found = conn.execute("SELECT run FROM ll_journal WHERE key = 'charge'").fetchone()
            assert found is not None
            (run_id,) = found
            assert conn.execute(
                "UPDATE ll_journal SET status = 'done', error = NULL, traceback = NULL, "
                "checksum = %s WHERE key = 'charge'",
                (marker_sum(run_id, "charge", "done"),),
            ).rowcount
        out = run_pauses(location)
        assert_pause_refused(out, "marker", "charge")
        assert "charged" not in out.stdout
        with psycopg.connect(location, autocommit=True) as conn:
            forged = '"no"'
            assert conn.execute(
                "UPDATE ll_journal SET result = %s, checksum = %s WHERE key = 'v'",
                (forged, pause_sum(run_id, "v", "wait", forged, None)),
            ).rowcount
        out = run_pauses(location)
        assert_pause_refused(out, "wait", "v")
        assert "got v" not in out.stdout
