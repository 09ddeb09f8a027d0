"""``lil copy`` on the in-memory store's data (a ``MemoryDatabase``: ``memory://NAME``, and
for reading, a PostgreSQL journal's snapshot of one run): a run read into a
:class:`RunImage` (:func:`memory_image`) and runs added from their images
(:func:`add_images`).
Pure functions of the database, called under its lock (inside the inspector's
``_reading`` or ``_changing``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..primitives.markers import GOAL_SCOPE_RUN
from ..stores.memory.database import MemoryDatabase, Row
from ..stores.row_rules import ROW_COLUMNS, TRY_COLUMNS
from .images import RESERVATION_COLUMNS, RUN_COLUMNS, RunImage, key_mismatch


def _row(row: Row) -> dict[str, Any]:
    return {k: row.get(k) for k in ROW_COLUMNS}


def memory_image(db: MemoryDatabase, run_id: str, chain: bool = True) -> RunImage:
    """Everything run ``run_id`` owns in ``db`` (its chain too, unless ``chain`` is False:
    a PostgreSQL snapshot holds none, its inspector reads it apart)."""
    run = db.runs[run_id]
    goal = run["goal"]
    rows = db.rows(goal)
    tries = sorted(
        ({"key": k, "try": n, **t} for (r, k, n), t in db.tries.items() if r == run_id),
        key=lambda t: (str(t.get("failed_at")), t["key"], t["try"]),
    )
    return RunImage(
        run={k: run.get(k) for k in RUN_COLUMNS},
        rows=[_row(r) for r in rows if r["run"] == run_id],
        goal_markers=[_row(r) for r in rows if r["run"] == GOAL_SCOPE_RUN],
        global_markers=[_row(r) for r in db.global_markers.values() if r["holder_run"] == run_id],
        tries=tries,
        replays=[(a, list(keys)) for r, a, keys in db.replays if r == run_id],
        reservations=[
            {"call": c, **{k: held.get(k) for k in RESERVATION_COLUMNS}}
            for (r, c), held in sorted(db.reservations.items())
            if r == run_id
        ],
        attempts=[
            {
                "attempt": a[1],
                "pid": a[2],
                "host": a[3],
                "started_at": a[4],
                "version": a[5] if len(a) > 5 else None,
                "trace": db.traces.get((run_id, a[1])),
                **dict(
                    zip(
                        ("ended_at", "outcome", "error"),
                        db.endings.get((run_id, a[1]), ()),
                        strict=False,
                    )
                ),
            }
            for a in sorted((a for a in db.attempts if a[0] == run_id), key=lambda a: a[1])
        ],
        seals=list(db.seals.get(run_id, [])) if chain else [],
        key_check=db.key_checks.get(goal),
        chunks=[
            (key, *chunk)
            for (r, key), chunks in sorted(db.chunks.items())
            if r == run_id
            for chunk in chunks
        ],
    )


def add_images(db: MemoryDatabase, images: Sequence[RunImage]) -> None:
    """Add the runs of ``images`` to ``db`` with their chains; EncryptionKeyError, adding
    nothing, when a goal of ``db`` has another key's check."""
    for image in images:
        check = db.key_checks.get(image.goal)
        if image.key_check is not None and check not in (None, image.key_check):
            raise key_mismatch(image)
    for image in images:
        goal = db.goals.setdefault(image.goal, {})
        if image.key_check is not None:
            db.key_checks.setdefault(image.goal, image.key_check)
        db.runs[image.id] = {
            **{k: image.run.get(k) for k in RUN_COLUMNS},
            "order": db.run_order(),
        }
        for values in image.rows:
            row = db.new_row()
            row.update({k: values.get(k) for k in ROW_COLUMNS})
            goal[(image.id, row["key"])] = row
        for values in image.goal_markers:
            if (GOAL_SCOPE_RUN, values["key"]) not in goal:
                row = db.new_row()
                row.update({k: values.get(k) for k in ROW_COLUMNS})
                goal[(GOAL_SCOPE_RUN, row["key"])] = row
        for values in image.global_markers:
            if values["key"] not in db.global_markers:
                row = db.new_row()
                row.update({k: values.get(k) for k in ROW_COLUMNS})
                db.global_markers[row["key"]] = row
        for t in image.tries:
            db.tries[(image.id, t["key"], t["try"])] = {k: t.get(k) for k in TRY_COLUMNS}
        db.replays.extend((image.id, a, tuple(keys)) for a, keys in image.replays)
        for held in image.reservations:
            db.reservations[(image.id, held["call"])] = {
                k: held.get(k) for k in RESERVATION_COLUMNS
            }
        for a in image.attempts:
            db.attempts.append(
                (image.id, a["attempt"], a["pid"], a["host"], a["started_at"], a.get("version"))
            )
            if a.get("trace") is not None:
                db.traces[(image.id, a["attempt"])] = a["trace"]
            if a.get("outcome") is not None:
                db.endings[image.id, a["attempt"]] = (a["ended_at"], a["outcome"], a.get("error"))
        if image.seals:
            db.seals[image.id] = list(image.seals)
        for key, *chunk in image.chunks:
            db.chunks.setdefault((image.id, key), []).append(tuple(chunk))
