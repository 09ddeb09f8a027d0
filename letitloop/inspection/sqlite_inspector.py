"""``SqliteInspector``: the :class:`~letitloop.inspection.inspector.Inspector` on a journal
file, built on :class:`~letitloop.stores.sqlite.store.Store`. Every SQL statement of
``lil``'s reading and changing commands, of :mod:`letitloop.maintenance` and of
:mod:`letitloop.supervision.control` is here or in the modules it is built of.

Here: changing runs (reset, fork, a value sent, a cancel) and collecting
garbage; its bases find and read them: ``sqlite_runs.py`` (goals and runs,
runs' locks: the lock files beside the journal, :mod:`letitloop.stores.sqlite.locks`) and
``sqlite_detail.py`` (one run in detail); ``sqlite_changes.py`` holds the
writes it makes inside a transaction, ``sqlite_filters.py`` a filter's SQL.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ..integrity.checksums import pause_sum
from ..stores.sqlite import locks
from ..stores.sqlite.goals import drop_goal_tables, refresh_journal_rows
from ..stores.sqlite.store import Store
from .entries import QUEUE_COLUMNS
from .images import RunImage
from .inspector_changes import WaitAnswer
from .records import RunInfo, WaitRow
from .sqlite_changes import bind_copied_rows, delete_runs, goals_left_empty, has_table
from .sqlite_copy import read_image, write_images
from .sqlite_detail import SqliteDetail
from .sqlite_filters import (
    CANCEL_ENTRY,
    NEWEST_ENTRIES,
    QUEUE_COUNTS,
    REQUEUE,
    queue_conditions,
)
from .sqlite_fixture import copy_run_to_file

#: Whatever part of the Inspector a caller of :func:`as_inspector` names.
_Part = TypeVar("_Part")

_REQUEUE = REQUEUE.format(table="queue_entries").replace("%s", "?")
_CANCEL_ENTRY = CANCEL_ENTRY.format(table="queue_entries").replace("%s", "?")


class SqliteInspector(SqliteDetail):
    """The inspector of one journal file, on a :class:`Store` it owns (closed by :meth:`close`)."""

    def delete_runs(self, runs: list[RunInfo]) -> int:
        by_table: dict[str, list[str]] = {}
        for run in runs:
            by_table.setdefault(run.journal_table, []).append(run.id)
        deleted = 0
        with self.store.write() as c:
            for table, ids in by_table.items():
                deleted += delete_runs(c, table, ids)
        return deleted

    def copy_run(self, run: RunInfo, to: Path, text: Callable[[str | None], str | None]) -> int:
        """``lil fixture``: ``run`` copied into a new journal file ``to``; the rows copied.

        A journal file's own (:class:`~letitloop.inspection.images.FixtureCopies`): only a
        journal file's runs are copied (:mod:`letitloop.inspection.sqlite_fixture`)."""
        return copy_run_to_file(self.store, run, to, text)

    def run_image(self, run: RunInfo) -> RunImage:
        """``lil copy``: everything ``run`` owns, read in one transaction (sqlite_copy.py)."""
        return read_image(self.store, run)

    def add_runs(self, images: Sequence[RunImage]) -> None:
        """``lil copy``: the runs of ``images`` written in one transaction (sqlite_copy.py)."""
        write_images(self.store, images)

    def fork(
        self,
        source: RunInfo,
        new_id: str,
        at: str,
        from_step: str,
        before_seq: int,
        rename_source: str | None,
    ) -> None:
        table = source.journal_table
        with self.store.write() as c:
            if rename_source is not None:
                c.execute("UPDATE runs SET name = ? WHERE id = ?", (rename_source, source.id))
            # The fork is a re-run of the same call: it keeps the source's input (so an
            # opener called with the same arguments resumes it) and records its lineage.
            c.execute(
                "INSERT INTO runs (id, goal, name, status, attempts, started_at, updated_at, "
                "input, input_fp, forked_from, forked_at) SELECT ?, goal, ?, 'running', 0, ?, ?, "
                "input, input_fp, id, ? FROM runs WHERE id = ?",
                (new_id, source.name, at, at, from_step, source.id),
            )
            # Each copied row keeps its arguments' fingerprint (a replay must match it, or
            # the fork would hand a result to a call with any arguments) and its model,
            # but not its tokens or cost: that money was spent once, by the source run,
            # where it stays counted (a sum over the journal table counts it once).
            c.execute(
                f'INSERT INTO "{table}" (run, key, kind, status, fn, result, started_at, '
                f"finished_at, duration_ms, attempt, error, traceback, wake_at, args_fp, model) "
                f"SELECT ?, key, kind, status, fn, result, started_at, finished_at, duration_ms, "
                f"0, error, traceback, wake_at, args_fp, model "
                f'FROM "{table}" WHERE run = ? AND rowid < ? '
                f"AND status = 'done' ORDER BY rowid",
                (new_id, source.id, before_seq),
            )
            if has_table(c, "stream_chunks"):  # the streams of the steps before the cut
                c.execute(
                    "INSERT INTO stream_chunks (run, key, seq, attempt, kind, data, mark, at) "
                    "SELECT ?, key, seq, attempt, kind, data, mark, at FROM stream_chunks "
                    f'WHERE run = ? AND key IN (SELECT key FROM "{table}" WHERE run = ? '
                    "AND rowid < ?)",
                    (new_id, source.id, source.id, before_seq),
                )
            bind_copied_rows(c, table, new_id, source)

    def answer_wait(
        self, run: RunInfo, choose: Callable[[list[WaitRow]], WaitAnswer]
    ) -> WaitAnswer:
        table = run.journal_table
        with self.store.write() as c:
            rows = c.execute(
                f'SELECT key, status, error, started_at, finished_at, wake_at FROM "{table}" '
                f"WHERE run = ? AND kind = 'wait' ORDER BY rowid",
                (run.id,),
            ).fetchall()
            answer = choose([WaitRow(*r) for r in rows])
            c.execute(
                f"UPDATE \"{table}\" SET status = 'done', result = ?, error = NULL, "
                f"finished_at = ?, duration_ms = ?, checksum = ? WHERE run = ? AND key = ? "
                f"AND status = 'waiting'",
                (
                    answer.result,
                    answer.finished_at,
                    answer.duration_ms,
                    pause_sum(run.id, answer.key, "wait", answer.result, None),
                    run.id,
                    answer.key,
                ),
            )
        return answer

    def cancel_now(self, run_id: str, at: str, reason: str, error: str) -> None:
        with self.store.write() as c:
            c.execute(
                "UPDATE runs SET status = 'cancelled', cancel_requested_at = coalesce("
                "cancel_requested_at, ?), cancel_reason = coalesce(cancel_reason, ?), "
                "finished_at = ?, updated_at = ?, error = ? WHERE id = ? "
                "AND status NOT IN ('completed', 'cancelled')",
                (at, reason, at, at, error, run_id),
            )

    def request_cancel(self, run_id: str, at: str, reason: str) -> None:
        with self.store.write() as c:
            c.execute(
                "UPDATE runs SET cancel_requested_at = coalesce(cancel_requested_at, ?), "
                "cancel_reason = coalesce(cancel_reason, ?), updated_at = ? WHERE id = ? "
                "AND status NOT IN ('completed', 'cancelled')",
                (at, reason, at, run_id),
            )

    # -- work queues (stores/sqlite/queue.py, migration 0021) ------------------------------

    def queue_rows(
        self,
        queue: str | None = None,
        *,
        ids: Sequence[str] | None = None,
        run_ids: Sequence[str] | None = None,
        run_names: Sequence[str] | None = None,
        unstarted: bool = False,
        limit: int | None = None,
        status: str | None = None,
    ) -> list[dict[str, Any]]:
        if not has_table(self.store, "queue_entries"):  # an older file, read as it is
            return []
        conditions, params = queue_conditions(
            queue, ids, run_ids, run_names, unstarted, "?", status
        )
        if conditions is None:
            return []
        where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
        rows = self.store.query(
            f"SELECT {', '.join(QUEUE_COLUMNS)} FROM queue_entries{where} ORDER BY {NEWEST_ENTRIES}"
            + ("" if limit is None else f" LIMIT {int(limit)}"),
            params,
        )
        return [dict(zip(QUEUE_COLUMNS, r, strict=True)) for r in rows]

    def queue_counts(self, queue: str | None, now: str) -> list[tuple[str, str, bool, int, str]]:
        if not has_table(self.store, "queue_entries"):
            return []
        where = "" if queue is None else " WHERE queue = %s"
        sql = QUEUE_COUNTS.format(table="queue_entries", where=where).replace("%s", "?")
        rows = self.store.query(sql, (now,) if queue is None else (now, queue))
        return [(str(q), str(s), bool(d), int(n), str(due)) for q, s, d, n, due in rows]

    def queue_parents(self, run_ids: Sequence[str]) -> dict[str, str]:
        if not run_ids or not has_table(self.store, "queue_entries"):
            return {}
        found: dict[str, str] = {}
        for i in range(0, len(run_ids), 500):
            part = list(run_ids[i : i + 500])
            found.update(
                self.store.query(
                    f"SELECT run_id, parent_run FROM queue_entries WHERE run_id IN "
                    f"({','.join('?' * len(part))}) AND parent_run IS NOT NULL",
                    part,
                )
            )
        return found

    def queue_held(self, entry_ids: Sequence[str]) -> set[str]:
        return {i for i in entry_ids if locks.is_held(self.store.lock_name("queue", i))}

    def delete_queue_entries(self, entry_ids: Sequence[str]) -> int:
        if not entry_ids or not has_table(self.store, "queue_entries"):
            return 0
        gone = 0
        with self.store.write() as c:
            for i in range(0, len(entry_ids), 500):
                part = list(entry_ids[i : i + 500])
                marks = ",".join("?" * len(part))
                gone += c.execute(
                    f"DELETE FROM queue_entries WHERE id IN ({marks}) "
                    "AND status IN ('completed', 'failed', 'cancelled')",
                    part,
                ).rowcount
                c.execute(f"DELETE FROM queue_starts WHERE entry IN ({marks})", part)
        return gone

    def cancel_entry(self, entry_id: str, at: str, error: str) -> bool:
        if not has_table(self.store, "queue_entries"):
            return False
        with self.store.write() as c:
            return bool(c.execute(_CANCEL_ENTRY, (at, error, entry_id)).rowcount)

    def requeue_entry(self, entry_id: str, run_id: str) -> bool:
        if not has_table(self.store, "queue_entries"):
            return False
        if locks.is_held(self.store.lock_name("queue", entry_id)):
            return False
        with self.store.write() as c:
            return bool(c.execute(_REQUEUE, (entry_id, run_id)).rowcount)

    def add_queue_rows(self, rows: Sequence[dict[str, Any]]) -> int:
        if not rows:
            return 0
        added = 0
        with self.store.write() as c:
            for row in rows:
                added += c.execute(
                    f"INSERT OR IGNORE INTO queue_entries ({', '.join(QUEUE_COLUMNS)}) "
                    f"VALUES ({', '.join('?' * len(QUEUE_COLUMNS))})",
                    [row[k] for k in QUEUE_COLUMNS],
                ).rowcount
        return added

    # -- gc ------------------------------------------------------------------------------

    def supervisor_events_before(self, at: str, going: set[str]) -> int:
        kept_watchers = {
            w
            for run, w in self.store.query(
                "SELECT run, watch_id FROM attempts WHERE watch_id IS NOT NULL"
            )
            if run not in going
        }
        return sum(
            1
            for (w,) in self.store.query(
                "SELECT watch_id FROM supervisor_events WHERE at < ?", (at,)
            )
            if w not in kept_watchers
        )

    def delete_supervisor_events(self, at: str) -> int:
        with self.store.write() as c:
            deleted: int = c.execute(
                "DELETE FROM supervisor_events WHERE at < ? AND watch_id NOT IN "
                "(SELECT watch_id FROM attempts WHERE watch_id IS NOT NULL)",
                (at,),
            ).rowcount
        return deleted

    def empty_goals(self, going: set[str]) -> list[str]:
        return goals_left_empty(self.store.conn, self.store, going)

    def drop_empty_goals(self) -> list[str]:
        with self.store.write() as c:
            gone = goals_left_empty(c, self.store, set())
            for goal in gone:
                (table,) = c.execute(
                    "SELECT journal_table FROM goals WHERE goal = ?", (goal,)
                ).fetchone()
                c.execute("DELETE FROM goals WHERE goal = ?", (goal,))
                if has_table(c, "key_checks"):  # no value is left under its key
                    c.execute("DELETE FROM key_checks WHERE goal = ?", (goal,))
                drop_goal_tables(c, table)
            if gone:
                refresh_journal_rows(c)  # the browsing view must not name a dropped table
        return gone

    def size(self) -> int:
        total = 0
        for suffix in ("", "-wal"):
            with contextlib.suppress(OSError):
                total += Path(str(self.store.path) + suffix).stat().st_size
        return total

    def sweep_locks(self) -> None:
        locks.sweep(self.store.lock_folder)

    def compact(self) -> None:
        store = self.store
        with store.lock:
            try:
                # VACUUM rewrites the file without the freed pages (the journal does not
                # use auto_vacuum, so incremental vacuum is not available); in WAL mode the
                # new pages land in the -wal file, and the checkpoint moves them into the
                # database and truncates the WAL, so the file really shrinks.
                store.conn.execute("VACUUM")
                store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as exc:
                from ..stores.sqlite.sqlerrors import explain

                raise explain(exc, store.path) from None


def as_inspector(journal: _Part | Store) -> _Part | SqliteInspector:
    """``journal`` as an :class:`Inspector` (or as the part of it the caller names): a
    :class:`Store` (what :func:`~letitloop.inspection.open_journal_file` returns) is read
    through a :class:`SqliteInspector` that does not own it; an inspector is itself."""
    return SqliteInspector(journal) if isinstance(journal, Store) else journal
