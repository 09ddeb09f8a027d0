"""The sealed chain on PostgreSQL: each final row of a sealed run adds its entry to ``ll_seals``.

The key never reaches the server: no ``SET`` of it, no pgcrypto. The writing
process computes each entry (``chains.py``, with ``seals.py``'s arithmetic)
and inserts it in the same transaction as its row (migration 0007), so a
committed row has its entry and a rolled-back one has none. A step's row and
its entry are one statement (:func:`write_step`), so a sealed step is still
one round trip.

**Where the chain's head comes from.** An entry's position and its previous
seal are read once, when the journal starts sealing the run (:func:`start`,
inside a transaction fenced on the run's attempt), and then kept by the
journal (``PostgresStorage.sealing``), not read again for every step. That is
right because one writer continues a run's chain at a time: the run is held
by one journal (its advisory lock), every write of its rows is fenced on its
attempt (a new holder's claim waits for the write's commit and makes every
later write of the old holder fail), and a journal's threads write through
its one connection one transaction at a time. Readers (``lil send``, ``lil
fork``) write no entries. And it is checked, not trusted: each entry is
inserted only if the chain's stored last entry is still the one it was
computed from (:data:`_ENTRY`'s ``WHERE``; ``(run, n)`` is also the primary
key). If it is not — a transaction rolled back after the kept head moved, a
second writer — the head is read again and the entry computed afresh, so a
stale head never forks or breaks the chain.
"""

from __future__ import annotations

from typing import Any

from ...errors import JournalFileError
from ...integrity.chains import Chain, Entry, Row, adopted, resume
from ...integrity.seals import FINAL, GENESIS
from ..storage_steps import StepRow

__all__ = ["chain_of", "seal_row", "seal_step", "start", "write_step"]

#: An entry of run %(run)s, written only while the chain's stored last entry is %(head)s
#: (``n:seal``; ``0:`` for a run without a chain yet), the one it was computed from.
_ENTRY = (
    "INSERT INTO ll_seals (run, n, key, kind, status, digest, seal, prev) "
    "SELECT %(run)s, %(n)s, %(key)s, %(kind)s, %(status)s, %(digest)s, %(seal)s, %(prev)s "
    "WHERE coalesce((SELECT n || ':' || seal FROM ll_seals WHERE run = %(run)s "
    "ORDER BY n DESC LIMIT 1), '0:') = %(head)s"
)

#: A step's row (``postgres_steps``' statement, its parameters first) and its entry, in
#: one statement, so one round trip: the entry is added only when the row was written (not
#: fenced off), and an entry that does not follow the stored head (``ll_seals``' key and its
#: reference to the entry it follows, migration 0007) fails the whole statement.
_STEP_AND_ENTRY = (
    "WITH step AS ({step} RETURNING 1) "
    "INSERT INTO ll_seals (run, n, key, kind, status, digest, seal, prev) "
    "SELECT %s, %s, %s, %s, %s, %s, %s, %s FROM step"
)

_LAST = (
    "SELECT n, key, kind, status, digest, seal FROM ll_seals WHERE run = %s ORDER BY n DESC LIMIT 2"
)

#: A row of a run as a reader sees it (``chains.Row``): what its entry's digest covers.
_ROW = (
    "SELECT key, kind, status, fn, args_fp, result, error, wake_at FROM ll_journal "
    "WHERE goal = %s AND run = %s"
)


def _insert(c: Any, chain: Chain, entry: Entry) -> bool:
    """Insert ``entry`` if the chain's stored last entry is ``chain``'s kept one."""
    n, key, kind, status, digest, seal = entry
    params = dict(run=chain.run_id, n=n, key=key, kind=kind, status=status, digest=digest)
    head = f"{chain.n}:{chain.seal}"
    prev = chain.seal if chain.n else None
    if c.execute(_ENTRY, params | {"seal": seal, "prev": prev, "head": head}).rowcount != 1:
        return False
    chain.moved_to(entry)
    return True


def _write(c: Any, chain: Chain, row: Row) -> None:
    """Inside the row's transaction: add the entry that seals ``row`` to ``chain``."""
    for _ in range(2):
        if _insert(c, chain, chain.next(row)):
            return
        _reread(c, chain)
    raise _contended(chain)


def _reread(c: Any, chain: Chain) -> None:
    """The kept head is not the stored one (a rolled-back transaction moved it): read it."""
    stored = c.execute(_LAST, (chain.run_id,)).fetchone()
    chain.n, chain.seal = (0, GENESIS) if stored is None else (stored[0], stored[5])


def _contended(chain: Chain) -> JournalFileError:
    return JournalFileError(
        f"run {chain.run_id}: expected to add entry {chain.n + 1} to its sealed chain; found "
        f"another writer adding entries at the same time. Nothing was written; the run's "
        f"rows are written by one holder at a time: is a second process writing them "
        f"outside letitloop?"
    )


def start(c: Any, goal: str, run_id: str, secret: bytes) -> Chain:
    """Inside a write transaction fenced on the run's attempt: the chain of run ``run_id``
    continued with ``secret``, its rows the chain lacks sealed as found
    (``chains.adopted``).

    Raises SealKeyError when the chain's last entry was not sealed with ``secret``.
    """
    chain = resume(run_id, secret, c.execute(_LAST, (run_id,)).fetchall())
    latest: dict[str, str] = {}
    if chain.n:
        rows = c.execute(
            "SELECT DISTINCT ON (key) key, digest FROM ll_seals WHERE run = %s "
            "ORDER BY key, n DESC",
            (run_id,),
        ).fetchall()
        latest = {key: digest for key, digest in rows}
    found = c.execute(f"{_ROW} ORDER BY rowid", (goal, run_id)).fetchall()
    for entry in adopted(Chain(run_id, secret, chain.n, chain.seal), found, latest):
        if not _insert(c, chain, entry):  # pragma: no cover - read in this transaction
            raise AssertionError(entry)
    return chain


def write_step(
    conn: Any,
    sealing: dict[str, Chain],
    run_id: str,
    row: StepRow,
    sql: str,
    params: tuple[Any, ...],
) -> int:
    """Write a step's row with ``sql`` and ``params`` (autocommit, one statement) and, when
    its run is sealed and it is final, its entry in the same statement; how many rows
    were written (0: fenced off, nothing written)."""
    chain = sealing.get(run_id)
    if chain is None or row.status not in FINAL:
        return int(conn.execute(sql, params).rowcount)
    import psycopg

    fn = str(row.fn)  # this store's function keys are the names themselves
    values = (row.key, "step", row.status, fn, row.args_fp, row.result, row.error, None)
    for _ in range(2):
        entry = chain.next(values)
        prev = chain.seal if chain.n else None
        try:
            cur = conn.execute(
                _STEP_AND_ENTRY.format(step=sql), (*params, run_id, *entry[:6], prev)
            )
        except (psycopg.errors.UniqueViolation, psycopg.errors.ForeignKeyViolation):
            _reread(conn, chain)  # a stale kept head: nothing was written
            continue
        if cur.rowcount == 1:
            chain.moved_to(entry)
        return int(cur.rowcount)
    raise _contended(chain)


def seal_step(c: Any, sealing: dict[str, Chain], run_id: str, row: StepRow) -> None:
    """Inside the step row's transaction: its entry, when its run is sealed and it is final."""
    chain = sealing.get(run_id)
    if chain is not None and row.status in FINAL:
        fn = str(row.fn)  # this store's function keys are the names themselves
        status, fp = row.status, row.args_fp
        _write(c, chain, (row.key, "step", status, fn, fp, row.result, row.error, None))


def seal_row(
    c: Any, sealing: dict[str, Chain], goal: str, run_id: str, key: str, status: Any
) -> None:
    """Inside the transaction that wrote row (``goal``, ``run_id``, ``key``): its entry, when
    its run is sealed and its new ``status`` is final (None: read it), read back as every
    reader reads it (a marker's, a sleep's or a wait's row)."""
    chain = sealing.get(run_id)
    if chain is None or (status is not None and status not in FINAL):
        return
    row = c.execute(f"{_ROW} AND key = %s", (goal, run_id, key)).fetchone()
    if row is not None and row[2] in FINAL:
        _write(c, chain, tuple(row))


def chain_of(conn: Any, goal: str, run_id: str) -> tuple[list[Entry], list[Row]]:
    """Run ``run_id``'s chain in order and its rows in the order written, as
    ``inspection/verify.py`` checks them, read in one snapshot: a row and its entry are
    committed together, so they are read together. ``conn`` is in autocommit."""
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        entries = conn.execute(
            "SELECT n, key, kind, status, digest, seal FROM ll_seals WHERE run = %s ORDER BY n",
            (run_id,),
        ).fetchall()
        rows = conn.execute(f"{_ROW} ORDER BY rowid", (goal, run_id)).fetchall()
    return [tuple(e) for e in entries], [tuple(r) for r in rows]
