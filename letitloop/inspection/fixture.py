"""``lil fixture``: one recorded run copied into a small standalone journal file for tests.

The rules and the words; the copy itself is the inspector's (``FixtureCopies.copy_run``:
SQLite's is :mod:`letitloop.inspection.sqlite_fixture`). The new file holds
the run's goal, its ``runs`` row (input and result), its steps, markers,
sleeps and waits with their usage, and nothing else, so a test replays it
with ``Journal(..., replay_only=True)`` (or the pytest plugin's
``letitloop_replay`` marker) and commits it beside the test.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from ..errors import LetItLoopError
from ..integrity.redaction import redact_text
from ..stores.sqlite.store import Store
from .images import FixtureCopies
from .inspector import Inspector
from .listing import find_run
from .records import RunInfo
from .sqlite_inspector import as_inspector


@dataclass(frozen=True)
class FixtureResult:
    """What :func:`make_fixture` made."""

    run: RunInfo
    to: Path
    rows: int
    """Rows copied: steps, markers, sleeps and waits."""
    redacted: tuple[str, ...]
    """The dict keys whose values were replaced by ``"[redacted]"``."""


def make_fixture(
    inspector: Inspector | Store,
    ref: str,
    to: str | os.PathLike[str],
    *,
    redact: Collection[str] = (),
    replace: bool = False,
) -> FixtureResult:
    """Copy the run ``ref`` names (as ``lil show`` finds it) into a new journal file ``to``.

    ``redact``: dict keys whose values are replaced by ``"[redacted]"`` in the
    run's input, its result and every row's result (letitloop.integrity.redaction).
    ``replace``: an existing file at ``to`` is replaced; else it is refused
    (LetItLoopError), untouched. A store that cannot copy runs into a file
    (``scheme://`` stores today) is refused with a LetItLoopError, nothing made.
    """
    journal = as_inspector(inspector)
    run = find_run(journal, ref)
    if not isinstance(journal, FixtureCopies):
        raise LetItLoopError(
            f"lil fixture copies runs out of a journal file, and {journal.path} is not one; "
            f"record the run into a file (LETITLOOP_DB=run.db) and make the fixture from that"
        )
    target = Path(to)
    source = Path(journal.path)
    if target.exists() or target.is_symlink():
        if source.exists() and target.exists() and os.path.samefile(source, target):
            raise LetItLoopError(
                f"--to {target} is the journal the run is copied from; name a new file"
            )
        if not replace:
            raise LetItLoopError(
                f"{target} exists already; pass --force to replace it, or name a new file"
            )
        for leftover in (target, Path(f"{target}-wal"), Path(f"{target}-shm")):
            leftover.unlink(missing_ok=True)
    if not target.parent.is_dir():
        raise LetItLoopError(
            f"the folder of {target} does not exist; create it first (mkdir -p {target.parent})"
        )
    keys = tuple(dict.fromkeys(redact))
    rows = journal.copy_run(run, target, lambda text: redact_text(text, keys))
    return FixtureResult(run, target, rows, keys)
