"""``MemoryPauseRows``: sleeps' and waits' rows in the in-memory store (``PauseRows``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...integrity.checksums import pause_sum
from .. import row_rules
from .database import MemoryConnection
from .seals import seal_row


class MemoryPauseRows(MemoryConnection):
    """A sleep's or a wait's row: started, read, done."""

    def pause(self, run_id: str, key: str) -> tuple[str, str, str | None, str | None] | None:
        r = self._row(run_id, key)
        return None if r is None else (r["kind"], r["status"], r["started_at"], r["wake_at"])

    def start_pause(self, row: Sequence[Any]) -> None:
        with self._write():
            target = self._upsert(row[0], row[1])
            target.update(row_rules.pause_values(row))
            if self.sealing:
                seal_row(self.db.seals, self.sealing, target)

    def finish_sleep(
        self, run_id: str, key: str, finished_at: str, duration_ms: float, attempt: int
    ) -> None:
        with self._write():
            row = self._rows().get((run_id, key))
            if row is not None:
                row.update(
                    status="done",
                    finished_at=finished_at,
                    duration_ms=duration_ms,
                    attempt=attempt,
                    checksum=pause_sum(run_id, key, "sleep", None, None),
                )
                if self.sealing:
                    seal_row(self.db.seals, self.sealing, row)

    def wait_ending(self, run_id: str, key: str) -> tuple[str, str | None, str | None] | None:
        r = self._row(run_id, key)
        return None if r is None else (r["status"], r["result"], r["error"])

    def time_out_wait(
        self, run_id: str, key: str, error: str, finished_at: str, duration_ms: float
    ) -> None:
        with self._write():
            row = self._rows().get((run_id, key))
            if row is not None and row["status"] == "waiting":
                row.update(
                    status="done",
                    error=error,
                    finished_at=finished_at,
                    duration_ms=duration_ms,
                    checksum=pause_sum(run_id, key, "wait", None, error),
                )
                if self.sealing:
                    seal_row(self.db.seals, self.sealing, row)

    def recorded_wait(self, rowid: int) -> tuple[str | None, str | None] | None:
        with self._read():
            row = self.db.by_rowid.get(rowid)
            return None if row is None else (row["result"], row["error"])
