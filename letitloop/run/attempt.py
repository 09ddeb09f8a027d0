"""What a journal opened: its attempt's storage, lock, keys and results (``Journal._opened``).

One :class:`Attempt` per journal, for its life; ``opening.py`` alone sets its
fields, anew at each open (``opening.py``'s docstring gives the thread rules;
docs/architecture.md, "Who owns a run's state").
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

from ..errors import LetItLoopError
from ..identity.keys import StepKeys

if TYPE_CHECKING:
    from ..integrity.chains import SealedRows
    from ..stores.storage import Storage
    from ..stores.storage_holding import Hold
    from ..stores.storage_steps import StepRow
    from .replay import Results


def not_open(row: StepRow) -> None:
    """A closed journal's step-row writer (``Attempt.write_step``)."""
    raise LetItLoopError("the journal is not open")


class Attempt:
    """What a journal opened: one attempt of its run, its fields written by ``opening.py`` only.

    The storage the attempt writes through (``storage``, its ``table`` and
    its step-row writer ``write_step``: ``storage.py``), the run's lock
    (``lock``, ``held_key``: ``opening.hold``), whether this attempt started the
    run (``created``) and the result recorded when it completed before
    (``recorded_result``), the keys and results it replays (``keys``: a
    fresh ``StepKeys`` each attempt, the owner of its own contents;
    ``results``: ``replay.Results``), and a sealed run's chain as replays check it
    (``sealed``: ``chains.SealedRows``; None without a seal key). Empty
    (None, ``""``) while the journal is closed; one object for the journal's
    life, its fields set anew by each open.
    """

    __slots__ = (
        "created",
        "held_key",
        "keys",
        "lock",
        "recorded_result",
        "results",
        "sealed",
        "storage",
        "table",
        "write_step",
    )

    def __init__(self) -> None:
        self.table = ""
        self.storage: Storage | None = None
        self.write_step: Callable[[StepRow], None] = not_open
        self.lock: Hold | None = None
        self.held_key: tuple[Hashable, str] | None = None
        self.created = False
        self.recorded_result: str | None = None
        self.keys = StepKeys("")
        self.results: Results | None = None
        self.sealed: SealedRows | None = None
