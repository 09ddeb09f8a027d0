"""``@durable(seal=..., encryption_key=...)`` and ``@durable_async``'s: Journal's keys, given
once at decoration (letitloop/run/durable.py; docs/audit.md)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest
from helpers import lil_forked

from letitloop import durable, durable_async, step
from letitloop.errors import EncryptionKeyError, SealKeyError

ROOT = Path(__file__).resolve().parent.parent
SEAL = "seal-key-0123456789abcdef"
KEY = "encryption-key-0123456789"
SECRET = "PLAINTEXT-SECRET-5521"


@pytest.fixture(autouse=True)
def no_keys_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LETITLOOP_SEAL_KEY", "LETITLOOP_ENCRYPTION_KEY"):
        monkeypatch.delenv(name, raising=False)


def verify(db: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LETITLOOP_SEAL_KEY"}
    return lil_forked(
        "--db", str(db), "verify", "--all", cwd=ROOT, env={**env, "LETITLOOP_SEAL_KEY": SEAL}
    )


def plaintext_in(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.is_file() and SECRET.encode() in p.read_bytes()]


class TestASealKeyGivenToTheDecorator:
    def test_each_calls_run_is_sealed_and_lil_verify_holds(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"

        @durable(goal_id="g", path=db, seal=SEAL)
        def job(n: int) -> int:
            return step("double", lambda: n * 2)

        @durable_async(goal_id="h", path=db, seal=SEAL)
        async def ajob(n: int) -> int:
            return step("double", lambda: n * 2)

        assert job(1) == 2 and job(2) == 4 and asyncio.run(ajob(3)) == 6
        out = verify(db)
        assert out.returncode == 0, out.stdout + out.stderr
        assert out.stdout.count(" sealed (") == 3, out.stdout

    def test_a_short_key_is_refused_at_decoration(self, tmp_path: Path) -> None:
        with pytest.raises(SealKeyError, match="at least 16 bytes"):
            durable(goal_id="g", path=tmp_path / "j.db", seal="short")


class TestAnEncryptionKeyGivenToTheDecorator:
    def test_results_and_arguments_are_stored_encrypted_and_replayed(self, tmp_path: Path) -> None:
        pytest.importorskip("cryptography")
        db = tmp_path / "journal.db"
        calls = []

        def fetch(who: str) -> str:
            calls.append(who)
            return f"{SECRET}-{who}"

        @durable(goal_id="g", run="r1", path=db, encryption_key=KEY)
        def job(who: str) -> str:
            return step("fetch", fetch, who)

        @durable_async(goal_id="h", run="r1", path=db, encryption_key=KEY)
        async def ajob(who: str) -> str:
            return step("fetch", fetch, who)

        assert job(f"{SECRET}-arg") == f"{SECRET}-{SECRET}-arg"
        assert asyncio.run(ajob("b")) == f"{SECRET}-b"
        assert job(f"{SECRET}-arg") == f"{SECRET}-{SECRET}-arg"  # replayed
        assert len(calls) == 2
        assert plaintext_in(tmp_path) == []
        conn = sqlite3.connect(db)
        assert [g for (g,) in conn.execute("SELECT goal FROM key_checks ORDER BY goal")] == [
            "g",
            "h",
        ]
        conn.close()

    def test_a_short_key_is_refused_at_decoration(self, tmp_path: Path) -> None:
        with pytest.raises(EncryptionKeyError, match="at least 16 bytes"):
            durable_async(goal_id="g", path=tmp_path / "j.db", encryption_key="short")
