"""The writes a journal file's runs go through from outside them, inside one write
transaction: deleting runs with everything of theirs (:func:`delete_runs`, for ``lil
reset`` and ``lil gc``), the rows a fork copied bound to its new run (:func:`bind_copied_rows`:
re-encrypted, checksummed, sealed), and the goals a gc leaves empty
(:func:`goals_left_empty`)."""

from __future__ import annotations

import sqlite3

from ..integrity.checksums import marker_sum, pause_sum, step_sum
from ..integrity.encryption import PREFIX, encrypted, env_cipher
from ..integrity.seals import env_seal_key
from ..stores.sqlite.goals import delete_run_rows, rows_table
from ..stores.sqlite.seals import adopt
from ..stores.sqlite.store import Store
from .fork_copies import ENCRYPTED_FIELDS, key_needed
from .records import RunInfo

#: Ids bound per statement: SQLite allows at most 999 parameters in old builds.
CHUNK = 500


def delete_runs(c: sqlite3.Connection, table: str, ids: list[str]) -> int:
    """Inside a write transaction: delete the runs ``ids`` of journal table ``table`` with
    their rows, tries, replays, reservations and attempts; the rows deleted."""
    deleted = 0
    for i in range(0, len(ids), CHUNK):
        chunk = ids[i : i + CHUNK]
        marks = ",".join("?" * len(chunk))
        deleted += delete_run_rows(c, table, chunk)
        c.execute(f"DELETE FROM step_tries WHERE run IN ({marks})", chunk)
        c.execute(f"DELETE FROM step_replays WHERE run IN ({marks})", chunk)
        c.execute(f"DELETE FROM attempts WHERE run IN ({marks})", chunk)
        if has_table(c, "reservations"):  # migration 0018
            c.execute(f"DELETE FROM reservations WHERE run IN ({marks})", chunk)
        if has_table(c, "stream_chunks"):  # migration 0022
            c.execute(f"DELETE FROM stream_chunks WHERE run IN ({marks})", chunk)
        if has_table(c, "seals"):
            c.execute(
                f"DELETE FROM seals WHERE run IN (SELECT num FROM runs WHERE id IN ({marks}))",
                chunk,
            )
        c.execute(f"DELETE FROM runs WHERE id IN ({marks})", chunk)
    return deleted


def has_table(db: Store | sqlite3.Connection, name: str) -> bool:
    sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
    if isinstance(db, Store):
        return bool(db.query(sql, (name,)))
    return db.execute(sql, (name,)).fetchone() is not None


def bind_copied_rows(c: sqlite3.Connection, view: str, run_id: str, source: RunInfo) -> None:
    """Inside the fork's write transaction: the rows it copied into run ``run_id`` get their
    encrypted values bound to it (``_rebound``), their checksums (letitloop/integrity/checksums.py)
    and, with ``LETITLOOP_SEAL_KEY`` set, the new run's sealed chain
    (letitloop/stores/sqlite/seals.py)."""
    table = rows_table(view)
    _rebound(c, view, run_id, source)
    sums = []
    for rowid, key, kind, status, fn, fp, result, error in c.execute(
        f'SELECT rowid, key, kind, status, fn, args_fp, result, error FROM "{view}" WHERE run = ?',
        (run_id,),
    ).fetchall():
        if kind == "step":
            sums.append((step_sum(run_id, key, status, fn, fp, result, error), rowid))
        elif kind == "marker":
            sums.append((marker_sum(run_id, key, status), rowid))
        elif kind in ("sleep", "wait"):
            sums.append((pause_sum(run_id, key, kind, result, error), rowid))
    c.executemany(f'UPDATE "{table}" SET checksum = ? WHERE rowid = ?', sums)
    secret = env_seal_key()
    if secret is not None and has_table(c, "seals"):
        (num,) = c.execute("SELECT num FROM runs WHERE id = ?", (run_id,)).fetchone()
        adopt(c, table, num, run_id, secret, chained=False)


def _rebound(c: sqlite3.Connection, view: str, run_id: str, source: RunInfo) -> None:
    """Inside the fork's write transaction: the encrypted values copied from run ``source``
    into run ``run_id`` decrypted and encrypted again for the new run (each is bound to its
    run: letitloop/integrity/encryption.py), with ``LETITLOOP_ENCRYPTION_KEY``. EncryptionKeyError
    without that key (or with another one): the fork is not made."""
    like = PREFIX + "%"
    rows = c.execute(
        f'SELECT rowid, key, result, error, traceback FROM "{view}" WHERE run = ? '
        f"AND (result LIKE ? OR error LIKE ? OR traceback LIKE ?)",
        (run_id, like, like, like),
    ).fetchall()
    if not rows:
        return
    cipher = env_cipher()
    if cipher is None:
        raise key_needed(source)
    for rowid, key, *values in rows:
        again = [
            cipher.seal(cipher.open(v, source.id, key, f), run_id, key, f) if encrypted(v) else v
            for v, f in zip(values, ENCRYPTED_FIELDS, strict=True)
        ]
        c.execute(
            f'UPDATE "{rows_table(view)}" SET result = ?, error = ?, traceback = ? WHERE rowid = ?',
            (*again, rowid),
        )


def goals_left_empty(conn: sqlite3.Connection, store: Store, going: set[str]) -> list[str]:
    """Goals that have no run but those in ``going`` and no row of another run (in order).

    A goal's table may hold rows of no run: goal-scoped markers (run ``*``),
    which guard side effects across runs; such a goal is never empty.
    """
    with store.lock:
        try:
            goals = conn.execute("SELECT goal, journal_table FROM goals ORDER BY goal").fetchall()
            empty = []
            for goal, table in goals:
                runs = {r for (r,) in conn.execute("SELECT id FROM runs WHERE goal = ?", (goal,))}
                if runs - going:
                    continue
                marks = ",".join("?" * len(runs))
                other = conn.execute(
                    f'SELECT 1 FROM "{table}" WHERE run NOT IN ({marks}) LIMIT 1', sorted(runs)
                ).fetchone()
                if other is None:
                    empty.append(str(goal))
            return empty
        except sqlite3.Error as exc:
            raise store.explain(exc) from None
