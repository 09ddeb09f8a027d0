"""``MemoryStepRows``: a run's step rows in the in-memory store, written and read back.

``StepRows`` on the goal's rows of a ``MemoryDatabase`` (by (run, key), with a
rowid for replay's order); a row keeps its function's name itself. What a
step row's columns are is ``row_rules.step_values``, shared with PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..row_rules import MAX_TEXT, step_values
from ..storage_steps import DoneRow, FunctionKey, StepRow, step_row_of
from .database import MemoryConnection
from .seals import seal_row

#: A done step as ``recorded_steps`` gives it: key, function, fingerprint, rowid, checksum.
Done = tuple[str, str, str | None, int, int | None]


class MemoryStepRows(MemoryConnection):
    """The goal's rows of the run this connection holds: written, read back for a replay."""

    def function_key(self, name: str) -> FunctionKey:
        return name  # rows here keep the name itself

    @property
    def max_text(self) -> int:
        return MAX_TEXT

    def _done(self, run_id: str, prefix: str = "") -> list[Done]:
        return [
            (r["key"], r["fn"], r["args_fp"], r.rowid, r["checksum"])
            for r in self.db.rows(self.goal)
            if r["run"] == run_id
            and r["key"].startswith(prefix)
            and r["kind"] in ("step", "sleep", "wait")
            and r["status"] == "done"
        ]

    def recorded_steps(self, run_id: str) -> tuple[list[Done], set[str]]:
        with self._read():
            markers = {
                r["key"]
                for r in self._rows().values()
                if r["run"] == run_id and r["kind"] == "marker"
            }
            return self._done(run_id), markers

    def recorded_under(self, run_id: str, prefix: str) -> list[Done]:
        with self._read():
            return self._done(run_id, prefix)

    def results(self, rowids: Sequence[int]) -> dict[int, str | None]:
        with self._read():
            rows = self.db.by_rowid
            return {i: rows[i]["result"] for i in rowids if i in rows}

    def _put_step(self, row: StepRow) -> None:
        values = step_values(row, self.db.run_id_of(row.run))
        target = self._upsert(values["run"], values["key"])
        target.update(values, kind="step", wake_at=None)
        if self.sealing:
            seal_row(self.db.seals, self.sealing, target)

    def write_step(self, row: StepRow) -> None:
        with self._write():
            self._put_step(row)

    def write_done(self, done: DoneRow) -> None:
        self.write_step(step_row_of(done))

    def write_steps(self, rows: Sequence[StepRow]) -> None:
        with self._write():
            for row in rows:
                self._put_step(row)

    def try_write_steps(self, rows: Sequence[StepRow]) -> bool:
        if not self.db.lock.acquire(blocking=False):
            return False
        try:
            self.write_steps(rows)
        finally:
            self.db.lock.release()
        return True

    def record_replays(self, run_id: str, attempt: int, keys: Sequence[str]) -> None:
        with self._write() as db:
            db.replays.append((run_id, attempt, tuple(keys)))
