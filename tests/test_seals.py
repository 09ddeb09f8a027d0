"""The sealed chain: a run written with a seal key is proven unaltered by ``lil verify``.

Real journal files written by child processes with ``LETITLOOP_SEAL_KEY``,
altered with plain sqlite3 (as anyone with the file could), checked by the
real ``lil verify`` in a fresh process (letitloop/integrity/seals.py, sqlite_seals.py,
inspection/verify.py).
"""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest
from seal_programs import SEALED, keyless_env, run_lil, run_program

from letitloop import Journal
from letitloop.errors import SealKeyError

ROOT = Path(__file__).resolve().parent.parent
KEY = "k" * 16 + "-test-seal-key"
OTHER_KEY = "o" * 16 + "-another-key"


def env(key: str | None = KEY) -> dict[str, str]:
    return keyless_env() if key is None else keyless_env(LETITLOOP_SEAL_KEY=key)


def write(db: Path, *args: str, key: str | None = KEY) -> subprocess.CompletedProcess[str]:
    return run_program(SEALED, db, *args, env=env(key))


def lil(db: Path, *args: str, key: str | None = KEY, stdin: str | None = None) -> tuple[int, str]:
    out = run_lil(db, "verify", *args, env=env(key), stdin=stdin)
    return out.returncode, out.stdout + out.stderr


def verdict(db: Path, *args: str, key: str | None = KEY) -> dict[str, object]:
    code, out = lil(db, "r1", "--json", *args, key=key)
    (found,) = json.loads(out)
    assert code == (1 if found["state"] == "broken" else 0), out
    return dict(found)


def sql(db: Path, statement: str, *params: object) -> int:
    conn = sqlite3.connect(db)
    with conn:
        changed = conn.execute(statement, params).rowcount
    conn.close()
    return changed


@pytest.fixture(scope="module")
def sealed_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run r1 written with the key by a child process: once for the module."""
    db = tmp_path_factory.mktemp("sealed") / "journal.db"
    out = write(db)
    assert out.returncode == 0, out.stderr
    return db


@pytest.fixture
def sealed(tmp_path: Path, sealed_once: Path) -> Path:
    """A copy of :func:`sealed_once`'s file (its writer ended) for one test to alter."""
    db = tmp_path / "journal.db"
    for suffix in ("", "-wal"):
        if Path(f"{sealed_once}{suffix}").exists():
            shutil.copyfile(f"{sealed_once}{suffix}", f"{db}{suffix}")
    return db


class TestARunWrittenWithAKey:
    def test_lil_verify_finds_every_link_whole(self, sealed: Path) -> None:
        found = verdict(sealed)
        assert found["state"] == "sealed" and found["broken"] is None
        # a, b, six threads, child, e, the marker, the sleep, f: one entry each.
        assert found["entries"] == 13
        code, out = lil(sealed, "g")
        assert code == 0 and "sealed (13 entries)" in out

    def test_its_entries_are_numbered_without_gaps_whatever_order_threads_finished(
        self, sealed: Path
    ) -> None:
        conn = sqlite3.connect(sealed)
        ns = [n for (n,) in conn.execute("SELECT n FROM seals ORDER BY n")]
        kinds = dict(conn.execute("SELECT key, kind FROM seals"))
        conn.close()
        assert ns == list(range(1, 14))
        assert kinds["notify"] == "marker" and kinds["nap"] == "sleep"
        assert kinds["e/child"] == "step"

    def test_the_key_is_nowhere_in_the_file(self, sealed: Path) -> None:
        for path in sealed.parent.iterdir():
            if path.is_file():
                assert KEY.encode() not in path.read_bytes(), path

    def test_a_process_killed_midway_leaves_a_chain_its_resume_continues(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "journal.db"
        killed = write(db, "kill")
        assert killed.returncode == -signal.SIGKILL
        assert verdict(db)["state"] == "sealed"
        resumed = write(db)
        assert resumed.returncode == 0, resumed.stderr
        found = verdict(db)
        assert found["state"] == "sealed" and found["entries"] == 13

    def test_a_failed_step_run_again_keeps_both_entries_and_the_chain_whole(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "journal.db"
        program = (
            "import sys\nfrom letitloop import Journal\n"
            "def flaky():\n    if sys.argv[2] == 'fail':\n        raise ValueError('no')\n"
            "    return 'ok'\n"
            "try:\n    with Journal('g', path=sys.argv[1], run='r1') as j:\n"
            "        j.step('a', lambda: 1)\n        j.step('flaky', flaky)\n"
            "except ValueError:\n    pass\n"
        )
        for how in ("fail", "pass"):
            assert run_program(program, db, how, env=env()).returncode == 0
        found = verdict(db)
        assert found["state"] == "sealed" and found["entries"] == 3  # a, flaky failed, done


class TestAChainBrokenEachWay:
    def test_an_edited_result_is_reported_at_its_row(self, sealed: Path) -> None:
        assert sql(sealed, "UPDATE _journal_g SET result = '[3, \"two\"]' WHERE key = 'b'")
        found = verdict(sealed)
        assert found["state"] == "broken" and found["key"] == "b"
        assert "edited" in str(found["broken"])

    def test_a_deleted_row_is_reported(self, sealed: Path) -> None:
        assert sql(sealed, "DELETE FROM _journal_g WHERE key = 't:3'")
        found = verdict(sealed)
        assert found["state"] == "broken" and found["key"] == "t:3"
        assert "deleted" in str(found["broken"])

    def test_two_rows_swapped_are_reported(self, sealed: Path) -> None:
        conn = sqlite3.connect(sealed)
        with conn:
            (ra,) = conn.execute("SELECT result FROM _journal_g WHERE key = 'a'").fetchone()
            (rb,) = conn.execute("SELECT result FROM _journal_g WHERE key = 'b'").fetchone()
            conn.execute("UPDATE _journal_g SET result = ? WHERE key = 'a'", (rb,))
            conn.execute("UPDATE _journal_g SET result = ? WHERE key = 'b'", (ra,))
        conn.close()
        found = verdict(sealed)
        assert found["state"] == "broken" and found["key"] == "a"

    def test_two_entries_swapped_are_reported(self, sealed: Path) -> None:
        conn = sqlite3.connect(sealed)
        with conn:
            conn.execute("UPDATE seals SET n = -1 WHERE n = 2")
            conn.execute("UPDATE seals SET n = 2 WHERE n = 3")
            conn.execute("UPDATE seals SET n = 3 WHERE n = -1")
        conn.close()
        found = verdict(sealed)
        assert found["state"] == "broken" and found["at"] == 2

    def test_an_inserted_row_is_reported(self, sealed: Path) -> None:
        assert sql(
            sealed,
            "INSERT INTO _journal_g (run, key, kind, status, result, attempt, args_fp) "
            "SELECT run, 'x', 'step', 'done', '\"forged\"', 1, args_fp FROM _journal_g "
            "WHERE key = 'a'",
        )
        found = verdict(sealed)
        assert found["state"] == "broken" and found["key"] == "x"
        assert "inserted" in str(found["broken"])

    def test_an_inserted_entry_is_reported(self, sealed: Path) -> None:
        sql(sealed, "UPDATE seals SET n = n + 100 WHERE n >= 5")
        sql(sealed, "UPDATE seals SET n = n - 99 WHERE n >= 100")
        assert sql(
            sealed,
            "INSERT INTO seals SELECT run, 5, key, kind, status, digest, seal FROM seals "
            "WHERE n = 4",
        )
        found = verdict(sealed)
        assert found["state"] == "broken" and found["at"] == 5

    def test_a_truncated_tail_is_caught_by_the_head_kept_elsewhere(
        self, sealed: Path, tmp_path: Path
    ) -> None:
        code, heads = lil(sealed, "--all", "--print-head")
        assert code == 0 and heads.split()[1] == "13"
        (tmp_path / "heads.txt").write_text(heads)
        # The last row and its entry removed together: the chain left is whole ...
        assert sql(sealed, "DELETE FROM _journal_g WHERE key = 'f'")
        assert sql(sealed, "DELETE FROM seals WHERE n = 13")
        assert verdict(sealed)["state"] == "sealed"
        # ... but it does not reach the head that was kept.
        code, out = lil(sealed, "--all", "--head", str(tmp_path / "heads.txt"))
        assert code == 1 and "tail was removed" in out
        code, out = lil(sealed, "--all", "--head", "-", stdin=heads)
        assert code == 1 and "tail was removed" in out

    def test_checking_with_another_key_breaks_at_the_first_entry(self, sealed: Path) -> None:
        found = verdict(sealed, key=OTHER_KEY)
        assert found["state"] == "broken" and found["at"] == 1


class TestRowsWrittenWithoutAKey:
    def test_a_run_without_a_key_is_unsealed_not_broken(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        assert write(db, key=None).returncode == 0
        found = verdict(db)
        assert found["state"] == "unsealed" and "a" in found["unsealed"]  # type: ignore[operator]

    def test_rows_written_before_the_key_are_sealed_when_the_run_is_first_opened_with_it(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "journal.db"
        with pytest.raises(ValueError), Journal("g", path=db, run="r1") as j:
            j.step("a", lambda: 1)
            raise ValueError("stop")
        with Journal("g", path=db, run="r1", seal=KEY) as j:
            j.step("a", lambda: 1)
            j.step("b", lambda: 2)
        found = verdict(db)
        assert found["state"] == "sealed" and found["entries"] == 2

    def test_lil_verify_without_the_key_says_it_needs_it(self, sealed: Path) -> None:
        code, out = lil(sealed, "g", key=None)
        assert code != 0 and "LETITLOOP_SEAL_KEY" in out and "Traceback" not in out


class TestTheKey:
    def test_a_run_sealed_with_one_key_is_refused_with_another(self, sealed: Path) -> None:
        with pytest.raises(SealKeyError, match="not sealed with this key"):
            Journal("g", path=sealed, run="r1", seal=OTHER_KEY).open()

    def test_a_short_key_is_refused(self, tmp_path: Path) -> None:
        with pytest.raises(SealKeyError, match="at least 16 bytes"):
            Journal("g", path=tmp_path / "j.db", seal="short")

    def test_the_in_memory_store_keeps_a_chain_too(self) -> None:
        # (It refused a key before it kept one; every store now does: test_contract.py.)
        with Journal("g", path="memory://seal-test", run="r", seal=KEY) as j:
            j.step("a", lambda: 1)
        with pytest.raises(SealKeyError, match="not sealed with this key"):
            Journal("g", path="memory://seal-test", run="r", seal=OTHER_KEY).open()


class TestAForkedRun:
    def test_lil_fork_with_the_key_seals_the_copy(self, sealed: Path) -> None:
        out = run_lil(sealed, "fork", "r1", "--from-step", "f", env=env())
        assert out.returncode == 0, out.stderr
        code, text = lil(sealed, "g", "--all", "--json")
        found = json.loads(text)
        assert code == 0 and [f["state"] for f in found] == ["sealed", "sealed"], text


#: Run "r1": two async steps gathered, then a wait (answered with letitloop.send).
ASYNC = """
import asyncio, sys
from letitloop import Journal
from letitloop.primitives.waits import RunWaiting

async def main():
    async with Journal("g", path=sys.argv[1], run="r1") as j:
        async def f(i):
            return i
        await asyncio.gather(*(j.async_step(f"f:{i}", f, i) for i in range(5)))
        print("got", j.wait_for("answer", stop_after=0))
try:
    asyncio.run(main())
except RunWaiting:
    print("waiting")
"""


class TestAsyncStepsAndWaits:
    def test_gathered_async_steps_and_a_value_sent_without_the_key(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"

        def go() -> str:
            out = run_program(ASYNC, db, env=env())
            return out.stdout.strip()

        assert go() == "waiting"
        found = verdict(db)
        assert found["state"] == "sealed" and found["entries"] == 5
        sent = run_lil(db, "send", "r1", "answer", '"yes"', env=env(None))  # the sender has no key
        assert sent.returncode == 0, sent.stderr
        found = verdict(db)
        assert found["state"] == "sealed" and found["unsealed"] == ["answer"]
        assert go() == "got yes"  # the holder's next attempt seals the value it took
        found = verdict(db)
        assert found["state"] == "sealed" and found["unsealed"] == []
        assert found["entries"] == 6


class TestARunReset:
    def test_its_chain_goes_with_it_and_a_new_run_of_the_name_is_sealed_afresh(
        self, sealed: Path
    ) -> None:
        out = run_lil(sealed, "reset", "r1", "--yes", env=env())
        assert out.returncode == 0, out.stderr
        conn = sqlite3.connect(sealed)
        assert conn.execute("SELECT count(*) FROM seals").fetchone() == (0,)
        conn.close()
        # The new run takes the deleted run's number: no stale entry may be counted as its own.
        assert write(sealed).returncode == 0
        found = verdict(sealed)
        assert found["state"] == "sealed" and found["entries"] == 13
