"""Encryption at rest: with a key, results, errors and inputs are stored as AES-GCM ciphertext.

Real journal files written by child processes (one SIGKILLed), their bytes
searched for the plaintext, read back by fresh processes and by the real
``lil`` (letitloop/integrity/encryption.py).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest
from helpers import program_file, start_forked, wait_until
from seal_programs import (
    ENCRYPTED,
    SECRET,
    SENT,
    WAITER,
    keyless_env,
    run_lil,
    run_program,
)

pytest.importorskip("cryptography")

from letitloop import Journal
from letitloop.errors import EncryptionKeyError

ROOT = Path(__file__).resolve().parent.parent
KEY = "e" * 16 + "-test-encryption"


def env(key: str | None = KEY) -> dict[str, str]:
    return keyless_env() if key is None else keyless_env(LETITLOOP_ENCRYPTION_KEY=key)


def run(db: Path, how: str = "", key: str | None = KEY) -> subprocess.CompletedProcess[str]:
    return run_program(ENCRYPTED, db, how, env=env(key))


def lil(db: Path, *args: str, key: str | None = KEY) -> str:
    out = run_lil(db, *args, env=env(key))
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.fixture
def killed(tmp_path: Path) -> Path:
    """A journal whose writer was SIGKILLed after steps a and b (its -wal not checkpointed)."""
    db = tmp_path / "journal.db"
    out = run(db, "kill")
    assert out.returncode == -signal.SIGKILL, out.stderr
    assert out.stdout.splitlines() == ["called a", f"got {SECRET}-a"]
    return db


class TestAnEncryptedJournal:
    def test_it_never_holds_the_plaintext_of_a_result_an_error_or_the_input(
        self, killed: Path
    ) -> None:
        files = [p for p in killed.parent.iterdir() if p.is_file()]
        assert any(p.name.endswith("-wal") and p.stat().st_size for p in files), files
        for path in files:
            data = path.read_bytes()
            assert SECRET.encode() not in data, path
            assert KEY.encode() not in data, path
        run(killed)  # and after the run completed
        for path in killed.parent.iterdir():
            if path.is_file():
                assert SECRET.encode() not in path.read_bytes(), path

    def test_it_replays_after_a_sigkill_with_the_key(self, killed: Path) -> None:
        out = run(killed)
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines() == [f"got {SECRET}-a"]  # a replayed, not called
        again = run(killed)  # the completed run: every step replays
        assert again.stdout.splitlines() == [f"got {SECRET}-a"], again.stderr

    def test_it_refuses_another_key_with_a_clear_error(self, killed: Path) -> None:
        out = run(killed, key="another-key-0123456789")
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("EncryptionKeyError"), out.stdout
        assert "encrypted with another key" in out.stdout and "lil rekey" in out.stdout
        assert "called a" not in out.stdout

    def test_it_refuses_to_replay_without_a_key(self, killed: Path) -> None:
        out = run(killed, key=None)
        assert out.stdout.startswith("EncryptionKeyError"), out.stdout
        assert "has no key" in out.stdout and "LETITLOOP_ENCRYPTION_KEY" in out.stdout

    def test_a_ciphertext_moved_to_another_row_is_refused(self, killed: Path) -> None:
        assert run(killed).returncode == 0
        conn = sqlite3.connect(killed)
        with conn:
            conn.execute(
                "UPDATE _journal_g SET result = (SELECT result FROM _journal_g WHERE key = 'c'), "
                "checksum = NULL WHERE key = 'a'"
            )
        conn.close()
        out = run(killed)
        assert out.stdout.startswith("EncryptionKeyError"), out.stdout
        assert "moved from another row" in out.stdout and "called a" not in out.stdout

    def test_a_short_key_is_refused(self, tmp_path: Path) -> None:
        with pytest.raises(EncryptionKeyError, match="at least 16 bytes"):
            Journal("g", path=tmp_path / "j.db", encryption_key="short")


class TestLilOnAnEncryptedJournal:
    def test_lil_runs_works_without_the_key(self, killed: Path) -> None:
        assert run(killed).returncode == 0
        out = lil(killed, "runs", "g", key=None)
        assert "r1" in out and "completed" in out

    def test_lil_show_without_the_key_says_the_values_are_encrypted(self, killed: Path) -> None:
        assert run(killed).returncode == 0
        out = lil(killed, "show", "r1", key=None)
        assert SECRET not in out
        assert "input     encrypted: set LETITLOOP_ENCRYPTION_KEY" in out
        assert "(encrypted)" in out and "damaged" not in out

    def test_lil_show_with_the_key_shows_the_values(self, killed: Path) -> None:
        assert run(killed).returncode == 0
        out = lil(killed, "show", "r1", "--full")
        for part in ("-a", "-error", "-input", "-c", "-run"):
            assert f"{SECRET}{part}" in out, (part, out)


class TestAsyncSteps:
    def test_their_results_are_encrypted_and_replayed(self, tmp_path: Path) -> None:
        import asyncio

        db = tmp_path / "journal.db"
        calls = []

        async def f(i: int) -> str:
            calls.append(i)
            return f"{SECRET}-{i}"

        async def main() -> list[str]:
            async with Journal("g", path=db, run="r1", encryption_key=KEY) as j:
                return list(await asyncio.gather(*(j.async_step(f"f:{i}", f, i) for i in range(3))))

        assert asyncio.run(main()) == [f"{SECRET}-{i}" for i in range(3)]
        assert asyncio.run(main()) == [f"{SECRET}-{i}" for i in range(3)]
        assert sorted(calls) == [0, 1, 2]  # the second run replayed all three
        for path in tmp_path.iterdir():
            if path.is_file():
                assert SECRET.encode() not in path.read_bytes(), path


def waiter(db: Path, how: str, key: str | None = KEY) -> subprocess.CompletedProcess[str]:
    return run_program(WAITER, db, how, env=env(key))


def lil_run(db: Path, *args: str, key: str | None = KEY) -> subprocess.CompletedProcess[str]:
    return run_lil(db, *args, env=env(key))


def holds_plaintext(folder: Path, text: str) -> list[str]:
    return [p.name for p in folder.iterdir() if p.is_file() and text.encode() in p.read_bytes()]


class TestAValueSentIntoAnEncryptedRun:
    def test_a_live_run_gets_it_and_the_file_never_holds_its_plaintext(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "journal.db"
        child = start_forked(program_file(WAITER), str(db), "live", cwd=ROOT, env=env())
        try:
            wait_until(lambda: child.printed() == "waiting\n", "the run waits")
            for _ in range(600):  # the wait's row is written just after the line
                sent = lil_run(db, "send", "r1", "approval", SENT)
                if sent.returncode == 0 or "not waiting" not in sent.stderr:
                    break
            assert sent.returncode == 0, sent.stderr
            assert holds_plaintext(tmp_path, SECRET) == []  # the file and its -wal
        except BaseException:
            os.kill(child.pid, signal.SIGKILL)
            raise
        finally:
            done = child.wait()
        assert done.stdout == f"waiting\ngot {SECRET}-sent\n", done.stderr
        assert holds_plaintext(tmp_path, SECRET) == []
        again = waiter(db, "live")  # the completed run replays the value
        assert again.stdout == f"waiting\ngot {SECRET}-sent\n", again.stderr
        shown = lil_run(db, "show", "r1", "--full")
        assert f"{SECRET}-sent" in shown.stdout, shown.stderr

    def test_a_run_stopped_to_wait_resumes_with_it(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        assert waiter(db, "stop").returncode == 75
        sent = lil_run(db, "send", "w", "approval", SENT)
        assert sent.returncode == 0, sent.stderr
        assert holds_plaintext(tmp_path, SECRET) == []
        assert waiter(db, "stop").stdout == f"got {SECRET}-sent\n"

    def test_without_the_key_it_is_refused_in_one_line_and_nothing_is_written(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "journal.db"
        assert waiter(db, "stop").returncode == 75
        sent = lil_run(db, "send", "w", "approval", SENT, key=None)
        assert sent.returncode == 1
        assert sent.stderr.count("\n") == 1 and "Traceback" not in sent.stderr
        assert "values are encrypted and this send has no key" in sent.stderr, sent.stderr
        assert holds_plaintext(tmp_path, SECRET) == []
        conn = sqlite3.connect(db)
        assert conn.execute("SELECT status FROM journal_w WHERE kind = 'wait'").fetchall() == [
            ("waiting",)
        ]
        conn.close()

    def test_with_another_key_it_is_refused(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        assert waiter(db, "stop").returncode == 75
        sent = lil_run(db, "send", "w", "approval", SENT, key="another-key-0123456789")
        assert sent.returncode == 1
        assert "encrypted with another key" in sent.stderr, sent.stderr
        assert holds_plaintext(tmp_path, SECRET) == []

    def test_the_python_send_encrypts_it_with_the_key_given(self, tmp_path: Path) -> None:
        import json

        from letitloop import send

        db = tmp_path / "journal.db"
        assert waiter(db, "stop").returncode == 75
        send("w", "approval", json.loads(SENT), path=db, encryption_key=KEY)
        assert holds_plaintext(tmp_path, SECRET) == []
        assert waiter(db, "stop").stdout == f"got {SECRET}-sent\n"

    def test_into_a_run_that_is_not_encrypted_it_is_stored_as_sent(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        assert waiter(db, "stop", key=None).returncode == 75
        sent = lil_run(db, "send", "w", "approval", SENT)  # a key in the sender's environment
        assert sent.returncode == 0, sent.stderr
        assert waiter(db, "stop", key=None).stdout == f"got {SECRET}-sent\n"


class TestAnotherKeyIsCaughtWhenTheJournalOpens:
    """Before a row is replayed: a new run of the goal, under another key or none, would
    otherwise write its values beside the old ones unnoticed."""

    def runs(self, db: Path) -> list[str]:
        conn = sqlite3.connect(db)
        try:
            return [r[0] for r in conn.execute("SELECT name FROM runs ORDER BY rowid")]
        finally:
            conn.close()

    def test_a_new_run_with_another_key_is_refused_and_nothing_is_written(
        self, killed: Path
    ) -> None:
        with pytest.raises(EncryptionKeyError, match=r"encrypted with another key.*lil rekey"):
            Journal("g", path=killed, run="r2", encryption_key="another-key-0123456789").open()
        assert self.runs(killed) == ["r1"]

    def test_a_new_run_without_a_key_is_told_the_values_are_encrypted(
        self, killed: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("LETITLOOP_ENCRYPTION_KEY", raising=False)
        with pytest.raises(EncryptionKeyError, match="values are encrypted and this journal has"):
            Journal("g", path=killed, run="r2").open()
        assert self.runs(killed) == ["r1"]

    def test_the_key_itself_is_never_stored_only_its_check_value(self, killed: Path) -> None:
        from letitloop.integrity.encryption import make_cipher

        conn = sqlite3.connect(killed)
        rows = conn.execute("SELECT goal, key_check FROM key_checks").fetchall()
        conn.close()
        cipher = make_cipher(KEY)
        assert cipher is not None and rows == [("g", cipher.check)]
        assert KEY not in cipher.check and len(cipher.check) == 32

    def test_the_same_key_opens_it_and_another_goal_may_have_its_own(self, killed: Path) -> None:
        with Journal("g", path=killed, run="r2", encryption_key=KEY) as j:
            j.step("x", lambda: 1)
        with Journal("h", path=killed, encryption_key="another-key-0123456789") as j:
            j.step("x", lambda: 1)
        assert self.runs(killed) == ["r1", "r2", None]


class TestAForkOfAnEncryptedRun:
    """Each value is bound to its run, so the fork's copies are encrypted again for it."""

    def forked(self, db: Path, key: str | None = KEY) -> subprocess.CompletedProcess[str]:
        return lil_run(db, "fork", "r1", "--from-step", "c", key=key)  # the fork takes r1

    def test_it_replays_the_copied_results_with_the_key(self, killed: Path) -> None:
        assert run(killed).returncode == 0  # r1 completed: a, b, c
        out = self.forked(killed)
        assert out.returncode == 0, out.stderr
        resumed = run(killed)  # the fork: a and b replayed, c run again
        assert resumed.stdout.splitlines() == [f"got {SECRET}-a"], resumed.stdout
        assert holds_plaintext(killed.parent, SECRET) == []

    def test_without_the_key_it_is_refused_and_nothing_is_forked(self, killed: Path) -> None:
        assert run(killed).returncode == 0
        out = self.forked(killed, key=None)
        assert out.returncode == 1 and out.stderr.count("\n") == 1
        assert "a fork's copies must be encrypted again" in out.stderr, out.stderr
        conn = sqlite3.connect(killed)
        assert conn.execute("SELECT count(*) FROM runs").fetchone() == (1,)
        conn.close()


class TestAFailedTryOfAnEncryptedStep:
    @pytest.fixture
    def retried(self, tmp_path: Path) -> Path:
        from letitloop import RetryPolicy

        db = tmp_path / "journal.db"
        tries = []

        def flaky() -> int:
            tries.append(1)
            if len(tries) == 1:
                raise ValueError(f"{SECRET}-try")
            return 1

        with Journal("g", path=db, run="r1", encryption_key=KEY) as j:
            j.step("t", flaky, retry=RetryPolicy(max_attempts=2, initial_backoff=0, jitter=0))
        assert holds_plaintext(tmp_path, SECRET) == []
        return db

    def test_lil_show_with_the_key_shows_its_error(self, retried: Path) -> None:
        out = lil_run(retried, "show", "r1")
        assert "try 1" in out.stdout and f"ValueError: {SECRET}-try" in out.stdout, out.stdout

    def test_lil_show_without_the_key_says_it_is_encrypted(self, retried: Path) -> None:
        out = lil_run(retried, "show", "r1", key=None)
        assert "try 1" in out.stdout and '{"!enc"' not in out.stdout, out.stdout
        assert "(encrypted: set LETITLOOP_ENCRYPTION_KEY to read it)" in out.stdout
