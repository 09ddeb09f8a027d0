"""A replayed row of a sealed run checked against its seal before it is handed back.

With a seal key, the journal reads its run's chain when it opens it
(``opening.seal``: ``chains.SealedRows``); every row a replay would trust — a
step's result (``replay.py``), a run-scoped marker recorded done
(``markers.py``), a sleep (``sleeps.py``), a wait's value (``waits.py``) — must
be what its latest entry covers, or ForgedRowError names it and nothing is
handed back, skipped or called. docs/audit.md, "A sealed run replays only what
its seal covers".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import ForgedRowError

if TYPE_CHECKING:
    from typing import Protocol

    from ..stores.storage_seals import SealRows
    from .chains import SealedRows

    class SealedAttempt(Protocol):
        """What the check reads of a journal's attempt (run/attempt.py): the run's chain as
        its replays check it, and the storage its entries are read from."""

        @property
        def sealed(self) -> SealedRows | None: ...
        @property
        def storage(self) -> SealRows | None: ...

    class SealedRun(Protocol):
        """What the check reads of the journal whose rows it checks (``Journal`` is one)."""

        @property
        def run_id(self) -> str: ...
        @property
        def goal(self) -> str: ...
        @property
        def _opened(self) -> SealedAttempt: ...


__all__ = ["check_sealed", "check_stored", "read_sealed", "ways_out"]


def ways_out(j: SealedRun, key: str) -> str:
    """The commands that reset or fork ``j``'s run at ``key``."""
    # Shell-quoted, so each command works as pasted whatever the goal and key hold.
    import shlex  # only for an error's advice

    reset = f"lil reset {shlex.quote(j.goal)} --run {j.run_id}"
    fork = f"lil fork {j.run_id} --from-step {shlex.quote(key)}"
    return f"reset it with: {reset}; or fork it with: {fork}"


#: What a refused row of each kind does not do (``check_sealed``'s error).
_WITHHELD = {
    "step": "Its result is not handed back and nothing was called",
    "marker": "It is not taken as done: its block is neither skipped nor run",
    "sleep": "It is not taken as slept",
    "wait": "Its value is not handed back",
}


def check_sealed(j: SealedRun, row: tuple[Any, ...]) -> None:
    """Raise ForgedRowError, handing nothing back, unless ``row`` (key, kind, status, function
    name, fingerprint, result, error, wake_at: as stored) is what its latest seal covers.

    A row its chain does not cover yet may have been written since the chain was read
    (a retried parent's children): the entries written since are read once more first.
    """
    sealed = j._opened.sealed
    assert sealed is not None
    why = sealed.refusal(row)
    if why is None:
        return
    storage = j._opened.storage
    if storage is not None:
        sealed.extend(storage.seal_entries(j.run_id, sealed.n))
        why = sealed.refusal(row)
        if why is None:
            return
    key, kind = row[0], row[1]
    raise ForgedRowError(
        f"{kind} {key!r} (run {j.run_id} of goal {j.goal!r}): its recorded row does not match "
        f"the run's seal: {why}. {_WITHHELD.get(kind, _WITHHELD['step'])}; "
        f"'lil verify {j.run_id}' (with the key in LETITLOOP_SEAL_KEY) shows the chain. "
        f"Restore the journal from a backup, or run it again from there: {ways_out(j, key)}",
        run_id=j.run_id,
        key=key,
    )


def read_sealed(j: SealedRun, key: str) -> tuple[Any, ...] | None:
    """Row ``key`` of ``j``'s run as its seal covers it (a marker's, a sleep's or a wait's:
    a step's replay reads its own), for :func:`check_stored`; None when there is none."""
    storage = j._opened.storage
    assert storage is not None
    row = storage.sealed_row(j.run_id, key)
    return None if row is None else tuple(row)


def check_stored(j: SealedRun, key: str, kind: str, row: tuple[Any, ...] | None) -> None:
    """:func:`check_sealed` of ``row`` as :func:`read_sealed` read it; a row gone since it
    was found recorded is refused as one its chain does not hold."""
    check_sealed(j, row if row is not None else (key, kind, "", None, None, None, None, None))
