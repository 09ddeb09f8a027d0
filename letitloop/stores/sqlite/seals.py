"""The sealed chain on a SQLite journal file: each final row of a sealed run adds its entry.

``start`` makes a connection seal one run: it registers three SQL functions on
the connection (the key stays in this process's memory, never in the file) and
a ``TEMP`` trigger pair on the goal's compact table, which add a ``seals``
entry in the same statement as every row of a sealed run that reaches a final
status. So no write path of the journal changes, and a connection that seals
nothing pays nothing: without a key there is no trigger.

The chain's order is the order of commits: an entry's position is the run's
last one plus one, read in the row's own write transaction, which holds the
file's write lock. Threads and tasks of one journal write through one
connection under its lock, so concurrent steps get distinct, consecutive
positions, and whatever a crash leaves is a whole prefix of the chain.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from ...integrity.chains import resume
from ...integrity.seals import FINAL, GENESIS, link, row_digest
from .store import Store

__all__ = ["adopt", "reseal", "start", "triggers_sql"]

_FINAL_SQL = ", ".join(f"'{s}'" for s in FINAL)

#: The entry a row of a sealed run adds (the body of both triggers).
_ENTRY = (
    "INSERT INTO seals (run, n, key, kind, status, digest, seal) "
    "SELECT NEW.run, s.n, NEW.key, NEW.kind, NEW.status, s.d, "
    "lil_seal_link(NEW.run, s.n, NEW.key, NEW.kind, NEW.status, s.d, s.prev) FROM ("
    "SELECT coalesce((SELECT max(n) FROM seals WHERE run = NEW.run), 0) + 1 AS n, "
    "(SELECT seal FROM seals WHERE run = NEW.run ORDER BY n DESC LIMIT 1) AS prev, "
    "lil_seal_digest(NEW.run, NEW.key, NEW.kind, NEW.status, "
    "coalesce((SELECT name FROM functions WHERE id = NEW.fn), NEW.fn), "
    "NEW.args_fp, NEW.result, NEW.error, NEW.wake_at) AS d) AS s;"
)

#: The columns a seal covers: an update that sets none of them (a row's usage moved to
#: ``step_tries``) adds no entry.
_COVERED = "status, kind, key, fn, args_fp, result, error, wake_at"


def triggers_sql(table: str) -> list[str]:
    """The ``TEMP`` triggers that seal the rows of ``table`` (a goal's compact table)."""
    when = f"WHEN NEW.status IN ({_FINAL_SQL}) AND lil_sealing(NEW.run)"
    return [
        f'CREATE TEMP TRIGGER IF NOT EXISTS "seal:{table}:insert" AFTER INSERT ON '
        f'main."{table}" {when} BEGIN {_ENTRY} END',
        f'CREATE TEMP TRIGGER IF NOT EXISTS "seal:{table}:update" AFTER UPDATE OF {_COVERED} '
        f'ON main."{table}" {when} BEGIN {_ENTRY} END',
    ]


def _functions(store: Store) -> dict[int, tuple[str, bytes]]:
    """The connection's sealed runs, its SQL functions registered the first time."""
    sealing = store.sealing
    if sealing is not None:
        return sealing
    sealing = {}

    def sealed(num: int) -> bool:
        return num in sealing

    def digest(num: int, *fields: Any) -> str:
        return row_digest(sealing[num][0], *fields)

    def chain(num: int, n: int, key: str, kind: str, status: str, d: str, prev: Any) -> str:
        run_id, secret = sealing[num]
        return link(secret, run_id, n, key, kind, status, d, GENESIS if prev is None else prev)

    conn = store.conn
    conn.create_function("lil_sealing", 1, sealed)
    conn.create_function("lil_seal_digest", 9, digest)
    conn.create_function("lil_seal_link", 7, chain)
    store.sealing = sealing
    return sealing


def start(store: Store, table: str, num: int, run_id: str, secret: bytes) -> None:
    """Seal run ``run_id`` (``runs.num`` ``num``, rows in the compact ``table``) with ``secret``
    from now on, on this connection.

    Refuses (SealKeyError) a run whose chain's last entry was not sealed with
    ``secret``. Then, in one write transaction, seals what the run holds that
    its chain does not: every final row of a run that has no chain yet (rows
    written before it was sealed are sealed as found), and a wait's value sent
    from outside since (``lil send`` without the key) into a wait that has no
    entry yet — see :func:`adopt`.
    """
    sealing = _functions(store)
    with store.lock:
        for sql in triggers_sql(table):
            store.conn.execute(sql)
    with store.write() as c:
        chained = _check_head(c, num, run_id, secret)
        adopt(c, table, num, run_id, secret, chained=chained)
        sealing[num] = (run_id, secret)


def _check_head(c: sqlite3.Connection, num: int, run_id: str, secret: bytes) -> bool:
    """Inside a write transaction: whether run ``num`` has a chain; SealKeyError when its
    last entry was not sealed with ``secret``."""
    last = c.execute(
        "SELECT n, key, kind, status, digest, seal FROM seals WHERE run = ? "
        "ORDER BY n DESC LIMIT 2",
        (num,),
    ).fetchall()
    resume(run_id, secret, last)  # SealKeyError: not sealed with this key (chains.py)
    return bool(last)


def reseal(c: sqlite3.Connection, table: str, num: int, run_id: str, secret: bytes) -> int:
    """Inside a write transaction: an entry added to sealed run ``num``'s chain for each of
    its final rows whose content differs from its latest entry (rows rewritten from
    outside: ``lil rekey``); returns how many. SealKeyError for another key."""
    chained = _check_head(c, num, run_id, secret)
    return adopt(c, table, num, run_id, secret, chained=chained, every_kind=True)


def adopt(
    c: sqlite3.Connection,
    table: str,
    num: int,
    run_id: str,
    secret: bytes,
    *,
    chained: bool,
    every_kind: bool = False,
) -> int:
    """Inside a write transaction: add to run ``num``'s chain its final rows the chain lacks;
    returns how many. With no chain yet (``chained`` false), every final row, in the
    order written; else only waits that have no entry (a value sent with ``lil send``,
    which does not seal), or, with ``every_kind``, rows of every kind whose content
    differs from their latest entry's."""
    kinds = "" if not chained or every_kind else "AND t.kind = 'wait' "
    rows: Sequence[Any] = c.execute(
        f"SELECT t.key, t.kind, t.status, coalesce(f.name, t.fn), t.args_fp, t.result, "
        f'''t.error, t.wake_at FROM "{table}" AS t LEFT JOIN functions AS f ON f.id = t.fn '''
        f"WHERE t.run = ? AND t.status IN ({_FINAL_SQL}) {kinds}ORDER BY t.rowid",
        (num,),
    ).fetchall()
    added = 0
    for key, kind, status, fn, fp, result, error, wake_at in rows:
        d = row_digest(run_id, key, kind, status, fn, fp, result, error, wake_at)
        if chained:
            latest = c.execute(
                "SELECT digest FROM seals WHERE run = ? AND key = ? ORDER BY n DESC LIMIT 1",
                (num, key),
            ).fetchone()
            # A wait already sealed is not sealed again: its value was sealed as received,
            # and a value that differs now was edited (the replay refuses it). Only a
            # rewrite from outside by a holder of the key (every_kind: lil rekey) is.
            if latest is not None and (latest[0] == d or not every_kind):
                continue
        head = c.execute(
            "SELECT n, seal FROM seals WHERE run = ? ORDER BY n DESC LIMIT 1", (num,)
        ).fetchone()
        n, prev = (1, GENESIS) if head is None else (head[0] + 1, head[1])
        c.execute(
            "INSERT INTO seals (run, n, key, kind, status, digest, seal) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (num, n, key, kind, status, d, link(secret, run_id, n, key, kind, status, d, prev)),
        )
        added += 1
    return added
