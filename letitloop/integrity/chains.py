"""A sealed run's chain as a store that writes its rows from Python continues it (PostgreSQL,
memory): the next entry, the check of the key on the chain's last entry, the rows to adopt.

SQLite computes its entries in triggers (``sqlite_seals.py``); the PostgreSQL
store (``postgres_seals.py``) and the in-memory one (``memory_seals.py``)
compute them here, in the writing process, and write each in the same
transaction as its row. The key never leaves the process. Pure: it reads and
writes nothing; the arithmetic is ``seals.py``'s, so every store's chain is
checked by the same ``lil verify`` (``inspection/verify.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import SealKeyError
from .seals import FINAL, GENESIS, link, row_digest

__all__ = ["Chain", "Entry", "Row", "SealedRows", "adopted", "resume"]

#: An entry of a chain: n, key, kind, status, digest, seal.
Entry = tuple[int, str, str, str, str, str]
#: A row as every reader sees it: key, kind, status, fn (the name), args_fp, result, error,
#: wake_at.
Row = tuple[str, str, str, Any, Any, Any, Any, Any]


class Chain:
    """One sealed run's chain as its holder continues it: the run, the key, the last entry's
    position ``n`` and ``seal`` (0 and :data:`~letitloop.integrity.seals.GENESIS` before the first).

    Kept by the holder between writes, so a step pays no read of the chain's
    head; a store checks the head it was computed from when it writes the
    entry (``postgres_seals.py``) and starts again from the stored one when
    they differ.
    """

    __slots__ = ("n", "run_id", "seal", "secret")

    def __init__(self, run_id: str, secret: bytes, n: int = 0, seal: str = GENESIS) -> None:
        self.run_id = run_id
        self.secret = secret
        self.n = n
        self.seal = seal

    def next(self, row: Row) -> Entry:
        """The entry that seals ``row`` after the chain's last one (the chain is not moved:
        :meth:`moved_to` does, once the entry is written)."""
        key, kind, status, fn, fp, result, error, wake_at = row
        d = row_digest(self.run_id, key, kind, status, fn, fp, result, error, wake_at)
        n = self.n + 1
        seal = link(self.secret, self.run_id, n, key, kind, status, d, self.seal)
        return (n, key, kind, status, d, seal)

    def moved_to(self, entry: Entry) -> None:
        """The chain's last entry is now ``entry``."""
        self.n, self.seal = entry[0], entry[5]


class SealedRows:
    """A sealed run's chain as its replays check it: each row's latest entry, every link
    verified with the key (docs/audit.md, "A sealed run replays only what its seal covers").

    Filled with the chain's entries in order (:meth:`extend`: all of them when the
    journal starts sealing the run, then those written since, when a row replays
    that they may cover). A row replays only when its digest is its key's latest
    entry's and every entry up to the last one read holds its link: an entry
    edited, deleted, inserted or moved breaks the chain there, and nothing of the
    run replays after that. One SHA-256 per replayed row, one HMAC per entry read.
    Thread rules: read and extended by any replaying thread without a lock; a race
    verifies an entry twice, never an entry that was not verified.
    """

    __slots__ = ("broken", "latest", "n", "run_id", "seal", "secret")

    def __init__(self, run_id: str, secret: bytes) -> None:
        self.run_id = run_id
        self.secret = secret
        self.n = 0
        self.seal = GENESIS
        #: Key -> the digest of its latest entry.
        self.latest: dict[str, str] = {}
        #: The first entry whose link does not hold: (n, key); None while the chain holds.
        self.broken: tuple[int, str] | None = None

    def extend(self, entries: Iterable[Entry]) -> None:
        """The entries after the last one read, in order."""
        for n, key, kind, status, d, seal in entries:
            if n <= self.n:
                continue  # read already (two threads refreshed at once)
            if self.broken is None and (
                n != self.n + 1
                or link(self.secret, self.run_id, n, key, kind, status, d, self.seal) != seal
            ):
                self.broken = (n, key)
            self.n, self.seal = n, seal
            self.latest[key] = d

    def refusal(self, row: Row) -> str | None:
        """Why ``row`` (as every reader sees it) may not replay; None when its seal covers it."""
        if self.broken is not None:
            n, key = self.broken
            return (
                f"the run's sealed chain is broken at entry {n} (row {key!r}): an entry was "
                f"edited, deleted, inserted or moved, so no row of the run is trusted"
            )
        key, kind, status, fn, fp, result, error, wake_at = row
        latest = self.latest.get(key)
        if latest is None:
            if kind == "wait":  # a value lil send wrote is sealed by the next keyed attempt
                return (
                    "it is in no entry of the run's sealed chain: it was inserted, or its "
                    "value was sent and no attempt with the key has sealed it yet (a "
                    "replay-only journal seals nothing)"
                )
            return (
                "it is in no entry of the run's sealed chain: it was inserted, or written "
                "by an attempt without the key"
            )
        if latest != row_digest(self.run_id, key, kind, status, fn, fp, result, error, wake_at):
            return "it differs from what its seal covers: it was edited after it was sealed"
        return None


def resume(run_id: str, secret: bytes, last: Sequence[Entry]) -> Chain:
    """The chain of a run whose last entries are ``last`` (newest first, up to two; none for a
    run without a chain), to be continued with ``secret``.

    Raises SealKeyError when the last entry was not sealed with ``secret``.
    """
    if not last:
        return Chain(run_id, secret)
    n, key, kind, status, d, seal = last[0]
    prev = last[1][5] if len(last) > 1 else GENESIS
    if link(secret, run_id, n, key, kind, status, d, prev) != seal:
        raise SealKeyError(
            f"run {run_id}: its chain's last entry ({n}, row {key!r}) was not sealed "
            f"with this key, so its rows cannot be sealed with it: expected the key the "
            f"run was sealed with (LETITLOOP_SEAL_KEY or seal=); if it is that key, the "
            f"chain was altered: 'lil verify {run_id}' says where",
            run_id=run_id,
        )
    return Chain(run_id, secret, n, seal)


def adopted(chain: Chain, rows: Iterable[Row], latest: dict[str, str]) -> list[Entry]:
    """The entries that seal what a run holds and its chain does not, as ``sqlite_seals.adopt``:
    with no chain yet (``latest`` empty: key -> digest of its latest entry), every final
    row, in ``rows``' order (the order written); else only waits that have no entry (a
    value sent without the key: a wait with an entry whose value differs now was edited,
    and is left for the replay to refuse). The chain is moved past them."""
    entries = []
    for row in rows:
        key, kind, status = row[0], row[1], row[2]
        if status not in FINAL or (latest and kind != "wait"):
            continue
        if key in latest:
            continue
        entry = chain.next(row)
        chain.moved_to(entry)
        entries.append(entry)
    return entries
