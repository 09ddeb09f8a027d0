"""``PostgresInspector``: the :class:`~letitloop.inspection.inspector.Inspector` on a
PostgreSQL journal (``postgresql://…``, ``postgres_storage.py``), for ``lil`` and
``letitloop.send``/``cancel``.

It answers with the in-memory store's rules (it is a ``MemoryInspector``),
over a snapshot of the database's tables read in one transaction: so the
state of a run is told by the same code on every store. A change reads the
snapshot under ``LOCK TABLE … IN EXCLUSIVE MODE`` (journals wait to write,
readers do not), applies the change to it, and writes back exactly the rows
it changed in the same transaction, with a notification (``NOTIFY
letitloop``) that wakes a journal waiting for a value sent or a cancel. A run is held through its
advisory lock, as a journal holds it.

What this costs: a question about one run (its rows, attempts, tries,
replays, result: what ``lil show`` and ``lil ui``'s run page ask) reads a
snapshot of that run alone; any other read, and every change, loads the
whole database (runs, rows, tries): fine for a journal of thousands of runs,
not of millions; reading by SQL query by query is left to do
(docs/postgres.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections.abc import Iterator
from typing import Any

from ..errors import LetItLoopError, SchemaVersionError
from ..memory_database import MemoryDatabase, Row
from ..postgres_seals import chain_of
from ..postgres_storage import (
    CHANNEL,
    COLUMNS,
    PostgresHold,
    connect,
    is_held,
    migrate,
    redact,
    run_hold_text,
    schema_version,
    schema_version_of,
)
from ..row_rules import TRY_COLUMNS
from .memory_inspector import MemoryInspector
from .records import AttemptInfo, RowInfo, RunInfo, TryInfo

_RUN_COLUMNS = (
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


def open_postgres_inspector(
    location: str, *, write: bool = False, live: bool = False
) -> PostgresInspector:
    """The inspector of the PostgreSQL journal at ``location``; read-only unless ``write``."""
    return PostgresInspector(location, write=write)


class PostgresInspector(MemoryInspector):
    """The inspector of one PostgreSQL journal (see the module's docstring)."""

    def __init__(self, location: str, *, write: bool = False) -> None:
        self.location = location
        self.conn = connect(location)
        row = self.conn.execute("SELECT current_schema()").fetchone()
        self.schema = str(row[0]) if row is not None else ""
        try:
            if self._has_tables():
                self._upgrade(write)
            # Nothing read yet: every question reads its own snapshot (_reading).
            super().__init__(MemoryDatabase(location), write=write)
        except BaseException:
            self.conn.close()
            raise

    def _upgrade(self, write: bool) -> None:
        """A newer schema refused, an older one upgraded to change it (``write``) or
        refused for reading: a reader never writes."""
        version = schema_version_of(self.conn)
        if write or version > schema_version():
            migrate(self.conn, self.location)  # refuses a newer schema, changing nothing
        elif version < schema_version():
            raise SchemaVersionError(
                f"{self.path}: expected a letitloop schema of version {schema_version()}; "
                f"found version {version}, written by an older letitloop, and a reader "
                f"changes nothing. Open a Journal on it (or run 'lil reset', 'fork' or "
                f"'gc', which write) to upgrade it, then read it again",
                path=self.path,
            )

    @property
    def path(self) -> str:
        return redact(self.location)

    def close(self) -> None:
        if not self.closed:
            self.conn.close()
        super().close()

    # -- snapshots ----------------------------------------------------------------------

    def _has_tables(self) -> bool:
        row = self.conn.execute("SELECT to_regclass('ll_meta') IS NOT NULL").fetchone()
        return bool(row and row[0])

    def _load(self, run_id: str | None = None) -> MemoryDatabase:
        """The database's rows as a ``MemoryDatabase`` (inside the caller's transaction);
        with ``run_id``, only that run's (its run, rows, tries, replays and attempts)."""
        db = MemoryDatabase(self.location)
        if not self._has_tables():
            return db
        c = self.conn
        only: tuple[str, ...] = () if run_id is None else (run_id,)

        def of_run(column: str) -> str:
            return f" WHERE {column} = %s" if only else ""

        for (goal,) in c.execute("SELECT goal FROM ll_goals").fetchall():
            db.goals[goal] = {}
        # Every goal's key check (a row per encrypted goal), even in one run's snapshot.
        db.key_checks = dict(c.execute("SELECT goal, key_check FROM ll_key_checks").fetchall())
        top = 0
        for num, *values in c.execute(
            f"SELECT num, {', '.join(_RUN_COLUMNS)} FROM ll_runs{of_run('id')} ORDER BY num",
            only,
        ).fetchall():
            run = dict(zip(_RUN_COLUMNS, values, strict=True))
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
        db.replays = [
            (r, a, tuple(k or ()))
            for r, a, k in c.execute(f"SELECT * FROM ll_replays{of_run('run')}", only).fetchall()
        ]
        # The columns the memory model keeps (not ``trace``: otel.py's, read by no reader).
        db.attempts = [
            tuple(a)
            for a in c.execute(
                "SELECT run, attempt, pid, host, started_at, version FROM ll_attempts"
                f"{of_run('run')}",
                only,
            ).fetchall()
        ]
        return db

    @contextlib.contextmanager
    def _reading(self) -> Iterator[MemoryDatabase]:
        self._check()
        with self.conn.transaction():
            self.db = self._load(self._run_only)
        yield self.db

    #: The run whose questions are being answered (``_of_run``): a snapshot of it alone.
    _run_only: str | None = None

    @contextlib.contextmanager
    def _of_run(self, run_id: str) -> Iterator[None]:
        """Answer a question about one run from a snapshot of that run only: its rows,
        not the database's (a run page asks several, each reading its own snapshot)."""
        self._run_only = run_id
        try:
            yield
        finally:
            self._run_only = None

    def rows(self, run: RunInfo) -> list[RowInfo]:
        with self._of_run(run.id):
            return super().rows(run)

    def tries(self, run_id: str) -> list[TryInfo]:
        with self._of_run(run_id):
            return super().tries(run_id)

    def result_json(self, run_id: str) -> str | None:
        with self._of_run(run_id):
            return super().result_json(run_id)

    def replays(self, run_id: str) -> list[Any]:
        with self._of_run(run_id):
            return super().replays(run_id)

    def attempt_replays(self, run_id: str) -> list[tuple[int, Any]]:
        with self._of_run(run_id):
            return super().attempt_replays(run_id)

    def key_check(self, run: RunInfo) -> str | None:
        with self._of_run(run.id):
            return super().key_check(run)

    @contextlib.contextmanager
    def _changing(self) -> Iterator[MemoryDatabase]:
        self._check()
        if not self.writable:
            raise LetItLoopError(
                f"{self.path} was opened for reading only, so nothing was written; to change "
                f"it, open it with open_inspector(path, write=True) (reset, fork, gc, send "
                f"and cancel do)"
            )
        with self.conn.transaction():
            if self._has_tables():
                self.conn.execute(
                    "LOCK TABLE ll_goals, ll_runs, ll_journal, ll_tries, ll_replays, ll_attempts, "
                    "ll_key_checks "
                    "IN EXCLUSIVE MODE"
                )
            before = self._load()
            after = self.db = self._load()
            yield after
            self._write_back(before, after)
            # Wakes the journals paused in this schema (a value sent, a cancel).
            self.conn.execute("SELECT pg_notify(%s, current_schema())", (CHANNEL,))

    def _write_back(self, before: MemoryDatabase, after: MemoryDatabase) -> None:
        """Write the rows ``after`` changed from ``before``: runs, rows, tries, replays."""
        c = self.conn
        for goal in before.goals.keys() - after.goals.keys():
            c.execute("DELETE FROM ll_goals WHERE goal = %s", (goal,))
        for goal in before.key_checks.keys() - after.key_checks.keys():
            c.execute("DELETE FROM ll_key_checks WHERE goal = %s", (goal,))
        for goal in after.goals.keys() - before.goals.keys():
            c.execute("INSERT INTO ll_goals VALUES (%s) ON CONFLICT DO NOTHING", (goal,))
        for run_id in before.runs.keys() - after.runs.keys():
            c.execute("DELETE FROM ll_runs WHERE id = %s", (run_id,))
        for run_id, run in sorted(after.runs.items(), key=lambda kv: kv[1]["order"]):
            old = before.runs.get(run_id)
            values = {k: run.get(k) for k in _RUN_COLUMNS}
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
                        f"UPDATE ll_runs SET {', '.join(f'{k} = %s' for k in changed)} "
                        f"WHERE id = %s",
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
                    f"UPDATE ll_journal SET {', '.join(f'{k} = %s' for k in changed)} "
                    f"WHERE rowid = %s",
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

    def seal_chain(self, run: RunInfo) -> tuple[list[Any], list[Any]]:
        """The run's sealed chain (``ll_seals``) and its rows, in one snapshot of that run
        alone (postgres_seals.py)."""
        self._check()
        return chain_of(self.conn, run.goal, run.id)

    # -- lil watch's records (migration 0006), read where they are ----------------------

    def _dicts(self, sql: str, params: tuple[Any, ...]) -> list[dict[str, Any]]:
        self._check()
        if not self._has_tables():
            return []
        cur = self.conn.execute(sql, params)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def attempts(self, run_id: str) -> list[AttemptInfo]:
        with self._of_run(run_id):
            found = super().attempts(run_id)
        watchers = {
            a["attempt"]: a
            for a in self._dicts(
                "SELECT attempt, watch_id, watch_attempt FROM ll_attempts WHERE run = %s "
                "AND watch_id IS NOT NULL",
                (run_id,),
            )
        }
        return [
            dataclasses.replace(
                a,
                watch_id=watchers[a.attempt]["watch_id"],
                watch_attempt=watchers[a.attempt]["watch_attempt"],
            )
            if a.attempt in watchers
            else a
            for a in found
        ]

    def supervisor_events(self, run_id: str) -> list[dict[str, Any]]:
        return self._dicts(
            "SELECT * FROM ll_supervisor_events WHERE watch_id IN (SELECT watch_id FROM "
            "ll_attempts WHERE run = %s AND watch_id IS NOT NULL) ORDER BY id",
            (run_id,),
        )

    def last_watcher_event(self, run_id: str) -> dict[str, Any] | None:
        rows = self._dicts(
            "SELECT * FROM ll_supervisor_events WHERE watch_id = (SELECT watch_id FROM "
            "ll_attempts WHERE run = %s AND watch_id IS NOT NULL ORDER BY attempt DESC "
            "LIMIT 1) ORDER BY id DESC LIMIT 1",
            (run_id,),
        )
        return rows[0] if rows else None

    def supervisor_events_before(self, at: str, going: set[str]) -> int:
        kept = {
            r["watch_id"]
            for r in self._dicts(
                "SELECT run, watch_id FROM ll_attempts WHERE watch_id IS NOT NULL", ()
            )
            if r["run"] not in going
        }
        return sum(
            1
            for r in self._dicts("SELECT watch_id FROM ll_supervisor_events WHERE at < %s", (at,))
            if r["watch_id"] not in kept
        )

    def delete_supervisor_events(self, at: str) -> int:
        self._check()
        if not self.writable or not self._has_tables():
            return 0
        cur = self.conn.execute(
            "DELETE FROM ll_supervisor_events WHERE at < %s AND watch_id NOT IN "
            "(SELECT watch_id FROM ll_attempts WHERE watch_id IS NOT NULL)",
            (at,),
        )
        return int(cur.rowcount)

    # -- runs' locks ------------------------------------------------------------------

    def is_held(self, run_id: str) -> bool:
        self._check()
        return is_held(self.conn, run_hold_text(self.schema, run_id))

    @contextlib.contextmanager
    def hold(self, run_id: str) -> Iterator[bool]:
        hold = PostgresHold(self.location, run_hold_text(self.schema, run_id))
        if not hold.acquire(0):
            yield False
            return
        try:
            yield True
        finally:
            hold.release()


def _all_rows(db: MemoryDatabase) -> dict[int, tuple[str, Row]]:
    found: dict[int, tuple[str, Row]] = {}
    for goal, rows in db.goals.items():
        for row in rows.values():
            found[row.rowid] = (goal, row)
    for row in db.global_markers.values():
        found[row.rowid] = ("", row)
    return found
