"""A run as ``lil copy`` moves it between stores: :class:`RunImage`, everything the run owns,
in one form every store reads into and writes from. No I/O.

The form is the in-memory store's (``memory_database.py``), which the
PostgreSQL inspector already reads its tables into: the run's row and its
journal rows by column name, times as ISO-8601 UTC text (what every reader
shows), values exactly as stored (an encrypted value stays encrypted, a
checksum stays the checksum it was), the run's sealed chain as its entries.
A store's inspector makes one (``run_image``) and writes a batch of them in
one transaction (``add_runs``): SQLite's in ``sqlite_copy.py``, the memory
store's in ``memory_copy.py``, PostgreSQL's from a snapshot of the run read
as the memory store's and inserted row by row (``postgres_snapshots.py``).

What it leaves out: ``lil watch``'s supervisor events (they belong to a
watcher, which may have started the attempts of many runs; an attempt keeps
its ``watch_id``), and the locks of holders (a copy is not held).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..errors import EncryptionKeyError
from ..integrity.seals import row_digest
from .records import RunInfo

__all__ = [
    "ATTEMPT_COLUMNS",
    "GLOBAL_MARKER_COLUMNS",
    "RESERVATION_COLUMNS",
    "RUN_COLUMNS",
    "Copying",
    "FixtureCopies",
    "RunImage",
    "key_mismatch",
    "row_digests",
]

#: A run's columns (``runs`` in a file, ``ll_runs`` on PostgreSQL), its number left out:
#: each store numbers the runs it holds.
RUN_COLUMNS = (
    "id",
    "goal",
    "name",
    "status",
    "attempts",
    "holder_pid",
    "holder_host",
    "started_at",
    "updated_at",
    "finished_at",
    "input",
    "input_fp",
    "result",
    "error",
    "cancel_requested_at",
    "cancel_reason",
    "forked_from",
    "forked_at",
)

#: An attempt's columns after its run.
ATTEMPT_COLUMNS = (
    "attempt",
    "pid",
    "host",
    "started_at",
    "version",
    "watch_id",
    "watch_attempt",
    "trace",
    "ended_at",
    "outcome",
    "error",
)

#: A paid call's reservation's columns after its run and number (``reservations`` in a
#: file, ``ll_reservations`` on PostgreSQL, the memory store's dicts).
RESERVATION_COLUMNS = (
    "key",
    "attempt",
    "reserved_at",
    "tokens",
    "cost",
    "model",
    "settled_at",
    "settled_tokens",
    "settled_cost",
)

#: A global marker's columns in a journal file (``markers``); a row's elsewhere.
GLOBAL_MARKER_COLUMNS = (
    "key",
    "status",
    "started_at",
    "finished_at",
    "duration_ms",
    "claims",
    "crashes",
    "holder_goal",
    "holder_run",
    "holder_pid",
    "holder_host",
    "holder_token",
    "attempt",
    "error",
    "traceback",
    "checksum",
)


@dataclass(frozen=True)
class RunImage:
    """Everything one run owns, as stored (see the module's docstring)."""

    run: dict[str, Any]
    """Its row, by :data:`RUN_COLUMNS`."""
    rows: list[dict[str, Any]]
    """Its steps, markers, sleeps and waits in journal order, by the columns of a row
    (``row_rules.ROW_COLUMNS``; a journal file's has all of them but ``holder_goal``)."""
    goal_markers: list[dict[str, Any]] = field(default_factory=list)
    """Its goal's goal-scoped markers (``scope="goal"``; ``run`` is ``*``): a target
    that has one of them already keeps its own."""
    global_markers: list[dict[str, Any]] = field(default_factory=list)
    """The global markers (``scope="global"``) it holds or last held, by the columns of a
    row; a target that has one of them already keeps its own."""
    tries: list[dict[str, Any]] = field(default_factory=list)
    """Its failed tries: ``key``, ``try`` and ``row_rules.TRY_COLUMNS``."""
    replays: list[tuple[int, list[str]]] = field(default_factory=list)
    """What each attempt replayed: (attempt, keys)."""
    attempts: list[dict[str, Any]] = field(default_factory=list)
    """Its attempts, by :data:`ATTEMPT_COLUMNS`."""
    reservations: list[dict[str, Any]] = field(default_factory=list)
    """Its paid calls' reservations in order: ``call`` and :data:`RESERVATION_COLUMNS`
    (one not settled stays counted against the run's budget in the copy too)."""
    seals: list[tuple[int, str, str, str, str, str]] = field(default_factory=list)
    """Its sealed chain's entries in order: n, key, kind, status, digest, seal."""
    key_check: str | None = None
    """The check value of the key its goal is encrypted with, None if none is recorded."""
    chunks: list[tuple[Any, ...]] = field(default_factory=list)
    """Its streamed steps' chunks (``letitloop.streams``), by key then offset: key, seq,
    attempt, kind, data, mark, at."""

    @property
    def id(self) -> str:
        return str(self.run["id"])

    @property
    def goal(self) -> str:
        return str(self.run["goal"])


def row_digests(rows: Sequence[Sequence[Any]]) -> dict[str, str]:
    """Each row's :func:`~letitloop.integrity.seals.row_digest` by key, for rows as ``seal_chain``
    reads them (key, kind, status, fn, args_fp, result, error, wake_at) of one run: what a
    sealed chain covers, so two stores whose rows give the same digests read the same to
    ``lil verify``. The run's id is left out (the same on both sides)."""
    return {str(r[0]): row_digest("", *r) for r in rows}


def key_mismatch(image: RunImage) -> EncryptionKeyError:
    """The refusal of a run whose goal the target encrypts with another key."""
    return EncryptionKeyError(
        f"run {image.id} of goal {image.goal!r} is encrypted with another key than the "
        f"target's runs of that goal; nothing was copied. Copy into a journal without that "
        f"goal, or move one side to the other's key first (lil rekey)",
        run_id=image.id,
    )


class Copying(Protocol):
    """What an inspector does for ``lil copy`` (a part of
    :class:`~letitloop.inspection.inspector.Inspector`): a run read whole, runs written."""

    def run_image(self, run: RunInfo) -> RunImage:
        """Everything ``run`` owns, read in one snapshot."""
        ...

    def add_runs(self, images: Sequence[RunImage]) -> None:
        """Write the runs in one transaction (their goals made as needed); none of their ids
        may be in the journal yet (the caller checks)."""
        ...


@runtime_checkable
class FixtureCopies(Protocol):
    """What an inspector does for ``lil fixture``: a journal file's only
    (:class:`~letitloop.inspection.inspector.FileInspector`; ``sqlite_fixture.py``)."""

    def copy_run(self, run: RunInfo, to: Path, text: Callable[[str | None], str | None]) -> int:
        """``run`` copied into a new journal file ``to``, each recorded text passed through
        ``text`` (redaction); the rows copied."""
        ...
