"""The journal ``lil check`` replays on: a copy of the journal file (:func:`copy_journal`,
SQLite's online backup from a reader's connection, the source untouched), its unfinished
runs renamed there so a replay-only opener finds each (:func:`unfinished_runs`), and the
patch decisions they recorded (:func:`recorded_patches`), for ``deploycheck.py``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ..errors import LetItLoopError
from ..inspection import open_journal_file
from ..primitives import patches
from ..stores.sqlite.connections import sqlite_entry

#: Statuses of the runs a check replays: the ones an opener may still resume.
UNFINISHED = ("running", "failed", "waiting")

#: What a checked run's name becomes on the copy, so a replay-only opener finds
#: exactly that run (an unnamed one is otherwise found by its input).
CHECK_NAME = "lil-check:"


def copy_journal(source: Path, folder: Path) -> Path:
    """A copy of the journal file ``source`` in ``folder``, made by SQLite's online backup
    from a reader's connection (``open_journal_file``: read-only, never migrating, under the
    file's lock, as ``lil runs`` reads it): a consistent snapshot, the source untouched."""
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / "journal.db"
    store = open_journal_file(source)
    try:
        with store.lock:  # a fork waits for it (connections.guard_fork): the copy's calls too
            target = sqlite3.connect(copy)
            try:
                store.conn.backup(target)
            except sqlite3.Error as exc:
                raise LetItLoopError(f"{source}: cannot copy the journal: {exc}") from None
            finally:
                target.close()
    finally:
        store.close()
    return copy


def unfinished_runs(copy: Path, goal: str) -> list[tuple[str, str | None, str | None]]:
    """``(id, name, input)`` of the goal's unfinished runs on ``copy``, oldest first; each is
    renamed there to ``CHECK_NAME + id`` so a replay-only opener finds exactly it."""
    with sqlite_entry():  # outside any store's lock: a fork waits for it
        return _unfinished_runs(copy, goal)


def _unfinished_runs(copy: Path, goal: str) -> list[tuple[str, str | None, str | None]]:
    conn = sqlite3.connect(copy, isolation_level=None)
    try:
        has_runs = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'runs'"
        ).fetchone()
        if not has_runs:
            return []
        marks = ",".join("?" * len(UNFINISHED))
        runs = conn.execute(
            f"SELECT id, name, input FROM runs WHERE goal = ? AND status IN ({marks}) "
            f"AND cancel_requested_at IS NULL ORDER BY rowid",
            (goal, *UNFINISHED),
        ).fetchall()
        conn.execute("BEGIN")
        conn.executemany(
            "UPDATE runs SET name = ? WHERE id = ?", [(CHECK_NAME + r[0], r[0]) for r in runs]
        )
        conn.execute("COMMIT")
        return [(str(i), n, t) for i, n, t in runs]
    finally:
        conn.close()


def recorded_patches(copy: Path, goal: str) -> dict[str, list[tuple[str, bool]]]:
    """Per run of ``goal`` on ``copy``: the patch decisions it recorded, ``(name, decision)``."""
    with sqlite_entry():  # outside any store's lock: a fork waits for it
        conn = sqlite3.connect(copy)
        try:
            rows = conn.execute(
                "SELECT run, key, result FROM journal_rows WHERE goal = ? AND kind = 'step' "
                "AND status = 'done' AND (key LIKE ? OR key LIKE ?) ORDER BY seq",
                (goal, patches.PREFIX + "%", "%/" + patches.PREFIX + "%"),
            ).fetchall()
        except sqlite3.Error:  # a journal from before the readable views: none found
            return {}
        finally:
            conn.close()
    out: dict[str, list[tuple[str, bool]]] = {}
    for run, key, result in rows:
        name = key.rsplit("/", 1)[-1][len(patches.PREFIX) :].split("#", 1)[0]
        out.setdefault(str(run), []).append((name, result == "true"))
    return out
