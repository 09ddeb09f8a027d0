"""A PostgreSQL journal's work-queue entries (``ll_queue_entries``, migration postgres/0012)
as ``PostgresInspector`` reads and changes them, where they are (never through its
snapshot): what ``lil runs``, ``lil queues``, ``gc``, ``reset`` and ``copy`` ask of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..stores.postgres.database import migrate, server_errors
from ..stores.postgres.holding import is_held
from .entries import QUEUE_COLUMNS
from .postgres_snapshots import has_tables
from .sqlite_filters import (
    CANCEL_ENTRY,
    NEWEST_ENTRIES,
    QUEUE_COUNTS,
    REQUEUE,
    queue_conditions,
)

#: ``lil reset`` of a queue's run: its entry back in its queue (as a file's).
_REQUEUE = REQUEUE.format(table="ll_queue_entries")
_CANCEL_ENTRY = CANCEL_ENTRY.format(table="ll_queue_entries")


class PostgresQueues:
    """The queue questions of ``PostgresInspector``, on its connection."""

    conn: Any
    schema: str
    location: str

    if TYPE_CHECKING:

        def _check(self) -> None: ...

        def _check_writable(self) -> None: ...

        def _dicts(self, sql: str, params: tuple[Any, ...]) -> list[dict[str, Any]]: ...

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
        conditions, params = queue_conditions(
            queue, ids, run_ids, run_names, unstarted, "%s", status
        )
        if conditions is None:
            return []
        where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
        return self._dicts(
            f"SELECT {', '.join(QUEUE_COLUMNS)} FROM ll_queue_entries{where} "
            f"ORDER BY {NEWEST_ENTRIES}" + ("" if limit is None else f" LIMIT {int(limit)}"),
            tuple(params),
        )

    def queue_counts(self, queue: str | None, now: str) -> list[tuple[str, str, bool, int, str]]:
        where = "" if queue is None else " WHERE queue = %s"
        rows = self._dicts(
            QUEUE_COUNTS.format(table="ll_queue_entries", where=where),
            (now,) if queue is None else (now, queue),
        )
        return [
            (str(r["queue"]), str(r["status"]), bool(r["delayed"]), int(r["count"]), str(r["min"]))
            for r in rows
        ]

    def queue_parents(self, run_ids: Sequence[str]) -> dict[str, str]:
        if not run_ids:
            return {}
        rows = self._dicts(
            "SELECT run_id, parent_run FROM ll_queue_entries WHERE run_id = ANY(%s) "
            "AND parent_run IS NOT NULL",
            (list(run_ids),),
        )
        return {str(r["run_id"]): str(r["parent_run"]) for r in rows}

    def queue_held(self, entry_ids: Sequence[str]) -> set[str]:
        self._check()
        with server_errors(self.location):
            return {i for i in entry_ids if is_held(self.conn, self._entry_hold(i))}

    def _entry_hold(self, entry_id: str) -> str:
        """What a worker's hold on an entry holds (``PostgresQueue._hold_text``)."""
        return f"queue\x1f{self.schema}\x1f{entry_id}"

    def delete_queue_entries(self, entry_ids: Sequence[str]) -> int:
        self._check_writable()
        if not entry_ids or not has_tables(self.conn):
            return 0
        with server_errors(self.location), self.conn.transaction():
            gone = self.conn.execute(
                "DELETE FROM ll_queue_entries WHERE id = ANY(%s) "
                "AND status IN ('completed', 'failed', 'cancelled')",
                (list(entry_ids),),
            ).rowcount
            self.conn.execute(
                "DELETE FROM ll_queue_starts WHERE entry = ANY(%s)", (list(entry_ids),)
            )
        return int(gone)

    def cancel_entry(self, entry_id: str, at: str, error: str) -> bool:
        self._check_writable()
        if not has_tables(self.conn):
            return False
        with server_errors(self.location), self.conn.transaction():
            return bool(self.conn.execute(_CANCEL_ENTRY, (at, error, entry_id)).rowcount)

    def requeue_entry(self, entry_id: str, run_id: str) -> bool:
        self._check_writable()
        if not has_tables(self.conn) or self.queue_held([entry_id]):
            return False
        with server_errors(self.location), self.conn.transaction():
            return bool(self.conn.execute(_REQUEUE, (entry_id, run_id)).rowcount)

    def add_queue_rows(self, rows: Sequence[dict[str, Any]]) -> int:
        self._check_writable()
        if not rows:
            return 0
        if not has_tables(self.conn):
            migrate(self.conn, self.location)
        added = 0
        with server_errors(self.location), self.conn.transaction():
            for row in rows:
                added += self.conn.execute(
                    f"INSERT INTO ll_queue_entries ({', '.join(QUEUE_COLUMNS)}) VALUES "
                    f"({', '.join(['%s'] * len(QUEUE_COLUMNS))}) ON CONFLICT (id) DO NOTHING",
                    [row[k] for k in QUEUE_COLUMNS],
                ).rowcount
        return added
