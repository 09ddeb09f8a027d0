"""A PostgreSQL journal as a snapshot: its tables read into a ``MemoryDatabase``
(:func:`load`, the whole database or one run's rows), and what a change made to the
snapshot written back, row by row (:func:`write_back`), for
:class:`~letitloop.inspection.postgres_inspector.PostgresInspector`.

Both run inside the caller's transaction, on the caller's connection.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from typing import Any

from ..stores.memory.database import MemoryDatabase, Row
from ..stores.postgres.connection import COLUMNS
from ..stores.row_rules import TRY_COLUMNS
from .images import ATTEMPT_COLUMNS, RESERVATION_COLUMNS, RUN_COLUMNS, RunImage, key_mismatch

#: A stream chunk's columns, as a ``RunImage`` holds them.
_CHUNKS = "key, seq, attempt, kind, data, mark, at"

__all__ = ["has_tables", "image_extras", "insert_images", "load", "write_back"]


def has_stream_table(conn: Any) -> bool:
    """Whether the schema has streamed steps' chunks (migration 0013): a reader never migrates."""
    row = conn.execute("SELECT to_regclass('ll_stream_chunks')").fetchone()
    return row is not None and row[0] is not None


def has_tables(conn: Any) -> bool:
    """Whether the connection's schema holds letitloop's tables (``ll_meta``)."""
    row = conn.execute("SELECT to_regclass('ll_meta') IS NOT NULL").fetchone()
    return bool(row and row[0])


def iso(value: Any) -> Any:
    """A timestamptz as the memory model's ISO-8601 text (None stays None)."""
    return value.isoformat() if hasattr(value, "isoformat") else value


def load(conn: Any, location: str, run_id: str | None = None) -> MemoryDatabase:
    """The database's rows as a ``MemoryDatabase`` (inside the caller's transaction);
    with ``run_id``, only that run's (its run, rows, tries, replays and attempts)."""
    db = MemoryDatabase(location)
    if not has_tables(conn):
        return db
    c = conn
    only: tuple[str, ...] = () if run_id is None else (run_id,)

    def of_run(column: str) -> str:
        return f" WHERE {column} = %s" if only else ""

    for (goal,) in c.execute("SELECT goal FROM ll_goals").fetchall():
        db.goals[goal] = {}
    # Every goal's key check (a row per encrypted goal), even in one run's snapshot.
    db.key_checks = dict(c.execute("SELECT goal, key_check FROM ll_key_checks").fetchall())
    top = 0
    for num, *values in c.execute(
        f"SELECT num, {', '.join(RUN_COLUMNS)} FROM ll_runs{of_run('id')} ORDER BY num",
        only,
    ).fetchall():
        run = dict(zip(RUN_COLUMNS, values, strict=True))
        run["order"] = num
        db.runs[run["id"]] = run
        db.goals.setdefault(run["goal"], {})
        top = max(top, num)
    db._runs = itertools.count(top + 1)
    last = 0
    for rowid, goal, run_id, key, *values in c.execute(
        f"SELECT rowid, goal, run, key, {', '.join(COLUMNS)} FROM ll_journal"
        f"{of_run('run')} ORDER BY rowid",
        only,
    ).fetchall():
        row = Row(rowid)
        row.update(zip(COLUMNS, values, strict=True), run=run_id, key=key)
        db.by_rowid[rowid] = row
        if goal == "":
            db.global_markers[key] = row
        else:
            db.goals.setdefault(goal, {})[(run_id, key)] = row
        last = max(last, rowid)
    db._rowids = itertools.count(last + 1)
    for run_id, key, n, *values in c.execute(
        f"SELECT run, key, try, {', '.join(TRY_COLUMNS)} FROM ll_tries{of_run('run')}", only
    ).fetchall():
        db.tries[(run_id, key, n)] = dict(zip(TRY_COLUMNS, values, strict=True))
    if c.execute("SELECT to_regclass('ll_reservations') IS NOT NULL").fetchone()[0]:
        for run_id, call, *values in c.execute(
            f"SELECT run, call, {', '.join(RESERVATION_COLUMNS)} FROM ll_reservations"
            f"{of_run('run')}",
            only,
        ).fetchall():
            held = dict(zip(RESERVATION_COLUMNS, values, strict=True))
            held["reserved_at"] = iso(held["reserved_at"])
            held["settled_at"] = iso(held["settled_at"])
            db.reservations[(run_id, call)] = held
    db.replays = [
        (r, a, tuple(k or ()))
        for r, a, k in c.execute(f"SELECT * FROM ll_replays{of_run('run')}", only).fetchall()
    ]
    # The columns the memory model keeps (not ``trace``: otel.py's, read by no reader).
    db.attempts = [
        tuple(a)
        for a in c.execute(
            f"SELECT run, attempt, pid, host, started_at, version FROM ll_attempts{of_run('run')}",
            only,
        ).fetchall()
    ]
    db.endings = {
        (run, attempt): (ended_at, outcome, error)
        for run, attempt, ended_at, outcome, error in c.execute(
            "SELECT run, attempt, ended_at, outcome, error FROM ll_attempts"
            f"{of_run('run')}{' AND' if only else ' WHERE'} outcome IS NOT NULL",
            only,
        ).fetchall()
    }
    return db


def write_back(conn: Any, before: MemoryDatabase, after: MemoryDatabase) -> None:
    """Write the rows ``after`` changed from ``before``: runs, rows, tries, replays."""
    c = conn
    for goal in before.goals.keys() - after.goals.keys():
        c.execute("DELETE FROM ll_goals WHERE goal = %s", (goal,))
    for goal in before.key_checks.keys() - after.key_checks.keys():
        c.execute("DELETE FROM ll_key_checks WHERE goal = %s", (goal,))
    for goal in after.goals.keys() - before.goals.keys():
        c.execute("INSERT INTO ll_goals VALUES (%s) ON CONFLICT DO NOTHING", (goal,))
    for run_id in before.runs.keys() - after.runs.keys():
        c.execute("DELETE FROM ll_runs WHERE id = %s", (run_id,))
        if has_stream_table(c):  # its migration 0013
            c.execute("DELETE FROM ll_stream_chunks WHERE run = %s", (run_id,))
    for run_id, call in before.reservations.keys() - after.reservations.keys():
        c.execute("DELETE FROM ll_reservations WHERE run = %s AND call = %s", (run_id, call))
    for run_id, run in sorted(after.runs.items(), key=lambda kv: kv[1]["order"]):
        old = before.runs.get(run_id)
        values = {k: run.get(k) for k in RUN_COLUMNS}
        if old is None:
            c.execute(
                f"INSERT INTO ll_runs ({', '.join(values)}) VALUES "
                f"({', '.join(['%s'] * len(values))})",
                tuple(values.values()),
            )
        else:
            changed = {k: v for k, v in values.items() if old.get(k) != v}
            if changed:
                c.execute(
                    f"UPDATE ll_runs SET {', '.join(f'{k} = %s' for k in changed)} WHERE id = %s",
                    (*changed.values(), run_id),
                )
    rows_before = _all_rows(before)
    rows_after = _all_rows(after)
    gone = [r for r in rows_before if r not in rows_after]
    if gone:
        c.execute("DELETE FROM ll_journal WHERE rowid = ANY(%s)", (gone,))
    for rowid in sorted(rows_after):
        goal, row = rows_after[rowid]
        values = {k: row.get(k) for k in COLUMNS}
        if rowid not in rows_before:
            c.execute(
                f"INSERT INTO ll_journal (goal, run, key, {', '.join(COLUMNS)}) VALUES "
                f"({', '.join(['%s'] * (3 + len(COLUMNS)))})",
                (goal, row["run"] or "", row["key"], *values.values()),
            )
            continue
        old = rows_before[rowid][1]
        changed = {k: v for k, v in values.items() if old.get(k) != v}
        if changed:
            c.execute(
                f"UPDATE ll_journal SET {', '.join(f'{k} = %s' for k in changed)} WHERE rowid = %s",
                (*changed.values(), rowid),
            )
    for slot in before.tries.keys() - after.tries.keys():
        c.execute("DELETE FROM ll_tries WHERE run = %s AND key = %s AND try = %s", slot)
    for slot, t in after.tries.items():
        if before.tries.get(slot) != t:
            c.execute("DELETE FROM ll_tries WHERE run = %s AND key = %s AND try = %s", slot)
            c.execute(
                f"INSERT INTO ll_tries (run, key, try, {', '.join(TRY_COLUMNS)}) VALUES "
                f"({', '.join(['%s'] * (3 + len(TRY_COLUMNS)))})",
                (*slot, *(t.get(k) for k in TRY_COLUMNS)),
            )
    lists: list[tuple[str, list[Any], list[Any]]] = [
        ("ll_replays", list(before.replays), list(after.replays)),
        ("ll_attempts", list(before.attempts), list(after.attempts)),
    ]
    for table, old_list, new_list in lists:
        old_set, new_set = set(old_list), set(new_list)
        touched: set[str] = {str(e[0]) for e in old_set ^ new_set}
        for run_id in touched:
            c.execute(f"DELETE FROM {table} WHERE run = %s", (run_id,))
            for entry in new_list:
                if entry[0] == run_id:
                    cells: list[Any] = list(entry)
                    if table == "ll_replays":
                        cells[2] = list(cells[2])
                    # ll_attempts by name: its columns after started_at came by ALTER
                    # (trace, version), in whichever order a database got them.
                    named = " (run, attempt, pid, host, started_at, version)"
                    c.execute(
                        f"INSERT INTO {table}{named if table == 'll_attempts' else ''} "
                        f"VALUES ({', '.join(['%s'] * len(cells))})",
                        cells,
                    )


def _all_rows(db: MemoryDatabase) -> dict[int, tuple[str, Row]]:
    found: dict[int, tuple[str, Row]] = {}
    for goal, rows in db.goals.items():
        for row in rows.values():
            found[row.rowid] = (goal, row)
    for row in db.global_markers.values():
        found[row.rowid] = ("", row)
    return found


# -- lil copy: what a snapshot leaves out -------------------------------------------------


def image_extras(conn: Any, image: RunImage) -> RunImage:
    """``image`` (of a snapshot of the run) with what that snapshot does not hold: the run's
    sealed chain (``ll_seals``), its attempts' watchers (``lil watch``'s ids) and spans, its
    goal's goal-scoped markers and the global markers it holds or last held."""
    seals = conn.execute(
        "SELECT n, key, kind, status, digest, seal FROM ll_seals WHERE run = %s ORDER BY n",
        (image.id,),
    ).fetchall()
    extras = {
        a: (w, wa, t)
        for a, w, wa, t in conn.execute(
            "SELECT attempt, watch_id, watch_attempt, trace FROM ll_attempts WHERE run = %s",
            (image.id,),
        ).fetchall()
    }
    markers = f"SELECT key, {', '.join(COLUMNS)} FROM ll_journal WHERE goal = %s AND "
    goal_markers = [
        {"run": "*", "key": key, **dict(zip(COLUMNS, values, strict=True))}
        for key, *values in conn.execute(
            markers + "run = '*' ORDER BY rowid", (image.goal,)
        ).fetchall()
    ]
    global_markers = [
        {"run": None, "key": key, **dict(zip(COLUMNS, values, strict=True))}
        for key, *values in conn.execute(
            markers + "holder_run = %s ORDER BY rowid", ("", image.id)
        ).fetchall()
    ]
    named = ("watch_id", "watch_attempt", "trace")
    attempts = [
        {**a, **dict(zip(named, extras.get(a["attempt"], ()), strict=False))}
        for a in image.attempts
    ]
    chunks = []
    if has_stream_table(conn):  # its migration 0013
        chunks = conn.execute(
            f"SELECT {_CHUNKS} FROM ll_stream_chunks WHERE run = %s ORDER BY key, seq",
            (image.id,),
        ).fetchall()
    return dataclasses.replace(
        image,
        chunks=[(key, int(seq), *rest) for key, seq, *rest in chunks],
        seals=[tuple(e) for e in seals],
        attempts=attempts,
        goal_markers=goal_markers,
        global_markers=global_markers,
    )


def insert_images(conn: Any, images: Sequence[RunImage]) -> None:
    """Inside the caller's transaction: the runs of ``images`` inserted, with everything they
    own, row by row (no snapshot: a copy into a large database reads none of it). A goal's
    or global marker the database has already stays its own; EncryptionKeyError, nothing
    written, for a goal whose recorded key check is another key's."""
    for image in images:
        if image.key_check is None:
            continue
        got = conn.execute(
            "SELECT key_check FROM ll_key_checks WHERE goal = %s", (image.goal,)
        ).fetchone()
        if got is not None and got[0] != image.key_check:
            raise key_mismatch(image)
    row_sql = (
        f"INSERT INTO ll_journal (goal, run, key, {', '.join(COLUMNS)}) VALUES "
        f"({', '.join(['%s'] * (3 + len(COLUMNS)))}) ON CONFLICT (goal, run, key) DO NOTHING"
    )
    for image in images:
        run, goal = image.id, image.goal
        conn.execute("INSERT INTO ll_goals VALUES (%s) ON CONFLICT DO NOTHING", (goal,))
        if image.key_check is not None:
            conn.execute(
                "INSERT INTO ll_key_checks (goal, key_check, set_at) VALUES (%s, %s, %s) "
                "ON CONFLICT (goal) DO NOTHING",
                (goal, image.key_check, image.run["started_at"]),
            )
        conn.execute(
            f"INSERT INTO ll_runs ({', '.join(RUN_COLUMNS)}) VALUES "
            f"({', '.join(['%s'] * len(RUN_COLUMNS))})",
            tuple(image.run.get(k) for k in RUN_COLUMNS),
        )
        rows = [(goal, run, r["key"], *(r.get(k) for k in COLUMNS)) for r in image.rows]
        rows += [(goal, "*", m["key"], *(m.get(k) for k in COLUMNS)) for m in image.goal_markers]
        rows += [("", "", m["key"], *(m.get(k) for k in COLUMNS)) for m in image.global_markers]
        with conn.cursor() as cur:
            cur.executemany(row_sql, rows)
            cur.executemany(
                f"INSERT INTO ll_tries (run, key, try, {', '.join(TRY_COLUMNS)}) VALUES "
                f"({', '.join(['%s'] * (3 + len(TRY_COLUMNS)))})",
                [(run, t["key"], t["try"], *(t.get(k) for k in TRY_COLUMNS)) for t in image.tries],
            )
            cur.executemany(
                "INSERT INTO ll_replays (run, attempt, keys) VALUES (%s, %s, %s)",
                [(run, a, list(keys)) for a, keys in image.replays],
            )
            cur.executemany(
                f"INSERT INTO ll_reservations (run, call, {', '.join(RESERVATION_COLUMNS)}) "
                f"VALUES ({', '.join(['%s'] * (2 + len(RESERVATION_COLUMNS)))})",
                [
                    (run, r["call"], *(r.get(k) for k in RESERVATION_COLUMNS))
                    for r in image.reservations
                ],
            )
            cur.executemany(
                f"INSERT INTO ll_attempts (run, {', '.join(ATTEMPT_COLUMNS)}) VALUES "
                f"({', '.join(['%s'] * (1 + len(ATTEMPT_COLUMNS)))})",
                [(run, *(a.get(k) for k in ATTEMPT_COLUMNS)) for a in image.attempts],
            )
            prevs = [None, *(e[5] for e in image.seals)][: len(image.seals)]
            cur.executemany(
                "INSERT INTO ll_seals (run, n, key, kind, status, digest, seal, prev) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                [(run, *e, prev) for e, prev in zip(image.seals, prevs, strict=True)],
            )
            cur.executemany(
                f"INSERT INTO ll_stream_chunks (run, {_CHUNKS}) VALUES "
                "(%s, %s, %s, %s, %s, %s, %s, %s)",
                [(run, *chunk) for chunk in image.chunks],
            )
