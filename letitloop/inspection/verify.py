"""Checking runs' sealed chains (``lil verify``): the first broken link of each run.

A run's chain (letitloop/integrity/seals.py) is checked in two passes, and the first
thing wrong is reported:

1. the entries, in order: positions 1, 2, 3, … with no gap, each entry's seal
   the HMAC of its own fields and the previous entry's seal under the key (an
   entry edited, deleted, reordered or inserted breaks the link there; a key
   other than the run's breaks the first);
2. the rows: each final row (done or failed) matches the digest of its key's
   latest entry (an edited or swapped row does not), every key the chain holds
   still has its row (a deleted row does not), and no final row is missing
   from a chain that exists (an inserted row is). A wait whose value was sent
   from outside without the key is *unsealed*, not broken: its holder seals
   it at its next attempt.

A run with no chain at all (written without a key) is *unsealed*. A kept head
(``--print-head``, then ``--head``) also catches a chain whose tail was
removed with its rows, which the two passes cannot see.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import LetItLoopError, SealKeyError
from ..integrity.seals import FINAL, GENESIS, SEAL_KEY_ENV, env_seal_key, link, row_digest
from .inspector_detail import SealReads
from .records import RunInfo

__all__ = ["Head", "RunSeal", "chain_of", "check_chain", "parse_heads"]

#: An entry of a chain as the file holds it: n, key, kind, status, digest, seal.
Entry = tuple[int, str, str, str, str, str]
#: A row of a run as every reader sees it: key, kind, status, fn, args_fp, result,
#: error, wake_at.
Row = tuple[str, str, str, Any, Any, Any, Any, Any]


@dataclass(frozen=True)
class Head:
    """A chain's last entry, kept outside the file: the run, the entry's position and seal."""

    run_id: str
    n: int
    seal: str

    def line(self) -> str:
        return f"{self.run_id} {self.n} {self.seal}"


@dataclass
class RunSeal:
    """What checking one run's chain found."""

    run_id: str
    goal: str
    state: str
    """``sealed`` (every link holds), ``broken`` or ``unsealed`` (the run has no chain)."""
    entries: int = 0
    head: Head | None = None
    broken: str | None = None
    """The first broken link, in words."""
    at: int | None = None
    """The chain position where it broke, when it is one."""
    key: str | None = None
    """The row's key where it broke, when it is one."""
    unsealed: list[str] = field(default_factory=list)
    """Keys of final rows outside the chain that are not a break (a wait's sent value; every
    row of a run without a chain)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "run": self.run_id,
            "goal": self.goal,
            "state": self.state,
            "entries": self.entries,
            "head": None if self.head is None else {"n": self.head.n, "seal": self.head.seal},
            "broken": self.broken,
            "at": self.at,
            "key": self.key,
            "unsealed": self.unsealed,
        }


def chain_of(inspector: SealReads, run: RunInfo) -> tuple[list[Entry], list[Row]]:
    """The run's chain entries in order and its rows; no entries from a store that keeps no
    seals (its runs are unsealed)."""
    entries, rows = inspector.seal_chain(run)
    return list(entries), list(rows)


def verify_key() -> bytes:
    """The key ``lil verify`` checks with: ``LETITLOOP_SEAL_KEY``; LetItLoopError without it."""
    secret = env_seal_key()
    if secret is None:
        raise LetItLoopError(
            f"lil verify checks runs' seals with the key they were sealed with: expected it in "
            f"{SEAL_KEY_ENV}, found that variable unset or empty; set it (the key is never "
            f"stored in the journal file)"
        )
    return secret


def check_chain(
    run_id: str,
    goal: str,
    entries: Sequence[Entry],
    rows: Sequence[Row],
    secret: bytes,
    head: Head | None = None,
) -> RunSeal:
    """Check one run's chain and rows against ``secret`` (and a kept ``head``)."""
    found = RunSeal(run_id, goal, "sealed", entries=len(entries))
    if entries:
        n, _, _, _, _, seal = entries[-1]
        found.head = Head(run_id, n, seal)

    def broken(why: str, at: int | None = None, key: str | None = None) -> RunSeal:
        found.state, found.broken, found.at, found.key = "broken", why, at, key
        return found

    prev = GENESIS
    latest: dict[str, tuple[int, str]] = {}
    for i, (n, key, kind, status, digest, seal) in enumerate(entries, 1):
        if n != i:
            return broken(
                f"entry {i} is missing (the chain goes from entry {i - 1} to {n}): an entry "
                f"was deleted",
                i,
            )
        if link(secret, run_id, n, key, kind, status, digest, prev) != seal:
            after = "the chain's start" if n == 1 else f"entry {n - 1}"
            return broken(
                f"entry {n} (row {key!r}) does not follow {after}: an entry was edited, "
                f"reordered or inserted there, or the run was sealed with another key",
                n,
                key,
            )
        prev = seal
        latest[key] = (n, digest)
    if head is not None:
        if len(entries) < head.n:
            return broken(
                f"the chain ends at entry {len(entries)}, before the kept head (entry "
                f"{head.n}): its tail was removed",
                len(entries) + 1,
            )
        if entries[head.n - 1][5] != head.seal:
            return broken(f"entry {head.n} is not the kept head: the chain was rewritten", head.n)
    present: set[str] = set()
    for key, kind, status, fn, fp, result, error, wake_at in rows:
        present.add(key)
        if status not in FINAL:
            continue
        if key in latest:
            n, digest = latest[key]
            if row_digest(run_id, key, kind, status, fn, fp, result, error, wake_at) != digest:
                return broken(
                    f"row {key!r} differs from what entry {n} sealed: the row was edited",
                    n,
                    key,
                )
        elif kind == "wait" or not entries:
            found.unsealed.append(key)
        else:
            return broken(
                f"row {key!r} is in no entry of the chain: it was inserted, or written by a "
                f"process without the key",
                None,
                key,
            )
    for key, (n, _) in latest.items():
        if key not in present:
            return broken(f"row {key!r}, sealed as entry {n}, is gone: it was deleted", n, key)
    if not entries:
        found.state = "unsealed"
    return found


def parse_heads(text: str, where: str) -> dict[str, Head]:
    """Kept heads, one ``RUN N SEAL`` a line as ``lil verify --print-head`` prints them."""
    heads = {}
    for number, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts or parts[0].startswith("#"):
            continue
        if len(parts) != 3 or not parts[1].isdigit() or int(parts[1]) < 1:
            raise SealKeyError(
                f"{where}, line {number}: expected 'RUN N SEAL' as 'lil verify --print-head' "
                f"prints it, found {line.strip()!r}"
            )
        heads[parts[0]] = Head(parts[0], int(parts[1]), parts[2])
    return heads
