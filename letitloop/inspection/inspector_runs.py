"""``JournalHolds``, ``RunListing`` and ``RunFinding``: the journal an inspector reads, its
runs' locks, and its goals and runs listed and found (parts of
:class:`~letitloop.inspection.inspector.Inspector`). No I/O.

``JournalHolds`` is where the journal is, whether a live process holds a run,
and a run held while it changes; ``RunListing`` what ``lil runs`` and the
shell's completion read; ``RunFinding`` how a reference (an id, a prefix, a
name, a goal) finds its run (:mod:`letitloop.inspection.listing`).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .records import RunInfo, RunRef


@dataclass(frozen=True)
class RunFilter:
    """Which runs :meth:`RunListing.runs` returns: every condition given must hold."""

    goal: str | None = None
    statuses: tuple[str, ...] | None = None
    """Recorded statuses (``runs.status``), not states: a state is told after reading."""
    since: str | None = None
    """Started at or after this time."""
    until: str | None = None
    """Started before this time."""
    name: str | None = None
    """A case-sensitive glob on the run's name (an unnamed run never matches)."""
    inputs: tuple[tuple[tuple[str, ...], str], ...] = ()
    """``(path, value)`` pairs: the recorded input holds ``value`` at the dotted ``path``
    (split into its parts). ``value`` is JSON when it parses (``7``, ``"7"``, ``[1]``),
    else text; it matches the recorded value, or a value the codec tagged
    (``{"!date": "2026-11-30"}`` matches ``2026-11-30``), in an input the codec may
    have wrapped (``{"!dict": {…}}``). An input that is not JSON matches nothing."""
    version: str | None = None
    """The version of the code the run's latest attempt ran starts with this text (a source
    hash's first digits are enough, as with git's)."""


class JournalHolds(Protocol):
    """The journal itself, and its runs held by one process at a time (their locks)."""

    @property
    def path(self) -> Path | str:
        """Where the journal is, as messages name it (a file's path, or a store's URL)."""
        ...

    def close(self) -> None:
        """Let go of the journal; the inspector is not used afterwards."""
        ...

    def is_held(self, run_id: str) -> bool:
        """True when a live process (this one included) holds the run now; writes nothing."""
        ...

    def hold(self, run_id: str) -> AbstractContextManager[bool]:
        """Hold the run while inside (so no process opens it): True; False, holding nothing,
        when a live process holds it. Never waits."""
        ...

    def sweep_locks(self) -> None:
        """Remove the locks of holders that died (runs' and markers')."""
        ...


class RunListing(Protocol):
    """The journal's goals and runs as ``lil runs`` lists them and the shell completes them."""

    def has_goal(self, goal: str) -> bool:
        """Whether the journal has this goal."""
        ...

    def goal_names(self, prefix: str = "", limit: int | None = None) -> list[str]:
        """The goals starting with ``prefix``, sorted, at most ``limit``."""
        ...

    def has_run(self, run_id: str) -> bool:
        """Whether a run has exactly this id."""
        ...

    def runs(self, where: RunFilter, *, limit: int | None, offset: int = 0) -> list[RunInfo]:
        """The runs ``where`` selects, newest made first, ``offset`` of them skipped."""
        ...

    def run(self, run_id: str) -> RunInfo | None:
        """The run with exactly this id."""
        ...

    def run_refs(self, prefix: str, limit: int) -> list[RunRef]:
        """Runs whose id starts with ``prefix`` (upper-cased) or whose name does, newest
        made first, at most ``limit``: quick, for completion."""
        ...

    def step_keys(self, ref: str, prefix: str) -> list[str]:
        """For completion: the keys starting with ``prefix`` of the run ``ref`` names (its
        id, its goal's newest run, its name, or an id prefix), in journal order."""
        ...


class RunFinding(Protocol):
    """The run a reference names: by goal, name or id prefix, or the one an opener resumes."""

    def run_of_goal(self, goal: str, ref: str) -> RunInfo | None:
        """A run of ``goal`` whose id or name is ``ref``."""
        ...

    def newest_run(self, goal: str) -> RunInfo | None:
        """The goal's newest run."""
        ...

    def runs_named(self, name: str) -> list[RunInfo]:
        """The runs with this name (of any goal), newest id first."""
        ...

    def runs_with_prefix(self, prefix: str, goal: str | None, limit: int) -> list[RunInfo]:
        """Runs (of ``goal``, if given) whose id starts with ``prefix`` (ids are upper case),
        newest id first, at most ``limit``."""
        ...

    def resumable_run_id(self, goal: str) -> str | None:
        """The run ``Journal(goal)`` resumes (``sqlite_storage.resumable_run_id``'s rule), or
        None when it would start a new one."""
        ...

    def argument_runs(self, goal: str, limit: int) -> list[RunInfo]:
        """The goal's unfinished, uncancelled unnamed runs opened for arguments (a
        ``@durable`` call's), newest first, at most ``limit``."""
        ...
