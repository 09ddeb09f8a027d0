"""``lil copy`` on a journal file: a run read into a :class:`RunImage` (:func:`read_image`)
and runs written from their images (:func:`write_images`), the SQL of
:mod:`letitloop.maintenance.copying` on SQLite.

A run's rows are read and written through its goal's view (``journal_<goal>``,
whose triggers turn ISO times and function names into the compact row), so
the image holds them as every reader sees them, and the checksum each row
carries is kept as it is. The run gets the target's next run number
(``runs.num``); its chain's entries are written under it.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Iterator, Sequence
from typing import Any

from ..primitives.markers import GOAL_SCOPE_RUN
from ..stores.sqlite.goals import VIEW_COLUMNS
from ..stores.sqlite.store import Store
from .images import (
    ATTEMPT_COLUMNS,
    GLOBAL_MARKER_COLUMNS,
    RESERVATION_COLUMNS,
    RUN_COLUMNS,
    RunImage,
    key_mismatch,
)
from .records import RunInfo
from .sqlite_changes import has_table

_RUNS = ", ".join(RUN_COLUMNS)
_ROWS = ", ".join(VIEW_COLUMNS)
_ATTEMPTS = ", ".join(ATTEMPT_COLUMNS)
_GLOBALS = ", ".join(GLOBAL_MARKER_COLUMNS)
_CHUNKS = "key, seq, attempt, kind, data, mark, at"
_TRIES = (
    "key, try, attempt, started_at, failed_at, error, next_at, ended, input_tokens, "
    "output_tokens, cost, model, traceback"
)


@contextlib.contextmanager
def _snapshot(store: Store) -> Iterator[sqlite3.Connection]:
    """One read transaction on the store's connection: every read of it sees one state."""
    with store.lock:
        conn = store.conn
        try:
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")
        except (sqlite3.Error, UnicodeError) as exc:
            raise store.explain(exc) from None


def _named(columns: Sequence[str], rows: Sequence[Any]) -> list[dict[str, Any]]:
    return [dict(zip(columns, r, strict=True)) for r in rows]


def read_image(store: Store, run: RunInfo) -> RunImage:
    """Everything ``run`` owns in this file, read in one transaction."""
    view = run.journal_table
    with _snapshot(store) as c:
        (found,) = c.execute(f"SELECT {_RUNS} FROM runs WHERE id = ?", (run.id,)).fetchall()
        rows = c.execute(
            f'SELECT {_ROWS} FROM "{view}" WHERE run = ? ORDER BY rowid', (run.id,)
        ).fetchall()
        goal_markers = c.execute(
            f'SELECT {_ROWS} FROM "{view}" WHERE run = ? ORDER BY rowid', (GOAL_SCOPE_RUN,)
        ).fetchall()
        globals_ = c.execute(
            f"SELECT {_GLOBALS} FROM markers WHERE holder_run = ?", (run.id,)
        ).fetchall()
        tries = c.execute(
            f"SELECT {_TRIES} FROM step_tries WHERE run = ? ORDER BY failed_at, key, try",
            (run.id,),
        ).fetchall()
        replays = c.execute(
            "SELECT attempt, keys FROM step_replays WHERE run = ? ORDER BY rowid", (run.id,)
        ).fetchall()
        attempts = c.execute(
            f"SELECT {_ATTEMPTS} FROM attempts WHERE run = ? ORDER BY attempt", (run.id,)
        ).fetchall()
        reservations = []
        if has_table(c, "reservations"):  # migration 0018
            reservations = c.execute(
                f"SELECT call, {', '.join(RESERVATION_COLUMNS)} FROM reservations "
                "WHERE run = ? ORDER BY call",
                (run.id,),
            ).fetchall()
        seals = []
        if has_table(c, "seals"):
            seals = c.execute(
                "SELECT n, key, kind, status, digest, seal FROM seals "
                "WHERE run = (SELECT num FROM runs WHERE id = ?) ORDER BY n",
                (run.id,),
            ).fetchall()
        chunks = []
        if has_table(c, "stream_chunks"):  # migration 0022
            chunks = c.execute(
                f"SELECT {_CHUNKS} FROM stream_chunks WHERE run = ? ORDER BY key, seq", (run.id,)
            ).fetchall()
        check = None
        if has_table(c, "key_checks"):
            got = c.execute("SELECT key_check FROM key_checks WHERE goal = ?", (run.goal,))
            check = next((str(r[0]) for r in got), None)
    return RunImage(
        run=dict(zip(RUN_COLUMNS, found, strict=True)),
        rows=_named(VIEW_COLUMNS, rows),
        goal_markers=_named(VIEW_COLUMNS, goal_markers),
        global_markers=[{**r, "kind": "marker"} for r in _named(GLOBAL_MARKER_COLUMNS, globals_)],
        tries=_named(_TRIES.split(", "), tries),
        replays=[(int(a), _keys(k)) for a, k in replays],
        attempts=_named(ATTEMPT_COLUMNS, attempts),
        reservations=_named(("call", *RESERVATION_COLUMNS), reservations),
        seals=[tuple(e) for e in seals],
        key_check=check,
        chunks=[tuple(r) for r in chunks],
    )


def _keys(text: Any) -> list[str]:
    """A replay record's keys (a JSON list); a damaged record's as one text."""
    try:
        keys = json.loads(text)
    except (TypeError, ValueError):
        return [str(text)]
    return [str(k) for k in keys] if isinstance(keys, list) else [str(text)]


def write_images(store: Store, images: Sequence[RunImage]) -> None:
    """Write the runs of ``images`` into this file in one transaction (see the module)."""
    if not images:
        return
    with store.write() as c:
        now = time.time()
        for image in images:
            view = store.ensure_goal(c, image.goal, now)
            _key_check(c, image)
            values = [image.run[k] for k in RUN_COLUMNS]
            c.execute(f"INSERT INTO runs ({_RUNS}) VALUES ({', '.join('?' * len(values))})", values)
            (num,) = c.execute("SELECT num FROM runs WHERE id = ?", (image.id,)).fetchone()
            row_sql = (
                f'INSERT INTO "{view}" ({_ROWS}) VALUES ({", ".join("?" * len(VIEW_COLUMNS))})'
            )
            c.executemany(row_sql, [[r.get(k) for k in VIEW_COLUMNS] for r in image.rows])
            for marker in image.goal_markers:
                if not c.execute(
                    f'SELECT 1 FROM "{view}" WHERE run = ? AND key = ?',
                    (GOAL_SCOPE_RUN, marker["key"]),
                ).fetchone():
                    c.execute(row_sql, [marker.get(k) for k in VIEW_COLUMNS])
            c.executemany(
                f"INSERT OR IGNORE INTO markers ({_GLOBALS}) "
                f"VALUES ({', '.join('?' * len(GLOBAL_MARKER_COLUMNS))})",
                [[m.get(k) for k in GLOBAL_MARKER_COLUMNS] for m in image.global_markers],
            )
            c.executemany(
                f"INSERT INTO step_tries (run, {_TRIES}) VALUES (?{', ?' * 13})",
                [[image.id, *(t.get(k) for k in _TRIES.split(", "))] for t in image.tries],
            )
            c.executemany(
                "INSERT INTO step_replays (run, attempt, keys) VALUES (?, ?, ?)",
                [(image.id, a, json.dumps(k)) for a, k in image.replays],
            )
            c.executemany(
                f"INSERT INTO reservations (run, call, {', '.join(RESERVATION_COLUMNS)}) "
                f"VALUES (?, ?{', ?' * len(RESERVATION_COLUMNS)})",
                [
                    [image.id, r["call"], *(r.get(k) for k in RESERVATION_COLUMNS)]
                    for r in image.reservations
                ],
            )
            c.executemany(
                f"INSERT INTO attempts (run, {_ATTEMPTS}) VALUES (?{', ?' * len(ATTEMPT_COLUMNS)})",
                [[image.id, *(a.get(k) for k in ATTEMPT_COLUMNS)] for a in image.attempts],
            )
            c.executemany(
                "INSERT INTO seals (run, n, key, kind, status, digest, seal) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(num, *e) for e in image.seals],
            )
            c.executemany(
                f"INSERT INTO stream_chunks (run, {_CHUNKS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(image.id, *chunk) for chunk in image.chunks],
            )


def _key_check(c: sqlite3.Connection, image: RunImage) -> None:
    """The goal's key check recorded, or refused when the file's goal has another key's."""
    if image.key_check is None:
        return
    got = c.execute("SELECT key_check FROM key_checks WHERE goal = ?", (image.goal,)).fetchone()
    if got is None:
        c.execute(
            "INSERT INTO key_checks (goal, key_check, set_at) VALUES (?, ?, ?)",
            (image.goal, image.key_check, image.run["started_at"]),
        )
    elif got[0] != image.key_check:
        raise key_mismatch(image)
