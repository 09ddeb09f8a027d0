"""Changing a journal's encryption key in place (``lil rekey``): :func:`rekey`.

Each goal is re-encrypted in one transaction (``Rekeying.rekey_goal``, a journal file's):
every encrypted value of it decrypted with the old key and encrypted with the
new one, bound to the same row, and the goal's key check changed with them.
So a SIGKILL leaves each goal wholly under one key, and running it again
finishes the rest: a goal whose check is already the new key's is skipped, and
inside a goal a value that already decrypts with the new key is left as it is.
Every run of the goal is held meanwhile (RunHeldError while a live process
holds one, before anything changes). Sealed runs get an entry for each row
rewritten, with the seal key (docs/audit.md). No SQL here.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import EncryptionKeyError, LetItLoopError
from ..inspection import Inspector, as_inspector, list_runs
from ..inspection.inspector_changes import Rekeying
from ..integrity.encryption import Cipher, encrypted
from ..stores.sqlite.store import Store
from .holding import holding_run

__all__ = ["GoalRekeyed", "rekey"]


@dataclass(frozen=True)
class GoalRekeyed:
    """What :func:`rekey` did to one goal."""

    goal: str
    state: str
    """``rekeyed``, ``already`` (its values were under the new key already: a rerun),
    or ``plain`` (it holds no encrypted value)."""
    values: int = 0
    """Values re-encrypted."""
    resealed: int = 0
    """Entries added to its sealed runs' chains."""


def _converter(old: Cipher, new: Cipher) -> Callable[[str | None, str, str, str], str | None]:
    def convert(text: str | None, run_id: str, key: str, field: str) -> str | None:
        if not encrypted(text):
            return None
        try:
            new.open(text, run_id, key, field)
            return None  # re-encrypted already (a rekey killed in an earlier goal's pass)
        except EncryptionKeyError:
            pass
        return new.seal(old.open(text, run_id, key, field), run_id, key, field)

    return convert


def rekey(
    inspector: Inspector | Store,
    old: Cipher,
    new: Cipher,
    *,
    goals: Sequence[str] | None = None,
    seal_secret: bytes | None = None,
    clock: Callable[[], float] = time.time,
) -> list[GoalRekeyed]:
    """Re-encrypt the values of ``goals`` (None: every goal of the file) from ``old`` to
    ``new``, one transaction per goal; returns what was done to each, in order.

    Raises LetItLoopError for a store without ``rekey_goal`` (only a journal
    file has it) or an unknown goal; EncryptionKeyError when ``new`` is ``old``,
    for a goal recorded under a third key, or for a value that decrypts with
    neither key (nothing of that goal changed; goals before it stay done);
    RunHeldError while a live process holds a run of the goal; SealKeyError for
    a sealed run without ``seal_secret``; DamagedRowError for a damaged row.
    """
    journal = as_inspector(inspector)
    if not isinstance(journal, Rekeying):
        raise LetItLoopError(
            f"{journal.path}: lil rekey changes the key of a SQLite journal file; this store "
            f"has no rekey"
        )
    if old.check == new.check:
        raise EncryptionKeyError(
            "lil rekey: the new key is the old key (LETITLOOP_ENCRYPTION_KEY and the new "
            "key are equal): expected another key; nothing was changed"
        )
    names = list(goals) if goals else journal.goal_names()
    for name in names:
        if not journal.has_goal(name):
            raise LetItLoopError(f"no goal {name!r} in {journal.path}: lil runs lists them")
    convert = _converter(old, new)
    done = []
    for goal in names:
        stored = journal.goal_key_check(goal)
        if stored == new.check:
            done.append(GoalRekeyed(goal, "already"))
            continue
        if stored is not None and stored != old.check:
            raise EncryptionKeyError(
                f"lil rekey: goal {goal!r} is encrypted with neither key (not "
                f"LETITLOOP_ENCRYPTION_KEY's, not the new one's): expected its key as "
                f"LETITLOOP_ENCRYPTION_KEY, or name the goals to rekey; goals before it "
                f"({len(done)}) are done"
            )
        with contextlib.ExitStack() as held:
            for run in list_runs(journal, goal):
                held.enter_context(holding_run(journal, run, "re-encrypt"))
            made = journal.rekey_goal(goal, convert, new.check, clock(), seal_secret)
        state = "rekeyed" if made.seen else "plain"
        done.append(GoalRekeyed(goal, state, made.values, made.resealed))
    return done
