"""``RunControl``, ``RunChanges``, ``Collecting`` and ``Rekeying``: runs changed from outside
them, each change one transaction (parts of
:class:`~letitloop.inspection.inspector.Inspector`; ``Rekeying`` is a journal
file's only: :class:`~letitloop.inspection.inspector.FileInspector`). No I/O.

``RunControl`` is what ``lil send`` and ``lil cancel`` read and write
(:mod:`letitloop.supervision.control`); ``RunChanges`` what ``lil reset`` and
``lil fork`` write; ``Collecting`` what ``lil gc`` reads and deletes
(:mod:`letitloop.maintenance`); ``Rekeying`` what ``lil rekey`` reads and changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .records import RunInfo, WaitRow

#: ``(text, run_id, key, field)`` -> the text re-encrypted, or None: leave it as it is.
Convert = Callable[[str | None, str, str, str], "str | None"]


@dataclass(frozen=True)
class WaitAnswer:
    """What :meth:`RunControl.answer_wait` writes into a wait's row: it becomes ``done``."""

    key: str
    result: str
    """The value, as codec JSON text."""
    finished_at: str
    duration_ms: float | None


@dataclass(frozen=True)
class Rekeyed:
    """What :meth:`Rekeying.rekey_goal` did to one goal."""

    values: int
    """Encrypted values re-encrypted."""
    seen: int
    """Encrypted values found (those already under the new key too)."""
    resealed: int
    """Entries added to sealed runs' chains."""


class RunControl(Protocol):
    """A run sent a value or cancelled from outside it (``lil send``, ``lil cancel``)."""

    def key_check(self, run: RunInfo) -> str | None:
        """The check value of the key ``run``'s goal is encrypted with (``key_checks``,
        docs/audit.md); ``""`` when none is recorded but the run holds encrypted values;
        None when its goal is not encrypted. ``lil send`` encrypts by it."""
        ...

    def waits_in_progress(self, goal: str) -> list[tuple[str, str]]:
        """``(run id, key)`` of the goal's waits still ``waiting``, newest run first, then
        in journal order."""
        ...

    def answer_wait(
        self, run: RunInfo, choose: Callable[[list[WaitRow]], WaitAnswer]
    ) -> WaitAnswer:
        """Read the run's waits (journal order) and write the value ``choose`` picks, in one
        transaction, so a deadline it read is never stale; what was written. ``choose``
        raises to write nothing."""
        ...

    def cancel_now(self, run_id: str, at: str, reason: str, error: str) -> None:
        """Mark an unfinished run ``cancelled`` (its first cancel request kept if any)."""
        ...

    def request_cancel(self, run_id: str, at: str, reason: str) -> None:
        """Ask an unfinished run's holder to cancel it (the first request is kept)."""
        ...


class RunChanges(Protocol):
    """Runs forgotten or forked (``lil reset``, ``lil fork``, and gc's deletion)."""

    def delete_runs(self, runs: list[RunInfo]) -> int:
        """Delete the runs with their rows, tries, replays and attempts; the rows deleted."""
        ...

    def fork(
        self,
        source: RunInfo,
        new_id: str,
        at: str,
        from_step: str,
        before_seq: int,
        rename_source: str | None,
    ) -> None:
        """Make run ``new_id`` of the source's goal, ``pending``, with its input, recording
        its lineage (``forked_from``, ``forked_at`` = ``from_step``), and a copy (attempt 0,
        no usage) of each of its ``done`` rows before row ``before_seq``; the new run takes
        the source's name, the source becoming ``rename_source`` when it is given."""
        ...


class Collecting(Protocol):
    """What ``lil gc`` reads and deletes besides runs, and the space it gives back."""

    def runs_updated_before(self, at: str) -> list[RunInfo]:
        """The runs last updated before ``at``, in id order."""
        ...

    def supervisor_events_before(self, at: str, going: set[str]) -> int:
        """How many supervisor events before ``at`` no attempt of a run outside ``going``
        refers to (what :meth:`delete_supervisor_events` deletes once they are gone)."""
        ...

    def delete_supervisor_events(self, at: str) -> int:
        """Delete the supervisor events before ``at`` no attempt refers to; how many."""
        ...

    def empty_goals(self, going: set[str]) -> list[str]:
        """Goals with no run but those in ``going`` and no row of another run (a goal-scoped
        marker keeps its goal), sorted."""
        ...

    def drop_empty_goals(self) -> list[str]:
        """Remove the goals that have no run and no row, with their rows' storage."""
        ...

    def size(self) -> int:
        """The bytes the journal takes (for SQLite: the file and its -wal)."""
        ...

    def compact(self) -> None:
        """Give the space freed by deletions back (for SQLite: VACUUM, then a checkpoint)."""
        ...


@runtime_checkable
class Rekeying(Protocol):
    """A goal's key changed in place (``lil rekey``): a journal file's only."""

    def goal_key_check(self, goal: str) -> str | None:
        """The check value recorded for ``goal``'s key (``key_checks``), None if none is."""
        ...

    def rekey_goal(
        self, goal: str, convert: Convert, check: str, now: float, seal_secret: bytes | None
    ) -> Rekeyed:
        """``goal``'s encrypted values changed by ``convert`` in one transaction, its check
        value made ``check``, its sealed runs' chains given an entry for each row changed
        (with ``seal_secret``)."""
        ...
