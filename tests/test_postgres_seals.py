"""Seals and encryption on PostgreSQL: proven unaltered by ``lil verify``, private at rest.

Runs written by child processes on the tests' real server (tests/pg_server.py),
one SIGKILLed; rows altered with plain psycopg (as anyone with the database
could); checked by the real ``lil verify`` in a fresh process
(letitloop/stores/postgres/seals.py, inspection/verify.py). The cases every store
keeps (a sealed run verifies, an encrypted value never stored in plaintext)
are in test_contract.py; these are PostgreSQL's own: the key never reaches the
server, and the ways of altering a run there.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any
from urllib.parse import quote

import pg_server
import pytest
from seal_programs import (
    ENCRYPTED,
    SEALED,
    SECRET,
    SENT,
    WAITER,
    keyless_env,
    run_lil,
    run_program,
)

KEY = "k" * 16 + "-pg-seal-key"
ENCRYPTION_KEY = "e" * 16 + "-pg-encryption"


def python(
    program: str, location: str, *args: str, **extra: str
) -> subprocess.CompletedProcess[str]:
    return run_program(program, location, *args, env=keyless_env(**extra))


def lil(location: str, *args: str, stdin: str | None = None) -> tuple[int, str]:
    out = run_lil(location, "verify", *args, env=keyless_env(LETITLOOP_SEAL_KEY=KEY), stdin=stdin)
    return out.returncode, out.stdout + out.stderr


def verdict(location: str, *args: str) -> dict[str, Any]:
    code, out = lil(location, "r1", "--json", *args)
    (found,) = json.loads(out)
    assert code == (1 if found["state"] == "broken" else 0), out
    return dict(found)


def sql(location: str, statement: str, *params: object) -> int:
    import psycopg

    with psycopg.connect(location, autocommit=True) as conn:
        return int(conn.execute(statement, params).rowcount)


@pytest.fixture
def sealed() -> str:
    location = pg_server.location()
    out = python(SEALED, location, LETITLOOP_SEAL_KEY=KEY)
    assert out.returncode == 0, out.stderr
    return location


class TestASealedRunOnPostgres:
    def test_lil_verify_in_a_fresh_process_finds_every_link_whole(self, sealed: str) -> None:
        found = verdict(sealed)
        # a, b, t:0..5, child, e, the marker, the sleep, f: an entry each.
        assert (found["state"], found["entries"], found["broken"]) == ("sealed", 13, None)
        code, out = lil(sealed, "g")
        assert code == 0 and "sealed (13 entries)" in out

    def test_its_entries_are_in_the_order_the_rows_were_committed(self, sealed: str) -> None:
        import psycopg

        with psycopg.connect(sealed) as conn:
            entries = conn.execute("SELECT n, key FROM ll_seals ORDER BY n").fetchall()
        assert [n for n, _ in entries] == list(range(1, 14))
        keys = [k for _, k in entries]
        assert keys[:2] == ["a", "b"] and keys[-4:] == ["e", "notify", "nap", "f"]
        assert keys.index("e/child") < keys.index("e")

    def test_the_key_never_reaches_the_server(self) -> None:
        import psycopg

        location = pg_server.location()
        log = pg_server.log_path()
        before = log.stat().st_size
        # Every statement of the writer, with its parameters, in the server's log (its
        # URL's options, which PGOPTIONS cannot add to).
        logged_url = location + quote(" -clog_statement=all")
        out = python(SEALED, logged_url, LETITLOOP_SEAL_KEY=KEY)
        assert out.returncode == 0, out.stderr
        with log.open("rb") as f:
            f.seek(before)
            logged = f.read().decode("utf-8", "replace")
        with psycopg.connect(location) as conn:
            head = conn.execute("SELECT seal FROM ll_seals WHERE n = 13").fetchone()
            assert head is not None
            seal = head[0]
            tables = [
                t
                for (t,) in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                ).fetchall()
            ]
            stored = "".join(
                str(conn.execute(f"SELECT t::text FROM {t} AS t").fetchall())
                for t in tables
                if t.startswith("ll_")
            )
        assert seal in logged  # the log has the writer's statements and their parameters
        assert KEY not in logged and KEY not in stored
        assert KEY.encode().hex() not in logged and KEY.encode().hex() not in stored

    def test_a_run_killed_mid_way_resumes_its_chain(self) -> None:
        location = pg_server.location()
        killed = python(SEALED, location, "kill", LETITLOOP_SEAL_KEY=KEY)
        assert killed.returncode == -9, killed.stderr
        found = verdict(location)
        assert (found["state"], found["entries"]) == ("sealed", 12)
        again = python(SEALED, location, LETITLOOP_SEAL_KEY=KEY)
        assert again.returncode == 0, again.stderr
        found = verdict(location)
        assert (found["state"], found["entries"]) == ("sealed", 13)

    def test_a_sealed_step_is_one_round_trip(self) -> None:
        from letitloop import Journal

        location = pg_server.location()
        with Journal("g", path=location, run="r1", seal=KEY) as j:
            store: Any = j.store
            assert pg_server.round_trips(store.conn, lambda: j.step("one", str, 1)) == 1
        found = verdict(location)
        assert (found["state"], found["entries"]) == ("sealed", 1)

    def test_a_run_sealed_with_one_key_is_refused_with_another(self, sealed: str) -> None:
        out = python(SEALED, sealed, LETITLOOP_SEAL_KEY="o" * 16 + "-another-key")
        assert out.returncode != 0 and "not sealed with this key" in out.stderr

    def test_lil_reset_takes_its_chain_with_it(self, sealed: str) -> None:
        reset = ("reset", "g", "--run", "r1", "--yes")
        done = run_lil(sealed, *reset, env=keyless_env())
        assert done.returncode == 0, done.stdout + done.stderr
        assert sql(sealed, "SELECT 1 FROM ll_seals") == 0


class TestAnAlteredRunOnPostgres:
    def test_an_edited_result_is_reported_at_its_row(self, sealed: str) -> None:
        assert sql(sealed, "UPDATE ll_journal SET result = '[3, \"two\"]' WHERE key = 'b'") == 1
        found = verdict(sealed)
        assert found["state"] == "broken" and found["key"] == "b"
        assert "edited" in found["broken"]

    def test_a_deleted_row_is_reported(self, sealed: str) -> None:
        assert sql(sealed, "DELETE FROM ll_journal WHERE key = 't:3'") == 1
        found = verdict(sealed)
        assert found["state"] == "broken" and found["key"] == "t:3"
        assert "deleted" in found["broken"]

    def test_two_rows_swapped_are_reported(self, sealed: str) -> None:
        sql(
            sealed,
            "UPDATE ll_journal AS t SET result = o.result FROM ll_journal AS o "
            "WHERE (t.key, o.key) IN (('a', 'b'), ('b', 'a'))",
        )
        found = verdict(sealed)
        assert found["state"] == "broken" and found["key"] in ("a", "b")

    def test_an_inserted_row_is_reported(self, sealed: str) -> None:
        sql(
            sealed,
            "INSERT INTO ll_journal (goal, run, key, status, kind, fn, result) "
            "SELECT goal, run, 'forged', 'done', 'step', fn, '1' FROM ll_journal WHERE key = 'a'",
        )
        found = verdict(sealed)
        assert found["state"] == "broken" and found["key"] == "forged"

    def test_an_edited_entry_is_reported(self, sealed: str) -> None:
        assert sql(sealed, "UPDATE ll_seals SET digest = repeat('0', 64) WHERE n = 4") == 1
        found = verdict(sealed)
        assert found["state"] == "broken" and found["at"] == 4

    def test_a_truncated_tail_is_caught_by_its_kept_head(self, sealed: str) -> None:
        code, heads = lil(sealed, "r1", "--print-head")
        assert code == 0 and heads.split()[1] == "13"
        # The last two rows and their entries gone: what is left is a whole, shorter chain.
        assert sql(sealed, "DELETE FROM ll_journal WHERE key IN ('nap', 'f')") == 2
        assert sql(sealed, "DELETE FROM ll_seals WHERE n > 11") == 2
        assert verdict(sealed)["state"] == "sealed"
        code, out = lil(sealed, "r1", "--json", "--head", "-", stdin=heads)
        (found,) = json.loads(out)
        assert code == 1 and found["state"] == "broken" and "tail was removed" in found["broken"]


class TestAnEncryptedRunOnPostgres:
    def test_it_resumes_after_a_sigkill_and_never_holds_the_plaintext(self) -> None:
        pytest.importorskip("cryptography")
        import psycopg

        location = pg_server.location()
        killed = python(ENCRYPTED, location, "kill", LETITLOOP_ENCRYPTION_KEY=ENCRYPTION_KEY)
        assert killed.returncode == -9 and "called a" in killed.stdout, killed.stderr
        again = python(ENCRYPTED, location, "end", LETITLOOP_ENCRYPTION_KEY=ENCRYPTION_KEY)
        assert again.returncode == 0, again.stderr
        assert "called a" not in again.stdout  # replayed, decrypted
        assert f"got {SECRET}-a" in again.stdout
        with psycopg.connect(location) as conn:
            values = conn.execute(
                "SELECT key, result, error, traceback FROM ll_journal ORDER BY rowid"
            ).fetchall()
            run = conn.execute("SELECT input, result FROM ll_runs").fetchone()
            stored = "".join(
                str(conn.execute(f"SELECT t::text FROM {t} AS t").fetchall())
                for (t,) in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                ).fetchall()
            )
        assert [v[0] for v in values] == ["a", "b", "c"]
        assert all(v[1].startswith('{"!enc":"v1:') for v in values if v[1] is not None)
        assert values[1][2].startswith('{"!enc":"v1:')  # b's error
        assert run is not None and all(str(v).startswith('{"!enc":"v1:') for v in run)
        assert SECRET not in stored

    def test_another_key_is_refused_clearly(self) -> None:
        pytest.importorskip("cryptography")
        location = pg_server.location()
        python(ENCRYPTED, location, "kill", LETITLOOP_ENCRYPTION_KEY=ENCRYPTION_KEY)
        wrong = python(ENCRYPTED, location, "end", LETITLOOP_ENCRYPTION_KEY="w" * 16 + "-wrong")
        # Refused when the journal opens (ll_key_checks, migration 0008), before a replay.
        assert "EncryptionKeyError" in wrong.stdout, wrong.stdout + wrong.stderr
        assert "encrypted with another key" in wrong.stdout
        assert "called a" not in wrong.stdout and SECRET not in wrong.stdout


def lil_send(location: str, key: str | None) -> subprocess.CompletedProcess[str]:
    extra = {} if key is None else {"LETITLOOP_ENCRYPTION_KEY": key}
    return run_lil(location, "send", "w", "approval", SENT, env=keyless_env(**extra))


def wait_rows(location: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(location, autocommit=True) as conn:
        return conn.execute(
            "SELECT key, status, result, error FROM ll_journal WHERE kind = 'wait'"
        ).fetchall()


class TestAnEncryptedGoalDroppedByLilGcOnPostgres:
    def test_its_key_check_goes_with_it_so_a_new_goal_of_its_name_may_use_another_key(
        self,
    ) -> None:
        pytest.importorskip("cryptography")
        import psycopg

        location = pg_server.location()
        done = python(ENCRYPTED, location, "end", LETITLOOP_ENCRYPTION_KEY=ENCRYPTION_KEY)
        assert done.returncode == 0, done.stdout + done.stderr
        with psycopg.connect(location, autocommit=True) as conn:
            assert [g for (g,) in conn.execute("SELECT goal FROM ll_key_checks")] == ["g"]
        args = ["gc", "--older-than", "0s", "--yes"]
        gc = run_lil(location, *args, env=keyless_env())
        assert gc.returncode == 0, gc.stdout + gc.stderr
        with psycopg.connect(location, autocommit=True) as conn:
            assert conn.execute("SELECT goal FROM ll_key_checks").fetchall() == []
        other = python(ENCRYPTED, location, "end", LETITLOOP_ENCRYPTION_KEY="o" * 16 + "-other")
        assert other.returncode == 0 and "called a" in other.stdout, other.stdout + other.stderr


class TestAValueSentIntoAnEncryptedRunOnPostgres:
    """``lil send`` reads the goal's key check (``ll_key_checks``) as it does a file's."""

    def test_without_the_key_it_is_refused_in_one_line_and_nothing_is_written(self) -> None:
        pytest.importorskip("cryptography")
        location = pg_server.location()
        waiting = python(WAITER, location, "stop", LETITLOOP_ENCRYPTION_KEY=ENCRYPTION_KEY)
        assert waiting.returncode == 75, waiting.stdout + waiting.stderr
        before = wait_rows(location)
        assert [r[1] for r in before] == ["waiting"]
        sent = lil_send(location, None)
        assert sent.returncode == 1, sent.stdout + sent.stderr
        assert sent.stderr.count("\n") == 1 and "Traceback" not in sent.stderr
        assert "values are encrypted and this send has no key" in sent.stderr, sent.stderr
        assert wait_rows(location) == before

    def test_with_another_key_it_is_refused_and_nothing_is_written(self) -> None:
        pytest.importorskip("cryptography")
        location = pg_server.location()
        waiting = python(WAITER, location, "stop", LETITLOOP_ENCRYPTION_KEY=ENCRYPTION_KEY)
        assert waiting.returncode == 75
        before = wait_rows(location)
        sent = lil_send(location, "w" * 16 + "-wrong")
        assert sent.returncode == 1, sent.stdout + sent.stderr
        assert "encrypted with another key" in sent.stderr, sent.stderr
        assert wait_rows(location) == before

    def test_into_a_goal_that_is_not_encrypted_it_is_stored_as_sent(self) -> None:
        pytest.importorskip("cryptography")
        location = pg_server.location()
        assert python(WAITER, location, "stop").returncode == 75
        sent = lil_send(location, ENCRYPTION_KEY)  # a key in the sender's environment
        assert sent.returncode == 0, sent.stderr
        assert python(WAITER, location, "stop").stdout == f"got {SECRET}-sent\n"


class TestAKeptHeadThatIsStale:
    def test_its_entry_follows_the_stored_head_and_the_chain_stays_whole(self, sealed: str) -> None:
        # Two writers of one run's chain, each keeping its head: never the case for two
        # journals (the run's hold and the fence), but what a kept head moved by a
        # rolled-back transaction looks like. Each entry is checked against the stored
        # head and follows it.
        from letitloop.stores.postgres.database import connect
        from letitloop.stores.postgres.seals import seal_row, start

        first, second = connect(sealed), connect(sealed)
        try:
            run_id = first.execute("SELECT id FROM ll_runs").fetchone()[0]
            chains = [{run_id: start(conn, "g", run_id, KEY.encode())} for conn in (first, second)]
            for i, key in enumerate(["a", "b", "e", "f"]):
                conn = (first, second)[i % 2]
                with conn.transaction():
                    seal_row(conn, chains[i % 2], "g", run_id, key, None)
        finally:
            first.close()
            second.close()
        found = verdict(sealed)
        assert (found["state"], found["entries"]) == ("sealed", 17)


class TestLilShowOfAnEncryptedRunOnPostgres:
    def show(self, location: str, key: str | None) -> str:
        extra = {} if key is None else {"LETITLOOP_ENCRYPTION_KEY": key}
        done = run_lil(location, "show", "r1", env=keyless_env(**extra))
        assert done.returncode == 0, done.stderr
        return done.stdout

    def test_it_shows_the_values_with_the_key_and_says_encrypted_without(self) -> None:
        pytest.importorskip("cryptography")
        location = pg_server.location()
        python(ENCRYPTED, location, "end", LETITLOOP_ENCRYPTION_KEY=ENCRYPTION_KEY)
        shown = self.show(location, ENCRYPTION_KEY)
        assert f"{SECRET}-error" in shown and f"{SECRET}-input" in shown
        hidden = self.show(location, None)
        assert SECRET not in hidden and "!enc" not in hidden
        assert "encrypted: set LETITLOOP_ENCRYPTION_KEY" in hidden

    def test_a_step_and_its_entry_written_in_one_statement_follow_the_stored_head(
        self, sealed: str
    ) -> None:
        # The same two writers through the step path (one statement: the row and its
        # entry): an entry that does not follow the stored head fails its whole statement
        # (ll_seals' key and reference), and the writer reads the head and writes again.
        import time

        from letitloop.stores.postgres.storage import open_postgres
        from letitloop.stores.storage_steps import StepRow

        writers = [open_postgres(sealed), open_postgres(sealed)]
        try:
            for w in writers:
                run_id, started = w.find_or_start_run("g", "r1", None, None, time.time(), print)
                assert not started
                w.seal_run(run_id, KEY.encode())
            for i in range(4):
                w = writers[i % 2]
                row = (w.run_key, f"x{i}", "done", "m.f", str(i), 0, 1, 1, None, None, "fp")
                w.write_step(StepRow(*row, None, None, None, None, None))
        finally:
            for w in writers:
                w.close()
        found = verdict(sealed)
        assert (found["state"], found["entries"]) == ("sealed", 17)
