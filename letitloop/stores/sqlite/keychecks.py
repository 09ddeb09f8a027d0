"""Each goal's encryption key check on a SQLite journal file (migration 0017).

The check value (``encryption.Cipher.check``) of the key a goal's values are
encrypted with, recorded by the first journal that opens the goal with a key.
Read when a journal opens the goal (another key, or none, is refused before
anything is written: ``opening.check_key``), by ``lil send`` (which encrypts
the value it sends) and by ``lil rekey`` (which changes it with the values).
"""

from __future__ import annotations

import sqlite3

from ...primitives.clock import utc_iso
from .store import Store

__all__ = ["GOALS_WITH_KEYS", "READ", "record", "stored_check"]

#: The check value recorded for a goal.
READ = "SELECT key_check FROM key_checks WHERE goal = ?"

#: Every goal with a recorded check value.
GOALS_WITH_KEYS = "SELECT goal, key_check FROM key_checks ORDER BY goal"

#: A goal's check value, recorded unless one already is.
_RECORD = "INSERT INTO key_checks (goal, key_check, set_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING"


def stored_check(store: Store, goal: str) -> str | None:
    """The check value recorded for ``goal``; None when none is (a goal never opened with a
    key, or a file from before migration 0017 opened read-only)."""
    with store.lock:
        try:
            row = store.conn.execute(READ, (goal,)).fetchone()
        except sqlite3.OperationalError:  # no such table: a file before 0017, read-only
            return None
    return None if row is None else str(row[0])


def record(store: Store, goal: str, check: str, now: float) -> str:
    """Record ``check`` for ``goal`` unless a value is recorded already; the value recorded
    (read in the same write transaction, so two first openers agree on one)."""
    with store.write() as c:
        c.execute(_RECORD, (goal, check, utc_iso(now)))
        return str(c.execute(READ, (goal,)).fetchone()[0])
