"""One run of a journal file copied into a new, standalone journal file (``lil fixture``).

The SQL of :func:`letitloop.inspection.fixture.make_fixture` on SQLite: the
run's ``runs`` row (its input and result), its goal, every row of its goal's
journal table (steps, markers, sleeps, waits, with their usage) in journal
order, and the goal-scoped and global markers it holds or last held. Nothing
else: no other run, no attempts, tries, replays or supervisor events, no
holder's pid or host. A replay-only journal (``replay_only=True``) reads the
new file as it reads the source.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ..integrity.checksums import step_sum
from ..stores.sqlite.goals import VIEW_COLUMNS
from ..stores.sqlite.store import Store
from .records import RunInfo

#: The run's columns copied as they are (``result`` and ``input`` go through the text filter).
_RUN_COLUMNS = (
    "id, goal, name, status, attempts, started_at, updated_at, finished_at, result, error, "
    "input, input_fp, cancel_requested_at, cancel_reason"
)

#: The rows' columns, as the goal's view shows them (its triggers take writes).
_ROW_COLUMNS = ", ".join(VIEW_COLUMNS)

#: A holder's process and machine: where the recording ran, not part of what it did.
_DROPPED = ("holder_pid", "holder_host")

_GLOBAL_COLUMNS = (
    "key, status, started_at, finished_at, duration_ms, claims, crashes, holder_goal, "
    "holder_run, holder_token, attempt, error, traceback, checksum"
)


def copy_run_to_file(
    source: Store, run: RunInfo, to: Path, text: Callable[[str | None], str | None]
) -> int:
    """Copy ``run`` from ``source`` into a new journal file at ``to``; the rows copied.

    ``text`` filters every stored value (the run's input and result, each
    row's result): redaction. A step row whose result it changes gets its
    checksum again (letitloop/integrity/checksums.py), so the copy replays unflagged.
    The new file is written in one transaction and closed; ``to`` must not
    exist (the caller checks).
    """
    (found,) = source.query(f"SELECT {_RUN_COLUMNS} FROM runs WHERE id = ?", (run.id,))
    values = list(found)
    values[8], values[10] = text(values[8]), text(values[10])
    rows = source.query(
        f'SELECT {_ROW_COLUMNS} FROM "{run.journal_table}" WHERE run = ? '
        f"OR (run = '*' AND holder_run = ?) ORDER BY rowid",
        (run.id, run.id),
    )
    globals_ = source.query(
        f"SELECT {_GLOBAL_COLUMNS} FROM markers WHERE holder_run = ?", (run.id,)
    )
    target = Store(to)
    try:
        with target.write() as c:
            table = target.ensure_goal(c, run.goal, time.time())
            c.execute(
                f"INSERT INTO runs ({_RUN_COLUMNS}) VALUES ({', '.join('?' * len(values))})",
                values,
            )
            c.executemany(
                f'INSERT INTO "{table}" ({_ROW_COLUMNS}) '
                f"VALUES ({', '.join('?' * len(VIEW_COLUMNS))})",
                [_copied(dict(zip(VIEW_COLUMNS, r, strict=True)), text) for r in rows],
            )
            c.executemany(
                f"INSERT INTO markers ({_GLOBAL_COLUMNS}) "
                f"VALUES ({', '.join('?' * len(_GLOBAL_COLUMNS.split(',')))})",
                globals_,
            )
    finally:
        target.close()
    return len(rows) + len(globals_)


def _copied(row: dict[str, object], text: Callable[[str | None], str | None]) -> list[object]:
    """One view row as the copy writes it: its result filtered, its holder's process dropped."""
    stored = row["result"]
    result = text(stored if isinstance(stored, str) else None) if stored is not None else None
    if result != stored:
        row["result"] = result
        if row["kind"] == "step" and row["checksum"] is not None:
            row["checksum"] = step_sum(
                str(row["run"]),
                str(row["key"]),
                str(row["status"]),
                row["fn"] if isinstance(row["fn"], str) else None,
                row["args_fp"] if isinstance(row["args_fp"], str) else None,
                result,
                row["error"] if isinstance(row["error"], str) else None,
            )
    for column in _DROPPED:
        row[column] = None
    return [row[c] for c in VIEW_COLUMNS]
