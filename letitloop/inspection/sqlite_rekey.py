"""The SQL of ``lil rekey``: one goal's encrypted values re-encrypted in one transaction.

``rekey_goal`` rewrites, inside one write transaction, every encrypted value
of a goal that ``convert`` changes: its rows' results, errors and tracebacks
(their checksums made again from the new text, a row whose checksum failed
before refused), its runs' inputs, results and errors, its steps' failed
tries and the global markers its runs hold; records the new key's check value
(``key_checks``); and adds to each sealed run's chain an entry for each row it
rewrote (``sqlite_seals.reseal``), so ``lil verify`` still holds. A SIGKILL
leaves the goal as it was before or as it is after, never half of it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ..errors import DamagedRowError, SealKeyError
from ..integrity.checksums import pause_sum, step_sum
from ..integrity.encryption import PREFIX
from ..primitives.clock import utc_iso
from ..stores.sqlite.goals import rows_table
from ..stores.sqlite.seals import reseal
from ..stores.sqlite.store import Store
from .inspector_changes import Convert, Rekeyed

__all__ = ["rekey_goal"]

_LIKE = PREFIX + "%"


def _has_table(c: sqlite3.Connection, name: str) -> bool:
    sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
    return c.execute(sql, (name,)).fetchone() is not None


def rekey_goal(
    store: Store,
    goal: str,
    view: str,
    convert: Convert,
    check: str,
    now: float,
    seal_secret: bytes | None,
) -> Rekeyed:
    """Re-encrypt goal ``goal``'s values (``view``: its ``goals.journal_table``) with
    ``convert``, record ``check`` for it, reseal the sealed runs it rewrote, in one write
    transaction. DamagedRowError for a row that fails its checksum, SealKeyError for a
    sealed run without ``seal_secret`` (or another key), EncryptionKeyError from
    ``convert``: then nothing of the goal changed."""
    values = seen = 0

    def new(text: str | None, run_id: str, key: str, field: str) -> str | None:
        nonlocal values, seen
        if text is None or not text.startswith(PREFIX):
            return None
        seen += 1
        out = convert(text, run_id, key, field)
        values += out is not None
        return out

    table = rows_table(view)
    with store.write() as c:
        rewritten: set[str] = set()
        rows = c.execute(
            f"SELECT rowid, run, key, kind, status, fn, args_fp, result, error, traceback, "
            f'checksum FROM "{view}" WHERE result LIKE ? OR error LIKE ? OR traceback LIKE ?',
            (_LIKE, _LIKE, _LIKE),
        ).fetchall()
        for rowid, run_id, key, kind, status, fn, fp, result, error, tb, checksum in rows:
            if checksum is not None and checksum != _sum(
                run_id, key, kind, status, fn, fp, result, error
            ):
                raise DamagedRowError(
                    f"lil rekey: row {key!r} (run {run_id} of goal {goal!r}) fails its "
                    f"checksum: the file was damaged or edited outside letitloop, so its value "
                    f"is not re-encrypted; nothing of the goal was changed. Restore the file "
                    f"from a backup, or reset the run (lil reset {run_id}), then rekey again",
                    run_id=run_id,
                    key=key,
                )
            made = [new(result, run_id, key, "result"), new(error, run_id, key, "error")]
            made.append(new(tb, run_id, key, "traceback"))
            if made == [None, None, None]:
                continue
            result, error, tb = _merged(made, (result, error, tb))
            c.execute(
                f'UPDATE "{table}" SET result = ?, error = ?, traceback = ?, checksum = ? '
                f"WHERE rowid = ?",
                (
                    result,
                    error,
                    tb,
                    None
                    if checksum is None
                    else _sum(run_id, key, kind, status, fn, fp, result, error),
                    rowid,
                ),
            )
            rewritten.add(run_id)
        _rekey_runs(c, goal, new)
        _rekey_tries(c, goal, new)
        if _has_table(c, "markers"):
            for key, error, tb in c.execute(
                "SELECT key, error, traceback FROM markers WHERE holder_goal = ? "
                "AND (error LIKE ? OR traceback LIKE ?)",
                (goal, _LIKE, _LIKE),
            ).fetchall():
                e, t = new(error, "", key, "error"), new(tb, "", key, "traceback")
                if e is not None or t is not None:
                    c.execute(
                        "UPDATE markers SET error = ?, traceback = ? WHERE key = ?",
                        (error if e is None else e, tb if t is None else t, key),
                    )
        resealed = _reseal(c, table, rewritten, seal_secret)
        if seen:
            c.execute(
                "INSERT INTO key_checks (goal, key_check, set_at) VALUES (?, ?, ?) "
                "ON CONFLICT (goal) DO UPDATE SET key_check = excluded.key_check, "
                "set_at = excluded.set_at",
                (goal, check, utc_iso(now)),
            )
    return Rekeyed(values, seen, resealed)


def _merged(made: Sequence[str | None], was: Sequence[str | None]) -> list[str | None]:
    """Each value re-encrypted where ``made`` has one, else as it was."""
    return [m if m is not None else o for m, o in zip(made, was, strict=True)]


def _sum(
    run_id: str,
    key: str,
    kind: str,
    status: str,
    fn: str | None,
    fp: str | None,
    result: str | None,
    error: str | None,
) -> int | None:
    """The checksum a row with these values carries (checksums.py); None for a row whose
    checksum covers no value (a marker's) or that carries none."""
    if kind == "step":
        return step_sum(run_id, key, status, fn, fp, result, error)
    if kind in ("sleep", "wait") and status == "done":
        return pause_sum(run_id, key, kind, result, error)
    return None


def _rekey_runs(c: sqlite3.Connection, goal: str, new: Convert) -> None:
    """The goal's runs' inputs (bound to the goal and the input's fingerprint), results
    and errors."""
    for run_id, fp, text, result, error in c.execute(
        "SELECT id, input_fp, input, result, error FROM runs WHERE goal = ? "
        "AND (input LIKE ? OR result LIKE ? OR error LIKE ?)",
        (goal, _LIKE, _LIKE, _LIKE),
    ).fetchall():
        made = (
            new(text, fp or "", goal, "input"),
            new(result, run_id, "", "run result"),
            new(error, run_id, "", "run error"),
        )
        if made != (None, None, None):
            t, r, e = (
                m if m is not None else o for m, o in zip(made, (text, result, error), strict=True)
            )
            c.execute(
                "UPDATE runs SET input = ?, result = ?, error = ? WHERE id = ?",
                (t, r, e, run_id),
            )


def _rekey_tries(c: sqlite3.Connection, goal: str, new: Convert) -> None:
    """The errors and tracebacks of the goal's steps' failed tries, and the errors its runs'
    attempts recorded when they closed them (migration 0019)."""
    for run_id, key, n, error, tb in c.execute(
        "SELECT t.run, t.key, t.try, t.error, t.traceback FROM step_tries AS t JOIN runs AS r "
        "ON r.id = t.run WHERE r.goal = ? AND (t.error LIKE ? OR t.traceback LIKE ?)",
        (goal, _LIKE, _LIKE),
    ).fetchall():
        made = [new(error, run_id, key, "error"), new(tb, run_id, key, "traceback")]
        if made != [None, None]:
            e, t = _merged(made, (error, tb))
            c.execute(
                "UPDATE step_tries SET error = ?, traceback = ? WHERE run = ? AND key = ? "
                "AND try = ?",
                (e, t, run_id, key, n),
            )
    for run_id, attempt, error in c.execute(
        "SELECT a.run, a.attempt, a.error FROM attempts AS a JOIN runs AS r ON r.id = a.run "
        "WHERE r.goal = ? AND a.error LIKE ?",
        (goal, _LIKE),
    ).fetchall():
        made_error = new(error, run_id, "", "run error")
        if made_error is not None:
            c.execute(
                "UPDATE attempts SET error = ? WHERE run = ? AND attempt = ?",
                (made_error, run_id, attempt),
            )


def _reseal(c: sqlite3.Connection, table: str, rewritten: set[str], secret: bytes | None) -> int:
    """Entries for the rows rewritten in each sealed run among ``rewritten``."""
    if not rewritten or not _has_table(c, "seals"):
        return 0
    added = 0
    for run_id in sorted(rewritten):
        found = c.execute(
            "SELECT r.num FROM runs AS r WHERE r.id = ? AND EXISTS "
            "(SELECT 1 FROM seals AS s WHERE s.run = r.num)",
            (run_id,),
        ).fetchone()
        if found is None:
            continue
        if secret is None:
            raise SealKeyError(
                f"lil rekey: run {run_id} is sealed, and its rewritten rows must be sealed "
                f"again or 'lil verify' would report them edited: expected the seal key in "
                f"LETITLOOP_SEAL_KEY; nothing of the goal was changed",
                run_id=run_id,
            )
        added += reseal(c, table, found[0], run_id, secret)
    return added
