"""The sealed chain in the in-memory store: each final row of a sealed run adds its entry.

The same chain as a SQLite file's and a PostgreSQL database's (``chains.py``,
``seals.py``'s arithmetic), kept in the ``MemoryDatabase`` beside the rows
(``seals``: run id -> its entries in order) and checked by the same ``lil
verify`` code through ``MemoryInspector.seal_chain``. It lives as long as
the process, as the rows do: what it proves is what a seal proves anywhere
(rows written by a holder of the key, in this order, unaltered), within the
process — useful to test a program that seals its runs without a file or a
server (docs/audit.md).

Every write of the store runs under the database's lock, as one transaction,
so an entry's position is the chain's length when its row is written: the
order of commits.
"""

from __future__ import annotations

from typing import Any

from ...integrity.chains import Chain, Entry, Row, adopted, resume
from ...integrity.seals import FINAL, GENESIS

__all__ = ["chain_row", "seal_row", "start"]


def chain_row(row: Any) -> Row:
    """A row of the store (memory's, or a PostgreSQL snapshot's) as its entry's digest covers it."""
    return (
        row["key"],
        row["kind"],
        row["status"],
        row["fn"],
        row["args_fp"],
        row["result"],
        row["error"],
        row["wake_at"],
    )


def start(seals: dict[str, list[Entry]], rows: list[Any], run_id: str, secret: bytes) -> Chain:
    """Under the database's lock: run ``run_id``'s chain (``seals[run_id]``) continued with
    ``secret``, its final ``rows`` (the run's, in the order written) the chain lacks
    sealed as found (``chains.adopted``). Raises SealKeyError when the chain's last entry
    was not sealed with ``secret``."""
    entries = seals.setdefault(run_id, [])
    chain = resume(run_id, secret, entries[::-1][:2])
    latest = {e[1]: e[4] for e in entries}
    entries.extend(adopted(chain, [chain_row(r) for r in rows], latest))
    return chain


def seal_row(seals: dict[str, list[Entry]], sealing: dict[str, Chain], row: Any) -> None:
    """Under the database's lock, after ``row`` was written: its entry, when its run is
    sealed and its status final."""
    chain = sealing.get(row["run"])
    if chain is None or row["status"] not in FINAL:
        return
    entries = seals.setdefault(chain.run_id, [])
    # The chain as stored (a journal of the run before this one may have continued it).
    chain.n, chain.seal = (entries[-1][0], entries[-1][5]) if entries else (0, GENESIS)
    entry = chain.next(chain_row(row))
    chain.moved_to(entry)
    entries.append(entry)
