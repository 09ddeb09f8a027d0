"""``lil rekey``: a journal's encrypted values re-encrypted with a new key, in place.

Real journal files written by child processes, the real ``lil`` run as a
subprocess, a rekey SIGKILLed in the middle of a goal's transaction, and the
file's bytes searched (letitloop/maintenance/rekey.py).
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest
from helpers import lil_forked, program_file, run_forked, start_forked, wait_until

pytest.importorskip("cryptography")

ROOT = Path(__file__).resolve().parent.parent
OLD = "old-key-0123456789abcdef"
NEW = "new-key-0123456789abcdef"
SEAL = "seal-key-0123456789abcdef"
SECRET = "PLAINTEXT-SECRET-9913"

#: Goal argv[2], run "r1" (a secret input): step a (a secret result, printed), step t
#: (a failed try with a secret error, then a result)
#: and marker m: 4 encrypted values; then SIGKILL when argv[3] == "kill", else
#: step c and the run's result.
PROGRAM = f"""
import os, signal, sys
from letitloop import Journal, RetryPolicy
from letitloop.errors import LetItLoopError

tries = []
def t():
    tries.append(1)
    if len(tries) == 1:
        raise ValueError("{SECRET}-try")
    return "ok"

try:
    with Journal(sys.argv[2], path=sys.argv[1], run="r1", input={{"in": "{SECRET}-in"}}) as j:
        print("a", j.step("a", lambda: "{SECRET}-a"), flush=True)
        j.step("t", t, retry=RetryPolicy(max_attempts=2, initial_backoff=0, jitter=0))
        with j.atomic_marker("m") as go:
            pass
        if sys.argv[3] == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        print("c", j.step("c", lambda: "{SECRET}-c"), flush=True)
        j.set_result("{SECRET}-run")
except LetItLoopError as exc:
    print(type(exc).__name__, exc, flush=True)
"""


def env(key: str | None, new: str | None = None, seal: str | None = None) -> dict[str, str]:
    names = ("LETITLOOP_ENCRYPTION_KEY", "LETITLOOP_NEW_ENCRYPTION_KEY", "LETITLOOP_SEAL_KEY")
    e = {k: v for k, v in os.environ.items() if k not in names}
    for name, value in zip(names, (key, new, seal), strict=True):
        if value is not None:
            e[name] = value
    return e


def run(
    db: Path, goal: str = "g", how: str = "", key: str = OLD, seal: str | None = None
) -> subprocess.CompletedProcess[str]:
    return run_forked(program_file(PROGRAM), str(db), goal, how, cwd=ROOT, env=env(key, seal=seal))


def lil(db: Path, *args: str, **keys: str | None) -> subprocess.CompletedProcess[str]:
    keyed = env(keys.get("key", OLD), keys.get("new", NEW), keys.get("seal"))
    return lil_forked("--db", str(db), *args, cwd=ROOT, env=keyed)


def checks(db: Path) -> dict[str, str]:
    conn = sqlite3.connect(db)
    try:
        return dict(conn.execute("SELECT goal, key_check FROM key_checks"))
    finally:
        conn.close()


def check_of(key: str) -> str:
    from letitloop.integrity.encryption import make_cipher

    cipher = make_cipher(key)
    assert cipher is not None
    return cipher.check


def plaintext_in(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.is_file() and SECRET.encode() in p.read_bytes()]


@pytest.fixture(scope="module")
def killed_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Goals g and h, each with run r1 SIGKILLed after steps a and t and marker m: written
    once for the module (:func:`killed` copies it)."""
    db = tmp_path_factory.mktemp("killed") / "journal.db"
    for goal in ("g", "h"):
        out = run(db, goal, "kill")
        assert out.returncode == -signal.SIGKILL, out.stderr
    return db


@pytest.fixture
def killed(tmp_path: Path, killed_once: Path) -> Path:
    """A copy of :func:`killed_once`'s file and its -wal, as the killed writers left them
    (SQLite rebuilds the -wal's index at the first open)."""
    db = tmp_path / "journal.db"
    for suffix in ("", "-wal"):
        if Path(f"{killed_once}{suffix}").exists():
            shutil.copyfile(f"{killed_once}{suffix}", f"{db}{suffix}")
    return db


class TestARekeyedJournal:
    def test_it_resumes_with_the_new_key_and_replays_what_was_recorded(self, killed: Path) -> None:
        out = lil(killed, "rekey")
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines()[:2] == [
            # the input, two results, the failed try's error and its traceback
            "g  5 values re-encrypted",
            "h  5 values re-encrypted",
        ]
        resumed = run(killed, key=NEW)
        assert resumed.stdout == f"a {SECRET}-a\nc {SECRET}-c\n", resumed.stderr
        again = run(killed, "h", key=NEW)
        assert again.stdout == f"a {SECRET}-a\nc {SECRET}-c\n", again.stderr
        assert checks(killed) == {"g": check_of(NEW), "h": check_of(NEW)}
        assert plaintext_in(killed.parent) == []
        shown = lil(killed, "show", "g", "--full", key=NEW)
        assert f"{SECRET}-in" in shown.stdout and f"{SECRET}-c" in shown.stdout
        from letitloop.integrity.encryption import make_cipher

        conn = sqlite3.connect(killed)
        (run_id, error, tb), *_ = conn.execute(
            "SELECT run, error, traceback FROM step_tries WHERE key = 't'"
        )
        conn.close()
        new = make_cipher(NEW)
        assert new is not None and f"{SECRET}-try" in new.open(error, run_id, "t", "error")
        assert f"{SECRET}-try" in new.open(tb, run_id, "t", "traceback")

    def test_the_old_key_is_refused_when_a_journal_opens(self, killed: Path) -> None:
        assert lil(killed, "rekey").returncode == 0
        out = run(killed)
        assert out.stdout.startswith("EncryptionKeyError"), out.stdout
        assert "encrypted with another key" in out.stdout and f"{SECRET}" not in out.stdout

    def test_a_second_rekey_changes_nothing_and_says_so(self, killed: Path) -> None:
        assert lil(killed, "rekey").returncode == 0
        out = lil(killed, "rekey", "--json")
        assert out.returncode == 0, out.stderr
        assert '"state": "already"' in out.stdout and '"values": 4' not in out.stdout

    def test_the_new_key_can_come_from_a_file(self, killed: Path, tmp_path: Path) -> None:
        (tmp_path / "new.key").write_text(NEW + "\n")
        out = lil(killed, "rekey", "g", "--new-key-file", str(tmp_path / "new.key"), new=None)
        assert out.returncode == 0, out.stderr
        assert checks(killed) == {"g": check_of(NEW), "h": check_of(OLD)}


class TestARekeyKilledHalfway:
    """SIGKILL inside the second goal's transaction, after some of its values were
    re-encrypted: the first goal is done, the second untouched; a rerun finishes."""

    KILLER = f"""
import os, signal, sys
from letitloop.integrity.encryption import Cipher, make_cipher
from letitloop.inspection import open_inspector
from letitloop.maintenance import rekey

seal = Cipher.seal
done = []
def killing_seal(self, text, run_id, key, field):
    done.append(run_id)
    if len(done) == 7:  # 4 values of goal g, then 3 of goal h
        os.kill(os.getpid(), signal.SIGKILL)
    return seal(self, text, run_id, key, field)
Cipher.seal = killing_seal
journal = open_inspector(sys.argv[1], write=True)
rekey(journal, make_cipher("{OLD}"), make_cipher("{NEW}"))
"""

    def test_the_rerun_finishes_it_and_every_value_reads_with_the_new_key(
        self, killed: Path
    ) -> None:
        child = run_forked(program_file(self.KILLER), str(killed), cwd=ROOT, env=env(None))
        assert child.returncode == -signal.SIGKILL, child.stderr
        assert checks(killed) == {"g": check_of(NEW), "h": check_of(OLD)}
        half = run(killed, "h")  # goal h is wholly under the old key still
        assert half.stdout == f"a {SECRET}-a\nc {SECRET}-c\n", half.stderr
        out = lil(killed, "rekey")
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines()[:2] == [
            "g  already under the new key",
            "h  7 values re-encrypted",  # its run finished: 5, a result and the run's
        ]
        for goal in ("g", "h"):
            again = run(killed, goal, key=NEW)
            assert again.stdout.startswith(f"a {SECRET}-a\nc {SECRET}-c"), again.stderr


class TestARekeyThatCannotProceed:
    def test_a_run_held_by_a_live_process_is_refused_and_nothing_changes(
        self, killed: Path
    ) -> None:
        holding = program_file(
            "import sys, time\nfrom letitloop import Journal\n"
            "with Journal('h', path=sys.argv[1], run='r1'):\n"
            "    print('held', flush=True)\n    time.sleep(60)\n"
        )
        holder = start_forked(holding, str(killed), cwd=ROOT, env=env(OLD))
        try:
            wait_until(lambda: holder.printed() == "held\n", "the run is held")
            out = lil(killed, "rekey", "h")
        finally:
            os.kill(holder.pid, signal.SIGKILL)
            holder.wait()
        assert out.returncode == 1
        assert "held by a live process" in out.stderr and out.stderr.count("\n") == 1
        assert checks(killed)["h"] == check_of(OLD)

    def test_without_the_new_key_it_says_where_to_put_it(self, killed: Path) -> None:
        out = lil(killed, "rekey", new=None)
        assert out.returncode == 2
        assert "LETITLOOP_NEW_ENCRYPTION_KEY or --new-key-file" in out.stderr

    def test_a_wrong_old_key_changes_nothing(self, killed: Path) -> None:
        out = lil(killed, "rekey", key="wrong-key-0123456789abcdef")
        assert out.returncode == 1
        assert "encrypted with neither key" in out.stderr
        assert checks(killed) == {"g": check_of(OLD), "h": check_of(OLD)}


class TestASealedRun:
    def test_its_rewritten_rows_are_sealed_again_and_lil_verify_holds(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        assert run(db, seal=SEAL).returncode == 0
        refused = lil(db, "rekey")  # no seal key: the chain would break
        assert refused.returncode == 1 and "is sealed" in refused.stderr, refused.stderr
        assert checks(db) == {"g": check_of(OLD)}
        out = lil(db, "rekey", seal=SEAL)
        assert out.returncode == 0, out.stderr
        assert "seal entries added" in out.stdout
        verified = lil(db, "verify", "--all", seal=SEAL)
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert " sealed (" in verified.stdout and "unsealed rows" not in verified.stdout
        again = run(db, key=NEW, seal=SEAL)
        assert again.stdout == f"a {SECRET}-a\nc {SECRET}-c\n", again.stderr


class TestAGoalDroppedByGc:
    def test_its_key_check_goes_with_it_so_a_new_goal_of_that_name_takes_any_key(
        self, tmp_path: Path
    ) -> None:
        from datetime import timedelta

        from letitloop import Journal
        from letitloop.inspection import open_inspector
        from letitloop.maintenance import gc_runs

        db = tmp_path / "journal.db"
        with Journal("g", path=db, encryption_key=OLD) as j:
            j.step("a", lambda: SECRET)
        journal = open_inspector(db, write=True)
        try:
            assert gc_runs(journal, timedelta(0), now=4e9).goals_removed == ["g"]
        finally:
            journal.close()
        assert checks(db) == {}
        with Journal("g", path=db, encryption_key=NEW) as j:
            assert j.step("a", lambda: 1) == 1
        assert checks(db) == {"g": check_of(NEW)}
